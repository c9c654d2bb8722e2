/**
 * Benchmark helpers (parent side), load: request bodies, the strict preflight, autocannon runs
 * with exact latency percentiles, and one measurement window (target CPU, load generator CPU,
 * foreign CPU). Re-exported by `bench/lib.ts`.
 *
 * Units are in the names or the TSDoc: `…Ms` milliseconds, `…S` seconds, `…Micros`
 * microseconds, `…Kb` KiB.
 */
import { readFileSync } from 'node:fs';
import type { EventEmitter } from 'node:events';
import os from 'node:os';
import autocannon from 'autocannon';
import type { Target, TargetUsage } from './lib.ts';
import { percentile } from './stats.ts';

/** A JSON-RPC request body. */
export interface RpcBody {
  /** The body text. */
  text: string;
  /** JSON-RPC calls in it (1 for a single request, n for a batch). */
  calls: number;
  /**
   * When set, every request of a load run sends a different body: `unique(i)` for the i-th
   * request of the run (`text` is `unique(0)`, the preflight's). Used where a repeated body would
   * be answered by svc's cache or collapsed by multiplexing, and the run must measure misses.
   */
  unique?: (i: number) => string;
}

/** Block of the unique-call bodies: below the fake upstream's finalized block, so answers are cacheable. */
const UNIQUE_BLOCK = '0x1200000';

/**
 * `eth_getBalance` of a different address on every request, at a fixed finalized block
 * (`0x1200000`): each call is a cache miss that svc writes back, as under a real indexer's load.
 * The address is the request index, zero-padded to 20 bytes; the run offset keeps rounds apart
 * (a later round must not hit what an earlier one cached).
 */
export function uniqueBalanceBody(): RpcBody {
  let run = 0;
  const at = (i: number) => `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x${i.toString(16).padStart(40, '0')}","${UNIQUE_BLOCK}"]}`;
  return {
    text: at(0),
    calls: 1,
    unique: (i) => {
      if (i === 0) run++;
      return at(run * 100_000_000 + i);
    },
  };
}

/**
 * The single-call body `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`.
 * @param method JSON-RPC method (default `eth_blockNumber`)
 */
export function singleBody(method = 'eth_blockNumber'): RpcBody {
  return { text: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }), calls: 1 };
}

/**
 * A realistic `eth_call` body: a contract call whose ABI data is `dataBytes` long,
 * zero-padded words like real calldata, at a fixed block.
 * @param dataBytes bytes of calldata after the 4-byte selector
 */
export function ethCallBody(dataBytes: number): RpcBody {
  const word = (i: number) => (i % 3 === 0 ? `${'0'.repeat(24)}${'ab'.repeat(20)}` : `${'0'.repeat(56)}${(i * 7919).toString(16).padStart(8, '0')}`);
  const words = Array.from({ length: Math.ceil(dataBytes / 32) }, (_, i) => word(i)).join('');
  const data = `0xa9059cbb${words}`;
  return {
    text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ to: '0x6b175474e89094c44da98b954eedeac495271d0f', data }, '0x1200000'] }),
    calls: 1,
  };
}

/**
 * A realistic `eth_sendRawTransaction` body: a signed transaction of about `bytes`
 * bytes (RLP with zero-padded calldata).
 */
export function rawTxBody(bytes: number): RpcBody {
  const body = Array.from({ length: bytes }, (_, i) => (i % 5 === 0 ? 'a7' : '00')).join('');
  return { text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: [`0x02f9${body}`] }), calls: 1 };
}

/**
 * A batch body of `n` calls of the same method, ids 1..n.
 * @param n number of calls in the batch
 * @param method JSON-RPC method (default `eth_blockNumber`)
 */
export function batchBody(n: number, method = 'eth_blockNumber'): RpcBody {
  return { text: JSON.stringify(Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method, params: [] }))), calls: n };
}

/** Number of non-overlapping occurrences of `needle` in `s`. */
function occurrences(s: string, needle: string): number {
  let n = 0;
  for (let i = s.indexOf(needle); i !== -1; i = s.indexOf(needle, i + needle.length)) n++;
  return n;
}

/**
 * A cheap body check for load runs: exactly `calls` `"result"` members and no `"error"`.
 * @param calls JSON-RPC calls expected in each answer
 * @returns a predicate for autocannon's `verifyBody`
 */
