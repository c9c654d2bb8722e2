/**
 * eRPC's served-tip pick beyond the plain majority: the guaranteed-method floor (the majority
 * over only the upstreams that support each pattern lowers the served tip), the regression
 * guard (a pick far below the corroborated head serves the last corroborated pick for at most
 * a minute, then fails open; -1 turns it off), and the `trajectoryWindow` / `guaranteedMethods` /
 * `maxRegressionBlocks` config keys.
 */
import { expect } from 'chai';
import { loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import type { Upstream } from '../../../core/plugin-api.ts';
import { UpstreamChainState } from '../../../plugins/evm-state/chain.ts';
import { ballotOf, REGRESSION_HOLD_MS, RegressionGuard, ServedTip } from '../../../plugins/evm-state/index.ts';
import { defaultPreset } from '../../../presets/default.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

interface Node {
  latest: number;
  finalized?: number;
  /** Methods (exact names or the patterns asked) this upstream does not serve. */
  ignores?: string[];
}

/** A fleet whose heads the test moves, and its peek/counted views. */
function fleet(...nodes: Node[]) {
  const ups = nodes.map((n, i) => ({ id: `u${i}`, supportsMethod: (m: string) => !(n.ignores ?? []).includes(m) }) as unknown as Upstream);
  const map = new Map<Upstream, UpstreamChainState>();
  const set = (i: number, latest: number, finalized = 0) => {
    const s = map.get(ups[i]!) ?? new UpstreamChainState();
    s.latest = latest;
    s.finalized = finalized;
    map.set(ups[i]!, s);
  };
  nodes.forEach((n, i) => set(i, n.latest, n.finalized));
  return { peek: (u: Upstream) => map.get(u), ups, set };
}

/** A clock the test moves, ms. */
function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const tip = (opts: Partial<ConstructorParameters<typeof ServedTip>[0]>, now?: () => number) =>
  new ServedTip({ latest: true, finalized: true, guaranteedMethods: [], maxRegressionBlocks: 0, ...opts }, now);

describe('evm-state: served tip guaranteed methods (eRPC parity)', () => {
  it('the served latest is lowered to the majority pick over only the upstreams that support a guaranteed pattern', () => {
    // Two upstreams ahead that ignore trace_*, one trace-capable behind: the global majority is 120,
    // the trace-capable set's is 100, and the served tip is the lower.
    const f = fleet({ latest: 120, ignores: ['trace_*'] }, { latest: 120, ignores: ['trace_*'] }, { latest: 100 });
    expect(tip({}).head(f.peek, f.ups, 'latest')).to.equal(120);
    expect(tip({ guaranteedMethods: ['trace_*'] }).head(f.peek, f.ups, 'latest')).to.equal(100);
  });

  it('a supporting set ahead of the majority does not raise the tip; the lowest pattern floor wins; the finalized axis is floored too', () => {
    const f = fleet(
      { latest: 100, finalized: 90, ignores: ['debug_*'] },
      { latest: 100, finalized: 90, ignores: ['debug_*'] },
      { latest: 130, finalized: 95 },
      { latest: 80, finalized: 70, ignores: ['trace_*'] },
    );
    // Global ballot [130,100,100,80] → 100; trace_* (u0,u1,u2) → 100; debug_* (u2,u3) → 80.
    expect(tip({ guaranteedMethods: ['trace_*'] }).head(f.peek, f.ups, 'latest')).to.equal(100);
    expect(tip({ guaranteedMethods: ['trace_*', 'debug_*'] }).head(f.peek, f.ups, 'latest')).to.equal(80);
    expect(tip({ guaranteedMethods: ['debug_*'] }).head(f.peek, f.ups, 'finalized')).to.equal(70);
  });

  it('a pattern no upstream supports sets no floor', () => {
    const f = fleet({ latest: 120, ignores: ['trace_*'] }, { latest: 110, ignores: ['trace_*'] });
    expect(tip({ guaranteedMethods: ['trace_*'] }).head(f.peek, f.ups, 'latest')).to.equal(110);
  });

  it('config: guaranteedMethods is taken (at most 32 patterns); a 33rd is refused', () => {
    const load = (guaranteedMethods: string[]) =>
      loadConfigObject(
        {
          projects: [
            {
              id: 'p',
              networks: [{ evm: { chainId: 1, servedTip: { enabledFor: ['latest'], guaranteedMethods } } }],
              upstreams: [{ endpoint: 'http://127.0.0.1:8545' }],
            },
          ],
        },
        { fragments: FRAGMENTS, env: {} },
      );
    const { config } = load(['trace_*']);
    expect((config.projects[0]?.networks[0]?.settings.evm as { servedTip: unknown }).servedTip).to.deep.equal({
      enabledFor: ['latest'],
      guaranteedMethods: ['trace_*'],
    });
    expect(() => load(Array.from({ length: 33 }, (_, i) => `m${i}`))).to.throw(/guaranteedMethods/);
  });
});

describe('evm-state: served tip regression guard (eRPC parity)', () => {
  it('ballotOf: the majority pick, the second-highest head (corroborated) and the highest', () => {
    expect(ballotOf([5000, 5000, 10, 10])).to.deep.equal({ pick: 10, corroborated: 5000, max: 5000 });
    expect(ballotOf([7])).to.deep.equal({ pick: 7, corroborated: 7, max: 7 });
    expect(ballotOf([])).to.deep.equal({ pick: 0, corroborated: 0, max: 0 });
  });

  it('a pick more than 1024 blocks (the default) below the corroborated head serves the last corroborated pick', () => {
    const c = clock();
    const f = fleet({ latest: 5000 }, { latest: 5000 }, { latest: 5000 }, { latest: 5000 });
    const t = tip({}, c.now);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(5000);
    // Two upstreams fall back far: the majority pick is 10, two heads still have 5000.
    f.set(2, 10);
    f.set(3, 10);
    c.advance(1000);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(5000);
    expect(t.guardState('latest')).to.equal('holding');
  });

  it('a pick within maxRegressionBlocks is served as computed', () => {
    const c = clock();
    const f = fleet({ latest: 5000 }, { latest: 5000 }, { latest: 5000 }, { latest: 5000 });
    const t = tip({ maxRegressionBlocks: 10_000 }, c.now);
    t.head(f.peek, f.ups, 'latest');
    f.set(2, 10);
    f.set(3, 10);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(10);
    // And 1024 exactly is still within the default.
    const g = fleet({ latest: 2024 }, { latest: 2024 }, { latest: 2024 }, { latest: 2024 });
    const d = tip({}, c.now);
    d.head(g.peek, g.ups, 'latest');
    g.set(2, 1000);
    g.set(3, 1000);
    expect(d.head(g.peek, g.ups, 'latest')).to.equal(1000);
  });

  it('the hold lasts at most one minute after the pick was last corroborated, then fails open and serves the pick', () => {
    const c = clock();
    const f = fleet({ latest: 5000 }, { latest: 5000 }, { latest: 5000 }, { latest: 5000 });
    const t = tip({}, c.now);
    t.head(f.peek, f.ups, 'latest');
    f.set(2, 10);
    f.set(3, 10);
    c.advance(REGRESSION_HOLD_MS - 1);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(5000);
    c.advance(1);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(10);
    expect(t.guardState('latest')).to.equal('failed-open');
    // Disarmed: it does not hold again on the same stale memory.
    c.advance(1000);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(10);
  });

  it('maxRegressionBlocks -1 turns the guard off: the pick is served at once', () => {
    const f = fleet({ latest: 5000 }, { latest: 5000 }, { latest: 5000 }, { latest: 5000 });
    const t = tip({ maxRegressionBlocks: -1 });
    t.head(f.peek, f.ups, 'latest');
    f.set(2, 10);
    f.set(3, 10);
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(10);
  });

  it('a held value is never above the highest head', () => {
    const c = clock();
    const g = new RegressionGuard(1024, c.now);
    expect(g.apply(ballotOf([5000, 5000, 5000]))).to.equal(5000);
    // Every head fell, one to 3000 and two to 10: the memory 5000 is capped at 3000.
    expect(g.apply(ballotOf([3000, 10, 10]))).to.equal(3000);
  });

  it('a far-future majority never enters the memory (continuity), so it cannot be held against an honest fleet', () => {
    const c = clock();
    const g = new RegressionGuard(1024, c.now);
    expect(g.apply(ballotOf([100, 100, 100]))).to.equal(100);
    g.served(100);
    // Two rogues far ahead outvote one honest upstream: served as computed, not remembered.
    expect(g.apply(ballotOf([900_000, 900_000, 101]))).to.equal(900_000);
    // The honest fleet returns: nothing holds it back to the rogue value.
    expect(g.apply(ballotOf([102, 102, 102]))).to.equal(102);
  });

  it('the guard runs before the guaranteed-method floor, which still lowers a held tip', () => {
    const c = clock();
    const f = fleet({ latest: 5000 }, { latest: 5000 }, { latest: 5000, ignores: ['trace_*'] }, { latest: 5000, ignores: ['trace_*'] }, { latest: 4990 });
    const t = tip({ guaranteedMethods: ['trace_*'] }, c.now);
    // trace_* set (u0,u1,u4) → 5000: no floor below the pick yet.
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(5000);
    f.set(2, 10);
    f.set(3, 10);
    f.set(4, 10);
    // Held at 5000 by the guard; the trace_* set [5000,5000,10] → 5000 keeps it.
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(5000);
    f.set(1, 10);
    // Now trace_* [5000,10,10] → 10 floors the held tip.
    expect(t.head(f.peek, f.ups, 'latest')).to.equal(10);
  });
});

describe('config: eRPC servedTip maxRegressionBlocks and trajectoryWindow', () => {
  const load = (servedTip: Record<string, unknown>) =>
    loadConfigObject(
      {
        projects: [
          {
            id: 'p',
            networks: [{ evm: { chainId: 1, servedTip: { enabledFor: ['latest'], ...servedTip } } }],
            upstreams: [{ endpoint: 'http://127.0.0.1:8545' }],
          },
        ],
      },
      { fragments: FRAGMENTS, env: {} },
    );
  const servedTipOf = (r: ReturnType<typeof load>) => (r.config.projects[0]?.networks[0]?.settings.evm as { servedTip: unknown }).servedTip;

  it('maxRegressionBlocks: 0, -1 and positive values are taken; other negatives are refused', () => {
    for (const v of [0, -1, 2048]) expect(servedTipOf(load({ maxRegressionBlocks: v }))).to.deep.equal({ enabledFor: ['latest'], maxRegressionBlocks: v });
    expect(() => load({ maxRegressionBlocks: -2 })).to.throw(/maxRegressionBlocks/);
  });

  it("trajectoryWindow: 0 (eRPC's referee off) is removed with a line saying svc serves the plain majority pick", () => {
    for (const v of [0, '0s', '0ms']) {
      const r = load({ trajectoryWindow: v });
      expect(servedTipOf(r)).to.deep.equal({ enabledFor: ['latest'] });
      const line = r.rewrites.find((w) => w.path === 'projects[0].networks[0].evm.servedTip.trajectoryWindow');
      expect(JSON.stringify(line)).to.match(/plain majority pick/);
    }
  });

  it('any other trajectoryWindow is refused naming the trajectory referee', () => {
    for (const v of ['10m', 60_000, 'soon']) expect(() => load({ trajectoryWindow: v })).to.throw(/trajectory referee[\s\S]*plain majority pick/);
  });
});
