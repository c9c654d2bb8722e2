/**
 * How the admin plugin shows an upstream's health: the `svc_project` method and the operator
 * page both read the project's health tracker snapshot (`HealthSnapshot` of
 * svc-proxy/plugin/contracts, lib/health-window.ts) and show its latencies the same way. Nothing is
 * computed again here: only units change.
 */
import type { HealthSnapshot } from 'svc-proxy/plugin/contracts';

/** A snapshot's latency quantiles in milliseconds. */
export interface LatencyMs {
  p50: number;
  p90: number;
  p99: number;
}

/**
 * A snapshot's latency quantiles (seconds, as the tracker and the Prometheus histograms keep
 * them) in milliseconds, to the microsecond.
 * @param h the upstream's snapshot
 */
export function latencyMsOf(h: Pick<HealthSnapshot, 'p50' | 'p90' | 'p99'>): LatencyMs {
  return { p50: ms(h.p50), p90: ms(h.p90), p99: ms(h.p99) };
}

function ms(seconds: number): number {
  return Math.round(seconds * 1_000_000) / 1000;
}
