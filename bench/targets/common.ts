/**
 * The child side of the benchmark's target protocol (the parent side is `bench/lib.ts`).
 *
 * A target is an entry script spawned with `fork(script, args, { execArgv: ['--import', 'tsx'] })`
 * so that the CPU time and peak RSS it reports belong to the server under test alone.
 *
 * Protocol:
 * - ready: one JSON line on stdout, `{"bench":"ready","name":…,"port":…,"pid":…}`; any other
 *   stdout line (e.g. a pino log) is the target's own output.
 * - IPC `{type:'reset'}` → `{type:'reset', ok:true}`: starts a measurement window (CPU baseline,
 *   request counter to 0).
 * - IPC `{type:'report'}` → `{type:'report', cpuMicros, maxRssKb, requests, calls, rssKb, heapUsedKb}` for
 *   the window.
 * - SIGTERM (or IPC `{type:'stop'}`): prints `{"bench":"final",…}` (same fields) on stdout,
 *   closes the server and exits 0.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { PerformanceObserver } from 'node:perf_hooks';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a target reports for one measurement window. */
export interface TargetReport {
  /** User + system CPU time of the whole target process since the last reset, µs. */
  cpuMicros: number;
  /** Peak resident set size of the target process since it started, KiB (`resourceUsage().maxRSS`). */
  maxRssKb: number;
  /** HTTP requests the target counted since the last reset (whole requests: a batch counts once). */
  requests: number;
  /** JSON-RPC calls the target counted since the last reset (each call of a batch counts); 0 when the target does not count them. */
  calls: number;
  /** Current resident set size at report time, KiB. */
  rssKb: number;
  /** Current V8 heap used at report time, KiB. */
  heapUsedKb: number;
  /**
   * Garbage collection CPU since the last reset, µs: the main thread's GC pauses (`gc` performance
   * entries) plus the CPU of V8's helper threads (parallel and concurrent marking, sweeping; libuv's
   * pool and other threads left out); NaN off Linux.
   */
  gcMicros: number;
  /** Bytes the target's response cache holds as it accounts them (its memory tier), at report time; 0 without one. */
  heldBytes?: number;
}

/** A listening server as handed to {@link serveTarget}. */
export interface RunningTarget {
  /** The bound TCP port. */
  port: number;
  /** Stops serving; called once on SIGTERM / IPC stop. */
  close(): Promise<void>;
  /** Bytes its response cache holds as it accounts them (svc: its memory tier's `svc_cache_memory_bytes`); absent without a cache. */
  heldBytes?(): Promise<number>;
}

/** Counter shared by a target's request handler and the protocol (see {@link serveTarget}). */
export interface RequestCounter {
  /** HTTP requests since the last reset. */
  count: number;
  /** JSON-RPC calls since the last reset (a batch adds its length); targets that do not parse bodies leave it at 0. */
  calls: number;
}

/**
 * Reads a target option: `--<name>=<value>` on argv wins, then the environment variable
 * `BENCH_<NAME>` (upper-case, `-` → `_`), then `fallback`.
 * @param name option name in kebab-case, e.g. `slow-fraction`
 * @param fallback value when neither is set
 * @returns the raw string value
 */
export function option(name: string, fallback: string): string {
  const prefix = `--${name}=`;
  const arg = process.argv.find((a) => a.startsWith(prefix));
  if (arg !== undefined) return arg.slice(prefix.length);
  const env = process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
  return env !== undefined && env !== '' ? env : fallback;
}

/**
 * Reads a numeric target option (see {@link option}).
 * @param name option name in kebab-case
 * @param fallback default value (unit as documented by the option)
 * @throws Error when the value is not a finite number
 */
export function numberOption(name: string, fallback: number): number {
  const raw = option(name, String(fallback));
  const n = Number(raw);
  if (!Number.isFinite(n)) throw new Error(`option ${name}: ${JSON.stringify(raw)} is not a number`);
  return n;
}

/**
 * Port of a listening node:http server.
 * @param server a server that is already listening on TCP
 * @returns the TCP port number
 */
export function portOf(server: Server): number {
  return (server.address() as AddressInfo).port;
}

/**
 * Listens on 127.0.0.1 with long keep-alive (autocannon holds its connections for the whole run).
 * @param server a node:http server (Koa's `app.callback()` served by one too)
 * @param port the port (0 = a free one)
 * @returns the bound port and a close that also drops idle keep-alive connections
 */
