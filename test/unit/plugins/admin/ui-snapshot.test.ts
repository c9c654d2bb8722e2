/**
 * The operator page's data builder (plugins/admin/ui/snapshot.ts): upstream rows from a real
 * health tracker (rates, latency in ms, cordons), the selection's order, scores and exclusions,
 * the chain state's heads, breaker states, and the per-project metric tables read from
 * prom-client samples (cache hit ratio per policy, rate-limit rejections, consensus disputes).
 */
import { expect } from 'chai';
import type { AttemptRecord } from '../../../../core/pipeline/context.ts';
import { HealthTracker, type HealthOutcome } from '../../../../lib/health-window.ts';
import {
  buildSnapshot,
  MAX_METRIC_ROWS,
  type MetricSample,
  type NetworkLike,
  type SnapshotSources,
  type UpstreamLike,
  worstBreaker,
} from '../../../../plugins/admin/ui/snapshot.ts';

const attempt = (upstreamId: string, durationMs: number, outcome: HealthOutcome): AttemptRecord =>
  ({
    upstreamId,
    vendor: 'unknown',
    method: 'eth_call',
    projectId: 'main',
    networkId: 'evm:1',
    reason: 'primary',
    outcome: outcome === 'error' ? 'exec_revert' : 'success',
    startedAt: 0,
    durationMs,
    won: true,
    dialled: true,
    kind: outcome,
  }) as unknown as AttemptRecord;

/** A project with network evm:1 (upstreams a, b, c) whose tracker classifies by the attempt's `kind`. */
function fixture(samples: Map<string, MetricSample[]> = new Map(), over: Partial<SnapshotSources> = {}) {
  const health = new HealthTracker(
    (a) => (a as unknown as { kind: HealthOutcome }).kind,
    60_000,
    10,
    () => 1_000_000,
  );
  const upstreams: UpstreamLike[] = [
    { id: 'a', vendor: 'unknown' },
    { id: 'b', vendor: 'alchemy' },
    { id: 'c', vendor: 'unknown' },
  ];
  const network: NetworkLike = { id: 'evm:1', alias: 'eth', upstreams };
  const project = { id: 'main', networks: new Map([['evm:1', network]]), health };
  const heads: Record<string, number> = { a: 100, b: 97 };
  const src: SnapshotSources = {
    projects: [project],
    chainState: () => ({
      highestLatest: 100,
      highestFinalized: 90,
      blockTimeMs: 12_000,
      peek: (u) => (heads[u.id] ? { latest: heads[u.id] as number } : undefined),
    }),
    selection: () => ({ order: ['b', 'a'], scores: { a: 0.4, b: 0.1, c: 9 }, excluded: { c: 'error rate above threshold' } }),
    breaker: (_n, u) => (u.id === 'b' ? 'open' : u.id === 'a' ? 'closed' : 'none'),
    samples,
    version: '0.1.0',
    lifecycle: 'serving',
    intervalMs: 1000,
    now: () => 42,
    ...over,
  };
  return { health, src };
}

