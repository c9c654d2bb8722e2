/**
 * eRPC's cross-tick policy helpers in a YAML policy (stickyPrimary, readmitExcluded and its alias
 * probeExcluded({ reAdmitAfter }), cooldown, includeIf, shadowExcludeIf, probeExcluded's probe
 * settings), run tick after tick over a fake clock (`ctx.now`): each tick runs in a fresh vm
 * context and what it remembers travels through the carry, as the selection plugin does it.
 */
import { expect } from 'chai';
import { evaluatePolicy, type PolicyResult, type PolicyUpstreamInput } from '../../../plugins/selection/index.ts';
import { compileSourcePolicy } from '../../../plugins/selection/sandbox.ts';
import { SelectionMemory, StickyRegisters } from '../../../plugins/selection/memory.ts';
import type { DecisionDraft } from '../../../plugins/selection/view.ts';

const GENEROUS_MS = 5_000;
const T0 = 1_700_000_000_000;

/** One network's evaluations over a fake clock: the carry in, the commit out, excludedSince kept as the selection state keeps it. */
class Network {
  readonly excludedSince = new Map<string, number>();
  readonly memory: SelectionMemory;
  prevOrder: string[] = [];
  notes: DecisionDraft[] = [];
  now = T0;

  /** @param method the evaluation scope's method; `registers` the network's, to share them between scopes */
  constructor(
    private readonly source: string,
    private readonly method = '*',
    registers?: StickyRegisters,
  ) {
    this.memory = new SelectionMemory(this.excludedSince, registers, method);
  }

  tick(inputs: PolicyUpstreamInput[], advanceMs = 0): PolicyResult {
    this.now += advanceMs;
    const carry = this.memory.carry(this.prevOrder);
    const opts = { evalFunc: compileSourcePolicy(this.source), evalTimeoutMs: GENEROUS_MS, network: 'evm:1', method: this.method, now: this.now, carry };
    const r = evaluatePolicy(inputs, opts);
    if (r instanceof Promise) throw new Error('a source policy must be synchronous');
    this.notes = this.memory.commit(carry);
    for (const u of inputs) {
      if (u.id in r.excluded) {
        if (!this.excludedSince.has(u.id)) this.excludedSince.set(u.id, this.now);
      } else this.excludedSince.delete(u.id);
    }
    this.prevOrder = r.order;
    return r;
  }
}

/** An upstream whose p70 latency is `p70` seconds (PREFER_FASTEST score 1 / (1 + 15 * p70)). */
const up = (id: string, p70: number, extra: Partial<PolicyUpstreamInput> = {}): PolicyUpstreamInput => ({ id, metrics: { requests: 20, p70 }, ...extra });

const STICKY = `(ups, ctx) => ups.sortByScore(PREFER_FASTEST).stickyPrimary({ hysteresis: 0.30, minSwitchInterval: '30s' })`;

