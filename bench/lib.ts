/**
 * Benchmark helpers (parent side): spawning targets in their own processes (here), driving load
 * with autocannon (`./load.ts`), medians/percentiles, markdown tables and settings
 * (`./stats.ts`); this module re-exports both, so scenarios import everything from `./lib.ts`.
 * `bench/run.ts` is the main benchmark; the other scenarios (hedging, cache hits, bursts,
 * memory) reuse these.
 *
 * Units are in the names or the TSDoc: `…Ms` milliseconds, `…S` seconds, `…Micros`
 * microseconds, `…Kb` KiB.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export * from './load.ts';
export * from './stats.ts';

// ---------------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------------

/** Entry scripts of the benchmark targets (absolute paths). See bench/targets/common.ts for the protocol. */
export const TARGETS = {
  /** Fake EVM JSON-RPC upstream (node:http). Options: chain-id, result, slow-fraction, slow-ms, slow-seed, delay-ms, latest-block, finalized-block, big-mib, block-fixture, advance-ms (the head grows every N ms, blocks linked by parentHash). */
  upstream: fileURLToPath(new URL('./targets/upstream.ts', import.meta.url)),
  /** svc with the default preset. Options: upstream (comma list), preset, log-level, metrics, config, multiplexing, cache, upstream-options, build. */
  svc: fileURLToPath(new URL('./targets/svc.ts', import.meta.url)),
  /** Bare node:http answering a fixed JSON body (no framework). */
  http: fileURLToPath(new URL('./targets/http.ts', import.meta.url)),
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
  /** JSON-RPC calls the target received in the window (each call of a batch counts; 0 when the target does not count calls). */
  calls: number;
  /** Current RSS of the target process at report time, KiB. */
  rssKb: number;
  /** Current V8 heap used of the target process at report time, KiB. */
  heapUsedKb: number;
  /** GC CPU of the target in the window (main-thread pauses + V8 helper threads), µs; NaN when unknown. */
  gcMicros: number;
  /** Bytes the target allocated in the window (V8's sampling heap profiler, garbage included); NaN unless it was an allocation window. */
  allocBytes: number;
  /** Bytes the target's response cache held as it accounts them, at report time (0 without a cache). */
  heldBytes: number;
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
  /**
   * How the target script runs: `compiled` (default) as plain JavaScript built once per bench run
   * (see {@link compiledTarget}), or `tsx` through the tsx loader (needed when the target itself
   * imports TypeScript, e.g. svc's `--build=source`).
   */
  loader?: 'compiled' | 'tsx';
  /** Write a V8 CPU profile of the target into this directory on exit (`--cpu-prof`), sampled every `cpuProfIntervalUs`. */
  cpuProfDir?: string;
  /** Sampling interval of {@link cpuProfDir}, µs (default 1000). */
  cpuProfIntervalUs?: number;
}

const compiled = new Map<string, Promise<string>>();

/**
 * The target script as plain JavaScript: bundled with esbuild (its own helpers inlined, packages
 * left as imports) into `bench/.compiled/`, next to `bench/targets/` so relative URLs such as
 * svc's `../../dist/` still resolve. Each target then runs as `node script.mjs`, like
 * `svc start`: under the tsx loader every process paid for the loader's worker and module
 * records (about 35 MiB for the forwarder, 50 MiB for svc), which made the peak RSS rows
 * measure the loader, not the server.
 * @param script absolute path of a `bench/targets/*.ts` entry
 * @returns absolute path of the built `.mjs`
 */
export function compiledTarget(script: string): Promise<string> {
  let out = compiled.get(script);
  if (!out) {
    const outfile = join(dirname(script), '..', '.compiled', basename(script).replace(/\.ts$/, '.mjs'));
    out = build({
      entryPoints: [script],
      outfile,
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      logLevel: 'error',
    }).then(() => outfile);
    compiled.set(script, out);
  }
  return out;
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
  /**
   * Starts a measurement window: CPU baseline and request counter reset in the target.
   * @param opts `alloc`: an allocation window (the sampling heap profiler runs, so its CPU figures are not comparable)
   */
  reset(opts?: { alloc?: boolean }): Promise<void>;
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

/** `--cpu-prof` flags of a target: its own profile directory, else BENCH_CPU_PROF_DIR for every target. */
function cpuProfArgs(opts: StartTargetOptions): string[] {
  // BENCH_TARGET_NODE_ARGS: extra Node.js flags for every target (e.g. `--heap-prof --heap-prof-dir=/tmp/h`).
  const extra = (process.env.BENCH_TARGET_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const dir = opts.cpuProfDir ?? process.env.BENCH_CPU_PROF_DIR;
  if (!dir) return extra;
  const interval = opts.cpuProfIntervalUs ?? Number(process.env.BENCH_CPU_PROF_INTERVAL ?? 1000);
  return [...extra, '--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${interval}`];
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
    calls: Number(o.calls ?? 0),
    rssKb: Number(o.rssKb),
    heapUsedKb: Number(o.heapUsedKb),
    gcMicros: Number(o.gcMicros),
    allocBytes: o.allocBytes === undefined || o.allocBytes === null ? Number.NaN : Number(o.allocBytes),
    heldBytes: Number(o.heldBytes ?? 0),
  };
}

/**
 * Spawns a target entry script in its own Node.js process (`fork` of its compiled copy, or with
 * `--import tsx`, and an IPC channel) and waits until it printed its ready line.
 * @param script absolute path of the entry script (see {@link TARGETS})
 * @param opts argv, environment, label and timeouts
 * @returns a handle speaking the reset/report/stop protocol
 * @throws Error when the process exits or stays silent before it is ready
 */
export async function startTarget(script: string, opts: StartTargetOptions = {}): Promise<Target> {
  installExitHook();
  const label = opts.label ?? (script.split('/').pop() ?? script).replace(/\.ts$/, '');
  const tsx = opts.loader === 'tsx';
  const child = fork(tsx ? script : await compiledTarget(script), opts.args ?? [], {
    // BENCH_CPU_PROF_DIR: every target writes a V8 CPU profile there on exit (docs/benchmarks.md, "where the time goes").
    execArgv: [...(tsx ? ['--import', 'tsx', '--conditions=svc-source'] : []), ...cpuProfArgs(opts)],
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

  const ask = (type: string, timeoutMs = 10_000, extra?: object): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${label}: no '${type}' answer within ${timeoutMs} ms`)), timeoutMs);
      const list = waiters.get(type) ?? [];
      list.push((m) => {
        clearTimeout(timer);
        resolve(m);
      });
      waiters.set(type, list);
      child.send({ type, ...extra });
    });

  return {
    label,
    pid: child.pid as number,
    port,
    origin: `http://127.0.0.1:${port}`,
    get logLines() {
      return logLines;
    },
    async reset(opts?: { alloc?: boolean }) {
      await ask('reset', 10_000, opts?.alloc === true ? { alloc: true } : undefined);
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