describe('admin ui: snapshot builder (plugins/admin/ui/snapshot.ts)', () => {
  it('rows carry window rates, latency in ms, heads and lag, score, rank, breaker and rotation', () => {
    const { health, src } = fixture();
    for (let i = 0; i < 3; i++) health.record(attempt('a', 20, 'success'));
    health.record(attempt('a', 5, 'error'));
    health.record(attempt('b', 100, 'throttle'));
    const s = buildSnapshot(src);
    expect(s).to.include({ at: 42, version: '0.1.0', lifecycle: 'serving', intervalMs: 1000 });
    const n = s.projects[0]?.networks[0];
    expect(n).to.include({ id: 'evm:1', alias: 'eth', highestLatest: 100, highestFinalized: 90, blockTimeMs: 12_000, consensusDisputes: 0 });
    const [a, b, c] = n?.upstreams ?? [];
    expect(a).to.include({
      id: 'a',
      requests: 4,
      errorRate: 0.25,
      throttleRate: 0,
      rank: 2,
      score: 0.4,
      latestBlock: 100,
      headLag: 0,
      breaker: 'closed',
      cordoned: false,
      inRotation: true,
      excluded: null,
    });
    expect(a?.latencyMs.p50).to.be.closeTo(20, 1);
    expect(b).to.include({ id: 'b', vendor: 'alchemy', throttleRate: 1, rank: 1, score: 0.1, latestBlock: 97, headLag: 3, breaker: 'open', inRotation: true });
    expect(b?.latencyMs).to.deep.equal({ p50: 0, p90: 0, p99: 0 });
    // Left out by the selection: no rank, out of the rotation, with the reason; no head known.
    expect(c).to.include({ id: 'c', rank: null, excluded: 'error rate above threshold', inRotation: false, latestBlock: null, breaker: 'none' });
  });

  it('a whole-upstream cordon takes it out of the rotation; method cordons are listed but keep it in', () => {
    const { health, src } = fixture();
    health.cordon('a', '*', 'admin ui: manual cordon');
    health.cordon('b', 'eth_getLogs', 'too slow');
    health.cordon('a', 'debug_*', 'no tracing');
    const [a, b] = buildSnapshot(src).projects[0]?.networks[0]?.upstreams ?? [];
    expect(a).to.include({ cordoned: true, inRotation: false, rank: null });
    expect(a?.cordons).to.deep.equal([
      { method: '*', reason: 'admin ui: manual cordon' },
      { method: 'debug_*', reason: 'no tracing' },
    ]);
    expect(b).to.include({ cordoned: false, inRotation: true, rank: 1 });
    expect(b?.cordons).to.deep.equal([{ method: 'eth_getLogs', reason: 'too slow' }]);
    health.uncordon('a', '*');
    expect(buildSnapshot(src).projects[0]?.networks[0]?.upstreams[0]).to.include({ cordoned: false, inRotation: true });
  });

  it('without the selection plugin every uncordoned upstream is in the rotation, unranked; without chain state the window lag is used', () => {
    const { health, src } = fixture(new Map(), {
      selection: () => undefined,
      chainState: () => ({ highestLatest: 0, highestFinalized: 0, blockTimeMs: undefined, peek: () => undefined }),
    });
    health.setLag('b', 7, 2);
    const n = buildSnapshot(src).projects[0]?.networks[0];
    expect(n?.blockTimeMs).to.equal(null);
    expect(n?.upstreams.map((u) => [u.id, u.inRotation, u.rank, u.score])).to.deep.equal([
      ['a', true, null, null],
      ['b', true, null, null],
      ['c', true, null, null],
    ]);
    expect(n?.upstreams[1]).to.include({ headLag: 7, finalizationLag: 2, latestBlock: null });
  });

  it('cache hit ratio per (network, connector, policy) summed over methods, rate-limit rejections and disputes of this project only', () => {
    const cache = (name: string, project: string, category: string, policy: string, value: number): [string, MetricSample] => [
      name,
      { labels: { project, network: 'evm:1', category, connector: 'memory', policy }, value },
    ];
    const rows: Array<[string, MetricSample]> = [
      cache('svc_cache_get_hit_total', 'main', 'eth_call', 'finalized', 3),
      cache('svc_cache_get_hit_total', 'main', 'eth_getBalance', 'finalized', 3),
      cache('svc_cache_get_miss_total', 'main', 'eth_call', 'finalized', 2),
      cache('svc_cache_get_miss_total', 'main', 'eth_call', 'realtime', 4),
      cache('svc_cache_get_hit_total', 'other', 'eth_call', 'finalized', 100),
      ['svc_rate_limited_total', { labels: { project: 'main', scope: 'project', budget: 'free' }, value: 5 }],
      ['svc_rate_limited_total', { labels: { project: 'main', scope: 'upstream', budget: 'node' }, value: 9 }],
      ['svc_rate_limited_total', { labels: { project: 'main', scope: 'project', budget: 'idle' }, value: 0 }],
      ['svc_rate_limited_total', { labels: { project: 'other', scope: 'project', budget: 'free' }, value: 1 }],
      ['svc_network_consensus_outcome_total', { labels: { project: 'main', network: 'evm:1', outcome: 'dispute' }, value: 2 }],
      ['svc_network_consensus_outcome_total', { labels: { project: 'main', network: 'evm:1', outcome: 'agreement' }, value: 50 }],
      ['svc_network_consensus_outcome_total', { labels: { project: 'other', network: 'evm:1', outcome: 'dispute' }, value: 7 }],
    ];
    const samples = new Map<string, MetricSample[]>();
    for (const [name, s] of rows) samples.set(name, [...(samples.get(name) ?? []), s]);
    const p = buildSnapshot(fixture(samples).src).projects[0];
    expect(p?.cache).to.deep.equal([
      { network: 'evm:1', connector: 'memory', policy: 'finalized', hits: 6, misses: 2, hitRatio: 0.75 },
      { network: 'evm:1', connector: 'memory', policy: 'realtime', hits: 0, misses: 4, hitRatio: 0 },
    ]);
    expect(p?.rateLimited).to.deep.equal([
      { scope: 'upstream', budget: 'node', rejected: 9 },
      { scope: 'project', budget: 'free', rejected: 5 },
    ]);
    expect(p?.networks[0]?.consensusDisputes).to.equal(2);
  });

  it('bounds each metric table and ignores non-finite values', () => {
    const many: MetricSample[] = Array.from({ length: MAX_METRIC_ROWS + 50 }, (_, i) => ({
      labels: { project: 'main', scope: 'project', budget: `b${i}` },
      value: i + 1,
    }));
    many.push({ labels: { project: 'main', scope: 'project', budget: 'nan' }, value: Number.NaN });
    const p = buildSnapshot(fixture(new Map([['svc_rate_limited_total', many]])).src).projects[0];
    expect(p?.rateLimited).to.have.length(MAX_METRIC_ROWS);
    expect(p?.rateLimited[0]).to.deep.equal({ scope: 'project', budget: `b${MAX_METRIC_ROWS + 49}`, rejected: MAX_METRIC_ROWS + 50 });
    expect(p?.rateLimited.some((r) => r.budget === 'nan')).to.equal(false);
  });

  it('the worst breaker state wins: open, then half-open, then closed; none for no breaker or unknown values', () => {
    expect(worstBreaker([])).to.equal('none');
    expect(worstBreaker(['closed', 'closed'])).to.equal('closed');
    expect(worstBreaker(['closed', 'half-open'])).to.equal('half-open');
    expect(worstBreaker(['half-open', 'open', 'closed'])).to.equal('open');
    expect(worstBreaker([undefined, 'weird', 3])).to.equal('none');
  });
});
