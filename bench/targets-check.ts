/**
 * The bench's regression check: each performance target of svc as shipped as a same-run ratio,
 * with its status. A target that is missed is printed as a warning
 * on stderr as well as marked in the report, so a regression is seen without reading the table.
 */
import { fmt, markdownTable, progress } from './lib.ts';

/** The figures of one scenario a target reads. */
export interface TargetFigures {
  cpuPerReq: number;
  cpuPerCall: number;
  rps: number;
  peakRssMiB: number;
  /** What the target's response cache accounted for, MiB (0 without one). */
  heldMiB?: number;
  /** GC CPU per request (main-thread pauses + V8 helper threads), µs, when measured. */
  gcPerReq?: number;
  /** Bytes allocated per request (the allocation window), when measured. */
  allocPerReq?: number;
}

/** One target: a ratio (or a difference, µs) of two scenarios' figures, at most or at least a bound. */
interface Target {
  name: string;
  /** Scenario keys: numerator (or minuend), denominator (or subtrahend). */
  of: [string, string];
  value: (a: TargetFigures, b: TargetFigures) => number;
  bound: number;
  kind: 'at most' | 'at least';
  /** `×` for a ratio (default), `µs` for a CPU difference per request. */
  unit?: '×' | 'µs';
}

/**
 * The performance targets of svc as shipped (docs/benchmarks.md): same-run ratios of medians,
 * CPU per request first. The floors are a minimal node:http + undici forwarder and the same
 * forwarder inside Koa + @koa/router (svc is a Koa application), on the same unique calls.
 */
const TARGETS: Target[] = [
  {
    name: 'svc as shipped, unique calls, CPU/req ÷ min forwarder',
    of: ['svc-shipped', 'fwd-unique'],
    value: (a, b) => a.cpuPerReq / b.cpuPerReq,
    bound: 2,
    kind: 'at most',
  },
  {
    name: 'svc as shipped, unique calls, CPU/req ÷ Koa forwarder',
    of: ['svc-shipped', 'fwd-koa-unique'],
    value: (a, b) => a.cpuPerReq / b.cpuPerReq,
    bound: 1.3,
    kind: 'at most',
  },
  {
    name: 'svc minimal preset, unique calls, CPU/req ÷ min forwarder',
    of: ['svc-minimal-unique', 'fwd-unique'],
    value: (a, b) => a.cpuPerReq / b.cpuPerReq,
    bound: 1.4,
    kind: 'at most',
  },
  {
    name: 'garbage per request of svc as shipped ÷ min forwarder (bytes allocated, sampling heap profiler)',
    of: ['svc-shipped', 'fwd-unique'],
    value: (a, b) => (a.allocPerReq ?? Number.NaN) / (b.allocPerReq ?? Number.NaN),
    bound: 1.5,
    kind: 'at most',
  },
  {
    name: 'GC CPU/req of svc as shipped, memory tier full ÷ the tier holding nothing',
    of: ['svc-shipped', 'svc-shipped-tier-empty'],
    value: (a, b) => (a.gcPerReq ?? Number.NaN) / (b.gcPerReq ?? Number.NaN),
    bound: 1.3,
    kind: 'at most',
  },
  {
    name: 'memory cache write-back, CPU µs per miss (alone, hashing and eviction included)',
    of: ['writeback', 'writeback'],
    value: (a) => a.cpuPerReq,
    bound: 5,
    kind: 'at most',
    unit: 'µs',
  },
  {
    name: 'default preset ÷ minimal preset, same unique calls (cache off)',
    of: ['svc-nocache-unique', 'svc-minimal-unique'],
    value: (a, b) => a.cpuPerReq / b.cpuPerReq,
    bound: 1.25,
    kind: 'at most',
  },
  { name: 'memory cache hit CPU/req ÷ bare Koa + router', of: ['svc-cache', 'koa'], value: (a, b) => a.cpuPerReq / b.cpuPerReq, bound: 1.3, kind: 'at most' },
  {
    name: 'svc batch10, upstream supportsBatch, CPU/req ÷ min forwarder batch10',
    of: ['svc-batch-ob', 'fwd-batch'],
    value: (a, b) => a.cpuPerReq / b.cpuPerReq,
    bound: 5,
    kind: 'at most',
  },
  {
    name: 'server.workers auto ÷ 1 worker, CPU/req (svc start, whole process tree)',
    of: ['workers', 'workers'],
    value: (a) => a.cpuPerReq,
    bound: 1.1,
    kind: 'at most',
  },
  {
    name: 'svc, cache and multiplexing off, peak RSS ÷ min forwarder',
    of: ['svc-nocache-unique', 'fwd-unique'],
    value: (a, b) => a.peakRssMiB / b.peakRssMiB,
    bound: 1.3,
    kind: 'at most',
  },
  {
    // The tier is bounded on purpose (100,000 entries by default): what it holds is the cache
    // working, what is left is what svc costs beside it.
    name: 'svc as shipped, memory tier full: peak RSS minus the bytes the tier accounts ÷ min forwarder',
    of: ['svc-shipped', 'fwd-unique'],
    value: (a, b) => (a.peakRssMiB - (a.heldMiB ?? 0)) / b.peakRssMiB,
    bound: 1.5,
    kind: 'at most',
  },
];

/**
 * The targets table of a run; every missed target is also warned about on stderr.
 * @param by the figures of a scenario by key, undefined when it did not run
 * @returns a markdown section
 */
export function targetsSection(by: (key: string) => TargetFigures | undefined): string {
  const rows: string[][] = [];
  let missed = 0;
  for (const t of TARGETS) {
    const a = by(t.of[0]);
    const b = by(t.of[1]);
    if (!a || !b) {
      rows.push([t.name, '–', `${t.kind} ${fmt(t.bound, 2)}${t.unit ?? '×'}`, 'not run']);
      continue;
    }
    const v = t.value(a, b);
    const met = t.kind === 'at most' ? v <= t.bound : v >= t.bound;
    if (!met) {
      missed++;
      progress(`⚠ bench target missed: ${t.name}: ${fmt(v, 2)}${t.unit ?? '×'}, target ${t.kind} ${fmt(t.bound, 2)}${t.unit ?? '×'}`);
    }
    rows.push([t.name, `${fmt(v, 2)}${t.unit ?? '×'}`, `${t.kind} ${fmt(t.bound, 2)}${t.unit ?? '×'}`, met ? 'met' : '⚠ missed']);
  }
  const table = markdownTable(['Target (same run)', 'measured', 'target', 'status'], rows);
  const koa = by('fwd-koa');
  const fwd = by('fwd');
  // svc is a Koa application: the targets are ratios to a node:http forwarder, and Koa's own share
  // of them is this floor (why a target cannot go lower with Koa as the core).
  const floor =
    koa && fwd
      ? `\n\nFloor: the same forwarder inside Koa + @koa/router (d″) costs ${fmt(koa.cpuPerReq / fwd.cpuPerReq, 2)}× the node:http forwarder's CPU/req and serves ${fmt(koa.rps / fwd.rps, 2)}× its req/s in this run, before any JSON-RPC work.`
      : '';
  return `## Targets\n\n${table}\n\n${missed === 0 ? 'Every target that ran is met.' : `⚠ ${missed} target(s) missed (also printed as warnings on stderr).`}${floor}\n`;
}
