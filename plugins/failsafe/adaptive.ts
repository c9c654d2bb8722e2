/**
 * Adaptive (quantile-based) durations of the failsafe plugin: eRPC's `AdaptiveDuration`
 * (common/adaptive_duration.go, common/timeout_func.go) for the `timeout` and `hedge` policies.
 *
 * A duration is `base` plus, when `quantile` > 0, that quantile of the method's latency over the
 * network's upstreams (successful answers in the health window), clamped to [`min`, `max`]:
 * - static (`quantile` unset or 0): `base` exactly; `min`/`max` are ignored;
 * - adaptive, warm: `clamp(base + latency(quantile), min, max)`;
 * - adaptive, cold (no sample yet): the latency part is `min`, so `clamp(base + min, min, max)`;
 * - a timeout in quantile mode without `min` gets eRPC's auto floor, `base / 2` (500 ms when
 *   `base` is 0), so a run of fast answers cannot shrink it until every call times out.
 *
 * The latency comes from the project's health tracker (`project.health.latencyQuantile`), shared
 * by both scopes and by hedges as eRPC's per network × method tracker is. A value is remembered
 * per (network, method, quantile) for {@link QUANTILE_MEMO_MS}, so a busy method does not merge
 * the window's sketches on every call; "no sample yet" is not remembered (it costs no merge), so
 * the first samples count at once. No hooks here.
 */
import type { CallContext, Network } from 'svc-proxy/plugin';
import type { FailsafeEntry } from './schema.ts';

/** A resolved adaptive duration, ms (0 = unset); eRPC's `AdaptiveDuration`. */
export interface AdaptiveSpec {
  /** Static part (the whole duration when `quantile` is 0), ms. */
  readonly base: number;
  /** Latency quantile (0..1) added to `base`; 0 = static. */
  readonly quantile: number;
  /** Floor in quantile mode (and the latency part while there is no sample), ms; 0 = none. */
  readonly min: number;
  /** Ceiling in quantile mode, ms; 0 = none. */
  readonly max: number;
}

/**
 * How long a computed latency quantile is reused for the same (network, method, quantile), ms:
 * a busy method merges the window's sketches a few times a second instead of on every call.
 */
export const QUANTILE_MEMO_MS = 250;
/** Remembered (network, method, quantile) values per plugin instance before the memo is cleared (method names come from clients). */
const QUANTILE_MEMO_LIMIT = 2048;

/**
 * eRPC's `AdaptiveDuration.Resolve`: the duration for a latency sample, ms; 0 means "none"
 * (the caller applies no timeout, or hedges at once).
 * @param spec the resolved spec
 * @param latencyMs the quantile's latency, ms; 0 or less while there is no sample (cold)
 */
export function resolveAdaptive(spec: AdaptiveSpec, latencyMs: number): number {
  if (spec.quantile <= 0) return spec.base;
  const adaptive = latencyMs > 0 ? latencyMs : spec.min;
  let v = spec.base + adaptive;
  if (spec.min > 0 && v < spec.min) v = spec.min;
  if (spec.max > 0 && v > spec.max) v = spec.max;
  return v;
}

/**
 * The spec of a `timeout` policy, with eRPC's auto floor in quantile mode: without `minDuration`
 * the floor is `duration / 2`, or 500 ms when `duration` is unset (common/timeout_func.go).
 * @returns undefined when the policy sets no duration at all (no timeout)
 */
export function timeoutSpec(t: NonNullable<FailsafeEntry['timeout']>): AdaptiveSpec | undefined {
  const base = t.duration ?? 0;
  const quantile = t.quantile ?? 0;
  let min = t.minDuration ?? 0;
  const max = t.maxDuration ?? 0;
  if (quantile <= 0) return base > 0 ? { base, quantile: 0, min, max } : undefined;
  if (min <= 0) min = base > 0 ? base / 2 : 500;
  return { base, quantile, min, max };
}

