import { Writable } from 'node:stream';
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { healthPlugin } from '../../../plugins/health/index.ts';
import { pino } from 'pino';
import type { AttemptRecord } from '../../../core/pipeline/context.ts';
import { ConfigError } from '../../../config/load.ts';
import { ErrEndpointServerSideException, ErrUpstreamsExhausted } from '../../../core/wire/errors.ts';
import { createLogger, type Logger } from '../../../lib/logger.ts';
import type { Proxy } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { Network } from '../../../core/registry/project.ts';
import { Upstream } from '../../../core/registry/upstream.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import { selectPlugin } from '../../../plugins/select/index.ts';
import {
  DEFAULT_SCORE_WEIGHTS,
  defaultPolicy,
  evaluatePolicy,
  evaluateSelection,
  MAX_DECISIONS,
  PolicyError,
  Ring,
  readSelectionSettings,
  scoreOf,
  selectionDecisions,
  selectionHooks,
  selectionPlugin,
  SelectionPlugin,
  selectionState,
  UpstreamsView,
  type EvalFunc,
  type PolicyResult,
  type PolicyUpstreamInput,
} from '../../../plugins/selection/index.ts';

const DEAD = 'http://127.0.0.1:9';

/** Runs a policy that must be synchronous. */
function run(inputs: PolicyUpstreamInput[], opts: Parameters<typeof evaluatePolicy>[1] = {}): PolicyResult {
  const r = evaluatePolicy(inputs, opts);
  if (r instanceof Promise) throw new Error('expected a synchronous evaluation');
  return r;
}

function ups(...ids: string[]): PolicyUpstreamInput[] {
  return ids.map((id) => ({ id }));
}

function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

