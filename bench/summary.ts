/**
 * A bench scenario's measurements over its rounds reduced to the figures bench/run.ts reports:
 * medians of throughput, latency, CPU, memory and GC per request.
 */
import { median, type Measurement, type Target } from './lib.ts';
import type { Scenario } from './scenarios.ts';

/** A scenario set up for the rounds, with its measurements so far. */
export interface Live {
  scenario: Scenario;
  target: Target;
  url: string;
  helpers: Target[];
  preflightError?: string;
  runs: Measurement[];
  /** Bytes allocated per request in the allocation window (NaN when skipped). */
  allocPerReq?: number;
}

/** Per-scenario medians. */
export interface Summary {
  live: Live;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  cpuPerReq: number;
  cpuPerReqMin: number;
  cpuPerReqMax: number;
  cpuPerCall: number;
  peakRssMiB: number;
  /** What the target's response cache accounted for at the end of the run with the highest peak RSS, MiB (0 without a cache). */
  heldMiB: number;
  /** GC CPU per request (main-thread pauses + V8 helper threads), µs. */
  gcPerReq: number;
  /** Bytes allocated per request (allocation window), NaN when skipped. */
  allocPerReq: number;
  upstreamPerReq: number;
  /** Median CPU per request of the helpers after the upstream (redis-server), µs; NaN without any. */
  extraHelperCpuPerReq: number;
  /** Median requests per client request counted by the second helper (Redis GETs), NaN without one. */
  extraHelperReqPerReq: number;
  failures: number;
  statusCodes: Record<string, number>;
  /** Median share of the machine used by foreign processes during the runs, 0..1 (NaN off Linux). */
  otherCpu: number;
  /** Median CPU of the load generator per request, µs. */
  loaderCpuPerReq: number;
}

/** The medians (and extremes) of a scenario over its rounds. */
export function summarise(l: Live): Summary {
  const cpu = l.runs.map((r) => r.usage.cpuMicros / Math.max(1, r.load.responses));
  const statusCodes: Record<string, number> = {};
  for (const r of l.runs) for (const [c, n] of Object.entries(r.load.statusCodes)) statusCodes[c] = (statusCodes[c] ?? 0) + n;
  return {
    live: l,
    rps: median(l.runs.map((r) => r.load.rps)),
    p50Ms: median(l.runs.map((r) => r.load.p50Ms)),
    p99Ms: median(l.runs.map((r) => r.load.p99Ms)),
    cpuPerReq: median(cpu),
    cpuPerReqMin: Math.min(...cpu),
    cpuPerReqMax: Math.max(...cpu),
    cpuPerCall: median(cpu) / l.scenario.body.calls,
    peakRssMiB: Math.max(...l.runs.map((r) => r.usage.maxRssKb)) / 1024,
    // What the tier held in the run that set the peak (the two belong to one process state).
    heldMiB:
      (l.runs.reduce<(typeof l.runs)[number] | undefined>((best, r) => (!best || r.usage.maxRssKb > best.usage.maxRssKb ? r : best), undefined)?.usage
        .heldBytes ?? 0) /
      2 ** 20,
    gcPerReq: median(l.runs.map((r) => r.usage.gcMicros / Math.max(1, r.load.responses))),
    allocPerReq: l.allocPerReq ?? Number.NaN,
    upstreamPerReq: l.helpers.length ? median(l.runs.map((r) => (r.helpers[0]?.requests ?? 0) / Math.max(1, r.load.responses))) : Number.NaN,
    extraHelperCpuPerReq:
      l.helpers.length > 1 ? median(l.runs.map((r) => r.helpers.slice(1).reduce((n, h) => n + h.cpuMicros, 0) / Math.max(1, r.load.responses))) : Number.NaN,
    extraHelperReqPerReq: l.helpers.length > 1 ? median(l.runs.map((r) => (r.helpers[1]?.requests ?? 0) / Math.max(1, r.load.responses))) : Number.NaN,
    failures: l.runs.reduce((n, r) => n + r.load.non2xx + r.load.errors + r.load.timeouts + r.load.mismatches, 0) + (l.preflightError ? 1 : 0),
    statusCodes,
    otherCpu: median(l.runs.map((r) => r.otherCpuShare ?? Number.NaN).filter((x) => !Number.isNaN(x))),
    loaderCpuPerReq: median(l.runs.map((r) => r.loaderCpuMicros / Math.max(1, r.load.responses))),
  };
}
