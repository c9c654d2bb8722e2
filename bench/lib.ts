/**
 * Benchmark helpers (parent side): spawning targets in their own processes, driving load with
 * autocannon, medians/percentiles and markdown tables. `bench/run.ts` is the main benchmark;
 * later scenarios (e.g. fault tolerance with a flaky upstream) reuse these.
 *
 * Units are in the names or the TSDoc: `…Ms` milliseconds, `…S` seconds, `…Micros`
 * microseconds, `…Kb` KiB.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { EventEmitter } from 'node:events';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

// ---------------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------------

/** Entry scripts of the benchmark targets (absolute paths). See bench/targets/common.ts for the protocol. */
export const TARGETS = {
  /** Fake EVM JSON-RPC upstream (node:http). Options: chain-id, result, slow-fraction, slow-ms, slow-seed, delay-ms. */
  upstream: fileURLToPath(new URL('./targets/upstream.ts', import.meta.url)),
  /** svc with the default preset. Options: upstream (comma list), preset, log-level, metrics, config. */
  svc: fileURLToPath(new URL('./targets/svc.ts', import.meta.url)),
  /** Bare Koa + @koa/router answering a fixed JSON body. */
  koa: fileURLToPath(new URL('./targets/koa.ts', import.meta.url)),
  /** Minimal node:http + undici Pool forwarder. Options: upstream, connections. */
  forwarder: fileURLToPath(new URL('./targets/forwarder.ts', import.meta.url)),
} as const;

/** Resource usage of a target process over one measurement window. */
export interface TargetUsage {
  /** User + system CPU time of the target process (all its threads) in the window, µs. */
  cpuMicros: number;
  /** Peak RSS of the target process since it started, KiB. */
  maxRssKb: number;
  /** HTTP requests the target received in the window (a batch counts once). */
  requests: number;
  /** Current RSS of the target process at report time, KiB. */
  rssKb: number;
  /** Current V8 heap used of the target process at report time, KiB. */
  heapUsedKb: number;
}

/** Options of {@link startTarget}. */
export interface StartTargetOptions {
  /** Extra argv for the script, e.g. `['--upstream=http://127.0.0.1:1234']`. */
  args?: string[];
  /** Extra environment variables (merged over the parent's). */
  env?: NodeJS.ProcessEnv;
  /** Label used in logs; default the script's base name. */
  label?: string;
  /** How long to wait for the ready line, ms (default 30 000). */
  readyTimeoutMs?: number;
  /** Max lines of the target's own stdout forwarded to stderr (default 20; the rest are counted). */
  maxForwardedLines?: number;
}

/** A running target process. */
export interface Target {
  /** Label given at start. */
  readonly label: string;
  /** OS process id. */
  readonly pid: number;
  /** TCP port it listens on (127.0.0.1). */
  readonly port: number;
  /** `http://127.0.0.1:<port>`. */
  readonly origin: string;
  /** Starts a measurement window: CPU baseline and request counter reset in the target. */
  reset(): Promise<void>;
  /** Usage since the last {@link reset}. */
  report(): Promise<TargetUsage>;
  /**
   * Sends SIGTERM and waits for exit (SIGKILL after 5 s).
   * @returns the usage the target printed on the way out (since the last reset), if any
   */
  stop(): Promise<TargetUsage | undefined>;
  /** Lines of the target's own stdout (logs) seen so far, forwarded or not. */
  readonly logLines: number;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of live) c.kill('SIGKILL');
  });
}

function toUsage(o: Record<string, unknown>): TargetUsage {
  return {
    cpuMicros: Number(o.cpuMicros),
    maxRssKb: Number(o.maxRssKb),
    requests: Number(o.requests),
    rssKb: Number(o.rssKb),
    heapUsedKb: Number(o.heapUsedKb),
  };
}

/**
 * Spawns a target entry script in its own Node.js process (`fork` with `--import tsx` and an
 * IPC channel) and waits until it printed its ready line.
 * @param script absolute path of the entry script (see {@link TARGETS})
 * @param opts argv, environment, label and timeouts
 * @returns a handle speaking the reset/report/stop protocol
 * @throws Error when the process exits or stays silent before it is ready
 */