/**
 * The spec of a `hedge` policy: `delay` is the base, `minDelay`/`maxDelay` the clamp (defaults
 * 100 ms and 999 s, eRPC's). A hedge with neither `delay` nor `quantile` waits `minDelay`.
 */
export function hedgeSpec(h: NonNullable<FailsafeEntry['hedge']>): AdaptiveSpec {
  const quantile = h.quantile ?? 0;
  if (quantile <= 0) return { base: h.delay ?? h.minDelay, quantile: 0, min: 0, max: 0 };
  return { base: h.delay ?? 0, quantile, min: h.minDelay, max: h.maxDelay };
}

/**
 * The upstream ids of a network, remembered while its upstream list keeps its length (providers
 * add upstreams at run time; none is ever replaced in place).
 */
class NetworkIds {
  private readonly ids = new WeakMap<Network, { n: number; ids: string[] }>();

  of(network: Network): readonly string[] {
    const list = network.upstreams;
    const known = this.ids.get(network);
    if (known && known.n === list.length) return known.ids;
    const ids = list.map((u) => u.id);
    this.ids.set(network, { n: list.length, ids });
    return ids;
  }
}

/** Method latency quantiles over a network's upstreams, remembered for {@link QUANTILE_MEMO_MS}. */
export class LatencyQuantiles {
  /** network → quantile → method → the value and when it was computed. */
  private readonly memo = new Map<Network, Map<number, Map<string, { at: number; ms: number }>>>();
  private size = 0;
  private readonly ids = new NetworkIds();

  /** @param now clock, ms (tests inject one; by default `Date.now` as it is at each call) */
  constructor(private readonly now: () => number = () => Date.now()) {}

  /**
   * The `q` quantile of the call's method latency over its network's upstreams, ms; 0 while none
   * of them has a successful sample in the health window.
   */
  latencyMs(ctx: CallContext, q: number): number {
    const network = ctx.network;
    const method = ctx.request.method;
    let byQ = this.memo.get(network)?.get(q);
    const hit = byQ?.get(method);
    const t = this.now();
    if (hit && t - hit.at < QUANTILE_MEMO_MS) return hit.ms;
    const ms = ctx.project.health.latencyQuantile(this.ids.of(network), method, q) * 1000;
    if (ms <= 0) return 0;
    if (hit) {
      hit.at = t;
      hit.ms = ms;
      return ms;
    }
    if (this.size >= QUANTILE_MEMO_LIMIT) {
      this.memo.clear();
      this.size = 0;
      byQ = undefined;
    }
    if (!byQ) {
      let byNetwork = this.memo.get(network);
      if (!byNetwork) this.memo.set(network, (byNetwork = new Map()));
      byNetwork.set(q, (byQ = new Map()));
    }
    byQ.set(method, { at: t, ms });
    this.size++;
    return ms;
  }

  /** The duration of a spec for a call, ms (0 = none): a static spec never reads the health window. */
  resolve(ctx: CallContext, spec: AdaptiveSpec): number {
    return spec.quantile > 0 ? resolveAdaptive(spec, this.latencyMs(ctx, spec.quantile)) : spec.base;
  }
}

const timeoutSpecs = new WeakMap<object, AdaptiveSpec | null>();
const hedgeSpecs = new WeakMap<object, AdaptiveSpec>();

/** {@link timeoutSpec}, computed once per resolved policy object. */
export function timeoutSpecOf(t: NonNullable<FailsafeEntry['timeout']>): AdaptiveSpec | undefined {
  let s = timeoutSpecs.get(t);
  if (s === undefined) timeoutSpecs.set(t, (s = timeoutSpec(t) ?? null));
  return s ?? undefined;
}

/** {@link hedgeSpec}, computed once per resolved policy object. */
export function hedgeSpecOf(h: NonNullable<FailsafeEntry['hedge']>): AdaptiveSpec {
  let s = hedgeSpecs.get(h);
  if (!s) hedgeSpecs.set(h, (s = hedgeSpec(h)));
  return s;
}
