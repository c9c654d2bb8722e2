/**
 * eRPC's `selectionPolicy.evalScope` in the selection plugin: under `network-method` (and the
 * finality scopes) each scope of calls is evaluated separately with its own method's health
 * numbers and the `scoreMultipliers` entries matching it, and a call gets its scope's order; the
 * number of scopes is bounded (past it, and before a scope's first evaluation, the network's
 * order serves); eRPC's legacy `evalPerMethod` / `evalPerFinality` become `evalScope`. Also what
 * an evaluation gathers through the other plugins' contracts: the misbehaviour rate from the
 * consensus plugin's service, the seconds lags from the evm-state block time.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { defaultPreset } from '../../../presets/default.ts';
import type { Proxy } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { Network } from '../../../core/registry/project.ts';
import { FINALITY } from '../../../core/pipeline/context.ts';
import { ErrEndpointUnsupported } from '../../../core/wire/errors.ts';
import { createLogger } from '../../../lib/logger.ts';
import { definePlugin, type Plugin } from '../../../core/plugin-api.ts';
import { healthPlugin } from '../../../plugins/health/index.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import { selectPlugin } from '../../../plugins/select/index.ts';
import { CHAIN_STATE_SERVICE, NO_CHAIN_STATE } from '../../../plugins/evm-state/api.ts';
import { CONSENSUS_MISBEHAVIOR_SERVICE } from '../../../plugins/consensus/api.ts';
import { MAX_SCOPES, SCOPE_IDLE_MS, evaluateSelection, scopeOf, selectionPlugin, selectionState, type EvalFunc } from '../../../plugins/selection/index.ts';

const DEAD = 'http://127.0.0.1:9';
const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

/** Puts the upstream named by the scope's method first: shows which scope's evaluation a call got. */
const BY_METHOD = `(ups, ctx) => ctx.method === '*' ? ups : ups.slice().sort((a, b) => (a.id === ctx.method.slice(4) ? -1 : b.id === ctx.method.slice(4) ? 1 : 0))`;