export function resultBodyCheck(calls: number): (body: string | Buffer | undefined) => boolean {
  return (body) => {
    const s = typeof body === 'string' ? body : (body?.toString('utf8') ?? '');
    return occurrences(s, '"result"') === calls && !s.includes('"error"');
  };
}

/**
 * One request before the load, checked strictly: HTTP 200, JSON, and for each call an answer
 * with the caller's id and a `result`.
 * @param url target URL
 * @param body the request body
 * @returns undefined when correct, else a description of what was wrong
 */
export async function preflight(url: string, body: RpcBody): Promise<string | undefined> {
  let status: number;
  let text: string;
  try {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body.text });
    status = res.status;
    text = await res.text();
  } catch (e) {
    return `request failed: ${(e as Error).message}`;
  }
  const excerpt = text.length > 300 ? `${text.slice(0, 300)}…` : text;
  if (status !== 200) return `HTTP ${status}: ${excerpt}`;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return `not JSON: ${excerpt}`;
  }
  const sent = JSON.parse(body.text) as { id: unknown } | Array<{ id: unknown }>;
  const want = Array.isArray(sent) ? sent.map((c) => c.id) : [sent.id];
  const got = Array.isArray(sent) ? doc : [doc];
  if (!Array.isArray(got) || got.length !== want.length) return `expected ${want.length} answers: ${excerpt}`;
  const ids = new Set(want);
  for (const a of got as Array<Record<string, unknown> | null>) {
    if (!a || !('result' in a) || !ids.delete(a.id)) return `bad answer ${JSON.stringify(a)} in ${excerpt}`;
  }
  return undefined;
}

/** Options of {@link runLoad}. */
export interface LoadOptions {
  /** Target URL. */
  url: string;
  /** Request body sent on every request (POST, `content-type: application/json`). */
  body: RpcBody;
  /** Concurrent connections (default 32). */
  connections?: number;
  /** Run length, s. */
  durationS: number;
  /** Per-request timeout, s (default 10). */
  timeoutS?: number;
  /** Check every answer body with {@link resultBodyCheck} (default true); failures count as mismatches. */
  verifyBodies?: boolean;
  /** Fixed overall request rate, requests per second (default: as fast as the connections go). */
  rate?: number;
  /** Extra request headers, e.g. a directive such as `{'x-svc-integrity': 'intrinsic'}` (content-type is always JSON). */
  headers?: Record<string, string>;
}

/** The outcome of one load run. */
export interface LoadResult {
  /** Completed HTTP responses (any status). */
  responses: number;
  /** Actual run length, s. */
  durationS: number;
  /** responses / durationS, requests per second. */
  rps: number;
  /** Median latency over all responses, ms (autocannon's per-request hrtime, not rounded). */
  p50Ms: number;
  /** 99th percentile latency, ms. */
  p99Ms: number;
  /** Mean latency, ms. */
  meanMs: number;
  /** Max latency, ms. */
  maxMs: number;
  /** Responses with a status outside 2xx. */
  non2xx: number;
  /** Connection errors (timeouts included). */
  errors: number;
  /** Request timeouts. */
  timeouts: number;
  /** 2xx answers whose body failed the check (JSON-RPC errors, missing results). */
  mismatches: number;
  /** Count per HTTP status. */
  statusCodes: Record<string, number>;
}

/** True when a load run saw any non-2xx answer, connection error, timeout or bad body. */
export function hasFailures(r: LoadResult): boolean {
  return r.non2xx + r.errors + r.timeouts + r.mismatches > 0;
}

/** A growable array of latencies, ms. */
class LatencyRecorder {
  private buf = new Float64Array(1 << 16);
  n = 0;
  push(v: number): void {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.n++] = v;
  }
  sorted(): Float64Array {
    return this.buf.slice(0, this.n).sort();
  }
}

/**
 * Runs autocannon in this process against a URL. Latency percentiles are computed from every
 * response's own hrtime measurement (autocannon's histogram rounds to whole ms).
 * @param opts URL, body, connections and duration
 * @returns counts, request rate and latency percentiles
 */
