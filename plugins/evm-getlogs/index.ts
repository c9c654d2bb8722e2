/**
 * evm-getlogs plugin (issue #4 item 6, spec §2.8 #8, erpc-notes §2.8): getLogs limits and splitting.
 * Taps: `call` at `CallStage.GETLOGS`, below interpolation (fresh `latest`/`finalized` tags are
 * numbers by then). For `eth_getLogs` and `trace_filter` it rejects a filter over the network's
 * range/address/topic limits before anything is forwarded (-32012, HTTP 200), and when the
 * upstreams refuse a range as too large (`ErrEndpointRequestTooLarge`) it halves the range,
 * runs the parts through the rest of the chain with bounded concurrency and merges them in block
 * order. Config keys live under `networks[].evm` (schema fragment `networkEvm`).
 */
import { setMaxListeners } from 'node:events';
import { Type } from '@sinclair/typebox';
import pLimit from 'p-limit';
import { Counter } from 'prom-client';
import { linkedController } from '../../core/abort.ts';
import type { CallContext } from '../../core/context.ts';
import {
  ErrCancelled,
  ErrEndpointRequestTooLarge,
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedRange,
  ErrGetLogsExceededMaxAllowedTopics,
  ErrUpstreamMalformedResponse,
  ErrUpstreamsExhausted,
  type SvcError,
} from '../../core/errors.ts';
import { parseBlockNumber, toHex } from '../../core/evm/blocks.ts';
import { chainStateOf } from '../../core/evm/state.ts';
import type { CallHandler } from '../../core/hooks.ts';
import { RpcResult } from '../../core/jsonrpc.ts';
import type { Plugin, Proxy } from '../../core/proxy.ts';
import type { Network } from '../../core/registry/network.ts';
import { CallStage } from '../../core/stages.ts';

// ---------------------------------------------------------------------------------------
// Config

/** Default of `networks[].evm.getLogsMaxAllowedRange`, in blocks (eRPC's default). */
export const DEFAULT_MAX_ALLOWED_RANGE = 30_000;
/** Default of `networks[].evm.getLogsSplitConcurrency`, in sub-requests in flight. */
export const DEFAULT_SPLIT_CONCURRENCY = 10;

/** The plugin's keys under `networks[].evm` (and `networkDefaults.evm`). */
const networkEvmSchema = {
  getLogsMaxAllowedRange: Type.Integer({
    minimum: 0,
    default: DEFAULT_MAX_ALLOWED_RANGE,
    description: 'largest eth_getLogs/trace_filter block range (toBlock - fromBlock + 1, in blocks) accepted; larger is rejected with -32012 before forwarding (spec §2.8 #8); 0 = unlimited',
  }),
  getLogsMaxAllowedAddresses: Type.Integer({
    minimum: 0,
    default: 0,
    description: 'most entries in an eth_getLogs `address` list; more is rejected with -32012; 0 = unlimited',
  }),
  getLogsMaxAllowedTopics: Type.Integer({
    minimum: 0,
    default: 0,
    description: 'most topic values in an eth_getLogs `topics` filter, summed over all positions (an OR-list counts each entry, null wildcards count 0); more is rejected with -32012; 0 = unlimited',
  }),
  getLogsSplitOnError: Type.Boolean({
    default: true,
    description: 'when the upstreams refuse a range as too large, halve it and merge the parts in block order',
  }),
  getLogsSplitConcurrency: Type.Integer({
    minimum: 1,
    default: DEFAULT_SPLIT_CONCURRENCY,
    description: 'split sub-requests of one call in flight at once',
  }),
};

/** A network's resolved getLogs settings (from `network.config.settings.evm`). */
export interface GetLogsSettings {
  /** `getLogsMaxAllowedRange`: blocks; 0 = unlimited. */
  maxAllowedRange: number;
  /** `getLogsMaxAllowedAddresses`: address entries; 0 = unlimited. */
  maxAllowedAddresses: number;
  /** `getLogsMaxAllowedTopics`: topic values; 0 = unlimited. */
  maxAllowedTopics: number;
  /** `getLogsSplitOnError`. */
  splitOnError: boolean;
  /** `getLogsSplitConcurrency`: sub-requests in flight, at least 1. */
  splitConcurrency: number;
}