describe('selection plugin (spec §1.3, §3.1, §6)', () => {
  describe('default policy (evaluatePolicy)', () => {
    it('keeps config order when nothing is known', () => {
      const r = run(ups('a', 'b', 'c'));
      expect(r.order).to.deep.equal(['a', 'b', 'c']);
      expect(r.excluded).to.deep.equal({});
      expect(r.scores).to.deep.equal({ a: 0, b: 0, c: 0 });
      expect(r.cordonsRemoved).to.equal(true);
    });

    it('removeCordoned: step removeCordoned, reason cordoned', () => {
      const r = run([{ id: 'a', cordoned: true }, { id: 'b' }, { id: 'c', metrics: { cordoned: true } }]);
      expect(r.order).to.deep.equal(['b']);
      expect(r.excluded).to.deep.equal({ a: 'cordoned', c: 'cordoned' });
      expect(r.decisions).to.deep.include({ step: 'removeCordoned', upstream: 'a', reason: 'cordoned' });
      expect(r.decisions).to.deep.include({ step: 'removeCordoned', upstream: 'c', reason: 'cordoned' });
    });

    it('excludes an error rate above 0.7 only with more than 10 samples', () => {
      const r = run([
        { id: 'many', metrics: { requests: 11, errorRate: 0.8 } },
        { id: 'few', metrics: { requests: 10, errorRate: 1 } },
        { id: 'edge', metrics: { requests: 100, errorRate: 0.7 } },
        { id: 'ok' },
      ]);
      expect(r.excluded).to.have.keys(['many']);
      expect(r.excluded.many).to.match(/^errorRate 0\.80 > 0\.7 over 11 requests$/);
      expect(r.decisions.find((d) => d.upstream === 'many')?.step).to.equal('excludeErrorRate');
      expect(r.order).to.have.members(['few', 'edge', 'ok']);
    });

    it('excludes a throttle rate above 0.4 (with more than 10 samples)', () => {
      const r = run([
        { id: 'throttled', metrics: { requests: 20, throttleRate: 0.45 } },
        { id: 'fewThrottled', metrics: { requests: 5, throttleRate: 1 } },
        { id: 'ok', metrics: { requests: 20, throttleRate: 0.4 } },
      ]);
      expect(r.excluded).to.have.keys(['throttled']);
      expect(r.decisions.find((d) => d.upstream === 'throttled')?.step).to.equal('excludeThrottled');
    });

    it('excludes a p70 latency above 10 s', () => {
      const r = run([{ id: 'slow', metrics: { p70: 10.5, requests: 1 } }, { id: 'edge', metrics: { p70: 10 } }, { id: 'fast' }]);
      expect(r.excluded).to.deep.equal({ slow: 'p70 10.50s > 10s' });
      expect(r.decisions.find((d) => d.upstream === 'slow')?.step).to.equal('excludeSlow');
    });

    it('excludes a syncing upstream', () => {
      const r = run([{ id: 'a', syncing: true }, { id: 'b' }]);
      expect(r.order).to.deep.equal(['b']);
      expect(r.excluded).to.deep.equal({ a: 'syncing' });
      expect(r.decisions).to.deep.include({ step: 'excludeSyncing', upstream: 'a', reason: 'syncing' });
    });

    it('when the exclusions leave nothing, uses every uncordoned upstream', () => {
      const r = run([
        { id: 'a', syncing: true },
        { id: 'b', metrics: { requests: 50, errorRate: 0.9 } },
        { id: 'c', cordoned: true },
      ]);
      expect(r.order).to.deep.equal(['a', 'b']);
      expect(r.excluded).to.deep.equal({ c: 'cordoned' });
      expect(r.decisions.map((d) => d.step)).to.include('useAllUncordoned');
    });

    it('when every upstream is cordoned, the order is empty', () => {
      const r = run([
        { id: 'a', cordoned: true },
        { id: 'b', cordoned: true },
      ]);
      expect(r.order).to.deep.equal([]);
      expect(r.excluded).to.deep.equal({ a: 'cordoned', b: 'cordoned' });
    });

    it('leaves out tier:fallback while another survives, and uses it when it is the only one', () => {
      const both = run([
        { id: 'fb', tags: ['tier:fallback'] },
        { id: 'main', tags: ['tier:primary'] },
      ]);
      expect(both.order).to.deep.equal(['main']);
      expect(both.excluded).to.deep.equal({ fb: 'tier:fallback' });
      expect(both.decisions).to.deep.include({ step: 'preferNonFallback', upstream: 'fb', reason: 'tier:fallback' });
      const mainDown = run([
        { id: 'fb', tags: ['tier:fallback'] },
        { id: 'main', cordoned: true },
      ]);
      expect(mainDown.order).to.deep.equal(['fb']);
      const mainSick = run([
        { id: 'fb', tags: ['tier:fallback'] },
        { id: 'main', syncing: true },
      ]);
      expect(mainSick.order).to.deep.equal(['fb']);
      const allFallback = run([
        { id: 'f1', tags: ['tier:fallback'] },
        { id: 'f2', tags: ['tier:fallback'] },
      ]);
      expect(allFallback.order).to.deep.equal(['f1', 'f2']);
    });

    it('demoteDown: an upstream no connection reached goes last, whatever its score; a timed-out one stays; all unreachable keeps the order', () => {
      const r = run([
        {
          id: 'dead',
          metrics: { down: true, unreachable: true, downReason: 'ErrEndpointServerSideException: transport error talking to upstream dead: ECONNREFUSED' },
        },
        { id: 'slow', metrics: { p70: 2 } },
        { id: 'frozen', metrics: { down: true, downReason: 'ErrEndpointRequestTimeout: no answer' } },
        { id: 'fast' },
      ]);
      expect(r.order).to.deep.equal(['frozen', 'fast', 'slow', 'dead']);
      expect(r.excluded).to.deep.equal({});
      expect(r.decisions).to.deep.include({
        step: 'demoteDown',
        upstream: 'dead',
        reason: 'down: ErrEndpointServerSideException: transport error talking to upstream dead: ECONNREFUSED',
      });
      expect(
        run([
          { id: 'x', metrics: { down: true, unreachable: true } },
          { id: 'y', metrics: { down: true, unreachable: true } },
        ]).order,
      ).to.deep.equal(['x', 'y']);
    });

    it('orders by score, lower first: 4*errorRate + 15*p70 + 4*throttleRate + 1*blockHeadLag', () => {
      const inputs: PolicyUpstreamInput[] = [
        { id: 'laggy', metrics: { blockHeadLag: 3 } }, // 3
        { id: 'slowish', metrics: { p70: 0.1 } }, // 1.5
        { id: 'erring', metrics: { requests: 20, errorRate: 0.5 } }, // 2
        { id: 'clean' }, // 0
        { id: 'throttly', metrics: { requests: 20, throttleRate: 0.25 } }, // 1
      ];
      const r = run(inputs);
      expect(r.order).to.deep.equal(['clean', 'throttly', 'slowish', 'erring', 'laggy']);
      expect(r.scores.laggy).to.equal(3);
      expect(r.scores.slowish).to.be.closeTo(1.5, 1e-9);
      expect(scoreOf({ errorRate: 0.5, p70: 0.1, throttleRate: 0.25, blockHeadLag: 3 })).to.be.closeTo(2 + 1.5 + 1 + 3, 1e-9);
      expect(DEFAULT_SCORE_WEIGHTS).to.deep.equal({ errorRate: 4, respLatency: 15, throttledRate: 4, blockHeadLag: 1, finalizationLag: 0, misbehaviors: 2 });
    });

    it('score weights are configurable', () => {
      const inputs: PolicyUpstreamInput[] = [
        { id: 'laggy', metrics: { blockHeadLag: 3 } },
        { id: 'slowish', metrics: { p70: 0.1 } },
      ];
      expect(run(inputs).order).to.deep.equal(['slowish', 'laggy']);
      const r = run(inputs, { weights: { blockHeadLag: 0.1, respLatency: 100 } });
      expect(r.order).to.deep.equal(['laggy', 'slowish']);
      expect(r.scores.slowish).to.be.closeTo(10, 1e-9);
    });
  });

  describe('custom evalFunc', () => {
    const inputs: PolicyUpstreamInput[] = [{ id: 'a' }, { id: 'b', cordoned: true }, { id: 'c' }];

    it('a sync function replaces the policy; without removeCordoned cordoned upstreams stay', () => {
      const r = run(inputs, { evalFunc: (u) => [...u].reverse() });
      expect(r.order).to.deep.equal(['c', 'b', 'a']);
      expect(r.cordonsRemoved).to.equal(false);
    });

    it('gets views whose helpers survive filter/slice; removeCordoned is tracked', () => {
      let isView = false;
      const r = run(inputs, {
        evalFunc: (u) => {
          const f = u.filter((x) => x.id !== 'c');
          isView = f instanceof UpstreamsView && u.slice(0) instanceof UpstreamsView;
          return f.removeCordoned();
        },
      });
      expect(isView).to.equal(true);
      expect(r.order).to.deep.equal(['a']);
      expect(r.cordonsRemoved).to.equal(true);
      expect(r.excluded).to.deep.equal({ b: 'cordoned', c: 'dropped by evalFunc' });
      expect(r.decisions).to.deep.include({ step: 'evalFunc', upstream: 'c', reason: 'dropped by evalFunc' });
    });

    it('receives metrics and a context; may return ids; may compose the default policy', () => {
      let seen: unknown;
      const r = run([{ id: 'a', vendor: 'v', tags: ['x:y'], metrics: { requests: 3, p70: 0.2 } }, { id: 'b' }], {
        project: 'main',
        network: 'evm:1',
        evalFunc: (u, ctx) => {
          seen = { project: ctx.project, network: ctx.network, method: ctx.method, first: u[0], score: ctx.score(u[0]!) };
          return ['b', 'a', 'zz', 'b'] as unknown as readonly never[];
        },
      });
      expect(r.order).to.deep.equal(['b', 'a']);
      expect(seen).to.deep.include({ project: 'main', network: 'evm:1', method: '*' });
      expect((seen as { first: { vendor: string; tags: string[]; metrics: { requests: number } } }).first).to.deep.include({
        id: 'a',
        vendor: 'v',
        tags: ['x:y'],
        syncing: false,
        cordoned: false,
      });
      expect((seen as { score: number }).score).to.be.closeTo(3, 1e-9);
      const composed = run(inputs, {
        evalFunc: (u, ctx) =>
          ctx.defaultPolicy(
            u.exclude((x) => x.id === 'a', 'not today', 'custom'),
            ctx,
          ),
      });
      expect(composed.order).to.deep.equal(['c']);
      expect(composed.excluded).to.deep.equal({ a: 'not today', b: 'cordoned' });
    });

    it('an async function is awaited', async () => {
      const r = await evaluatePolicy(inputs, { evalFunc: async (u) => u.removeCordoned().sortByScore().reverse() });
      expect(r.order).to.deep.equal(['c', 'a']);
      expect(r.cordonsRemoved).to.equal(true);
    });

    it('an async function slower than evalTimeout rejects with a timeout', async () => {
      const err = await Promise.resolve(evaluatePolicy(inputs, { evalTimeoutMs: 20, evalFunc: () => new Promise(() => undefined) })).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(PolicyError);
      expect((err as PolicyError).kind).to.equal('timeout');
    });

    it('a sync function that overruns evalTimeout is measured and fails with overrun', () => {
      expect(() =>
        evaluatePolicy(inputs, {
          evalTimeoutMs: 5,
          evalFunc: (u) => {
            busyWait(25);
            return u;
          },
        }),
      )
        .to.throw(PolicyError, /more than evalTimeout 5 ms/)
        .with.property('kind', 'overrun');
    });

    it('a throwing, rejecting or non-array function fails with a PolicyError', async () => {
      expect(() =>
        evaluatePolicy(inputs, {
          evalFunc: () => {
            throw new Error('boom');
          },
        }),
      ).to.throw(PolicyError, /boom/);
      expect(() => evaluatePolicy(inputs, { evalFunc: (() => 42) as unknown as EvalFunc })).to.throw(PolicyError, /not an array/);
      const rejected = await Promise.resolve(evaluatePolicy(inputs, { evalFunc: async () => Promise.reject(new Error('nope')) })).catch((e: unknown) => e);
      expect(rejected).to.be.instanceOf(PolicyError).with.property('kind', 'error');
    });

    it('the default policy itself is never bounded by evalTimeout', () => {
      expect(run(ups('a'), { evalFunc: defaultPolicy, evalTimeoutMs: 0 }).order).to.deep.equal(['a']);
    });
  });

  describe('settings and decisions ring', () => {
    it('Ring keeps the last N items, oldest first', () => {
      const ring = new Ring<number>(MAX_DECISIONS);
      for (let i = 0; i < 250; i++) ring.push(i);
      const items = ring.toArray();
      expect(MAX_DECISIONS).to.equal(100);
      expect(items).to.have.length(100);
      expect(items[0]).to.equal(150);
      expect(items[99]).to.equal(249);
      const small = new Ring<string>(3);
      small.push('a');
      small.push('b');
      expect(small.toArray()).to.deep.equal(['a', 'b']);
      expect(() => new Ring(0)).to.throw(RangeError);
    });

    it('readSelectionSettings defaults, converts and names bad paths', () => {
      expect(readSelectionSettings(undefined, 'x')).to.deep.equal({
        evalIntervalMs: 15_000,
        evalTimeoutMs: 100,
        weights: { ...DEFAULT_SCORE_WEIGHTS },
        evalScope: 'network',
        evalFunc: undefined,
        evalFuncSource: false,
      });
      const s = readSelectionSettings({ evalInterval: '2s', evalTimeout: 50, scoreWeights: { errorRate: 1 } }, 'x');
      expect(s).to.deep.include({ evalIntervalMs: 2000, evalTimeoutMs: 50 });
      expect(s.weights.errorRate).to.equal(1);
      let err: unknown;
      try {
        readSelectionSettings({ evalFunc: 42, evalInterval: 0 }, 'projects[0].networks[1].selectionPolicy');
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(ConfigError);
      expect((err as ConfigError).problems.map((p) => p.path)).to.have.members([
        'projects[0].networks[1].selectionPolicy.evalFunc',
        'projects[0].networks[1].selectionPolicy.evalInterval',
      ]);
    });
  });

  describe('in a proxy', () => {
    let proxy: Proxy | undefined;
    let clock: FakeTimers.Clock | undefined;

    afterEach(async () => {
      clock?.uninstall();
      clock = undefined;
      await proxy?.close();
      proxy = undefined;
    });

    interface Opts {
      network?: Record<string, unknown>;
      networkDefaults?: Record<string, unknown>;
      upstreams?: Array<Record<string, unknown>>;
      logger?: Logger;
      fake?: boolean;
    }

    async function start(o: Opts = {}): Promise<{ proxy: Proxy; network: Network }> {
      if (o.fake) clock = FakeTimers.install({ toFake: ['setInterval', 'clearInterval', 'Date'] });
      proxy = createProxy({
        config: {
          logLevel: 'error',
          projects: [
            {
              id: 'main',
              ...(o.networkDefaults ? { networkDefaults: o.networkDefaults } : {}),
              networks: [{ architecture: 'evm', evm: { chainId: 1 }, ...o.network }],
              upstreams: o.upstreams ?? ['a', 'b', 'c'].map((id) => ({ id, endpoint: DEAD, evm: { chainId: 1 } })),
            },
          ],
        },
        plugins: [healthPlugin(), selectionPlugin(), selectPlugin(), forwardPlugin()],
        logger: o.logger ?? createLogger('silent'),
        port: 0,
        host: '127.0.0.1',
        metricsPort: 0,
      });
      await proxy.start();
      const network = proxy.projects.get('main')!.networks.get('evm:1')!;
      return { proxy, network };
    }

    function select(p: Proxy, network: Network, method = 'eth_call'): string[] {
      const { ctx, done } = p.internalContext(network, method, [], 1000);
      try {
        return p.hooks.select.call(network.upstreams.slice(), ctx).map((u) => u.id);
      } finally {
        done();
      }
    }

    function failures(p: Proxy, upstream: string, n: number): void {
      const health = p.projects.get('main')!.health;
      for (let i = 0; i < n; i++) {
        const a: AttemptRecord = {
          upstreamId: upstream,
          vendor: 'unknown',
          method: 'eth_call',
          projectId: 'main',
          networkId: 'evm:1',
          reason: 'primary',
          outcome: 'error',
          startedAt: 0,
          durationMs: 5,
          won: false,
          dialled: true,
          error: new ErrEndpointServerSideException('down'),
          finality: 'unknown',
          internal: false,
        };
        health.record(a);
      }
    }

    async function gauge(p: Proxy, name: string): Promise<Array<{ labels: Record<string, string | number>; value: number }>> {
      const m = p.metrics.getSingleMetric(name);
      if (!m) throw new Error(`no metric ${name}`);
      return (await m.get()).values as Array<{ labels: Record<string, string | number>; value: number }>;
    }

    function captureLogger(lines: string[]): Logger {
      const stream = new Writable({
        write(chunk: Buffer, _enc, cb) {
          lines.push(chunk.toString());
          cb();
        },
      });
      return pino({ level: 'warn' }, stream);
    }

    it('evaluates at network creation and when upstreams join; state and decisions are exposed', async () => {
      const { proxy: p } = await start();
      expect(selectionState(p, 'main', 'evm:1')).to.deep.include({
        order: ['a', 'b', 'c'],
        excluded: {},
        honoursCordons: true,
        custom: false,
        evalIntervalMs: 15_000,
        evalTimeoutMs: 100,
      });
      expect(selectionState(p, 'main', 'evm:1')?.healthScores).to.deep.equal({ a: 0, b: 0, c: 0 });
      // The gauge's values ascend along the order handed out, ties broken in that order.
      expect(selectionState(p, 'main', 'evm:1')?.scores).to.deep.equal({ a: 0, b: 0.001, c: 0.002 });
      p.addUpstreamFromConfig(p.projects.get('main')!, { id: 'd', endpoint: DEAD, evm: { chainId: 1 } });
      expect(selectionState(p, 'main', 'evm:1')?.order).to.deep.equal(['a', 'b', 'c', 'd']);
      const orders = selectionDecisions(p, 'main', 'evm:1')
        .filter((d) => d.step === 'order')
        .map((d) => d.reason);
      expect(orders.at(-1)).to.equal('a > b > c > d');
      expect(selectionDecisions(p, 'main', 'evm:404')).to.deep.equal([]);
      expect(selectionState(p, 'nope', 'evm:1')).to.equal(undefined);
      expect(SelectionPlugin.getState(p, 'main', 'evm:1')?.order).to.have.length(4);
    });

    it('a cordoned upstream gets no traffic at once, before the next tick; the tick then records it', async () => {
      const { proxy: p, network } = await start({ fake: true });
      expect(select(p, network)).to.deep.equal(['a', 'b', 'c']);
      p.projects.get('main')!.health.cordon('b', '*', 'test');
      expect(select(p, network)).to.deep.equal(['a', 'c']);
      expect(selectionState(p, 'main', 'evm:1')?.order).to.deep.equal(['a', 'b', 'c']); // list refreshed only at the tick
      clock!.tick(15_000);
      expect(selectionState(p, 'main', 'evm:1')?.order).to.deep.equal(['a', 'c']);
      expect(selectionState(p, 'main', 'evm:1')?.excluded).to.deep.equal({ b: 'cordoned' });
      const d = selectionDecisions(p, 'main', 'evm:1').find((x) => x.step === 'removeCordoned');
      expect(d).to.deep.include({ upstream: 'b', reason: 'cordoned' });
      expect(d?.time).to.be.a('number');
    });

    it('a method-scoped cordon applies to that method only', async () => {
      const { proxy: p, network } = await start();
      p.projects.get('main')!.health.cordon('a', 'eth_call', 'test');
      expect(select(p, network, 'eth_call')).to.deep.equal(['b', 'c']);
      expect(select(p, network, 'eth_getBalance')).to.deep.equal(['a', 'b', 'c']);
    });

    it('all cordoned: ErrUpstreamsExhausted naming the cordons', async () => {
      const { proxy: p, network } = await start();
      const health = p.projects.get('main')!.health;
      for (const id of ['a', 'b', 'c']) health.cordon(id, '*', 'maintenance');
      expect(() => select(p, network)).to.throw(ErrUpstreamsExhausted, /every upstream of evm:1 is cordoned for eth_call: a \(maintenance\)/);
      await evaluateSelection(p, 'main', 'evm:1');
      expect(selectionState(p, 'main', 'evm:1')?.order).to.deep.equal([]);
      expect(() => select(p, network)).to.throw(ErrUpstreamsExhausted, /cordoned/);
      // Uncordoning one is honoured at once too (the default policy's last resort).
      health.uncordon('b', '*');
      expect(select(p, network)).to.deep.equal(['b']);
    });

    it('unhealthy upstreams are excluded at the tick; with the rest cordoned, the uncordoned ones serve at once', async () => {
      const { proxy: p, network } = await start();
      failures(p, 'a', 20);
      await evaluateSelection(p, 'main', 'evm:1');
      expect(select(p, network)).to.deep.equal(['b', 'c']);
      expect(selectionState(p, 'main', 'evm:1')?.excluded.a).to.match(/^errorRate 1\.00 > 0\.7/);
      const health = p.projects.get('main')!.health;
      health.cordon('b', '*', 'x');
      health.cordon('c', '*', 'x');
      expect(select(p, network)).to.deep.equal(['a']);
    });

    it('an upstream that joined since the last evaluation is served last, not hidden', async () => {
      const { proxy: p, network } = await start();
      const project = p.projects.get('main')!;
      const u = new Upstream(
        { id: 'late', endpoint: DEAD, vendor: 'unknown', chainId: 1, ignoreMethods: [], allowMethods: [], tags: [], headers: {}, settings: {} },
        'main',
      );
      project.addUpstream(u);
      network.upstreams.unshift(u); // joins without the hook, as if between ticks
      expect(select(p, network)).to.deep.equal(['a', 'b', 'c', 'late']);
      await u.close();
    });

    it('svc_selection_excluded_seconds climbs each tick while excluded, 0 once included; svc_selection_score has method "*"', async () => {
      const { proxy: p } = await start({ fake: true, network: { selectionPolicy: { evalInterval: '10s' } } });
      p.projects.get('main')!.health.cordon('b', '*', 'test');
      clock!.tick(10_000);
      const at = async () => (await gauge(p, 'svc_selection_excluded_seconds')).find((v) => v.labels.upstream === 'b')?.value;
      expect(await at()).to.equal(0);
      clock!.tick(10_000);
      expect(await at()).to.equal(10);
      clock!.tick(10_000);
      expect(await at()).to.equal(20);
      p.projects.get('main')!.health.uncordon('b', '*');
      clock!.tick(10_000);
      expect(await at()).to.equal(0);
      expect(selectionDecisions(p, 'main', 'evm:1').map((d) => d.step)).to.include('include');
      failures(p, 'c', 4);
      clock!.tick(10_000);
      const scores = await gauge(p, 'svc_selection_score');
      expect(scores.find((v) => v.labels.upstream === 'c')).to.deep.include({
        labels: { project: 'main', network: 'evm:1', method: '*', upstream: 'c' },
        value: 4,
      });
      expect(scores.find((v) => v.labels.upstream === 'a')?.value).to.equal(0);
    });

    it('no test waits for a real tick: the default interval is 15 s on an unref timer, cleared on shutdown', async () => {
      const { proxy: p } = await start({ fake: true });
      expect(clock!.countTimers()).to.equal(1);
      await p.close();
      expect(clock!.countTimers()).to.equal(0);
    });

    it('evalInterval is inherited from networkDefaults', async () => {
      const { proxy: p } = await start({ networkDefaults: { selectionPolicy: { evalInterval: '3s', scoreWeights: { blockHeadLag: 2 } } } });
      expect(selectionState(p, 'main', 'evm:1')).to.deep.include({ evalIntervalMs: 3000 });
      expect(selectionState(p, 'main', 'evm:1')?.weights).to.deep.equal({
        errorRate: 4,
        respLatency: 15,
        throttledRate: 4,
        blockHeadLag: 2,
        finalizationLag: 0,
        misbehaviors: 2,
      });
    });

    it('a custom selection function from the config takes effect; without removeCordoned cordoned upstreams stay in rotation', async () => {
      const evalFunc: EvalFunc = (u) => [...u].reverse();
      const { proxy: p, network } = await start({ network: { selectionPolicy: { evalFunc } } });
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      p.projects.get('main')!.health.cordon('c', '*', 'test');
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      await evaluateSelection(p, 'main', 'evm:1');
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      expect(selectionState(p, 'main', 'evm:1')).to.deep.include({ custom: true, honoursCordons: false });
    });

    it('a custom function that calls removeCordoned honours a new cordon at once', async () => {
      const { proxy: p, network } = await start({ network: { selectionPolicy: { evalFunc: ((u) => u.removeCordoned().reverse()) as EvalFunc } } });
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      p.projects.get('main')!.health.cordon('c', '*', 'test');
      expect(select(p, network)).to.deep.equal(['b', 'a']);
    });

    it('an async custom function takes effect once it settles', async () => {
      const { proxy: p, network } = await start({
        network: { selectionPolicy: { evalFunc: (async (u) => u.removeCordoned().filter((x) => x.id !== 'a')) as EvalFunc } },
      });
      await evaluateSelection(p, 'main', 'evm:1');
      expect(select(p, network)).to.deep.equal(['b', 'c']);
      expect(selectionState(p, 'main', 'evm:1')?.excluded).to.deep.equal({ a: 'dropped by evalFunc' });
    });

    it('an async function overrunning evalTimeout keeps the previous order and warns', async () => {
      let hang = false;
      const evalFunc: EvalFunc = (u) => (hang ? new Promise(() => undefined) : Promise.resolve([...u].reverse()));
      const lines: string[] = [];
      const { proxy: p, network } = await start({ logger: captureLogger(lines), network: { selectionPolicy: { evalFunc, evalTimeout: '20ms' } } });
      await evaluateSelection(p, 'main', 'evm:1');
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      hang = true;
      await evaluateSelection(p, 'main', 'evm:1');
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      expect(lines.join('')).to.match(/timeout/);
      const last = selectionDecisions(p, 'main', 'evm:1').at(-1);
      expect(last).to.deep.include({ step: 'evalFunc', upstream: '*' });
      expect(last?.reason).to.match(/^timeout: evalFunc did not settle within evalTimeout 20 ms; previous order kept$/);
    });

    it('a sync function overrunning evalTimeout is measured, warned about, and its result dropped', async () => {
      let slow = false;
      const evalFunc: EvalFunc = (u) => {
        if (!slow) return [...u].reverse();
        busyWait(30);
        return u;
      };
      const lines: string[] = [];
      const { proxy: p, network } = await start({ logger: captureLogger(lines), network: { selectionPolicy: { evalFunc, evalTimeout: '5ms' } } });
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      slow = true;
      await evaluateSelection(p, 'main', 'evm:1');
      expect(select(p, network)).to.deep.equal(['c', 'b', 'a']);
      expect(lines.join('')).to.match(/overrun/);
    });

    it('a throwing function keeps the previous order; ticks never throw', async () => {
      let fail = false;
      const evalFunc: EvalFunc = (u) => {
        if (fail) throw new Error('kaput');
        return u.filter((x) => x.id !== 'b');
      };
      const { proxy: p, network } = await start({ fake: true, network: { selectionPolicy: { evalFunc } } });
      expect(select(p, network)).to.deep.equal(['a', 'c']);
      fail = true;
      expect(() => clock!.tick(15_000)).to.not.throw();
      expect(select(p, network)).to.deep.equal(['a', 'c']);
      expect(selectionDecisions(p, 'main', 'evm:1').at(-1)?.reason).to.match(/^error: evalFunc threw: kaput/);
    });

    it('an evalFunc neither a function nor working JavaScript source fails at start-up naming its config path', () => {
      let err: unknown;
      try {
        createProxy({
          config: {
            projects: [
              { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 }, selectionPolicy: { evalFunc: 'upstreams => upstreams.nope()' } }] },
            ],
          },
          plugins: [healthPlugin(), selectionPlugin(), selectPlugin(), forwardPlugin()],
          logger: createLogger('silent'),
        });
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(ConfigError);
      expect((err as Error).message).to.include('projects[0].networks[0].selectionPolicy.evalFunc');
    });

    it('another plugin can install a policy through selectionHooks(proxy).policy', async () => {
      proxy = createProxy({
        config: {
          logLevel: 'error',
          projects: [
            {
              id: 'main',
              networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
              upstreams: ['a', 'b'].map((id) => ({ id, endpoint: DEAD, evm: { chainId: 1 } })),
            },
          ],
        },
        plugins: [
          healthPlugin(),
          selectionPlugin(),
          { name: 'my-policy', apply: (px) => selectionHooks(px).policy.tap('my-policy', () => (u) => u.removeCordoned().reverse()) },
          selectPlugin(),
          forwardPlugin(),
        ],
        logger: createLogger('silent'),
        port: 0,
        host: '127.0.0.1',
        metricsPort: 0,
      });
      await proxy.start();
      expect(selectionState(proxy, 'main', 'evm:1')).to.deep.include({ order: ['b', 'a'], custom: true, honoursCordons: true });
    });

    it('keeps the last 100 decisions per network', async () => {
      const { proxy: p } = await start();
      const health = p.projects.get('main')!.health;
      for (let i = 0; i < 60; i++) {
        health.cordon('b', '*', 'flap');
        await evaluateSelection(p, 'main', 'evm:1');
        health.uncordon('b', '*');
        await evaluateSelection(p, 'main', 'evm:1');
      }
      const ds = selectionDecisions(p, 'main', 'evm:1');
      expect(ds).to.have.length(100);
      expect(ds.at(-1)).to.deep.include({ step: 'order', upstream: '*', reason: 'a > b > c' });
      expect(ds.every((d) => typeof d.time === 'number' && d.step && d.upstream && d.reason)).to.equal(true);
    });
  });
});
