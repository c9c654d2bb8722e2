/**
 * Consensus punishment (`punishMisbehavior`): an upstream whose answer lost
 * `disputeThreshold` rounds within `disputeWindow` is cordoned for every method with reason
 * `misbehaving in consensus` through the project's health tracker (so `svc_upstream_cordoned`
 * and `svc_listCordoned` show it), and uncordoned after `sitOutPenalty`.
 */
import type { HealthTracker } from 'svc-proxy/plugin/contracts';

/** The cordon reason of a punished upstream (as eRPC does). */
export const MISBEHAVING_REASON = 'misbehaving in consensus';

/** Clock and timers, injectable so tests run on fake time. */
export interface PunishClock {
  /** Epoch ms. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Node's clock and timers; release timers never keep the process alive. */
export const REAL_CLOCK: PunishClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Losses per upstream are kept at most this many (the threshold is never above it in practice). */
const MAX_LOSSES_KEPT = 1024;

/** Counts lost rounds per (tracker, upstream) and cordons repeat losers. */
export class Punisher {
  private readonly losses = new WeakMap<HealthTracker, Map<string, number[]>>();
  private readonly releases = new Set<unknown>();

  /** @param clock time source and timers */
  constructor(private readonly clock: PunishClock = REAL_CLOCK) {}

  /**
   * Records that an upstream's answer lost a round; cordons it when it lost `threshold` rounds
   * within `windowMs`.
   * @param windowMs disputeWindow, ms
   * @param penaltyMs sitOutPenalty, ms
   * @returns true when this loss cordoned the upstream
   */
  lost(health: HealthTracker, upstreamId: string, threshold: number, windowMs: number, penaltyMs: number): boolean {
    let byUpstream = this.losses.get(health);
    if (!byUpstream) this.losses.set(health, (byUpstream = new Map()));
    const now = this.clock.now();
    const kept = (byUpstream.get(upstreamId) ?? []).filter((t) => now - t < windowMs);
    kept.push(now);
    if (kept.length > MAX_LOSSES_KEPT) kept.splice(0, kept.length - MAX_LOSSES_KEPT);
    byUpstream.set(upstreamId, kept);
    if (kept.length < threshold) return false;
    byUpstream.delete(upstreamId);
    // An operator's cordon stays as it is: punishment neither overwrites its reason nor lifts it later.
    if (health.cordonOf(upstreamId, '*') !== undefined) return false;
    health.cordon(upstreamId, '*', MISBEHAVING_REASON);
    const handle = this.clock.setTimeout(() => {
      this.releases.delete(handle);
      if (health.cordonOf(upstreamId, '*') === MISBEHAVING_REASON) health.uncordon(upstreamId, '*');
    }, penaltyMs);
    this.releases.add(handle);
    return true;
  }

  /** Cancels pending releases (shutdown). */
  close(): void {
    for (const h of this.releases) this.clock.clearTimeout(h);
    this.releases.clear();
  }
}