describe('selection: eRPC cross-tick helpers in a YAML policy (fake clock)', () => {
  describe("rotateBy and ctx.tickCount (eRPC's translation of routingStrategy round-robin)", () => {
    it('each upstream takes the head in turn, one place per evaluation, whatever the order it was given', () => {
      const n = new Network('(upstreams, ctx) => upstreams.rotateBy(ctx.tickCount)');
      const ups = [up('a', 0.1), up('b', 0.1), up('c', 0.1)];
      const heads = [0, 1, 2, 3].map(() => n.tick(ups, 1000).order);
      expect(heads).to.deep.equal([
        ['a', 'b', 'c'],
        ['b', 'c', 'a'],
        ['c', 'a', 'b'],
        ['a', 'b', 'c'],
      ]);
    });

    it('rotateBy turns left by n modulo the length; an empty list, a negative or a non-number n are safe', () => {
      const n = new Network(
        '(u) => [u.rotateBy(1).map((x) => x.id).join(""), u.rotateBy(-1).map((x) => x.id).join(""), u.rotateBy(NaN).length, [].rotateBy(3).length].length === 4 ? u.rotateBy(-1) : u',
      );
      expect(n.tick([up('a', 0.1), up('b', 0.1), up('c', 0.1)]).order).to.deep.equal(['c', 'a', 'b']);
    });
  });

  describe('stickyPrimary', () => {
    it('cold start seeds the register with the head, switch time now', () => {
      const n = new Network(STICKY);
      expect(n.tick([up('a', 0.2), up('b', 0.1)]).order).to.deep.equal(['b', 'a']);
      expect(n.memory.register).to.deep.equal({ primary: 'b', lastSwitchAt: T0 });
    });

    it('holds the primary while the challenger is within the hysteresis, switches once it clears it', () => {
      const n = new Network(STICKY);
      n.tick([up('a', 0.1), up('b', 0.2)]);
      // b: 1/(1+1.2)=0.4545 vs a: 1/(1+1.5)=0.4; 0.4545 <= 0.4*1.3 = 0.52: held.
      const held = n.tick([up('a', 0.1), up('b', 0.08)], 60_000);
      expect(held.order).to.deep.equal(['a', 'b']);
      expect(n.memory.register).to.deep.equal({ primary: 'a', lastSwitchAt: T0 });
      expect(n.notes.map((d) => d.step + ':' + d.upstream)).to.deep.equal(['stickyPrimary:a']);
      // b: 1/(1+0.15)=0.87 > 0.52: switches.
      const switched = n.tick([up('a', 0.1), up('b', 0.01)], 60_000);
      expect(switched.order).to.deep.equal(['b', 'a']);
      expect(n.memory.register).to.deep.equal({ primary: 'b', lastSwitchAt: T0 + 120_000 });
      expect(n.notes[0]!.reason).to.match(/took over from a/);
    });

    it('minSwitchInterval: a decisive challenger waits until the interval since the last switch has passed', () => {
      const n = new Network(STICKY);
      n.tick([up('a', 0.1), up('b', 0.2)]);
      expect(n.tick([up('a', 0.5), up('b', 0.01)], 10_000).order).to.deep.equal(['a', 'b']);
      expect(n.tick([up('a', 0.5), up('b', 0.01)], 19_000).order, '29 s after the seed').to.deep.equal(['a', 'b']);
      expect(n.tick([up('a', 0.5), up('b', 0.01)], 1_000).order, '30 s after the seed').to.deep.equal(['b', 'a']);
      // Right after that switch, a is decisively better again: held for 30 s.
      expect(n.tick([up('a', 0.01), up('b', 0.5)], 15_000).order).to.deep.equal(['b', 'a']);
      expect(n.tick([up('a', 0.01), up('b', 0.5)], 15_000).order).to.deep.equal(['a', 'b']);
    });

    it('a previous primary no longer in the list: the head serves and the register is unchanged', () => {
      const n = new Network(
        `(ups) => ups.excludeIf(errorRateAbove(0.5)).sortByScore(PREFER_FASTEST).stickyPrimary({ hysteresis: 0.3, minSwitchInterval: '30s' })`,
      );
      n.tick([up('a', 0.1), up('b', 0.2)]);
      const gone = n.tick([up('a', 0.1, { metrics: { requests: 20, p70: 0.1, errorRate: 0.9 } }), up('b', 0.2)], 60_000);
      expect(gone.order).to.deep.equal(['b']);
      expect(n.memory.register).to.deep.equal({ primary: 'a', lastSwitchAt: T0 });
      // a is back, slightly worse than b: the register still names it, so it is held.
      expect(n.tick([up('a', 0.12), up('b', 0.1)], 15_000).order).to.deep.equal(['a', 'b']);
    });

    it("slot scopes compare sortByScore's u.score; with no score the previous primary is held", () => {
      const slot = new Network(`(ups) => ups.sortBy((u) => u.metrics.p70).stickyPrimary({ scope: NETWORK_METHOD, minSwitchInterval: 0 })`);
      slot.tick([up('a', 0.1), up('b', 0.2)]);
      expect(slot.tick([up('a', 0.9), up('b', 0.01)], 1_000).order, 'no u.score').to.deep.equal(['a', 'b']);
      expect(slot.notes[0]!.reason).to.match(/no score/);
      const scored = new Network(`(ups) => ups.sortByScore(PREFER_FRESHEST).stickyPrimary({ scope: NETWORK_METHOD_FINALITY, minSwitchInterval: 0 })`);
      scored.tick([up('a', 0.1), up('b', 0.2)]);
      expect(scored.tick([up('a', 0.9), up('b', 0.01)], 1_000).order).to.deep.equal(['b', 'a']);
    });

    it('exports the scope constants; each stickyPrimary scope has its own register, an unknown scope fails the evaluation', () => {
      const n = new Network(
        `(ups) => [NETWORK, NETWORK_METHOD, NETWORK_FINALITY, NETWORK_METHOD_FINALITY].join() === 'network,network-method,network-finality,network-method-finality' ? ups.stickyPrimary({ scope: NETWORK_FINALITY }) : []`,
      );
      expect(n.tick([up('a', 0.1), up('b', 0.2)]).order).to.deep.equal(['a', 'b']);
      expect(n.memory.register).to.equal(null);
      expect(n.memory.carry([]).stickies['network-finality']?.primary).to.equal('a');
      expect(() => new Network(`(ups) => ups.stickyPrimary({ scope: 'upstream' })`).tick([up('a', 0.1)])).to.throw(/stickyPrimary scope must be/);
    });

    it("under evalScope by method, scope 'network' shares one primary across the methods' evaluations, 'network-method' keeps one per method", () => {
      const regs = new StickyRegisters();
      const shared = `(ups) => ups.sortByScore(PREFER_FASTEST).stickyPrimary({ minSwitchInterval: '1h' })`;
      // eth_call's evaluation seeds the network register with a; eth_getLogs (b faster there) holds a.
      expect(new Network(shared, 'eth_call', regs).tick([up('a', 0.1), up('b', 0.2)]).order).to.deep.equal(['a', 'b']);
      expect(new Network(shared, 'eth_getLogs', regs).tick([up('a', 0.2), up('b', 0.1)]).order).to.deep.equal(['a', 'b']);
      const own = `(ups) => ups.sortByScore(PREFER_FASTEST).stickyPrimary({ scope: NETWORK_METHOD, minSwitchInterval: '1h' })`;
      const regs2 = new StickyRegisters();
      expect(new Network(own, 'eth_call', regs2).tick([up('a', 0.1), up('b', 0.2)]).order).to.deep.equal(['a', 'b']);
      expect(new Network(own, 'eth_getLogs', regs2).tick([up('a', 0.2), up('b', 0.1)]).order).to.deep.equal(['b', 'a']);
    });
  });

  describe('readmitExcluded / probeExcluded({ reAdmitAfter }) / cooldown', () => {
    const broken = (id: string) => up(id, 0.1, { metrics: { requests: 20, p70: 0.1, errorRate: 0.9 } });

    it('re-admits the upstreams out for at least reAdmitAfter, oldest first, at most maxConcurrent, at the tail', () => {
      const n = new Network(`(ups) => ups.excludeIf(errorRateAbove(0.5)).readmitExcluded({ reAdmitAfter: '90s', maxConcurrent: 2, position: 'tail' })`);
      n.tick([up('ok', 0.1), broken('x'), up('y', 0.1), up('z', 0.1)]);
      n.tick([up('ok', 0.1), broken('x'), broken('y'), up('z', 0.1)], 10_000);
      n.tick([up('ok', 0.1), broken('x'), broken('y'), broken('z')], 10_000);
      expect([...n.excludedSince.entries()]).to.deep.equal([
        ['x', T0],
        ['y', T0 + 10_000],
        ['z', T0 + 20_000],
      ]);
      const bad = [up('ok', 0.1), broken('x'), broken('y'), broken('z')];
      // 89 s after x dropped out: nothing yet.
      expect(n.tick(bad, 69_000).order).to.deep.equal(['ok']);
      // 90 s: x only; it is then in the order, so its clock clears.
      expect(n.tick(bad, 1_000).order).to.deep.equal(['ok', 'x']);
      expect(n.notes.map((d) => d.step + ':' + d.upstream)).to.deep.equal(['readmitExcluded:x']);
      expect(n.excludedSince.has('x')).to.equal(false);
      // 120 s after y, 110 s after z: both, oldest first (x dropped out again just now).
      expect(n.tick(bad, 30_000).order).to.deep.equal(['ok', 'y', 'z']);
    });

    it('position head, longestFirst false, and probeExcluded with reAdmitAfter as the alias', () => {
      const run = (policy: string) => {
        const n = new Network(`(ups) => ups.excludeIf(errorRateAbove(0.5)).${policy}`);
        n.tick([up('ok', 0.1), broken('x'), up('y', 0.1)]);
        n.tick([up('ok', 0.1), broken('x'), broken('y')], 5_000);
        return n.tick([up('ok', 0.1), broken('x'), broken('y')], 300_000).order;
      };
      expect(run(`readmitExcluded({ reAdmitAfter: '1m', position: 'head' })`)).to.deep.equal(['x', 'ok']);
      expect(run(`readmitExcluded({ reAdmitAfter: 60000, longestFirst: false })`)).to.deep.equal(['ok', 'y']);
      expect(run(`probeExcluded({ reAdmitAfter: '5m', maxConcurrent: 1 })`)).to.deep.equal(['ok', 'x']);
      expect(run(`probeExcluded({ reAdmitAfter: '1m', maxConcurrent: 5, position: 'head' })`)).to.deep.equal(['x', 'y', 'ok']);
    });

    it('cooldown keeps a recovered upstream out until the duration since it dropped out has passed', () => {
      const n = new Network(`(ups) => ups.excludeIf(errorRateAbove(0.5)).cooldown('1m')`);
      n.tick([up('ok', 0.1), broken('x')]);
      expect(n.tick([up('ok', 0.1), up('x', 0.1)], 30_000).order).to.deep.equal(['ok']);
      expect(n.tick([up('ok', 0.1), up('x', 0.1)], 29_999).order).to.deep.equal(['ok']);
      expect(n.tick([up('ok', 0.1), up('x', 0.1)], 1).order).to.deep.equal(['ok', 'x']);
    });

    it('a duration that is not one fails the evaluation naming the helper', () => {
      const n = new Network(`(ups) => ups.readmitExcluded({ reAdmitAfter: 'soon' })`);
      expect(() => n.tick([up('a', 0.1)])).to.throw(/readmitExcluded reAdmitAfter: "soon" is not a duration/);
      expect(() => new Network(`(ups) => ups.readmitExcluded({})`).tick([up('a', 0.1)])).to.throw(/needs reAdmitAfter/);
      expect(new Network(`(ups) => durationMs('1m30s') === 90000 && durationMs(250) === 250 ? ups : []`).tick([up('a', 0.1)]).order).to.deep.equal(['a']);
    });
  });

  describe('includeIf, shadowExcludeIf, probeExcluded settings', () => {
    it("includeIf adds the matching upstreams of the whole set when the pool's condition holds (eRPC's break-glass tier)", () => {
      const policy = `(ups) => ups.excludeTag('tier:reserve').excludeIf(errorRateAbove(0.5)).includeIf('tier:reserve', (p) => p.length < 2)`;
      const reserve = up('r', 0.1, { tags: ['tier:reserve'] });
      expect(new Network(policy).tick([up('a', 0.1), up('b', 0.1), reserve]).order).to.deep.equal(['a', 'b']);
      const one = up('b', 0.1, { metrics: { requests: 20, errorRate: 0.9 } });
      expect(new Network(policy).tick([up('a', 0.1), one, reserve]).order).to.deep.equal(['a', 'r']);
      // Object form with position, never the whole set for an empty selector, a throwing condition admits nothing.
      const t = (s: string) => new Network(`(ups) => ups.byId('a').${s}`).tick([up('a', 0.1), reserve]).order;
      expect(t(`includeIf({ id: 'r', position: 'head' }, true)`)).to.deep.equal(['r', 'a']);
      expect(t(`includeIf({ position: 'head' }, true)`)).to.deep.equal(['a']);
      expect(t(`includeIf('tier:reserve', () => { throw new Error('x') })`)).to.deep.equal(['a']);
      // Seconds lag is 0 until the block time is estimated: the whole pool is not 30 s behind.
      expect(t(`includeIf('tier:reserve', (p) => p.every(blockSecondsLagAbove(30)))`)).to.deep.equal(['a']);
    });

    it('shadowExcludeIf leaves the order as it is and records what it would have excluded', () => {
      const n = new Network(`(ups) => ups.shadowExcludeIf(errorRateAbove(0.1), 'errors over 10%').shadowExcludeIf(latencyAbove(150))`);
      const r = n.tick([up('a', 0.1, { metrics: { requests: 20, p70: 0.2, errorRate: 0.2 } }), up('b', 0.1)]);
      expect(r.order).to.deep.equal(['a', 'b']);
      expect(r.excluded).to.deep.equal({});
      expect(n.notes).to.deep.equal([{ step: 'shadowExcludeIf', upstream: 'a', reason: 'would exclude (not applied): errors over 10%; shadowExcludeIf' }]);
    });

    it('probeExcluded without reAdmitAfter keeps the order and hands the host its probe settings (defaults, bounded); a tick without it clears them', () => {
      const n = new Network(`(ups, ctx) => ctx.previousOrder.length ? ups : ups.probeExcluded()`);
      expect(n.tick([up('a', 0.1)]).order).to.deep.equal(['a']);
      expect(n.memory.probe).to.deep.equal({ sampleRate: 0.1, minSamples: 10, minSamplesWindowMs: 60_000, maxConcurrent: 4, timeoutMs: 10_000 });
      n.tick([up('a', 0.1)], 1_000);
      expect(n.memory.probe).to.equal(undefined);
      const custom = new Network(`(ups) => ups.probeExcluded({ sampleRate: 1, minSamples: 0, minSamplesWindow: '10s', maxConcurrent: 1000, timeout: '2s' })`);
      custom.tick([up('a', 0.1)]);
      expect(custom.memory.probe).to.deep.equal({ sampleRate: 1, minSamples: 0, minSamplesWindowMs: 10_000, maxConcurrent: 64, timeoutMs: 2_000 });
      expect(() => new Network(`(ups) => ups.probeExcluded({ sampleRate: 2 })`).tick([up('a', 0.1)])).to.throw(/sampleRate must be a number from 0 to 1/);
    });

    it("eRPC's cross-tick context fields reach the policy: previousOrder, previousExcluded, excludedSince, lastSwitchAt", () => {
      const n = new Network(
        `(ups, ctx) => ctx.previousOrder.length === 0 ? ups.excludeId('b').stickyPrimary() : ctx.previousExcluded.join() === 'b' && ctx.excludedSince.b === ${T0} && ctx.lastSwitchAt === ${T0} ? ups : []`,
      );
      expect(n.tick([up('a', 0.1), up('b', 0.1)]).order).to.deep.equal(['a']);
      expect(n.tick([up('a', 0.1), up('b', 0.1)], 1_000).order).to.deep.equal(['a', 'b']);
    });
  });
});