export function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const rec = new LatencyRecorder();
  const check = opts.verifyBodies === false ? undefined : resultBodyCheck(opts.body.calls);
  const unique = opts.body.unique;
  let next = 0;
  unique?.(next++);
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        method: 'POST',
        headers: { ...opts.headers, 'content-type': 'application/json' },
        body: opts.body.text,
        ...(unique ? { requests: [{ method: 'POST', setupRequest: (req: autocannon.Request) => ({ ...req, body: unique(next++) }) }] } : {}),
        connections: opts.connections ?? 32,
        pipelining: 1,
        duration: opts.durationS,
        timeout: opts.timeoutS ?? 10,
        ...(opts.rate !== undefined ? { overallRate: opts.rate } : {}),
        ...(check ? { verifyBody: check } : {}),
      },
      (err: unknown, r: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error(String(err)));
        const s = rec.sorted();
        let sum = 0;
        for (const v of s) sum += v;
        const statusCodes: Record<string, number> = {};
        for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = v.count ?? 0;
        resolve({
          responses: rec.n,
          durationS: r.duration,
          rps: r.duration > 0 ? rec.n / r.duration : 0,
          p50Ms: percentile(s, 50),
          p99Ms: percentile(s, 99),
          meanMs: s.length ? sum / s.length : Number.NaN,
          maxMs: s.length ? (s[s.length - 1] as number) : Number.NaN,
          non2xx: r.non2xx,
          errors: r.errors,
          timeouts: r.timeouts,
          mismatches: r.mismatches,
          statusCodes,
        });
      },
    );
    // The tracker emits (client, statusCode, resBytes, responseTimeMs); @types/autocannon omits `client`.
    (instance as unknown as EventEmitter).on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => rec.push(ms));
  });
}

/**
 * Busy CPU time of the whole machine so far: user + nice + system of all cores from the first
 * line of `/proc/stat` (USER_HZ taken as 100, i.e. 10 ms ticks). Interrupt and steal time are
 * left out, as they are from per-process CPU times.
 * @returns µs, or undefined when `/proc/stat` is not readable (not Linux)
 */
export function machineBusyMicros(): number | undefined {
  try {
    const first = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    const f = first.trim().split(/\s+/).slice(1).map(Number);
    const ticks = (f[0] ?? 0) + (f[1] ?? 0) + (f[2] ?? 0);
    return first.startsWith('cpu ') && Number.isFinite(ticks) ? ticks * 10_000 : undefined;
  } catch {
    return undefined;
  }
}

/** One measured repetition: the load seen by the client and the usage of each measured process. */
export interface Measurement {
  /** What the load generator saw. */
  load: LoadResult;
  /** Usage of the process under test. */
  usage: TargetUsage;
  /** Usage of the helper processes (e.g. the fake upstream behind a proxy), in the order given. */
  helpers: TargetUsage[];
  /** CPU time of this (load generator) process during the run, µs. */
  loaderCpuMicros: number;
  /**
   * CPU used by processes outside the benchmark during the run, as a share of the machine's
   * capacity (wall time × logical cores), 0..1; undefined off Linux. Above a few percent the
   * run competed with foreign work and its numbers are noisier.
   */
  otherCpuShare?: number;
}

/**
 * One measurement window: resets the target and its helpers, runs the load, then asks each
 * for its usage; also accounts the load generator's CPU and the CPU of foreign processes.
 * @param target the process under test
 * @param load load options (URL, body, duration)
 * @param helpers other processes to account (e.g. the upstream behind the target)
 * @param alloc an allocation window: the target's sampling heap profiler runs and `usage.allocBytes` is filled (its CPU figures then carry the profiler's cost)
 */
export async function measure(target: Target, load: LoadOptions, helpers: Target[] = [], alloc = false): Promise<Measurement> {
  await Promise.all([target.reset({ alloc }), ...helpers.map((h) => h.reset())]);
  const busy0 = machineBusyMicros();
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  const result = await runLoad(load);
  const selfD = process.cpuUsage(self0);
  const wallMicros = (performance.now() - t0) * 1000;
  const busy1 = machineBusyMicros();
  const [usage, ...rest] = (await Promise.all([target.report(), ...helpers.map((h) => h.report())])) as [TargetUsage, ...TargetUsage[]];
  const loaderCpuMicros = selfD.user + selfD.system;
  const ours = usage.cpuMicros + loaderCpuMicros + rest.reduce((n, h) => n + h.cpuMicros, 0);
  const m: Measurement = { load: result, usage, helpers: rest, loaderCpuMicros };
  if (busy0 !== undefined && busy1 !== undefined) m.otherCpuShare = Math.max(0, busy1 - busy0 - ours) / (wallMicros * os.availableParallelism());
  return m;
}
