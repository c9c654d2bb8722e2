/**
 * The operator page's data (`GET /admin/ui/snapshot` and each `/admin/ui/events` push): per
 * project and network, every upstream with its selection score, error and throttle rates,
 * latency quantiles, head and finalization lag, circuit-breaker state and cordons; per project
 * the cache hit ratio per policy and the rate-limit rejections; per network the consensus
 * disputes.
 *
 * Built from the public plugin host only (never another plugin's module): the projects and their
 * health trackers, `networkChainState(host, network)`, the selection plugin's read side
 * (`SELECTION_API_SERVICE`) and the Prometheus registry, where other plugins count under the
 * metric names of docs/operations.md (`svc_cache_get_hit_total`, `svc_cache_get_miss_total`,
 * `svc_rate_limited_total`, `svc_network_consensus_outcome_total`). The breaker state comes from
 * the failsafe plugin's breakers (`BREAKERS_SERVICE`, a typed contract of svc-proxy/plugin): without
 * that plugin it is `none`.
 *
 * {@link buildSnapshot} is pure over its {@link SnapshotSources}, so it is unit tested with fakes.
 */
import type { HealthSnapshot } from 'svc-proxy/plugin/contracts';
import type { NetworkChainState } from 'svc-proxy/plugins/evm-state';
import type { SelectionState } from 'svc-proxy/plugins/selection';
import { networkChainState } from 'svc-proxy/plugins/evm-state';
import { latencyMsOf } from '../health-view.ts';

/** Most rows of each per-project metric table (their labels are bounded already; this bounds the page). */
export const MAX_METRIC_ROWS = 200;

/** A circuit breaker's state; `none` when the upstream has no breaker (or the failsafe plugin is absent). */
export type BreakerState = 'closed' | 'open' | 'half-open' | 'none';

/** Most cordons listed per upstream in a snapshot. */
export const MAX_CORDONS_SHOWN = 20;

/** One cordon of an upstream: a method name, a glob, or `*` for the whole upstream. */
export interface UiCordon {
  method: string;
  reason: string;
}

/** One upstream row of the page. */
export interface UiUpstream {
  id: string;
  /** The `vendor` label (`unknown` for a plain endpoint). */
  vendor: string;
  /** 1-based position in the selection order; null while the selection leaves it out (cordoned, excluded) or without the selection plugin. */
  rank: number | null;
  /** `svc_selection_score` (lower is better); null before the first evaluation or without the selection plugin. */
  score: number | null;
  /** Why the last selection evaluation left it out, if it did. */
  excluded: string | null;
  /** Requests in the health window (`projects[].scoreMetricsWindowSize`). */
  requests: number;
  /** Errors charged to the upstream / requests in the window, 0..1. */
  errorRate: number;
  /** Rate-limited answers / requests in the window, 0..1. */
  throttleRate: number;
  /** Latency quantiles of successful answers in the window, ms (0 without samples). */
  latencyMs: { p50: number; p90: number; p99: number };
  /** Highest latest block this upstream reported; null while unknown (no chain state). */
  latestBlock: number | null;
  /** Blocks behind the network's highest latest block. */
  headLag: number;
  /** Blocks behind the network's highest finalized block. */
  finalizationLag: number;
  /** Worst state over the upstream's breakers (open, then half-open, then closed). */
  breaker: BreakerState;
  /**
   * True when its last attempt (a call or a state poll) got no answer: connection refused or
   * reset, no answer before the deadline, HTTP 5xx (`svc_upstream_up` 0).
   */
  down: boolean;
  /** The error that attempt ended with (`<ErrName>: <message>`, at most 200 characters); null while up. */
  lastError: string | null;
  /** True when the whole upstream (`*`) is cordoned. */
  cordoned: boolean;
  /** The upstream's cordons, `*` first, at most {@link MAX_CORDONS_SHOWN} (reasons cut to 128 characters). */
  cordons: UiCordon[];
  /** Cordons of the upstream not listed in `cordons` (over the bound). */
  moreCordons: number;
  /** False when the next call would not go to it: cordoned for every method, or left out by the selection. */
  inRotation: boolean;
}

/** One network section of the page. */
export interface UiNetwork {
  /** `evm:<chainId>`. */
  id: string;
  alias: string | null;
  /** Highest latest and finalized block over the network's upstreams; 0 when unknown. */
  highestLatest: number;
  highestFinalized: number;
  /** Estimated block time, ms; null while unknown. */
  blockTimeMs: number | null;
  /** Consensus rounds that ended in a dispute (`svc_network_consensus_outcome_total{outcome="dispute"}`), since start. */
  consensusDisputes: number;
  upstreams: UiUpstream[];
}

/** Cache reads of one (network, connector, policy), since start. */
export interface UiCacheRow {
  network: string;
  connector: string;
  policy: string;
  hits: number;
  misses: number;
  /** hits / (hits + misses); null without reads. */
  hitRatio: number | null;
}