/**
 * Reads a network's getLogs settings, falling back to the defaults for keys the resolved
 * config lacks (a network built without this plugin's schema fragment).
 * @param network the network
 */
export function getLogsSettingsOf(network: Network): GetLogsSettings {
  const raw = network.config.settings.evm;
  const evm = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const int = (k: string, d: number, min: number): number => {
    const v = evm[k];
    return typeof v === 'number' && Number.isSafeInteger(v) && v >= min ? v : d;
  };
  return {
    maxAllowedRange: int('getLogsMaxAllowedRange', DEFAULT_MAX_ALLOWED_RANGE, 0),
    maxAllowedAddresses: int('getLogsMaxAllowedAddresses', 0, 0),
    maxAllowedTopics: int('getLogsMaxAllowedTopics', 0, 0),
    splitOnError: typeof evm.getLogsSplitOnError === 'boolean' ? evm.getLogsSplitOnError : true,
    splitConcurrency: int('getLogsSplitConcurrency', DEFAULT_SPLIT_CONCURRENCY, 1),
  };
}

// ---------------------------------------------------------------------------------------
// Filter inspection

/** Methods this plugin handles: filters with `fromBlock`/`toBlock` at param 0. */
export const GETLOGS_METHODS: ReadonlySet<string> = new Set(['eth_getLogs', 'trace_filter']);

/** A getLogs/trace_filter filter object. */
export type LogsFilter = Record<string, unknown>;

