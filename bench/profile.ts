/**
 * "Where the time goes" of `npm run bench`: a CPU profile of svc as shipped next to the floors,
 * under the same load as the targets table, so a missed target comes with its profile (the lean hot path targets).
 *
 * Each subject (svc as shipped, svc with the cache and multiplexing off, the node:http forwarder)
 * runs behind its own fake upstream with `--cpu-prof`; after a warm-up it takes the unique
 * `eth_getBalance` load for the run's duration. Only the samples taken inside that window count
 * (V8's profile clock and `process.hrtime` are both CLOCK_MONOTONIC). The main thread's busy
 * samples are grouped by component and scaled to the main thread's CPU per request (from
 * `/proc/<pid>/task`); V8's helper threads (concurrent and parallel GC, the compiler) get their
 * own row, since CPU per request counts every thread.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, markdownTable, preflight, progress, runLoad, startTarget, TARGETS, uniqueBalanceBody, type BenchSettings, type Target } from './lib.ts';

/** Sampling interval of the profiles, µs: fine enough for per-request shares, coarse enough to cost little. */
const INTERVAL_US = 250;

/** One profiled server. */
interface Subject {
  label: string;
  script: string;
  args: string[];
}

const SUBJECTS: Subject[] = [
  { label: 'svc as shipped', script: TARGETS.svc, args: ['--cache=1', '--multiplexing=1'] },
  { label: 'svc, cache and multiplexing off', script: TARGETS.svc, args: [] },
  { label: 'min forwarder', script: TARGETS.forwarder, args: [] },
];

/** The parts of a V8 `.cpuprofile` read here. */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** What one profiled run measured. */
interface Profiled {
  /** Main-thread CPU µs per request by component. */
  groups: Map<string, number>;
  /** Main-thread CPU µs per request by function (self time). */
  functions: Map<string, number>;
  mainCpuPerReq: number;
  helperCpuPerReq: number;
  responses: number;
}

/** CPU ticks (1/100 s) of a process's threads: the main thread and all others. */
function threadTicks(pid: number): { main: number; helpers: number } {
  let main = 0;
  let helpers = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]);
    if (tid === String(pid)) main += ticks;
    else helpers += ticks;
  }
  return { main, helpers };
}