describe('selection: evalScope (per-method and per-finality evaluation)', () => {
  let proxy: Proxy | undefined;
  let clock: ReturnType<typeof FakeTimers.install> | undefined;
  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
    clock?.uninstall();
    clock = undefined;
  });

  async function start(
    selectionPolicy: Record<string, unknown>,
    extra: Plugin[] = [],
    upstreams?: Record<string, unknown>[],
  ): Promise<{ p: Proxy; net: Network }> {
    proxy = createProxy({
      config: {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 1 }, selectionPolicy: { evalInterval: '1h', evalTimeout: '10s', ...selectionPolicy } }],
            upstreams: upstreams ?? ['a', 'b', 'c'].map((id) => ({ id, endpoint: DEAD, evm: { chainId: 1 } })),
          },
        ],
      },
      plugins: [healthPlugin(), selectionPlugin(), selectPlugin(), forwardPlugin(), ...extra],
      logger: createLogger('silent'),
      port: 0,
      host: '127.0.0.1',
      metricsPort: 0,
    });
    await proxy.start();
    return { p: proxy, net: proxy.projects.get('main')!.networks.get('evm:1')! };
  }

  function select(p: Proxy, net: Network, method: string, finality?: 'finalized' | 'realtime'): string[] {
    const { ctx, done } = p.internalContext(net, method, [], 1000);
    try {
      if (finality) FINALITY.set(ctx, finality);
      return p.hooks.select.call(net.upstreams.slice(), ctx).map((u) => u.id);
    } finally {
      done();
    }
  }

  const settle = () => new Promise<void>((r) => setImmediate(r));

  /** `n` attempts of `upstream` for `method` in the project's health window, each `ms` long (answered, or refused as unsupported). */
  function served(p: Proxy, method: string, upstream = 'a', ms = 5, n = 1, outcome: 'success' | 'error' = 'success'): void {
    const health = p.projects.get('main')!.health;
    for (let i = 0; i < n; i++) {
      health.record({
        upstreamId: upstream,
        vendor: 'unknown',
        method,
        projectId: 'main',
        networkId: 'evm:1',
        reason: 'primary',
        outcome,
        ...(outcome === 'error' ? { error: new ErrEndpointUnsupported(`${method} is not supported`) } : {}),
        startedAt: Date.now(),
        durationMs: ms,
        won: outcome === 'success',
        dialled: true,
        finality: 'unknown',
        internal: false,
      });
    }
  }

  it('scopeOf maps a call to its scope; `network` has none', () => {
    expect(scopeOf('network', 'eth_call', 'realtime')).to.equal(undefined);
    expect(scopeOf('network-method', 'eth_call', 'realtime')).to.deep.equal({ method: 'eth_call', finality: 'unknown' });
    expect(scopeOf('network-finality', 'eth_call', 'realtime')).to.deep.equal({ method: '*', finality: 'realtime' });
    expect(scopeOf('network-method-finality', 'eth_call', 'finalized')).to.deep.equal({ method: 'eth_call', finality: 'finalized' });
  });

  it("network-method: each method's calls get the order of their own evaluation (ctx.method), after its first evaluation", async () => {
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: BY_METHOD });
    served(p, 'eth_c');
    served(p, 'eth_b', 'b');
    // The call that opens a scope gets the network's order; its evaluation runs off the request path.
    expect(select(p, net, 'eth_c')).to.deep.equal(['a', 'b', 'c']);
    await settle();
    expect(select(p, net, 'eth_c')).to.deep.equal(['c', 'a', 'b']);
    select(p, net, 'eth_b');
    await settle();
    expect(select(p, net, 'eth_b')).to.deep.equal(['b', 'a', 'c']);
    expect(select(p, net, 'eth_c')).to.deep.equal(['c', 'a', 'b']);
    const st = selectionState(p, 'main', 'evm:1')!;
    expect(st.evalScope).to.equal('network-method');
    expect(st.order).to.deep.equal(['a', 'b', 'c']);
    expect(st.scopes.map((s) => [s.method, s.finality, s.order.join('')])).to.deep.equal([
      ['eth_c', 'unknown', 'cab'],
      ['eth_b', 'unknown', 'bac'],
    ]);
  });

  it("network-finality: the scope's ctx.finality is the call's finality; method stays `*`; `unknown` is the network's own", async () => {
    const policy = `(ups, ctx) => ctx.finality === 'finalized' ? ups.slice().reverse() : ups`;
    const { p, net } = await start({ evalScope: 'network-finality', evalFunc: policy });
    select(p, net, 'eth_getBlockByNumber', 'finalized');
    select(p, net, 'eth_getBlockByNumber', 'realtime');
    await settle();
    expect(select(p, net, 'eth_call', 'finalized')).to.deep.equal(['c', 'b', 'a']);
    expect(select(p, net, 'eth_call', 'realtime')).to.deep.equal(['a', 'b', 'c']);
    // A call of unknown finality is the network's own evaluation: no scope of its own.
    expect(select(p, net, 'eth_call')).to.deep.equal(['a', 'b', 'c']);
    expect(selectionState(p, 'main', 'evm:1')!.scopes.map((s) => `${s.method}/${s.finality}`)).to.have.members(['*/finalized', '*/realtime']);
  });

  it("a method's scope sees that method's health: each method's calls are ranked by their own latencies (eRPC's per-method ranking)", async () => {
    const seen: Record<string, Record<string, [number, number]>> = {};
    const fn: EvalFunc = (ups, ctx) => {
      seen[ctx.method] = Object.fromEntries(ups.map((u) => [u.id, [u.metrics.requests, u.metrics.p70]]));
      return ups.sortByScore();
    };
    const upstreams = ['a', 'b'].map((id) => ({ id, endpoint: DEAD, evm: { chainId: 1 } }));
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: fn }, [], upstreams);
    // a is fast for eth_call and slow for eth_getLogs; b the other way round.
    served(p, 'eth_call', 'a', 10, 4);
    served(p, 'eth_call', 'b', 2000, 4);
    served(p, 'eth_getLogs', 'a', 2000, 2);
    served(p, 'eth_getLogs', 'b', 10, 2);
    select(p, net, 'eth_getLogs');
    select(p, net, 'eth_call');
    await settle();
    expect(select(p, net, 'eth_getLogs')).to.deep.equal(['b', 'a']);
    expect(select(p, net, 'eth_call')).to.deep.equal(['a', 'b']);
    expect(seen['eth_getLogs']!['a']![0]).to.equal(2);
    expect(seen['eth_getLogs']!['a']![1]).to.be.closeTo(2, 0.1);
    expect(seen['eth_getLogs']!['b']![1]).to.be.closeTo(0.01, 0.001);
    expect(seen['eth_call']!['a']![0]).to.equal(4);
    expect(seen['eth_call']!['b']![1]).to.be.closeTo(2, 0.1);
  });

  it("a method's scope applies the score multipliers scoped to that method", async () => {
    const upstreams = [
      { id: 'a', endpoint: DEAD, evm: { chainId: 1 }, routing: { scoreMultipliers: [{ method: 'eth_getLogs', overall: 0.01 }] } },
      { id: 'b', endpoint: DEAD, evm: { chainId: 1 } },
    ];
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: '(ups) => ups.sortByScore(PREFER_FASTEST)' }, [], upstreams);
    for (const id of ['a', 'b']) for (const m of ['eth_getLogs', 'eth_call']) served(p, m, id);
    select(p, net, 'eth_getLogs');
    select(p, net, 'eth_call');
    await settle();
    expect(select(p, net, 'eth_getLogs')).to.deep.equal(['b', 'a']);
    expect(select(p, net, 'eth_call')).to.deep.equal(['a', 'b']);
  });

  it('a method gets a scope only once an upstream answered it in the health window: names no upstream serves never take a slot', async () => {
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: BY_METHOD });
    for (let i = 0; i < 100; i++) select(p, net, `junk_${i}`);
    // Refused by an upstream (unsupported, no answer): still no scope.
    served(p, 'eth_c', 'a', 5, 3, 'error');
    select(p, net, 'eth_c');
    await settle();
    expect(selectionState(p, 'main', 'evm:1')!.scopes).to.deep.equal([]);
    expect(select(p, net, 'eth_c')).to.deep.equal(['a', 'b', 'c']);
    served(p, 'eth_c', 'b');
    select(p, net, 'eth_c');
    await settle();
    expect(select(p, net, 'eth_c')).to.deep.equal(['c', 'a', 'b']);
    expect(selectionState(p, 'main', 'evm:1')!.scopes.map((s) => s.method)).to.deep.equal(['eth_c']);
  });

  it("idle scopes are dropped by the network's own timer, with no call and no evaluation asked for", async () => {
    clock = FakeTimers.install({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    const { p, net } = await start({ evalScope: 'network-method', evalInterval: '10m', evalFunc: BY_METHOD });
    served(p, 'eth_b', 'b');
    served(p, 'eth_c', 'c');
    select(p, net, 'eth_b');
    select(p, net, 'eth_c');
    await settle();
    expect(selectionState(p, 'main', 'evm:1')!.scopes).to.have.length(2);
    // eth_c keeps getting calls; eth_b gets none for longer than the idle time.
    for (let t = 0; t <= SCOPE_IDLE_MS; t += 600_000) {
      select(p, net, 'eth_c');
      clock.tick(600_000);
    }
    expect(selectionState(p, 'main', 'evm:1')!.scopes.map((s) => s.method)).to.deep.equal(['eth_c']);
  });

  it("metricsByMethod lists the health tracker's methods, built once per tick and shared by every scope; client-sent names do not enter it", async () => {
    const byScope = new Map<string, unknown>();
    const fn: EvalFunc = (ups, ctx) => {
      const a = ups.find((u) => u.id === 'a')!;
      byScope.set(ctx.method, a.metricsByMethod);
      return ups;
    };
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: fn });
    served(p, 'eth_call', 'a', 20, 3);
    served(p, 'eth_getLogs', 'b');
    select(p, net, 'eth_call');
    select(p, net, 'eth_getLogs');
    for (let i = 0; i < 100; i++) select(p, net, `junk_${i}`);
    await settle();
    byScope.clear();
    await evaluateSelection(p, 'main', 'evm:1');
    expect([...byScope.keys()]).to.have.members(['*', 'eth_call', 'eth_getLogs']);
    const ofNetwork = byScope.get('*') as Record<string, { requestsTotal: number; p70ms: number }>;
    expect(Object.keys(ofNetwork)).to.deep.equal(['eth_call']);
    expect(ofNetwork['eth_call']).to.deep.include({ requestsTotal: 3 });
    expect(ofNetwork['eth_call']!.p70ms).to.be.closeTo(20, 1);
    // One build per tick: every scope reads the same (frozen) numbers.
    expect((byScope.get('eth_call') as Record<string, unknown>)['eth_call']).to.equal(ofNetwork['eth_call']);
    expect((byScope.get('eth_getLogs') as Record<string, unknown>)['eth_call']).to.equal(ofNetwork['eth_call']);
    expect(Object.isFrozen(ofNetwork['eth_call'])).to.equal(true);
  });

  it(`at most ${MAX_SCOPES} scopes: calls of later scopes get the network's order; an idle scope is dropped`, async () => {
    clock = FakeTimers.install({ toFake: ['Date'] });
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: `(ups, ctx) => ctx.method === '*' ? ups : ups.slice().reverse()` });
    for (let i = 0; i < MAX_SCOPES; i++) served(p, `m_${i}`);
    served(p, 'm_late');
    for (let i = 0; i < MAX_SCOPES; i++) select(p, net, `m_${i}`);
    select(p, net, 'm_late');
    await settle();
    expect(selectionState(p, 'main', 'evm:1')!.scopes).to.have.length(MAX_SCOPES);
    expect(select(p, net, 'm_0')).to.deep.equal(['c', 'b', 'a']);
    expect(select(p, net, 'm_late')).to.deep.equal(['a', 'b', 'c']);
    expect(selectionState(p, 'main', 'evm:1')!.scopes.some((s) => s.method === 'm_late')).to.equal(false);
    clock.tick(SCOPE_IDLE_MS + 1);
    select(p, net, 'm_1');
    await evaluateSelection(p, 'main', 'evm:1');
    expect(selectionState(p, 'main', 'evm:1')!.scopes.map((s) => s.method)).to.deep.equal(['m_1']);
  });

  it('evaluateSelection re-evaluates every scope; the network scope runs with method `*`', async () => {
    let calls: string[] = [];
    const fn: EvalFunc = (ups, ctx) => {
      calls.push(ctx.method);
      return ups;
    };
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: fn });
    served(p, 'eth_call');
    select(p, net, 'eth_call');
    await settle();
    calls = [];
    await evaluateSelection(p, 'main', 'evm:1');
    expect(calls).to.have.members(['*', 'eth_call']);
  });

  it("the evaluation reads the misbehaviour rate from the consensus plugin's service and turns block lag into seconds with the block time", async () => {
    const asked = new Set<string>();
    const fakes = definePlugin({
      name: 'fakes',
      apply(host) {
        host.services.provide(CHAIN_STATE_SERVICE, { of: () => ({ ...NO_CHAIN_STATE, blockTimeMs: 2000 }) });
        host.services.provide(CONSENSUS_MISBEHAVIOR_SERVICE, {
          counts: (_p, u, method = '*') => {
            asked.add(`${u.id}/${method}`);
            return u.id === 'b' ? { rounds: 10, misbehaviors: 4, requests: 10, rate: 0.4 } : { rounds: 0, misbehaviors: 0, requests: 0, rate: 0 };
          },
        });
      },
    });
    let seen: Record<string, unknown> = {};
    const fn: EvalFunc = (ups) => {
      seen = Object.fromEntries(ups.map((u) => [u.id, [u.metrics.misbehaviorRate, u.metrics.blockHeadLagSeconds, u.metrics.finalizationLagSeconds]]));
      return ups;
    };
    const { p } = await start({ evalFunc: fn }, [fakes]);
    p.projects.get('main')!.health.setLag('c', 3, 5);
    asked.clear();
    await evaluateSelection(p, 'main', 'evm:1');
    expect(seen).to.deep.equal({ a: [0, 0, 0], b: [0.4, 0, 0], c: [0, 6, 10] });
    // The network scope reads each upstream's rate over every method.
    expect([...asked]).to.have.members(['a/*', 'b/*', 'c/*']);
  });

  it("a method's scope reads that method's misbehaviour rate; metricsAcrossMethods keeps the whole upstream's", async () => {
    const fakes = definePlugin({
      name: 'fakes',
      apply(host) {
        host.services.provide(CONSENSUS_MISBEHAVIOR_SERVICE, {
          counts: (_p, _u, method = '*') => ({ rounds: 4, misbehaviors: 1, requests: 1, rate: method === 'eth_call' ? 0.5 : 0.1 }),
        });
      },
    });
    const seen: Record<string, [number, number | undefined]> = {};
    const fn: EvalFunc = (ups, ctx) => {
      seen[ctx.method] = [ups[0]!.metrics.misbehaviorRate, ups[0]!.metricsAcrossMethods?.misbehaviorRate];
      return ups;
    };
    const { p, net } = await start({ evalScope: 'network-method', evalFunc: fn }, [fakes]);
    served(p, 'eth_call');
    select(p, net, 'eth_call');
    await settle();
    expect(seen).to.deep.equal({ '*': [0.1, undefined], eth_call: [0.5, 0.1] });
  });

  describe('config', () => {
    const load = (selectionPolicy: Record<string, unknown>) =>
      loadConfigObject(
        { projects: [{ id: 'main', networks: [{ evm: { chainId: 1 }, selectionPolicy }], upstreams: [{ endpoint: 'http://127.0.0.1:8545' }] }] },
        { fragments: FRAGMENTS, env: {} },
      );
    const policyOf = (c: ReturnType<typeof load>) => c.config.projects[0]!.networks[0]!.settings.selectionPolicy as Record<string, unknown>;

    it("eRPC's evalPerMethod / evalPerFinality become evalScope with a rewrite line; evalScope next to them wins", () => {
      const both = load({ evalPerMethod: true, evalPerFinality: true });
      expect(policyOf(both)).to.deep.include({ evalScope: 'network-method-finality' });
      expect(both.rewrites.map((r) => r.path)).to.include('projects[0].networks[0].selectionPolicy');
      expect(policyOf(load({ evalPerMethod: true }))).to.deep.include({ evalScope: 'network-method' });
      expect(policyOf(load({ evalPerFinality: true, evalPerMethod: false }))).to.deep.include({ evalScope: 'network-finality' });
      expect(policyOf(load({ evalPerMethod: false }))).to.deep.include({ evalScope: 'network' });
      const wins = load({ evalScope: 'network', evalPerMethod: true });
      expect(policyOf(wins)).to.deep.include({ evalScope: 'network' });
      expect(policyOf(wins)).not.to.have.property('evalPerMethod');
    });

    it('refuses an unknown evalScope and a legacy switch that is not a boolean, naming the key', () => {
      const paths = (sp: Record<string, unknown>) => {
        try {
          load(sp);
        } catch (e) {
          expect(e).to.be.instanceOf(ConfigError);
          return (e as ConfigError).problems.map((x) => x.path);
        }
        return [];
      };
      expect(paths({ evalScope: 'network-upstream' })).to.include('projects[0].networks[0].selectionPolicy.evalScope');
      expect(paths({ evalPerMethod: 'yes' })).to.include('projects[0].networks[0].selectionPolicy.evalPerMethod');
    });
  });
});
