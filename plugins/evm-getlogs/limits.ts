/**
 * Limits of the evm-getlogs plugin (spec §2.8 #8): the
 * network's getLogs settings and their defaults, filter inspection (address and topic counts,
 * block range resolution) and the range/address/topic limit check that answers a filter over
 * a limit with its `ErrGetLogsExceeded*` error (-32012, HTTP 200) before anything is forwarded.
 * Pure; no hooks here. `index.ts` taps it into the `call` hook at `CallStage.GETLOGS`.
 */
import type { Network, Upstream } from 'svc-proxy/plugin';
import {
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedRange,
  ErrGetLogsExceededMaxAllowedTopics,
  type SvcError,
} from 'svc-proxy/plugin/errors';
import { parseBlockNumber, toHex } from 'svc-proxy/util';

// ---------------------------------------------------------------------------------------
// Settings

/** Default of `networks[].evm.getLogsMaxAllowedRange`, in blocks (eRPC's default). */
export const DEFAULT_MAX_ALLOWED_RANGE = 30_000;
/** Default of `networks[].evm.getLogsSplitConcurrency`, in sub-requests in flight. */
export const DEFAULT_SPLIT_CONCURRENCY = 10;

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
  /** `traceFilterSplitOnError`: halve a `trace_filter`/`arbtrace_filter` range the upstreams refuse as too large. */
  traceSplitOnError: boolean;
  /** `traceFilterSplitConcurrency`: trace sub-requests in flight, at least 1. */
  traceSplitConcurrency: number;
  /** The getLogs pair as {@link splitSettingsOf} returns it (built once per network, not per call). */
  readonly logsSplit: { splitOnError: boolean; concurrency: number };
  /** The trace pair, likewise. */
  readonly traceSplit: { splitOnError: boolean; concurrency: number };
}

/** The split switch and concurrency that apply to a method: the trace pair for the trace methods, else the getLogs pair. */
export function splitSettingsOf(method: string, s: GetLogsSettings): { splitOnError: boolean; concurrency: number } {
  return TRACE_METHODS.has(method) ? s.traceSplit : s.logsSplit;
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
  const splitOnError = typeof evm.getLogsSplitOnError === 'boolean' ? evm.getLogsSplitOnError : true;
  const splitConcurrency = int('getLogsSplitConcurrency', DEFAULT_SPLIT_CONCURRENCY, 1);
  const traceSplitOnError = typeof evm.traceFilterSplitOnError === 'boolean' ? evm.traceFilterSplitOnError : true;
  const traceSplitConcurrency = int('traceFilterSplitConcurrency', DEFAULT_SPLIT_CONCURRENCY, 1);
  return {
    maxAllowedRange: int('getLogsMaxAllowedRange', DEFAULT_MAX_ALLOWED_RANGE, 0),
    maxAllowedAddresses: int('getLogsMaxAllowedAddresses', 0, 0),
    maxAllowedTopics: int('getLogsMaxAllowedTopics', 0, 0),
    splitOnError,
    splitConcurrency,
    traceSplitOnError,
    traceSplitConcurrency,
    logsSplit: { splitOnError, concurrency: splitConcurrency },
    traceSplit: { splitOnError: traceSplitOnError, concurrency: traceSplitConcurrency },
  };
}

/**
 * The proactive split threshold of a network (as eRPC does): the smallest
 * `upstreams[].evm.getLogsAutoSplittingRangeThreshold` above 0 among the network's upstreams,
 * capped by `getLogsMaxAllowedRange` (when above 0); 0 when no upstream sets one (no
 * proactive split, eRPC's default since its PR #764).
 * @param upstreams the network's upstreams
 * @param maxAllowedRange the network's `getLogsMaxAllowedRange` (0 = unlimited)
 * @param key the upstream key read (`traceFilterAutoSplittingRangeThreshold` for the trace methods)
 * @returns blocks per chunk, or 0
 */
export function autoSplitThresholdOf(upstreams: readonly Upstream[], maxAllowedRange: number, key = 'getLogsAutoSplittingRangeThreshold'): number {
  let t = 0;
  for (const u of upstreams) {
    const evm = u.config.settings.evm;
    const v = evm !== null && typeof evm === 'object' ? (evm as Record<string, unknown>)[key] : undefined;
    if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 && (t === 0 || v < t)) t = v;
  }
  if (maxAllowedRange > 0 && t > maxAllowedRange) t = maxAllowedRange;
  return t;
}

// ---------------------------------------------------------------------------------------
// Filter inspection

/** Methods this plugin handles: filters with `fromBlock`/`toBlock` at param 0. */
export const GETLOGS_METHODS: ReadonlySet<string> = new Set(['eth_getLogs', 'trace_filter', 'arbtrace_filter']);

/**
 * The trace filter methods (Parity/Erigon `trace_filter`, Arbitrum's pre-Nitro `arbtrace_filter`):
 * split like `eth_getLogs` (range only, never with `after`/`count` paging), with their own
 * switches; bounded by `getLogsMaxAllowedRange` like `eth_getLogs` (spec §2.8 #8).
 */
export const TRACE_METHODS: ReadonlySet<string> = new Set(['trace_filter', 'arbtrace_filter']);

/** A getLogs/trace_filter filter object. */
export type LogsFilter = Record<string, unknown>;

/**
 * True when a param is a filter object (a non-null, non-array object).
 * @param v param 0 of the call
 */
export function isFilter(v: unknown): v is LogsFilter {
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
 * Resolves a filter's `fromBlock`/`toBlock` (as eRPC does): hex numbers as such, `latest`
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
 * rejected, for the trace methods too. Address and topic limits apply to `eth_getLogs` whatever
 * `enforceRange` says.
 * @param method `eth_getLogs` or `trace_filter`
 * @param filter the filter object
 * @param range the resolved range ({@link resolveFilterRange})
 * @param s the network's settings
 * @param enforceRange the call's `enforce-getlogs-range` directive (default true)
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
      return new ErrGetLogsExceededMaxAllowedAddresses(
        `getLogs request exceeded max allowed addresses: ${n} is over getLogsMaxAllowedAddresses ${s.maxAllowedAddresses}`,
        {
          details: { method, addresses: n, maxAllowedAddresses: s.maxAllowedAddresses },
        },
      );
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