export async function startTarget(script: string, opts: StartTargetOptions = {}): Promise<Target> {
  installExitHook();
  const label = opts.label ?? (script.split('/').pop() ?? script).replace(/\.ts$/, '');
  const child = fork(script, opts.args ?? [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: { ...process.env, ...opts.env },
  });
  live.add(child);
  const maxLines = opts.maxForwardedLines ?? 20;
  let logLines = 0;
  let final: TargetUsage | undefined;
  const waiters = new Map<string, Array<(m: Record<string, unknown>) => void>>();
  child.on('message', (m: unknown) => {
    const msg = m as Record<string, unknown>;
    const list = waiters.get(String(msg.type));
    const w = list?.shift();
    if (w) w(msg);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  void exited.then(() => live.delete(child));

  const ready = new Promise<{ port: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: not ready after ${opts.readyTimeoutMs ?? 30_000} ms`)), opts.readyTimeoutMs ?? 30_000);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${label}: exited with code ${code} before it was ready`));
    });
    const rl = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    rl.on('line', (line) => {
      let o: Record<string, unknown> | undefined;
      if (line.startsWith('{"bench":')) {
        try {
          o = JSON.parse(line) as Record<string, unknown>;
        } catch {
          o = undefined;
        }
      }
      if (o?.bench === 'ready') {
        clearTimeout(timer);
        resolve({ port: Number(o.port) });
      } else if (o?.bench === 'final') {
        final = toUsage(o);
      } else {
        logLines++;
        if (logLines <= maxLines) process.stderr.write(`[${label}] ${line}\n`);
      }
    });
  });
  let port: number;
  try {
    ({ port } = await ready);
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }

  const ask = (type: string, timeoutMs = 10_000): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${label}: no '${type}' answer within ${timeoutMs} ms`)), timeoutMs);
      const list = waiters.get(type) ?? [];
      list.push((m) => {
        clearTimeout(timer);
        resolve(m);
      });
      waiters.set(type, list);
      child.send({ type });
    });

  return {
    label,
    pid: child.pid as number,
    port,
    origin: `http://127.0.0.1:${port}`,
    get logLines() {
      return logLines;
    },
    async reset() {
      await ask('reset');
    },
    async report() {
      return toUsage(await ask('report'));
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
      if (logLines > maxLines) process.stderr.write(`[${label}] … ${logLines - maxLines} more output lines not shown\n`);
      return final;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------------------------

/** A JSON-RPC request body. */
export interface RpcBody {
  /** The body text. */
  text: string;
  /** JSON-RPC calls in it (1 for a single request, n for a batch). */
  calls: number;
}

/**
 * The single-call body `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`.
 * @param method JSON-RPC method (default `eth_blockNumber`)
 */
export function singleBody(method = 'eth_blockNumber'): RpcBody {
  return { text: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }), calls: 1 };
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
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: opts.url,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: opts.body.text,
        connections: opts.connections ?? 32,
        pipelining: 1,
        duration: opts.durationS,
        timeout: opts.timeoutS ?? 10,
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
 */
export async function measure(target: Target, load: LoadOptions, helpers: Target[] = []): Promise<Measurement> {
  await Promise.all([target.reset(), ...helpers.map((h) => h.reset())]);
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

// ---------------------------------------------------------------------------------------------
// Statistics and formatting
// ---------------------------------------------------------------------------------------------

/**
 * Median of a list (mean of the two middle values for an even count).
 * @param xs values in any unit
 * @returns the median in the same unit, NaN for an empty list
 */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/**
 * Nearest-rank percentile of an ascending-sorted list.
 * @param sorted values sorted ascending (any unit)
 * @param p percentile, 0..100
 * @returns the value in the same unit, NaN for an empty list
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

/**
 * Formats a number for a table: fixed decimals, thousands grouping, `–` for NaN.
 * @param x the value
 * @param digits decimals (default 1)
 */
export function fmt(x: number, digits = 1): string {
  if (!Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/**
 * A markdown table with padded columns.
 * @param headers column titles
 * @param rows cells, one array per row
 * @param align per column `l` or `r` (default: first column left, others right)
 * @returns the table text, lines joined with `\n`, no trailing newline
 */
export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[], align?: readonly ('l' | 'r')[]): string {
  const al = headers.map((_, i) => align?.[i] ?? (i === 0 ? 'l' : 'r'));
  const width = headers.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)));
  const pad = (s: string, i: number) => ((al[i] === 'r' ? s.padStart(width[i] as number) : s.padEnd(width[i] as number)));
  const line = (cells: readonly string[]) => `| ${headers.map((_, i) => pad(cells[i] ?? '', i)).join(' | ')} |`;
  const sep = `|${headers.map((_, i) => (al[i] === 'r' ? `${'-'.repeat((width[i] as number) + 1)}:` : `:${'-'.repeat((width[i] as number) + 1)}`)).join('|')}|`;
  return [line(headers), sep, ...rows.map(line)].join('\n');
}

/**
 * One line describing the machine: CPU model, logical cores, Node.js version, total memory, OS.
 */
export function machineLine(): string {
  const cpus = os.cpus();
  const model = (cpus[0]?.model ?? 'unknown CPU').replace(/\s+/g, ' ').trim();
  return `${model}, ${cpus.length} logical cores (availableParallelism ${os.availableParallelism()}), Node.js ${process.version}, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB RAM, ${os.platform()} ${os.release()}`;
}

/** Benchmark settings read from the environment. */
export interface BenchSettings {
  /** Concurrent connections (env BENCH_CONNECTIONS, default 32). */
  connections: number;
  /** Measured run length, s (env BENCH_DURATION, default 5). */
  durationS: number;
  /** Repetitions per scenario (env BENCH_REPS, default 3). */
  reps: number;
  /** Warm-up run length per target, s (env BENCH_WARMUP, default 1; 0 disables). */
  warmupS: number;
}

function envInt(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}=${raw}: expected an integer >= ${min}`);
  return n;
}

/**
 * Reads {@link BenchSettings} from BENCH_CONNECTIONS, BENCH_DURATION (s), BENCH_REPS and
 * BENCH_WARMUP (s).
 * @throws Error on a malformed value
 */
export function benchSettings(): BenchSettings {
  return {
    connections: envInt('BENCH_CONNECTIONS', 32, 1),
    durationS: envInt('BENCH_DURATION', 5, 1),
    reps: envInt('BENCH_REPS', 3, 1),
    warmupS: envInt('BENCH_WARMUP', 1, 0),
  };
}

/**
 * Writes a progress line to stderr (stdout carries only the result table).
 * @param msg the message
 */
export function progress(msg: string): void {
  process.stderr.write(`${msg}\n`);
}
