/**
 * `eth_subscribe` params: validation (bounded, since they come from clients) and the canonical
 * form of a `logs` filter, whose key makes subscriptions of the same filter share one feed.
 */
import { ErrInvalidRequest } from 'svc-proxy/plugin/errors';
import type { SubscriptionType } from './types.ts';

/** Most addresses in one `logs` filter. */
export const MAX_FILTER_ADDRESSES = 100;
/** Most topic positions in one `logs` filter (a log has at most 4 topics). */
export const MAX_TOPIC_POSITIONS = 4;
/** Most alternatives at one topic position. */
export const MAX_TOPIC_ALTERNATIVES = 100;
/** Longest subscription type echoed in an error message, characters. */
const MAX_ECHO = 40;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;

/**
 * A `logs` filter in canonical form: addresses lower-cased, unique and sorted (undefined: any
 * address); topics per position lower-cased, unique and sorted (null: any topic), trailing
 * wildcards dropped (undefined when none is left).
 */
export interface LogFilter {
  readonly address?: readonly string[];
  readonly topics?: ReadonlyArray<readonly string[] | null>;
}

/** What one `eth_subscribe` asks for. */
export type SubscribeRequest =
  | { readonly type: 'newHeads'; readonly key: string }
  | { readonly type: 'newPendingTransactions'; readonly key: string }
  | { readonly type: 'logs'; readonly key: string; readonly filter: LogFilter };

/**
 * Parses `eth_subscribe` params: `["newHeads"]`, `["logs", {address?, topics?}]` (other filter
 * keys, such as `fromBlock`, are ignored as geth does: a subscription only sees new blocks),
 * `["newPendingTransactions"]` (geth's optional second param, full transactions, is refused).
 * @param params the call's params
 * @returns the type, the canonical filter and the feed key (`type` or `logs:<canonical filter>`)
 * @throws ErrInvalidRequest (-32602) for anything else
 */
export function parseSubscribe(params: unknown): SubscribeRequest {
  if (!Array.isArray(params) || params.length < 1 || params.length > 2) throw invalid('eth_subscribe expects [type] or ["logs", filter]');
  const [type, arg] = params as [unknown, unknown];
  switch (type as SubscriptionType) {
    case 'newHeads':
      if (arg !== undefined && arg !== null && !isEmptyObject(arg)) throw invalid('newHeads takes no filter');
      return { type: 'newHeads', key: 'newHeads' };
    case 'newPendingTransactions':
      if (arg !== undefined && arg !== null && arg !== false) throw invalid('newPendingTransactions with full transactions is not supported (hashes only)');
      return { type: 'newPendingTransactions', key: 'newPendingTransactions' };
    case 'logs': {
      const filter = parseLogFilter(arg);
      return { type: 'logs', key: `logs:${JSON.stringify(filter)}`, filter };
    }
    default: {
      const shown = typeof type === 'string' ? JSON.stringify(type.slice(0, MAX_ECHO)) : typeof type;
      throw invalid(`unknown subscription type ${shown} (newHeads, logs or newPendingTransactions)`);
    }
  }
}

/**
 * A `logs` filter in canonical form.
 * @param raw the client's filter object (absent or null: every log)
 * @throws ErrInvalidRequest (-32602) for a malformed or oversized filter
 */
export function parseLogFilter(raw: unknown): LogFilter {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw invalid('a logs filter is an object {address?, topics?}');
  const { address, topics } = raw as { address?: unknown; topics?: unknown };
  const out: { address?: string[]; topics?: Array<string[] | null> } = {};
  if (address !== undefined && address !== null) {
    const list = Array.isArray(address) ? (address as unknown[]) : [address];
    if (list.length > MAX_FILTER_ADDRESSES) throw invalid(`a logs filter holds at most ${MAX_FILTER_ADDRESSES} addresses`);
    for (const a of list) if (typeof a !== 'string' || !ADDRESS.test(a)) throw invalid('filter address must be a 20-byte 0x-hex string or a list of them');
    // An empty list matches every address, as in geth.
    if (list.length > 0) out.address = uniqueSorted(list as string[]);
  }
  if (topics !== undefined && topics !== null) {
    if (!Array.isArray(topics)) throw invalid('filter topics must be a list');
    if (topics.length > MAX_TOPIC_POSITIONS) throw invalid(`a logs filter has at most ${MAX_TOPIC_POSITIONS} topic positions`);
    const positions = (topics as unknown[]).map(topicPosition);
    while (positions.length > 0 && positions[positions.length - 1] === null) positions.pop();
    if (positions.length > 0) out.topics = positions;
  }
  return out;
}

/**
 * Whether a log matches a canonical filter, by the node's rules (geth `filterLogs`): its address
 * is one of the filter's (any when none); at each topic position with alternatives, the log has
 * a topic there and it is one of them (null: any, but the log still needs no topic there).
 * @param filter a canonical filter (lower-case)
 * @param log a log object from `eth_getLogs`
 */
export function matchLog(filter: LogFilter, log: Record<string, unknown>): boolean {
  if (filter.address) {
    const a = typeof log.address === 'string' ? log.address.toLowerCase() : '';
    if (!filter.address.includes(a)) return false;
  }
  if (filter.topics) {
    const topics = Array.isArray(log.topics) ? (log.topics as unknown[]) : [];
    if (topics.length < filter.topics.length) return false;
    for (let i = 0; i < filter.topics.length; i++) {
      const alts = filter.topics[i];
      if (!alts) continue;
      const t = topics[i];
      if (typeof t !== 'string' || !alts.includes(t.toLowerCase())) return false;
    }
  }
  return true;
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

function isEmptyObject(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
}

function invalid(message: string): ErrInvalidRequest {
  return new ErrInvalidRequest(`invalid params: ${message}`, { code: -32602 });
}
