/**
 * eRPC's predicates over misbehaviour, seconds of lag and latency deviation in a YAML selection
 * policy (eRPC's selection-policy docs): `misbehaviorRateAbove` / `removeByMisbehavior` read the
 * consensus misbehaviour rate, `blockSecondsLagAbove` / `finalizationSecondsLagAbove` the lags in
 * seconds (0 until the block time is estimated), `latencyDeviationAbove` compares each method's
 * latency with the fastest other upstream's (geomean, majority or veto; a sample floor; damping of
 * small latencies), and the score's `misbehaviors` term, with explicit inputs.
 */
import { expect } from 'chai';
import { evaluatePolicy, scoreOf, upstreamScore, type MethodLatency, type PolicyResult, type PolicyUpstreamInput } from '../../../plugins/selection/index.ts';
import { compileSourcePolicy } from '../../../plugins/selection/sandbox.ts';
import { policyUpstream } from '../../../plugins/selection/view.ts';

function run(source: string, inputs: PolicyUpstreamInput[]): PolicyResult {
  const r = evaluatePolicy(inputs, { evalFunc: compileSourcePolicy(source), evalTimeoutMs: 10_000, network: 'evm:1' });
  if (r instanceof Promise) throw new Error('a source policy must be synchronous');
  return r;
}
const order = (source: string, inputs: PolicyUpstreamInput[]) => run(source, inputs).order;

/** One method's latency entry: `ms` at every quantile, `n` requests. */
const lat = (ms: number, n = 100): MethodLatency => ({ requestsTotal: n, p50ms: ms, p70ms: ms, p90ms: ms, p95ms: ms, p99ms: ms });
const byMethod = (id: string, methods: Record<string, MethodLatency>): PolicyUpstreamInput => ({ id, metrics: { requests: 200 }, metricsByMethod: methods });