export async function listenTarget(server: Server, port: number): Promise<{ port: number; close: () => Promise<void> }> {
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: portOf(server),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Starts a target and speaks the benchmark protocol for it (see the module comment).
 * @param name target name, echoed in the ready line
 * @param start starts the server; receives the request counter its handler must increment
 *   once per HTTP request
 * @returns when the ready line has been written
 */
export async function serveTarget(name: string, start: (counter: RequestCounter) => Promise<RunningTarget>): Promise<void> {
  const counter: RequestCounter = { count: 0, calls: 0 };
  let cpuBase = process.cpuUsage();
  let gcPauseMs = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauseMs += e.duration;
  }).observe({ entryTypes: ['gc'] });
  let helperBase = v8HelperTicks();
  const report = (): TargetReport => {
    const d = process.cpuUsage(cpuBase);
    const mem = process.memoryUsage();
    return {
      gcMicros: gcPauseMs * 1000 + (v8HelperTicks() - helperBase) * 10_000,
      cpuMicros: d.user + d.system,
      maxRssKb: process.resourceUsage().maxRSS,
      requests: counter.count,
      calls: counter.calls,
      rssKb: Math.round(mem.rss / 1024),
      heapUsedKb: Math.round(mem.heapUsed / 1024),
    };
  };
  // BENCH_THREAD_CPU=1: each report also prints this process's CPU per thread group on stderr
  // (the JS main thread against V8's GC helpers and libuv's pool), since CPU/req counts them all.
  let threadBase = process.env.BENCH_THREAD_CPU === '1' ? threadCpuTicks() : undefined;
  const running = await start(counter);
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`${JSON.stringify({ bench: 'final', name, ...report() })}\n`);
    const hard = setTimeout(() => process.exit(0), 3000);
    hard.unref();
    try {
      await running.close();
    } finally {
      process.exit(0);
    }
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  // Allocation rounds (`{type:'reset', alloc:true}`): V8's sampling heap profiler, collected objects
  // included, over the window; the report carries the bytes allocated (the garbage a request leaves).
  // BENCH_ALLOC_PROFILE=<dir> also writes each such profile there as `<name>-<pid>-<n>.heapprofile`.
  const alloc = allocationProfiler(process.env.BENCH_ALLOC_PROFILE, name);
  process.on('message', async (m: unknown) => {
    const msg = m as { type?: unknown; alloc?: unknown } | null;
    const type = msg?.type;
    if (type === 'reset') {
      counter.count = 0;
      counter.calls = 0;
      if (msg?.alloc === true) await alloc.start();
      cpuBase = process.cpuUsage();
      gcPauseMs = 0;
      helperBase = v8HelperTicks();
      if (threadBase) threadBase = threadCpuTicks();
      process.send?.({ type: 'reset', ok: true });
    } else if (type === 'report') {
      const r = report();
      const allocBytes = await alloc.stop(r.requests);
      if (threadBase) {
        const now = threadCpuTicks();
        const parts = [...now].map(([k, v]) => `${k} ${(((v - (threadBase?.get(k) ?? 0)) * 10_000) / Math.max(1, r.requests)).toFixed(1)}`);
        process.stderr.write(`  threads of ${name}, CPU µs/req: ${parts.join(', ')}\n`);
      }
      const heldBytes = (await running.heldBytes?.()) ?? 0;
      process.send?.({ type: 'report', ...r, allocBytes, heldBytes });
    } else if (type === 'stop') {
      void stop();
    }
  });
  // The parent going away must not leave an orphan server behind.
  process.on('disconnect', () => void stop());
  process.stdout.write(`${JSON.stringify({ bench: 'ready', name, port: running.port, pid: process.pid })}\n`);
}

/**
 * Reads a whole request body.
 * @param req the incoming request stream
 * @returns the body bytes
 */
export async function readBody(req: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/**
 * CPU clock ticks (1/100 s) of this process's threads grouped by name (`node` is the JS main
 * thread; V8's GC and compiler helpers, libuv's pool), read from /proc (Linux only; empty elsewhere).
 */
/** CPU ticks (10 ms) of V8's helper threads: every thread but the main one and libuv's pool (`libuv-worker`). */
function v8HelperTicks(): number {
  const ticks = threadCpuTicks();
  let n = 0;
  for (const [k, v] of ticks) if (k !== 'main' && !k.startsWith('libuv')) n += v;
  return ticks.size ? n : Number.NaN;
}

function threadCpuTicks(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const name =
        tid === String(process.pid)
          ? 'main'
          : stat
              .slice(stat.indexOf('(') + 1, close)
              .replace(/[0-9]+$/, '')
              .trim();
      const f = stat.slice(close + 2).split(' ');
      out.set(name, (out.get(name) ?? 0) + Number(f[11]) + Number(f[12]));
    }
  } catch {
    // not Linux: no breakdown
  }
  return out;
}

/** Sampling interval of the allocation rounds, bytes (V8 scales each sample to the bytes it stands for). */
const ALLOC_SAMPLING_BYTES = 4096;

/** Total bytes of a sampling heap profile: every node's self size (samples already scaled by V8). */
function profileBytes(node: { selfSize?: number; children?: unknown[] }): number {
  let n = node.selfSize ?? 0;
  for (const c of node.children ?? []) n += profileBytes(c as { selfSize?: number; children?: unknown[] });
  return n;
}

/**
 * Starts and stops V8's sampling heap profiler with collected objects included (bench diagnostics).
 * `stop` answers the bytes allocated over the window (NaN when no window was started).
 * @param dir where to write each profile (undefined: not written)
 * @param name the target's name, in the file name
 */
function allocationProfiler(dir: string | undefined, name: string): { start(): Promise<void>; stop(requests: number): Promise<number> } {
  let session: Session | undefined;
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => session?.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));
  let n = 0;
  let on = false;
  return {
    async start() {
      if (!session) {
        session = new Session();
        session.connect();
      }
      if (on) await post('HeapProfiler.stopSampling');
      await post('HeapProfiler.startSampling', {
        samplingInterval: ALLOC_SAMPLING_BYTES,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      on = true;
    },
    async stop(requests: number) {
      if (!on) return Number.NaN;
      on = false;
      const res = (await post('HeapProfiler.stopSampling')) as { profile: { head: { selfSize?: number; children?: unknown[] } } };
      if (dir) writeFileSync(`${dir}/${name}-${process.pid}-${n++}.heapprofile`, JSON.stringify({ requests, ...res.profile }));
      return profileBytes(res.profile.head);
    },
  };
}
