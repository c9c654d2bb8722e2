/**
 * Splitting of the evm-getlogs plugin (as eRPC does): recognising an
 * upstream's too-large refusal, halving a refused job (block range, then for one `eth_getLogs`
 * block the `address` list, then the `topics[0]` OR-list), and the reactive split executor
 * that runs the parts through the rest of the chain with bounded concurrency and merges them
 * in block order. No hooks here; `index.ts` calls {@link splitGetLogs} from its `call` tap.
 */
import { setMaxListeners } from 'node:events';
import pLimit from 'p-limit';
import { type CallContext, type CallHandler, RpcResult } from 'svc-proxy/plugin';
import { ErrCancelled, ErrEndpointRequestTooLarge, ErrUpstreamMalformedResponse, ErrUpstreamsExhausted } from 'svc-proxy/plugin/errors';
import { linkedController, parseBlockNumber, toHex } from 'svc-proxy/util';
import type { LogsFilter } from './limits.ts';

// ---------------------------------------------------------------------------------------
// Refusals

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
 * Halves a refused job (as eRPC does): the block range while it spans more than one block
 * (`[from, mid - 1]`, `[mid, to]` with `mid = from + floor(size / 2)`); for one `eth_getLogs`
 * block, the `address` list, then the `topics[0]` OR-list. `undefined` when it cannot be split.
 * @param method `eth_getLogs` or `trace_filter` (only the range is split for trace_filter)
 * @param job the refused job
 */
export function splitJob(method: string, job: LogsJob): JobSplit | undefined {
  const size = job.to - job.from + 1;
  if (size > 1) {
    const mid = job.from + Math.floor(size / 2);
    return {
      dimension: 'block_range',
      parts: [
        { ...job, to: mid - 1 },
        { ...job, from: mid },
      ],
    };
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
    return {
      dimension: 'topics0',
      parts: [
        { ...job, filter: { ...job.filter, topics: left } },
        { ...job, filter: { ...job.filter, topics: right } },
      ],
    };
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
 * Runs getLogs/trace_filter jobs through `inner` and merges their answers in order: the shared
 * executor of the reactive split ({@link splitGetLogs}) and the proactive one
 * ({@link runProactiveSplit}).
 *
 * Each job runs with a child context: a shallow copy of `ctx` with its own `request` (params
 * `[subFilter, ...rest]`) and `state`, the same `record` (attempts and headers aggregate) and
 * a signal linked to `ctx.signal`. At most `concurrency` jobs are in flight. A job the
 * upstreams refuse as too large is halved again ({@link splitJob}) when `halveRefused` is on.
 * The first job that fails for good fails the call with its error; the jobs still running are
 * aborted.
 */
async function runJobs(
  ctx: CallContext,
  inner: CallHandler,
  opts: SplitOptions,
  halveRefused: boolean,
  top: (run: (j: LogsJob) => Promise<PartResult>, runSplit: (s: JobSplit) => Promise<PartResult>) => Promise<PartResult>,
): Promise<RpcResult> {
  const method = ctx.request.method;
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
      throw new ErrUpstreamMalformedResponse(`${method} part ${toHex(j.from)}..${toHex(j.to)} answered a non-array result`, {
        details: { upstream: r.upstreamId },
      });
    }
    return { items: v ?? [], upstreamId: r.upstreamId, fromCache: r.fromCache };
  };

  const run = async (j: LogsJob): Promise<PartResult> => {
    try {
      // Only leaf requests hold a limiter slot: a parent waiting on its halves holds none.
      return await limit(runOne, j);
    } catch (e) {
      if (!halveRefused || link.signal.aborted || !isRequestTooLarge(e)) throw e;
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
    const merged = await top(run, runSplit);
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

/**
 * Runs a refused getLogs/trace_filter job as halves through `inner`, halving again each part
 * the upstreams refuse as too large ({@link isRequestTooLarge}) until it succeeds or cannot be
 * split ({@link splitJob}), and merges the answers in block order (concatenation of the parts
 * in order; address/topic halves of one block re-sorted by `logIndex`). Parts run as described
 * for the shared executor: child contexts, at most `concurrency` in flight, the first part
 * that fails for good fails the call and aborts the others.
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
  const first = splitJob(ctx.request.method, job);
  if (!first) throw cause;
  return runJobs(ctx, inner, opts, true, (_run, runSplit) => runSplit(first));
}

/**
 * Cuts `[job.from, job.to]` into consecutive chunks of `size` blocks (the last one shorter),
 * eRPC's proactive split (as eRPC does).
 * @param job the whole range
 * @param size blocks per chunk, at least 1
 */
export function chunkJob(job: LogsJob, size: number): LogsJob[] {
  const step = Math.max(1, Math.floor(size));
  const out: LogsJob[] = [];
  for (let from = job.from; from <= job.to; from += step) out.push({ ...job, from, to: Math.min(from + step - 1, job.to) });
  return out;
}

/**
 * The proactive split (`upstreams[].evm.getLogsAutoSplittingRangeThreshold`, or
 * `traceFilterAutoSplittingRangeThreshold` for the trace methods): runs `job` as consecutive
 * chunks of `size` blocks (as {@link chunkJob} cuts them, each cut only when a worker takes it)
 * through `inner` with at most `concurrency` in flight, before any upstream has refused it, and
 * concatenates the answers in block order. When `halveRefused` is on (`getLogsSplitOnError`), a chunk the upstreams still
 * refuse as too large is halved like a reactive split. Any chunk that fails for good fails the
 * call: no partial result.
 * @param ctx the call being served
 * @param inner the handler below the getLogs stage
 * @param job the whole range (`from <= to`)
 * @param size blocks per chunk (the effective threshold), at least 1
 * @param halveRefused halve chunks refused as too large
 * @param opts concurrency and split callback
 * @returns a new `RpcResult` with the merged array; `fromCache` only when every chunk came from the cache
 * @throws SvcError the first chunk's final error, or `ErrUpstreamMalformedResponse` when a chunk answers a non-array
 */
export async function runProactiveSplit(
  ctx: CallContext,
  inner: CallHandler,
  job: LogsJob,
  size: number,
  halveRefused: boolean,
  opts: SplitOptions,
): Promise<RpcResult> {
  // Chunks are cut as workers take them, never all at once: a trace range has no upper bound,
  // so what a wide one costs is `concurrency` requests in flight until the call's deadline.
  const step = Math.max(1, Math.floor(size));
  const count = Math.floor((job.to - job.from) / step) + 1;
  return runJobs(ctx, inner, opts, halveRefused, async (run) => {
    const parts: PartResult[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < count; i = next++) {
        const from = job.from + i * step;
        parts[i] = await run({ ...job, from, to: Math.min(from + step - 1, job.to) });
      }
    };
    await Promise.all(Array.from({ length: Math.min(count, Math.max(1, opts.concurrency)) }, worker));
    const items: unknown[] = [];
    for (const p of parts) for (const x of p.items) items.push(x);
    return { items, upstreamId: parts.find((p) => p.upstreamId !== undefined)?.upstreamId, fromCache: parts.every((p) => p.fromCache) };
  });
}
