/**
 * eRPC's `upstreams[].routing.scoreMultipliers` in svc's selection score (eRPC's selection-policy
 * docs, "upstream.routing" and `sortByScore`): the first matching entry's weights replace the
 * base weights for that upstream, `overall` scales its preference, `totalRequests` is accepted
 * and dropped (eRPC ignores it), `misbehaviors` weighs the consensus misbehaviour rate; entries
 * scoped to a method or finality apply to the evaluations of matching scopes (`evalScope`).
 */
import { expect } from 'chai';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { evaluatePolicy, type PolicyResult, type PolicyUpstreamInput, resolveScoreMultipliers, upstreamScore } from '../../../plugins/selection/index.ts';
import { policyUpstream } from '../../../plugins/selection/view.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

function load(upstream: Record<string, unknown>) {
  return loadConfigObject(
    { projects: [{ id: 'main', networks: [{ evm: { chainId: 1 } }], upstreams: [{ endpoint: 'http://127.0.0.1:8545', ...upstream }] }] },
    { fragments: FRAGMENTS, env: {} },
  );
}

describe('selection: routing.scoreMultipliers (eRPC parity)', () => {
  describe('resolveScoreMultipliers', () => {
    it('takes the first entry matching the network; an entry naming a method never applies to the per-network evaluation', () => {
      const entries = [
        { method: 'eth_getLogs', overall: 9 },
        { network: 'evm:10', overall: 8 },
        { network: 'evm:1|evm:5', respLatency: 0, overall: 2 },
        { overall: 0.5 },
      ];
      expect(resolveScoreMultipliers(entries, 'evm:1')).to.deep.equal({ respLatency: 0, overall: 2 });
      expect(resolveScoreMultipliers(entries, 'evm:10')).to.deep.equal({ overall: 8 });
      expect(resolveScoreMultipliers(entries, 'evm:137')).to.deep.equal({ overall: 0.5 });
      expect(resolveScoreMultipliers(undefined, 'evm:1')).to.equal(undefined);
    });

    it('a finality list applies only when it holds `unknown` (the per-network evaluation); a matching entry without weights shadows later ones', () => {
      expect(resolveScoreMultipliers([{ finality: ['realtime'], overall: 3 }, { overall: 2 }], 'evm:1')).to.deep.equal({ overall: 2 });
      expect(resolveScoreMultipliers([{ finality: ['realtime', 'unknown'], overall: 3 }], 'evm:1')).to.deep.equal({ overall: 3 });
      expect(resolveScoreMultipliers([{ network: 'evm:*' }, { overall: 2 }], 'evm:1')).to.equal(undefined);
    });

    it("entries naming a method or finality apply to the evaluations of that scope (evalScope), with eRPC's globs", () => {
      const entries = [{ method: 'eth_getLogs', overall: 9 }, { method: 'trace_*', finality: ['finalized' as const], overall: 7 }, { misbehaviors: 5 }];
      expect(resolveScoreMultipliers(entries, 'evm:1', 'eth_getLogs')).to.deep.equal({ overall: 9 });
      expect(resolveScoreMultipliers(entries, 'evm:1', 'trace_block', 'finalized')).to.deep.equal({ overall: 7 });
      expect(resolveScoreMultipliers(entries, 'evm:1', 'trace_block', 'realtime')).to.deep.equal({ misbehaviors: 5 });
      expect(resolveScoreMultipliers(entries, 'evm:1', '*', 'finalized')).to.deep.equal({ misbehaviors: 5 });
    });
  });

  describe('upstreamScore', () => {
    const m = { errorRate: 0.5, p70: 0.2, throttleRate: 0, blockHeadLag: 2, finalizationLag: 10 };
    it('without multipliers it is the plain penalty (4*err + 15*p70 + 4*thr + 1*lag + 0*finLag)', () => {
      expect(upstreamScore(policyUpstream({ id: 'a', metrics: m }))).to.be.closeTo(2 + 3 + 2, 1e-9);
    });
    it('a weight replaces the base one for that upstream; 0 drops the term', () => {
      expect(upstreamScore(policyUpstream({ id: 'a', metrics: m, scoreMultipliers: { respLatency: 0, finalizationLag: 1 } }))).to.be.closeTo(2 + 2 + 10, 1e-9);
    });
    it('overall orders as eRPC`s overall / (1 + penalty): (1 + P) / overall - 1; 0 ranks last', () => {
      const p = 7;
      expect(upstreamScore(policyUpstream({ id: 'a', metrics: m, scoreMultipliers: { overall: 2 } }))).to.be.closeTo((1 + p) / 2 - 1, 1e-9);
      expect(upstreamScore(policyUpstream({ id: 'a', metrics: m, scoreMultipliers: { overall: 0 } }))).to.equal(Number.POSITIVE_INFINITY);
      // eRPC: a = 2/(1+7) = 0.25 beats b = 1/(1+4) = 0.2; svc: 3 < 4.
      const a = upstreamScore(policyUpstream({ id: 'a', metrics: m, scoreMultipliers: { overall: 2 } }));
      const b = upstreamScore(policyUpstream({ id: 'b', metrics: { blockHeadLag: 4 } }));
      expect(a).to.be.lessThan(b);
    });
  });

  describe('in the default policy', () => {
    const inputs = (mult?: PolicyUpstreamInput['scoreMultipliers']): PolicyUpstreamInput[] => [
      { id: 'slow', metrics: { requests: 50, p70: 0.4 }, scoreMultipliers: mult },
      { id: 'erring', metrics: { requests: 50, errorRate: 0.3 } },
    ];
    const order = (r: PolicyResult | Promise<PolicyResult>) => (r as PolicyResult).order;

    it('changes which upstream is preferred, and the scores reported', () => {
      expect(order(evaluatePolicy(inputs()))).to.deep.equal(['erring', 'slow']); // 1.2 < 6
      const r = evaluatePolicy(inputs({ respLatency: 1 })) as PolicyResult;
      expect(r.order).to.deep.equal(['slow', 'erring']); // 0.4 < 1.2
      expect(r.scores.slow).to.be.closeTo(0.4, 1e-9);
      expect(order(evaluatePolicy(inputs({ overall: 10 })))).to.deep.equal(['slow', 'erring']); // 7/10-1 = -0.3
    });

    it('an explicit sortByScore weight is the base the upstream multipliers merge over', () => {
      const r = evaluatePolicy(inputs({ respLatency: 1 }), { evalFunc: (ups) => ups.sortByScore({ errorRate: 0 }) }) as PolicyResult;
      expect(r.order).to.deep.equal(['erring', 'slow']); // 0 < 0.4
    });
  });

  describe('config', () => {
    it("accepts eRPC's shape; totalRequests is dropped and a finality value becomes a list", () => {
      const cfg = load({
        routing: { scoreMultipliers: [{ network: '*', method: '*', finality: 3, overall: 2, errorRate: 8, totalRequests: 1, finalizationLag: 1 }] },
      });
      const routing = cfg.config.projects[0]?.upstreams[0]?.settings.routing as { scoreMultipliers: unknown[] };
      expect(routing.scoreMultipliers).to.deep.equal([{ network: '*', method: '*', finality: ['unknown'], overall: 2, errorRate: 8, finalizationLag: 1 }]);
      expect(cfg.rewrites.map((r) => r.path)).to.include.members([
        'projects[0].upstreams[0].routing.scoreMultipliers[0].totalRequests',
        'projects[0].upstreams[0].routing.scoreMultipliers[0].finality',
      ]);
    });

    it('refuses negative weights and unknown finalities, naming the key; takes misbehaviors', () => {
      const problems = (u: Record<string, unknown>) => {
        try {
          load(u);
        } catch (e) {
          expect(e).to.be.instanceOf(ConfigError);
          return (e as ConfigError).problems;
        }
        return [];
      };
      expect(problems({ routing: { scoreMultipliers: [{ misbehaviors: 5 }] } })).to.deep.equal([]);
      expect(problems({ routing: { scoreMultipliers: [{ misbehaviors: -1 }] } }).map((p) => p.path)).to.include(
        'projects[0].upstreams[0].routing.scoreMultipliers[0].misbehaviors',
      );
      const neg = problems({ routing: { scoreMultipliers: [{ overall: -1 }] } });
      expect(neg.map((p) => p.path)).to.include('projects[0].upstreams[0].routing.scoreMultipliers[0].overall');
      const fin = problems({ routing: { scoreMultipliers: [{ finality: ['soon'] }] } });
      expect(fin.some((p) => p.path.startsWith('projects[0].upstreams[0].routing.scoreMultipliers[0].finality'))).to.equal(true);
    });
  });
});