function isFilter(v: unknown): v is LogsFilter {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Number of entries in a filter's `address`: an array's length, 1 for a single string, else 0. */
export function countAddresses(filter: LogsFilter): number {
  const a = filter.address;
  if (Array.isArray(a)) return a.length;
  return typeof a === 'string' ? 1 : 0;
}

/**
 * Number of topic values in a filter's `topics`, summed over every position: a string counts
 * 1, an OR-list counts its non-null entries, `null` (wildcard) counts 0. So
 * `[[A, B], null, C]` counts 3. (eRPC HEAD counts only the `topics[0]` OR-list; summing every
 * position bounds the node's matching work whatever position the values sit in.)
 */
export function countTopics(filter: LogsFilter): number {
  const t = filter.topics;
  if (!Array.isArray(t)) return 0;
  let n = 0;
  for (const p of t) {
    if (Array.isArray(p)) {
      for (const x of p) if (x !== null && x !== undefined) n++;
    } else if (p !== null && p !== undefined) n++;
  }
  return n;
}

/** The block range of a filter as far as it can be resolved. */
export interface FilterRange {
  /** First block, when resolvable. */
  from?: number;
  /** Last block, when resolvable. */
  to?: number;
  /**
   * True when both ends are numbers or `latest`/`finalized` resolved from the chain state;
   * false when an end is `earliest`, `safe`, `pending`, missing for `trace_filter`, or unknown.
   */
  splittable: boolean;
}

function resolveEnd(v: unknown, method: string, heads: { latest: number; finalized: number }): { n?: number; splittable: boolean } {
  // eth_getLogs defaults a missing end to `latest`; trace_filter's defaults differ between
  // clients, so a missing end there is left unresolved.
  const x = v === undefined || v === null ? (method === 'eth_getLogs' ? 'latest' : undefined) : v;
  if (x === 'latest') return heads.latest > 0 ? { n: heads.latest, splittable: true } : { splittable: false };
  if (x === 'finalized') return heads.finalized > 0 ? { n: heads.finalized, splittable: true } : { splittable: false };
  if (x === 'earliest') return { n: 0, splittable: false };
  const n = parseBlockNumber(x);
  return n === undefined ? { splittable: false } : { n, splittable: true };
}

/**
 * Resolves a filter's `fromBlock`/`toBlock` (erpc-notes §2.8): hex numbers as such, `latest`
 * and `finalized` from the network's known heads (unresolved while a head is unknown, 0),
 * `earliest` as block 0 for the range check only, `safe`/`pending` unresolved.
 * @param method `eth_getLogs` or `trace_filter`
 * @param filter the filter object
 * @param heads highest known latest and finalized blocks (0 = unknown)
 */
export function resolveFilterRange(method: string, filter: LogsFilter, heads: { latest: number; finalized: number }): FilterRange {
  const a = resolveEnd(filter.fromBlock, method, heads);
  const b = resolveEnd(filter.toBlock, method, heads);
  const out: FilterRange = { splittable: a.splittable && b.splittable };
  if (a.n !== undefined) out.from = a.n;
  if (b.n !== undefined) out.to = b.n;
  return out;
}

/**
 * The limit a filter breaks, if any (spec §2.8 #8), as the error to answer with (-32012,
 * HTTP 200). The range check runs only when `enforceRange` is true and both ends resolved
 * with `from <= to`; a range of `to - from + 1` blocks over `maxAllowedRange` (> 0) is
 * rejected. Address and topic limits apply to `eth_getLogs` whatever `enforceRange` says.
 * @param method `eth_getLogs` or `trace_filter`
 * @param filter the filter object
 * @param range the resolved range ({@link resolveFilterRange})
 * @param s the network's settings
 * @param enforceRange `directives.enforceGetLogsBlockRange !== false`
 * @returns `ErrGetLogsExceededMaxAllowedRange`, `...Addresses`, `...Topics`, or undefined
 */
export function checkGetLogsLimits(method: string, filter: LogsFilter, range: FilterRange, s: GetLogsSettings, enforceRange: boolean): SvcError | undefined {
  if (enforceRange && s.maxAllowedRange > 0 && range.from !== undefined && range.to !== undefined && range.to >= range.from) {
    const size = range.to - range.from + 1;
    if (size > s.maxAllowedRange) {
      return new ErrGetLogsExceededMaxAllowedRange(
        `getLogs request exceeded max allowed range: ${size} blocks (${toHex(range.from)}..${toHex(range.to)}) is over getLogsMaxAllowedRange ${s.maxAllowedRange}`,
        { details: { method, fromBlock: range.from, toBlock: range.to, requestRange: size, maxAllowedRange: s.maxAllowedRange } },
      );
    }
  }
  if (method !== 'eth_getLogs') return undefined;
  if (s.maxAllowedAddresses > 0) {
    const n = countAddresses(filter);
    if (n > s.maxAllowedAddresses) {
      return new ErrGetLogsExceededMaxAllowedAddresses(`getLogs request exceeded max allowed addresses: ${n} is over getLogsMaxAllowedAddresses ${s.maxAllowedAddresses}`, {
        details: { method, addresses: n, maxAllowedAddresses: s.maxAllowedAddresses },
      });
    }
  }
  if (s.maxAllowedTopics > 0) {
    const n = countTopics(filter);
    if (n > s.maxAllowedTopics) {
      return new ErrGetLogsExceededMaxAllowedTopics(`getLogs request exceeded max allowed topics: ${n} is over getLogsMaxAllowedTopics ${s.maxAllowedTopics}`, {
        details: { method, topics: n, maxAllowedTopics: s.maxAllowedTopics },
      });
    }
  }
  return undefined;
}

/**
 * True when an error says an upstream refused the request as too large: an
 * `ErrEndpointRequestTooLarge` (the normaliser's class for "range too large" answers and code
 * -32012), itself or among the causes of an `ErrUpstreamsExhausted` / `cause` chain. svc's own
 * `ErrGetLogsExceeded*` never counts: a request over svc's limits is not split.
 */
export function isRequestTooLarge(err: unknown, depth = 0): boolean {
  if (depth > 8 || err === null || typeof err !== 'object') return false;
  if (err instanceof ErrEndpointRequestTooLarge) return true;
  if (err instanceof ErrUpstreamsExhausted) return err.causes.some((c) => isRequestTooLarge(c, depth + 1));
  const cause = (err as { cause?: unknown }).cause;
  if (Array.isArray(cause)) return cause.some((c) => isRequestTooLarge(c, depth + 1));
  return cause !== undefined && isRequestTooLarge(cause, depth + 1);
}

// ---------------------------------------------------------------------------------------
// Splitting

/** One sub-request of a split: a concrete block range and the filter it narrows. */
export interface LogsJob {
  /** First block (inclusive). */
  from: number;
  /** Last block (inclusive), `>= from`. */
  to: number;
  /** The filter (address/topics as narrowed so far); `fromBlock`/`toBlock` are rewritten from `from`/`to`. */
  filter: LogsFilter;
}

/** How a job was split (label of `svc_network_getlogs_splits_total`). */
export type SplitDimension = 'block_range' | 'addresses' | 'topics0';

/** The two halves of a job. */
export interface JobSplit {
  dimension: SplitDimension;
  parts: [LogsJob, LogsJob];
}

/**
 * Halves a refused job (erpc-notes §2.8): the block range while it spans more than one block
 * (`[from, mid - 1]`, `[mid, to]` with `mid = from + floor(size / 2)`); for one `eth_getLogs`
 * block, the `address` list, then the `topics[0]` OR-list. `undefined` when it cannot be split.
 * @param method `eth_getLogs` or `trace_filter` (only the range is split for trace_filter)
 * @param job the refused job
 */
export function splitJob(method: string, job: LogsJob): JobSplit | undefined {
  const size = job.to - job.from + 1;
  if (size > 1) {
    const mid = job.from + Math.floor(size / 2);
    return { dimension: 'block_range', parts: [{ ...job, to: mid - 1 }, { ...job, from: mid }] };
  }
  if (method !== 'eth_getLogs') return undefined;
  const addr = job.filter.address;
  if (Array.isArray(addr) && addr.length > 1) {
    const m = Math.floor(addr.length / 2);
    return {
      dimension: 'addresses',
      parts: [
        { ...job, filter: { ...job.filter, address: addr.slice(0, m) } },
        { ...job, filter: { ...job.filter, address: addr.slice(m) } },
      ],
    };
  }
  const topics = job.filter.topics;
  if (Array.isArray(topics) && Array.isArray(topics[0]) && (topics[0] as unknown[]).length > 1) {
    const t0 = topics[0] as unknown[];
    const m = Math.floor(t0.length / 2);
    const left = topics.slice();
    const right = topics.slice();
    left[0] = t0.slice(0, m);
    right[0] = t0.slice(m);
    return { dimension: 'topics0', parts: [{ ...job, filter: { ...job.filter, topics: left } }, { ...job, filter: { ...job.filter, topics: right } }] };
  }
  return undefined;
}

/** The filter sent for a job: the job's filter with hex `fromBlock`/`toBlock`. */
export function jobFilter(job: LogsJob): LogsFilter {
  return { ...job.filter, fromBlock: toHex(job.from), toBlock: toHex(job.to) };
}

/** Merged answer of a subtree of parts. */
interface PartResult {
  items: unknown[];
  upstreamId?: string;
  fromCache: boolean;
}

function logIndexOf(v: unknown): number {
  const li = v !== null && typeof v === 'object' ? (v as { logIndex?: unknown }).logIndex : undefined;
  return parseBlockNumber(li) ?? Number.MAX_SAFE_INTEGER;
}

function merge(a: PartResult, b: PartResult, dimension: SplitDimension): PartResult {
  let items = a.items.concat(b.items);
  // Address/topic halves of one block interleave: restore the block's log order.
  if (dimension !== 'block_range') items = items.slice().sort((x, y) => logIndexOf(x) - logIndexOf(y));
  return { items, upstreamId: a.upstreamId ?? b.upstreamId, fromCache: a.fromCache && b.fromCache };
}

/** Options of {@link splitGetLogs}. */
export interface SplitOptions {
  /** Sub-requests in flight at once (`getLogsSplitConcurrency`), at least 1. */
  concurrency: number;
  /** Called once per split performed (metrics). Must not throw. */
  onSplit?: (dimension: SplitDimension) => void;
}

/**
 * Runs a refused getLogs/trace_filter job as halves through `inner`, halving again each part
 * the upstreams refuse as too large ({@link isRequestTooLarge}) until it succeeds or cannot be
 * split ({@link splitJob}), and merges the answers in block order (concatenation of the parts
 * in order; address/topic halves of one block re-sorted by `logIndex`).
 *
 * Each part runs with a child context: a shallow copy of `ctx` with its own `request` (params
 * `[subFilter, ...rest]`) and `state`, the same `record` (attempts and headers aggregate) and
 * a signal linked to `ctx.signal`. At most `concurrency` parts are in flight. The first part
 * that fails for good fails the call with its error; the parts still running are aborted.
 *
 * @param ctx the call being served
 * @param inner the handler below the getLogs stage
 * @param job the whole (refused) range
 * @param cause the refusal; rethrown when `job` cannot be split
 * @param opts concurrency and split callback
 * @returns a new `RpcResult` with the merged array, `upstreamId` of the first part
 * @throws SvcError the first part's final error, `ErrUpstreamMalformedResponse` when a part answers a non-array, or `cause`
 */
export async function splitGetLogs(ctx: CallContext, inner: CallHandler, job: LogsJob, cause: unknown, opts: SplitOptions): Promise<RpcResult> {
  const method = ctx.request.method;
  const first = splitJob(method, job);
  if (!first) throw cause;
  const rest: unknown[] = Array.isArray(ctx.request.params) ? ctx.request.params.slice(1) : [];
  const link = linkedController(ctx.signal);
  // Every part in flight links its own listeners to this one signal (legs, transports): room
  // for them, so Node's leak warning does not fire on a legitimately busy split.
  setMaxListeners(10 + 16 * Math.max(1, opts.concurrency), link.signal);
  const limit = pLimit(Math.max(1, opts.concurrency));

  const runOne = async (j: LogsJob): Promise<PartResult> => {
    if (link.signal.aborted) throw new ErrCancelled('split eth_getLogs part not started: the call already failed', { cause: link.signal.reason });
    const child: CallContext = { ...ctx, request: { ...ctx.request, params: [jobFilter(j), ...rest] }, state: new Map(), signal: link.signal };
    const r = await inner(child);
    const v = r.result;
    if (v !== null && !Array.isArray(v)) {
      throw new ErrUpstreamMalformedResponse(`${method} part ${toHex(j.from)}..${toHex(j.to)} answered a non-array result`, { details: { upstream: r.upstreamId } });
    }
    return { items: v ?? [], upstreamId: r.upstreamId, fromCache: r.fromCache };
  };

  const run = async (j: LogsJob): Promise<PartResult> => {
    try {
      // Only leaf requests hold a limiter slot: a parent waiting on its halves holds none.
      return await limit(runOne, j);
    } catch (e) {
      if (link.signal.aborted || !isRequestTooLarge(e)) throw e;
      const s = splitJob(method, j);
      if (!s) throw e;
      return runSplit(s);
    }
  };

  const runSplit = async (s: JobSplit): Promise<PartResult> => {
    opts.onSplit?.(s.dimension);
    const [a, b] = await Promise.all([run(s.parts[0]), run(s.parts[1])]);
    return merge(a, b, s.dimension);
  };

  try {
    const merged = await runSplit(first);
    const out = new RpcResult(merged.items);
    out.upstreamId = merged.upstreamId;
    out.fromCache = merged.fromCache;
    return out;
  } catch (e) {
    if (!link.signal.aborted) link.controller.abort(new ErrCancelled('another part of the split request failed'));
    throw e;
  } finally {
    link.dispose();
  }
}

// ---------------------------------------------------------------------------------------
// Plugin

/**
 * Creates the getLogs limits and splitting plugin (name `evm-getlogs`).
 *
 * For `eth_getLogs` and `trace_filter` calls whose param 0 is a filter without `blockHash`
 * (a `blockHash` filter bypasses everything):
 * 1. resolves the range ({@link resolveFilterRange}) and rejects it before forwarding when it
 *    breaks a limit ({@link checkGetLogsLimits}); the range check runs unless
 *    `directives.enforceGetLogsBlockRange === false`, which only `directiveDefaults` can set
 *    (the directives plugin ignores a request's own `enforce-getlogs-range`, spec §2.8 #8);
 * 2. forwards it unchanged;
 * 3. when `getLogsSplitOnError` is on, the range is splittable (no `earliest`/`safe`/`pending`,
 *    no trace_filter `after`/`count` paging) and the answer is a too-large refusal, runs it
 *    split ({@link splitGetLogs}). A `toBlock` above the network's highest known latest block
 *    is clamped to it for the split (no logs exist above it yet, and nodes answer a range wholly
 *    above their head with an error); a range starting above it is not split.
 *
 * Registers the counter `svc_network_getlogs_splits_total{project,network,method,dimension}`.
 */
export function evmGetLogsPlugin(): Plugin {
  return {
    name: 'evm-getlogs',
    schema: { networkEvm: networkEvmSchema },
    apply(proxy: Proxy) {
      const splits = new Counter({
        name: 'svc_network_getlogs_splits_total',
        help: 'eth_getLogs/trace_filter requests halved after an upstream refused them as too large',
        labelNames: ['project', 'network', 'method', 'dimension'],
        registers: [proxy.metrics],
      });
      proxy.hooks.call.tap({ name: 'evm-getlogs', stage: CallStage.GETLOGS }, (inner: CallHandler, network: Network): CallHandler => {
        const settings = getLogsSettingsOf(network);
        const limited = async (ctx: CallContext, method: string): Promise<RpcResult> => {
          const params = ctx.request.params;
          const filter: unknown = Array.isArray(params) ? params[0] : undefined;
          if (!isFilter(filter) || (filter.blockHash !== undefined && filter.blockHash !== null)) return inner(ctx);
          const state = chainStateOf(network);
          const range = resolveFilterRange(method, filter, { latest: state.highestLatest, finalized: state.highestFinalized });
          const rejected = checkGetLogsLimits(method, filter, range, settings, ctx.directives.enforceGetLogsBlockRange !== false);
          if (rejected) throw rejected;
          try {
            return await inner(ctx);
          } catch (e) {
            if (!settings.splitOnError || !range.splittable || range.from === undefined || range.to === undefined || range.from > range.to) throw e;
            if (method === 'trace_filter' && (filter.after !== undefined || filter.count !== undefined)) throw e;
            if (ctx.signal.aborted || !isRequestTooLarge(e)) throw e;
            // Parts are never asked above the highest known block: no logs exist there yet, and
            // nodes answer a range wholly above their head with an error, not `[]`.
            const head = chainStateOf(network).highestLatest;
            let to = range.to;
            if (head > 0 && to > head) {
              if (range.from > head) throw e;
              to = head;
            }
            return splitGetLogs(ctx, inner, { from: range.from, to, filter }, e, {
              concurrency: settings.splitConcurrency,
              onSplit: (dimension) => splits.inc({ project: ctx.project.id, network: network.id, method, dimension }),
            });
          }
        };
        // Other methods pass straight through, without an extra promise layer.
        return (ctx: CallContext) => {
          const method = ctx.request.method;
          return GETLOGS_METHODS.has(method) ? limited(ctx, method) : inner(ctx);
        };
      });
    },
  };
}