/** Calls or attempts refused by one rate-limit budget (`svc_rate_limited_total`), since start. */
export interface UiRateLimitRow {
  scope: string;
  budget: string;
  rejected: number;
}

/** One project of the page. */
export interface UiProject {
  id: string;
  networks: UiNetwork[];
  cache: UiCacheRow[];
  rateLimited: UiRateLimitRow[];
}

/** What the page receives, as JSON. */
export interface UiSnapshot {
  /** When it was built, epoch ms. */
  at: number;
  /** svc's version. */
  version: string;
  /** `serving`, `draining`, `closing` or `stopped`. */
  lifecycle: string;
  /** Push interval of `/admin/ui/events`, ms. */
  intervalMs: number;
  projects: UiProject[];
}

/** One sample of a Prometheus metric (prom-client's `get().values` element). */
export interface MetricSample {
  labels: Partial<Record<string, string | number>>;
  value: number;
}

/** The parts of an upstream the snapshot reads. */
export interface UpstreamLike {
  readonly id: string;
  readonly vendor: string;
}

/** The parts of a network the snapshot reads. */
export interface NetworkLike {
  readonly id: string;
  readonly alias?: string;
  readonly upstreams: readonly UpstreamLike[];
}

/** The parts of a project the snapshot reads (its health tracker: window numbers and cordons). */
export interface ProjectLike {
  readonly id: string;
  readonly networks: ReadonlyMap<string, NetworkLike>;
  readonly health: {
    snapshot(upstream: string, method?: string): HealthSnapshot;
    listCordoned(): Array<{ upstream: string; method: string; reason: string }>;
  };
}

/** Where {@link buildSnapshot} reads from (the plugin host in svc, fakes in unit tests). */
export interface SnapshotSources {
  projects: Iterable<ProjectLike>;
  /** The chain state of a network (heads), or undefined without one. */
  chainState(
    network: NetworkLike,
  ): Pick<NetworkChainState, 'highestLatest' | 'highestFinalized' | 'blockTimeMs'> & { peek(u: UpstreamLike): { latest: number } | undefined };
  /** The selection plugin's state of a network, undefined without that plugin. */
  selection(projectId: string, networkId: string): Pick<SelectionState, 'order' | 'scores' | 'excluded'> | undefined;
  /** The breaker state of an upstream of a network. */
  breaker(network: NetworkLike, upstream: UpstreamLike): BreakerState;
  /** Samples of a metric by name; empty when no plugin registered it. */
  samples: ReadonlyMap<string, readonly MetricSample[]>;
  version: string;
  lifecycle: string;
  intervalMs: number;
  /** Clock, epoch ms. */
  now(): number;
}

/** The metric names the snapshot reads (docs/operations.md, spec §6). */
export const SNAPSHOT_METRICS = [
  'svc_cache_get_hit_total',
  'svc_cache_get_miss_total',
  'svc_rate_limited_total',
  'svc_network_consensus_outcome_total',
] as const;

/**
 * Builds the page's data from its sources.
 * @param src the plugin host's views (see {@link SnapshotSources})
 */
export function buildSnapshot(src: SnapshotSources): UiSnapshot {
  const projects: UiProject[] = [];
  const disputes = sumBy(src.samples.get('svc_network_consensus_outcome_total'), (l) =>
    l.outcome === 'dispute' ? `${l.project}\u0000${l.network}` : undefined,
  );
  for (const p of src.projects) {
    const cordons = p.health.listCordoned();
    const networks: UiNetwork[] = [];
    for (const n of p.networks.values()) {
      const chain = src.chainState(n);
      const selection = src.selection(p.id, n.id);
      const upstreams = n.upstreams.map((u) => upstreamRow(p, n, u, chain, selection, cordons, src));
      networks.push({
        id: n.id,
        alias: n.alias ?? null,
        highestLatest: chain.highestLatest,
        highestFinalized: chain.highestFinalized,
        blockTimeMs: chain.blockTimeMs ?? null,
        consensusDisputes: disputes.get(`${p.id}\u0000${n.id}`) ?? 0,
        upstreams,
      });
    }
    projects.push({ id: p.id, networks, cache: cacheRows(p.id, src.samples), rateLimited: rateLimitRows(p.id, src.samples) });
  }
  return { at: src.now(), version: src.version, lifecycle: src.lifecycle, intervalMs: src.intervalMs, projects };
}

