/**
 * Params of the filter methods, as clients send them: validated and bounded (every field comes
 * from a client), canonical (lower-case, unique, sorted), and the errors a node answers with.
 */
import { randomBytes } from 'node:crypto';
import { SvcError } from 'svc-proxy/plugin/errors';

/** Most addresses in one filter. */
export const MAX_FILTER_ADDRESSES = 100;
/** Most topic positions in one filter (a log has at most 4 topics). */
export const MAX_TOPIC_POSITIONS = 4;
/** Most alternatives at one topic position. */
export const MAX_TOPIC_ALTERNATIVES = 100;
/** Longest filter id accepted from a client, characters (an upstream's id of a pending filter included). */
export const MAX_ID_LENGTH = 130;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;
const QUANTITY = /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,12})$/;
const BLOCK_TAGS = new Set(['latest', 'safe', 'finalized', 'earliest', 'pending']);
/** svc's own filter ids: `0x` and 32 lower-case hex digits (16 random bytes). */
const OWN_ID = /^0x[0-9a-f]{32}$/;

/** Params refused (JSON-RPC -32602, HTTP 200): a fact about the call, charged to no upstream. */
export class ErrFilterInvalidParams extends SvcError {
  static override readonly defaultCode = -32602;
}

/** The id is not a live filter of this client on this network (as geth: -32000 "filter not found"). */
export class ErrFilterNotFound extends SvcError {
  static override readonly defaultCode = -32000;
  constructor() {
    super('filter not found');
  }
}

/** A client or the replica holds as many filters as allowed (JSON-RPC -32005, HTTP 429). */
export class ErrFilterLimitExceeded extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 429;
}

/**
 * An `eth_newFilter` filter in canonical form: addresses and topics lower-cased, unique and
 * sorted (absent: any), trailing topic wildcards dropped; `fromBlock`/`toBlock` as sent (a tag or
 * a hex quantity; absent: `latest`), for `eth_getFilterLogs`.
 */
export interface LogCriteria {
  address?: string[];
  topics?: Array<string[] | null>;
  fromBlock?: string;
  toBlock?: string;
}

/**
 * Parses `eth_newFilter` params `[{address?, topics?, fromBlock?, toBlock?}]`.
 * @throws ErrFilterInvalidParams (-32602) for anything malformed or over a bound, and for
 *   `blockHash` (a filter on one block never has changes: use `eth_getLogs`)
 */
export function parseNewFilter(params: unknown): LogCriteria {
  if (!Array.isArray(params) || params.length > 1) throw invalid('eth_newFilter expects [filter]');
  const raw = params[0] as unknown;
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw invalid('a filter is an object {address?, topics?, fromBlock?, toBlock?}');
  const { address, topics, fromBlock, toBlock, blockHash } = raw as Record<string, unknown>;
  if (blockHash !== undefined && blockHash !== null) throw invalid('eth_newFilter takes no blockHash (use eth_getLogs for one block)');
  const out: LogCriteria = {};
  if (address !== undefined && address !== null) {
    const list = Array.isArray(address) ? (address as unknown[]) : [address];
    if (list.length > MAX_FILTER_ADDRESSES) throw invalid(`a filter holds at most ${MAX_FILTER_ADDRESSES} addresses`);
    for (const a of list) if (typeof a !== 'string' || !ADDRESS.test(a)) throw invalid('filter address must be a 20-byte 0x-hex string or a list of them');
    if (list.length > 0) out.address = uniqueSorted(list as string[]);
  }
  if (topics !== undefined && topics !== null) {
    if (!Array.isArray(topics)) throw invalid('filter topics must be a list');
    if (topics.length > MAX_TOPIC_POSITIONS) throw invalid(`a filter has at most ${MAX_TOPIC_POSITIONS} topic positions`);
    const positions = (topics as unknown[]).map(topicPosition);
    while (positions.length > 0 && positions[positions.length - 1] === null) positions.pop();
    if (positions.length > 0) out.topics = positions;
  }
  const from = blockParam(fromBlock, 'fromBlock');
  const to = blockParam(toBlock, 'toBlock');
  if (from !== undefined) out.fromBlock = from;
  if (to !== undefined) out.toBlock = to;
  const f = numberOf(from);
  const t = numberOf(to);
  if (f !== undefined && t !== undefined && f > t) throw invalid('fromBlock is above toBlock');
  return out;
}

/**
 * The block number of a hex quantity (undefined for a tag or nothing).
 * @param ref `fromBlock` / `toBlock` as stored
 */
export function numberOf(ref: string | undefined): number | undefined {
  return ref !== undefined && QUANTITY.test(ref) ? Number.parseInt(ref, 16) : undefined;
}

/**
 * The filter id of `eth_getFilterChanges`, `eth_getFilterLogs` or `eth_uninstallFilter` params
 * `[id]`.
 * @returns the id, lower-cased, when it has the form of svc's ids; undefined for any other
 *   string (no such filter, as a node answers an id it never gave)
 * @throws ErrFilterInvalidParams (-32602) when params are not `[string]` or the id is over
 *   {@link MAX_ID_LENGTH} characters
 */
export function parseFilterId(method: string, params: unknown): string | undefined {
  if (!Array.isArray(params) || params.length !== 1 || typeof params[0] !== 'string') throw invalid(`${method} expects [filterId]`);
  const id = params[0];
  if (id.length > MAX_ID_LENGTH) throw invalid(`a filter id is at most ${MAX_ID_LENGTH} characters`);
  const lower = id.toLowerCase();
  return OWN_ID.test(lower) ? lower : undefined;
}

/**
 * Checks the params of `eth_newBlockFilter` / `eth_newPendingTransactionFilter`: none.
 * @throws ErrFilterInvalidParams (-32602) for any param
 */
export function expectNoParams(method: string, params: unknown): void {
  if (params === undefined || params === null || (Array.isArray(params) && params.length === 0)) return;
  throw invalid(`${method} takes no params`);
}

/** A new filter id: 16 random bytes, `0x` and 32 hex digits, unguessable. */
export function newFilterId(): string {
  return `0x${randomBytes(16).toString('hex')}`;
}

function blockParam(v: unknown, name: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string' && (BLOCK_TAGS.has(v) || QUANTITY.test(v))) return v;
  throw invalid(`${name} must be a block tag or a hex block number`);
}

/** One topic position: null/[] = any, a topic, or a list of alternatives. */
function topicPosition(v: unknown): string[] | null {
  if (v === null || v === undefined) return null;
  const list = Array.isArray(v) ? (v as unknown[]) : [v];
  if (list.length > MAX_TOPIC_ALTERNATIVES) throw invalid(`a topic position holds at most ${MAX_TOPIC_ALTERNATIVES} alternatives`);
  for (const t of list) if (typeof t !== 'string' || !TOPIC.test(t)) throw invalid('filter topics must be 32-byte 0x-hex strings, null, or lists of them');
  return list.length === 0 ? null : uniqueSorted(list as string[]);
}

function uniqueSorted(list: readonly string[]): string[] {
  return [...new Set(list.map((s) => s.toLowerCase()))].sort();
}

function invalid(message: string): ErrFilterInvalidParams {
  return new ErrFilterInvalidParams(`invalid params: ${message}`);
}