describe('selection: misbehaviour, seconds-lag and latency-deviation predicates (YAML policy)', () => {
  describe('misbehaviour', () => {
    const ups = [
      { id: 'honest', metrics: { misbehaviorRate: 0 } },
      { id: 'liar', metrics: { misbehaviorRate: 0.4 } },
      { id: 'slip', metrics: { misbehaviorRate: 0.05 } },
    ];
    it('misbehaviorRateAbove(r) excludes an upstream whose rate is above r (not at it)', () => {
      expect(order('(u) => u.excludeIf(misbehaviorRateAbove(0.1))', ups)).to.deep.equal(['honest', 'slip']);
      expect(order('(u) => u.excludeIf(misbehaviorRateAbove(0.4))', ups)).to.deep.equal(['honest', 'liar', 'slip']);
    });
    it('removeByMisbehavior(max) keeps the upstreams at or below max; sortByMisbehavior ranks by rate', () => {
      expect(order('(u) => u.removeByMisbehavior(0.05)', ups)).to.deep.equal(['honest', 'slip']);
      expect(order('(u) => u.sortByMisbehavior()', ups)).to.deep.equal(['honest', 'slip', 'liar']);
    });
    it('an upstream without a rate (no consensus ran) counts 0 and is never excluded', () => {
      expect(order('(u) => u.excludeIf(misbehaviorRateAbove(0))', [{ id: 'a' }, { id: 'b' }])).to.deep.equal(['a', 'b']);
    });
    it("sortByScore weighs it by the preset's misbehaviors (PREFER_LEAST_ERRORS: 12) and by an upstream's misbehaviors multiplier", () => {
      const two = [
        { id: 'liar', metrics: { misbehaviorRate: 0.5 } },
        { id: 'slow', metrics: { p70: 0.2, requests: 20 } },
      ];
      // PREFER_LEAST_ERRORS: liar 12*0.5 = 6, slow 2*0.2 = 0.4.
      expect(order('(u) => u.sortByScore(PREFER_LEAST_ERRORS)', two)).to.deep.equal(['slow', 'liar']);
      // PREFER_FASTEST: liar 2*0.5 = 1, slow 15*0.2 = 3.
      expect(order('(u) => u.sortByScore(PREFER_FASTEST)', two)).to.deep.equal(['liar', 'slow']);
      const weighted = [{ ...two[0], scoreMultipliers: { misbehaviors: 10 } }, two[1]] as PolicyUpstreamInput[];
      expect(order('(u) => u.sortByScore(PREFER_FASTEST)', weighted)).to.deep.equal(['slow', 'liar']);
    });
    it("svc's own score (TypeScript policies, svc_selection_score) adds 2 * misbehaviorRate by default, a multiplier replaces the weight", () => {
      expect(scoreOf({ misbehaviorRate: 0.5 })).to.equal(1);
      expect(upstreamScore(policyUpstream({ id: 'a', metrics: { misbehaviorRate: 0.5 }, scoreMultipliers: { misbehaviors: 6 } }))).to.equal(3);
    });
  });

  describe('seconds of lag', () => {
    const ups = [
      { id: 'tip', metrics: { blockHeadLag: 0, blockHeadLagSeconds: 0 } },
      { id: 'behind', metrics: { blockHeadLag: 5, blockHeadLagSeconds: 60, finalizationLag: 2, finalizationLagSeconds: 24 } },
      { id: 'close', metrics: { blockHeadLag: 1, blockHeadLagSeconds: 12, finalizationLagSeconds: 12 } },
    ];
    it('blockSecondsLagAbove(s) excludes an upstream more than s seconds behind the head', () => {
      expect(order('(u) => u.excludeIf(blockSecondsLagAbove(30))', ups)).to.deep.equal(['tip', 'close']);
      expect(order('(u) => u.excludeIf(blockSecondsLagAbove(12))', ups)).to.deep.equal(['tip', 'close']);
      expect(order('(u) => u.excludeIf(blockSecondsLagAbove(11))', ups)).to.deep.equal(['tip']);
    });
    it('finalizationSecondsLagAbove(s) reads the finalization lag in seconds', () => {
      expect(order('(u) => u.excludeIf(finalizationSecondsLagAbove(20))', ups)).to.deep.equal(['tip', 'close']);
    });
    it("is 0 while the block time is unknown, so eRPC's pairing with blockNumberLagAbove still catches a cold start", () => {
      const cold = [{ id: 'a' }, { id: 'b', metrics: { blockHeadLag: 40 } }];
      expect(order('(u) => u.excludeIf(blockSecondsLagAbove(30))', cold)).to.deep.equal(['a', 'b']);
      expect(order('(u) => u.excludeIf(any(blockNumberLagAbove(16), blockSecondsLagAbove(30)))', cold)).to.deep.equal(['a']);
    });
  });

  describe('latencyDeviationAbove', () => {
    it('geomean (default): the typical per-method ratio to the fastest other upstream above the multiplier trips', () => {
      const ups = [
        byMethod('fast', { eth_call: lat(100), eth_getLogs: lat(400) }),
        byMethod('slow', { eth_call: lat(500), eth_getLogs: lat(2000) }),
        byMethod('ok', { eth_call: lat(150), eth_getLogs: lat(500) }),
      ];
      // slow: 5x and 5x (damping ~1 at these latencies); ok: 1.5x and 1.25x.
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3))', ups)).to.deep.equal(['fast', 'ok']);
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(6))', ups)).to.deep.equal(['fast', 'slow', 'ok']);
    });
    it('compares method by method, so an upstream serving only slow methods is not slow', () => {
      const ups = [
        byMethod('calls', { eth_call: lat(50) }),
        byMethod('logs', { eth_getLogs: lat(3000) }),
        byMethod('both', { eth_call: lat(60), eth_getLogs: lat(3100) }),
      ];
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(2))', ups)).to.deep.equal(['calls', 'logs', 'both']);
    });
    it('the fastest upstream is compared with the next fastest (never itself); one alone on its methods never trips', () => {
      const ups = [byMethod('a', { eth_call: lat(1000) }), byMethod('b', { eth_call: lat(100) })];
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3))', ups)).to.deep.equal(['b']);
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3))', [byMethod('a', { eth_call: lat(1000) })])).to.deep.equal(['a']);
    });
    it("mode 'majority' trips when at least half of the methods are slower than the multiplier, 'veto' on any one", () => {
      const ups = [
        byMethod('ref', { m1: lat(100), m2: lat(100), m3: lat(100) }),
        byMethod('one', { m1: lat(1000), m2: lat(110), m3: lat(110) }),
        byMethod('two', { m1: lat(1000), m2: lat(1000), m3: lat(110) }),
      ];
      expect(order(`(u) => u.excludeIf(latencyDeviationAbove(3, { mode: 'veto' }))`, ups)).to.deep.equal(['ref']);
      expect(order(`(u) => u.excludeIf(latencyDeviationAbove(3, { mode: 'majority' }))`, ups)).to.deep.equal(['ref', 'one']);
      // geomean of one: (10 * 1.1 * 1.1)^(1/3) ~ 2.3 < 3.
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3))', ups)).to.deep.equal(['ref', 'one']);
    });
    it('methods under minMethodSamples (default 50) are left out; the floor is configurable', () => {
      const ups = [byMethod('a', { eth_call: lat(100, 10) }), byMethod('b', { eth_call: lat(1000, 10) })];
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3))', ups)).to.deep.equal(['a', 'b']);
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3, { minMethodSamples: 5 }))', ups)).to.deep.equal(['a']);
    });
    it('damps the ratio of small latencies (dampingMs 30): 2 ms against 6 ms is no deviation unless damping is off', () => {
      const ups = [byMethod('a', { eth_call: lat(2) }), byMethod('b', { eth_call: lat(6) })];
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(2))', ups)).to.deep.equal(['a', 'b']);
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(2, { dampingMs: 0 }))', ups)).to.deep.equal(['a']);
    });
    it('the second argument as a number is the quantile (p95 reads svc’s nearest kept quantile)', () => {
      const q = (p70: number, p99: number): MethodLatency => ({ requestsTotal: 100, p50ms: p70, p70ms: p70, p90ms: p70, p95ms: p99, p99ms: p99 });
      const ups = [byMethod('a', { eth_call: q(100, 200) }), byMethod('b', { eth_call: q(100, 2000) })];
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3))', ups)).to.deep.equal(['a', 'b']);
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(3, 95))', ups)).to.deep.equal(['a']);
    });
    it('without per-method numbers (a policy not naming it gets none) nothing is compared and nothing trips', () => {
      expect(order('(u) => u.excludeIf(latencyDeviationAbove(1.01))', [{ id: 'a' }, { id: 'b', metrics: { p70: 9 } }])).to.deep.equal(['a', 'b']);
    });
  });

  it('ctx carries the scope (method, finality) the evaluation runs for', () => {
    const fn = compileSourcePolicy('(u, ctx) => methodMatches("eth_get*") && ctx.finality === "finalized" ? u.slice().reverse() : u');
    const r = evaluatePolicy([{ id: 'a' }, { id: 'b' }], { evalFunc: fn, method: 'eth_getLogs', finality: 'finalized', evalTimeoutMs: 10_000 });
    expect((r as PolicyResult).order).to.deep.equal(['b', 'a']);
    const n = evaluatePolicy([{ id: 'a' }, { id: 'b' }], { evalFunc: fn, evalTimeoutMs: 10_000 });
    expect((n as PolicyResult).order).to.deep.equal(['a', 'b']);
  });
});