/** The component a profile frame belongs to. */
export function componentOf(functionName: string, url: string): string {
  if (functionName === '(garbage collector)') return 'GC (main thread)';
  if (functionName === 'writev' || functionName === 'writevGeneric' || functionName === 'writeGeneric') return 'socket writes (kernel writev)';
  if (functionName === 'runMicrotasks' || functionName === 'processTicksAndRejections') return 'promise jobs and ticks';
  if (functionName === '(program)') return 'V8 and native (program)';
  const plugin = /\/plugins\/([^/]+)\//.exec(url);
  if (plugin && !url.includes('/node_modules/')) return `svc plugin ${plugin[1]}`;
  if (!url.includes('/node_modules/')) {
    if (/\/(dist\/)?core\//.test(url)) return 'svc core';
    if (/\/(dist\/)?lib\//.test(url)) return 'svc lib';
    if (/\/(dist\/)?config\//.test(url)) return 'svc config';
  }
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) {
    const name = pkg[1] as string;
    if (
      name === 'koa' ||
      name === '@koa/router' ||
      name === 'koa-compose' ||
      name === 'delegates' ||
      name === 'ee-first' ||
      name === 'on-finished' ||
      name === 'statuses' ||
      name === 'cookies'
    )
      return 'Koa';
    return name;
  }
  if (url.startsWith('node:internal/abort_controller') || url.startsWith('node:internal/event_target')) return 'Node AbortSignal and EventTarget';
  if (url.startsWith('node:_http') || url.startsWith('node:http')) return 'Node http';
  if (url.startsWith('node:internal/streams') || url.startsWith('node:net') || url.startsWith('node:internal/stream_base')) return 'Node streams and net';
  if (url.startsWith('node:')) return 'Node other';
  return url === '' ? `native ${functionName || '(anonymous)'}` : 'other';
}

/** Busy samples of a profile inside [fromUs, toUs], by component and by function. */
function readProfile(file: string, fromUs: number, toUs: number): { groups: Map<string, number>; functions: Map<string, number>; busy: number } {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
  const groups = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const f = byId.get(p.samples[i] as number);
    if (!f || f.functionName === '(idle)') continue;
    busy++;
    const g = componentOf(f.functionName, f.url);
    groups.set(g, (groups.get(g) ?? 0) + 1);
    const where = f.url.replace(/^.*\/(node_modules|dist|plugins|core|lib)\//, '$1/');
    const fn = `${f.functionName || '(anonymous)'} ${where}${where ? `:${f.lineNumber + 1}` : ''}`;
    functions.set(fn, (functions.get(fn) ?? 0) + 1);
  }
  return { groups, functions, busy };
}

/** Profiles one subject under the unique-call load. */
async function profileOne(s: Subject, settings: BenchSettings): Promise<Profiled> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-prof-'));
  const procs: Target[] = [];
  try {
    const up = await startTarget(TARGETS.upstream, { label: `profile/${s.label}/upstream` });
    procs.push(up);
    const target = await startTarget(s.script, {
      label: `profile/${s.label}`,
      args: [`--upstream=${up.origin}/`, ...s.args],
      cpuProfDir: dir,
      cpuProfIntervalUs: INTERVAL_US,
    });
    procs.push(target);
    const body = uniqueBalanceBody();
    const url = s.script === TARGETS.svc ? `${target.origin}/main/evm/1` : `${target.origin}/`;
    const bad = await preflight(url, body);
    if (bad) throw new Error(`${s.label}: ${bad}`);
    await runLoad({ url, body, connections: settings.connections, durationS: settings.warmupS });
    const before = threadTicks(target.pid);
    const fromUs = Number(process.hrtime.bigint() / 1000n);
    const load = await runLoad({ url, body, connections: settings.connections, durationS: settings.durationS });
    const toUs = Number(process.hrtime.bigint() / 1000n);
    const after = threadTicks(target.pid);
    await target.stop();
    procs.pop();
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`${s.label}: no CPU profile written`);
    const { groups, functions, busy } = readProfile(join(dir, file), fromUs, toUs);
    const responses = Math.max(1, load.responses);
    const mainCpuPerReq = ((after.main - before.main) * 10_000) / responses;
    const helperCpuPerReq = ((after.helpers - before.helpers) * 10_000) / responses;
    const scale = (m: Map<string, number>) => new Map([...m].map(([k, v]) => [k, (v / Math.max(1, busy)) * mainCpuPerReq]));
    progress(
      `  profile ${s.label}: ${fmt(load.rps, 0)} req/s, main thread ${fmt(mainCpuPerReq, 1)} µs/req, helper threads ${fmt(helperCpuPerReq, 1)} µs/req, ${busy} busy samples`,
    );
    return { groups: scale(groups), functions: scale(functions), mainCpuPerReq, helperCpuPerReq, responses };
  } finally {
    for (const p of procs.reverse()) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Profiles svc as shipped, svc with the cache and multiplexing off, and the node:http
 * forwarder under the unique-call load.
 * @param settings connections, duration (s) and warm-up (s) of the run
 * @returns the markdown section
 */
export async function profileSection(settings: BenchSettings): Promise<string> {
  progress('profiling: svc as shipped and the forwarder under the unique-call load (--cpu-prof)');
  const runs: Profiled[] = [];
  for (const s of SUBJECTS) runs.push(await profileOne(s, settings));
  const names = new Set<string>();
  for (const r of runs) for (const k of r.groups.keys()) names.add(k);
  const ordered = [...names].sort((a, b) => (runs[0]?.groups.get(b) ?? 0) - (runs[0]?.groups.get(a) ?? 0));
  const rows = ordered.filter((k) => runs.some((r) => (r.groups.get(k) ?? 0) >= 0.3)).map((k) => [k, ...runs.map((r) => fmt(r.groups.get(k) ?? 0, 1))]);
  rows.push(['V8 helper threads (parallel and concurrent GC, compiler)', ...runs.map((r) => fmt(r.helperCpuPerReq, 1))]);
  rows.push(['**total CPU µs/req (profiled run)**', ...runs.map((r) => `**${fmt(r.mainCpuPerReq + r.helperCpuPerReq, 1)}**`)]);
  const shipped = runs[0] as Profiled;
  const off = runs[1] as Profiled;
  const top = [...shipped.functions]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25)
    .map(([k, v]) => [`\`${k}\``, fmt(v, 2), fmt(off.functions.get(k) ?? 0, 2)]);
  return [
    '## Where the time goes: profiles of svc as shipped and of the floor',
    '',
    `Each server ran alone behind its own fake upstream under the unique \`eth_getBalance\` load (${settings.connections} connections, ${settings.durationS} s after a ${settings.warmupS} s warm-up) with \`--cpu-prof\` (one sample every ${INTERVAL_US} µs, which itself costs CPU: read shares, not absolute figures). The main thread's busy samples inside the load window are grouped by component and scaled to its CPU µs per request (from /proc); V8's helper threads are their own row, because CPU per request counts every thread.`,
    '',
    markdownTable(['Component (CPU µs per request)', ...SUBJECTS.map((s) => s.label)], rows),
    '',
    'The functions with the most self time in svc as shipped (µs per request), with the same function in svc with the cache and multiplexing off:',
    '',
    markdownTable(['Function', 'svc as shipped', 'cache and multiplexing off'], top),
    '',
  ].join('\n');
}