/** One upstream's row. */
function upstreamRow(
  p: ProjectLike,
  n: NetworkLike,
  u: UpstreamLike,
  chain: ReturnType<SnapshotSources['chainState']>,
  selection: ReturnType<SnapshotSources['selection']>,
  cordons: ReadonlyArray<{ upstream: string; method: string; reason: string }>,
  src: SnapshotSources,
): UiUpstream {
  const h = p.health.snapshot(u.id);
  const all = cordons.filter((c) => c.upstream === u.id);
  // Whole-upstream cordon: the snapshot's own state (its `*` cell), not worked out again from the list.
  const cordoned = h.cordoned;
  // Bounded: an operator (or a fleet peer) may cordon many methods; every tick carries the rows.
  const own = all
    .sort((a, b) => (a.method === '*' ? -1 : b.method === '*' ? 1 : a.method.localeCompare(b.method)))
    .slice(0, MAX_CORDONS_SHOWN)
    .map((c) => ({ method: c.method, reason: c.reason.slice(0, 128) }));
  const position = selection ? selection.order.indexOf(u.id) : -1;
  const excluded = selection?.excluded[u.id] ?? null;
  const latest = chain.peek(u)?.latest ?? 0;
  // The chain state's own view when it has one (fresh every poll); the health window's otherwise.
  const headLag = latest > 0 && chain.highestLatest > 0 ? Math.max(0, chain.highestLatest - latest) : h.blockHeadLag;
  const score = selection?.scores[u.id];
  return {
    id: u.id,
    vendor: u.vendor,
    rank: position >= 0 && !cordoned ? position + 1 : null,
    score: typeof score === 'number' && Number.isFinite(score) ? score : null,
    excluded,
    requests: h.requests,
    errorRate: h.errorRate,
    throttleRate: h.throttleRate,
    latencyMs: latencyMsOf(h),
    latestBlock: latest > 0 ? latest : null,
    headLag,
    finalizationLag: h.finalizationLag,
    breaker: src.breaker(n, u),
    down: h.down === true,
    lastError: h.down ? (h.downReason ?? null) : null,
    cordoned,
    cordons: own,
    moreCordons: all.length - own.length,
    // Without the selection plugin every uncordoned upstream is a candidate.
    inRotation: !cordoned && (selection ? position >= 0 : true),
  };
}

/** Cache hit ratio rows of one project, per (network, connector, policy), summed over methods. */
function cacheRows(projectId: string, samples: ReadonlyMap<string, readonly MetricSample[]>): UiCacheRow[] {
  const key = (l: MetricSample['labels']) =>
    String(l.project) === projectId ? `${l.network ?? ''}\u0000${l.connector ?? ''}\u0000${l.policy ?? ''}` : undefined;
  const hits = sumBy(samples.get('svc_cache_get_hit_total'), key);
  const misses = sumBy(samples.get('svc_cache_get_miss_total'), key);
  const rows: UiCacheRow[] = [];
  for (const k of new Set([...hits.keys(), ...misses.keys()])) {
    const [network = '', connector = '', policy = ''] = k.split('\u0000');
    const h = hits.get(k) ?? 0;
    const m = misses.get(k) ?? 0;
    rows.push({ network, connector, policy, hits: h, misses: m, hitRatio: h + m > 0 ? h / (h + m) : null });
  }
  return rows
    .sort((a, b) => a.network.localeCompare(b.network) || a.policy.localeCompare(b.policy) || a.connector.localeCompare(b.connector))
    .slice(0, MAX_METRIC_ROWS);
}

/** Rate-limit rejections of one project, per (scope, budget). */
function rateLimitRows(projectId: string, samples: ReadonlyMap<string, readonly MetricSample[]>): UiRateLimitRow[] {
  const sums = sumBy(samples.get('svc_rate_limited_total'), (l) => (String(l.project) === projectId ? `${l.scope ?? ''}\u0000${l.budget ?? ''}` : undefined));
  const rows: UiRateLimitRow[] = [];
  for (const [k, rejected] of sums) {
    const [scope = '', budget = ''] = k.split('\u0000');
    if (rejected > 0) rows.push({ scope, budget, rejected });
  }
  return rows.sort((a, b) => b.rejected - a.rejected || a.budget.localeCompare(b.budget)).slice(0, MAX_METRIC_ROWS);
}

/** Sums sample values by a key of their labels (samples whose key is undefined are left out). */
function sumBy(samples: readonly MetricSample[] | undefined, key: (labels: MetricSample['labels']) => string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples ?? []) {
    const k = key(s.labels);
    if (k === undefined || !Number.isFinite(s.value)) continue;
    out.set(k, (out.get(k) ?? 0) + s.value);
  }
  return out;
}

/**
 * The worst of several breaker states: `open`, then `half-open`, then `closed`; `none` for an
 * empty list. Unknown values count as `none`.
 * @param states the `state` field of each breaker of an upstream
 */
export function worstBreaker(states: Iterable<unknown>): BreakerState {
  let worst: BreakerState = 'none';
  const rank: Record<BreakerState, number> = { none: 0, closed: 1, 'half-open': 2, open: 3 };
  for (const s of states) if ((s === 'closed' || s === 'half-open' || s === 'open') && rank[s] > rank[worst]) worst = s;
  return worst;
}
