/**
 * Unit tests of the rate-limit auto-tuner (eRPC's `rateLimitAutoTune`): the rounding and bounds
 * of one adjustment, the per-method lazy windows on an injected clock (10-sample floor, the
 * error-rate threshold, increase only on a clean window), a rule's `maxCount` changing the
 * current window at once, the config (eRPC's defaults, implicit on with a budget, `enabled:
 * false`, refused values), and the composed pipeline of a started proxy whose upstream answers
 * 429s through an in-process stub: the budget goes down while it does, up when it stops, and
 * `svc_rate_limiter_budget_max_count` follows.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { ErrEndpointCapacityExceeded, ErrEndpointServerSideException, type SvcError } from '../../../core/wire/errors.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import type { Plugin } from '../../../core/plugin-api.ts';
import type { Proxy } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { createLogger } from '../../../lib/logger.ts';
import { failsafePlugin } from '../../../plugins/failsafe/index.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import {
  AUTO_TUNE_DEFAULTS,
  AutoTuner,
  Budget,
  MIN_SAMPLES,
  rateLimitPlugin,
  tunedCount,
  type Adjustment,
  type AutoTuneConfig,
} from '../../../plugins/rate-limit/index.ts';

const cfg = (c: Partial<AutoTuneConfig> = {}): AutoTuneConfig => ({ ...AUTO_TUNE_DEFAULTS, adjustmentPeriod: 1000, ...c });
const subject = (method = 'eth_call') => ({ method, clientAddress: '127.0.0.1', userId: undefined, networkId: 'evm:1' });

/** Takes `n` points; how many were admitted. */
async function take(b: Budget, n: number, method = 'eth_call'): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) if (await b.admit(subject(method))) ok++;
  return ok;
}

describe('rate-limit auto-tuner: one adjustment', () => {
  it("multiplies by the factor, a decrease rounded down and an increase rounded up (eRPC's defaults 0.95 / 1.05)", () => {
    expect(tunedCount(100, 'decrease', AUTO_TUNE_DEFAULTS)).to.equal(95);
    expect(tunedCount(10, 'decrease', AUTO_TUNE_DEFAULTS)).to.equal(9); // eRPC's ceil would keep 10
    expect(tunedCount(100, 'increase', AUTO_TUNE_DEFAULTS)).to.equal(105);
    expect(tunedCount(10, 'increase', AUTO_TUNE_DEFAULTS)).to.equal(11);
  });

  it('clamps to [minBudget, maxBudget] (0 = no bound) and never goes below 1', () => {
    expect(tunedCount(12, 'decrease', { ...AUTO_TUNE_DEFAULTS, decreaseFactor: 0.5, minBudget: 10 })).to.equal(10);
    expect(tunedCount(1, 'decrease', { ...AUTO_TUNE_DEFAULTS, minBudget: 0 })).to.equal(1);
    expect(tunedCount(99_999, 'increase', AUTO_TUNE_DEFAULTS)).to.equal(100_000);
    expect(tunedCount(200, 'increase', { ...AUTO_TUNE_DEFAULTS, maxBudget: 0 })).to.equal(210);
    expect(tunedCount(150, 'increase', { ...AUTO_TUNE_DEFAULTS, maxBudget: 120 })).to.equal(120);
  });
});

describe('rate-limit auto-tuner: windows per method (injected clock)', () => {
  let t: number;
  let budget: Budget;
  let adjustments: Adjustment[];
  const tuner = (c: Partial<AutoTuneConfig> = {}) =>
    new AutoTuner(
      (m) => budget.rulesFor(m),
      cfg(c),
      (a) => adjustments.push(a),
      () => t,
    );
  const feed = (tu: AutoTuner, ok: number, limited: number, method = 'eth_call') => {
    for (let i = 0; i < ok; i++) tu.recordSuccess(method);
    for (let i = 0; i < limited; i++) tu.recordError(method);
  };

  beforeEach(() => {
    t = 1_000_000;
    adjustments = [];
    budget = new Budget(
      'b',
      [
        { method: '*', maxCount: 100, period: 'second' },
        { method: 'eth_getLogs', maxCount: 40, period: 'minute' },
        { method: 'eth_*', maxCount: 0, period: 'second' },
      ],
      undefined,
    );
  });

  it('lowers every rule counting the method after a window above errorRateThreshold, and only those', () => {
    const tu = tuner();
    tu.recordSuccess('eth_getLogs'); // opens the window, not counted
    feed(tu, 8, 2, 'eth_getLogs');
    expect(adjustments).to.have.length(0);
    t += 1000;
    tu.recordSuccess('eth_getLogs'); // closes it: 9 + 2 = 11 answers, 2/11 rate-limited
    expect(adjustments.map((a) => `${a.rule.method}:${a.from}->${a.to}:${a.direction}:${a.samples}`)).to.deep.equal([
      '*:100->95:decrease:11',
      'eth_getLogs:40->38:decrease:11',
    ]);
    expect(budget.rules.map((r) => r.maxCount)).to.deep.equal([95, 38, 0]);
  });

  it('raises them after a window with no rate-limited answer; in between, or with fewer than 10 answers, nothing changes', () => {
    const tu = tuner();
    tu.recordSuccess('eth_call');
    feed(tu, MIN_SAMPLES - 2, 0);
    t += 1000;
    tu.recordSuccess('eth_call'); // 9 answers: too few; the window restarts anyway
    expect(adjustments).to.have.length(0);
    feed(tu, 19, 1); // 1/20 = 0.05: between 0 and 0.1
    t += 1000;
    tu.recordSuccess('eth_call');
    expect(adjustments).to.have.length(0);
    feed(tu, 15, 0);
    t += 999;
    tu.recordSuccess('eth_call');
    expect(adjustments).to.have.length(0);
    t += 1;
    tu.recordSuccess('eth_call');
    expect(adjustments.map((a) => `${a.rule.method}:${a.from}->${a.to}`)).to.deep.equal(['*:100->105']);
  });

  it('each method has its own window; a rule configured with maxCount 0 is never tuned', () => {
    const tu = tuner({ decreaseFactor: 0.5 });
    tu.recordError('eth_call');
    tu.recordError('eth_chainId');
    feed(tu, 0, 12, 'eth_call');
    t += 1000;
    tu.recordError('eth_chainId'); // its window holds 1 answer
    expect(adjustments).to.have.length(0);
    tu.recordError('eth_call');
    expect(adjustments.map((a) => `${a.rule.method}:${a.from}->${a.to}`)).to.deep.equal(['*:100->50']);
    expect(budget.rules[2]!.maxCount).to.equal(0);
  });

  it('a changed maxCount applies to the current window at once', async () => {
    const b = new Budget('one', [{ method: '*', maxCount: 5, period: 'minute' }], undefined);
    expect(await take(b, 5)).to.equal(5);
    expect(await take(b, 1)).to.equal(0);
    expect(b.rules[0]!.setMaxCount(8)).to.equal(true);
    expect(await take(b, 5)).to.equal(2); // counts 7 and 8 (the refused 6th counted too)
    expect(b.rules[0]!.setMaxCount(3)).to.equal(true);
    expect(await take(b, 1)).to.equal(0);
    expect(b.rules[0]!.setMaxCount(0)).to.equal(false);
    expect(b.rules[0]!.maxCount).to.equal(3);
  });
});

/** A plugin answering every upstream call from a per-upstream script (or throwing what it throws). */
function stub(scripts: Record<string, () => unknown>): Plugin {
  return {
    name: 'test:stub',
    apply(host) {
      host.hooks.upstream.tap({ name: 'test:stub', stage: -10_000 }, (_inner, u) => async (call) => {
        call.attempt.dialled = true;
        return new RpcResult((scripts[u.id] as () => unknown)());
      });
    },
  };
}

describe('rate-limit auto-tuner: config', () => {
  const boot = (upstream: Record<string, unknown>): Proxy =>
    createProxy({
      config: {
        logLevel: 'error',
        metrics: { enabled: false },
        rateLimiters: { budgets: [{ id: 'up', rules: [{ method: '*', maxCount: 100, period: 'second' }] }] },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
            upstreams: [{ id: 'u', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 }, ...upstream }],
          },
        ],
      },
      plugins: [rateLimitPlugin()],
      logger: createLogger('silent'),
    });

  it("eRPC's defaults: adjustmentPeriod 1m, errorRateThreshold 0.1, factors 0.95 / 1.05, budgets 0..100000, on", () => {
    expect(AUTO_TUNE_DEFAULTS).to.deep.equal({
      enabled: true,
      adjustmentPeriod: 60_000,
      errorRateThreshold: 0.1,
      increaseFactor: 1.05,
      decreaseFactor: 0.95,
      minBudget: 0,
      maxBudget: 100_000,
    });
    const p = boot({ rateLimitBudget: 'up', rateLimitAutoTune: { adjustmentPeriod: '30s', decreaseFactor: 0.7, minBudget: 1 } });
    expect(p.config.projects[0]!.upstreams[0]!.settings.rateLimitAutoTune).to.deep.equal({
      enabled: true,
      adjustmentPeriod: 30_000,
      errorRateThreshold: 0.1,
      increaseFactor: 1.05,
      decreaseFactor: 0.7,
      minBudget: 1,
      maxBudget: 100_000,
    });
  });

  it('refuses factors on the wrong side of 1, a threshold outside (0, 1] and negative budgets', () => {
    for (const bad of [
      { decreaseFactor: 1 },
      { decreaseFactor: 0 },
      { increaseFactor: 1 },
      { errorRateThreshold: 0 },
      { errorRateThreshold: 1.5 },
      { minBudget: -1 },
      { period: '1m' },
    ]) {
      expect(() => boot({ rateLimitBudget: 'up', rateLimitAutoTune: bad }), JSON.stringify(bad)).to.throw(/rateLimitAutoTune/);
    }
  });

  it('warns when an upstream with rateLimitAutoTune has no budget to tune', () => {
    expect(boot({ rateLimitAutoTune: { enabled: true } }).config.warnings.join('\n')).to.match(
      /upstreams\[0\]\.rateLimitAutoTune has no effect: the upstream has no rateLimitBudget/,
    );
    expect(boot({ rateLimitAutoTune: { enabled: false } }).config.warnings.join('\n')).not.to.match(/rateLimitAutoTune/);
  });
});

describe("rate-limit auto-tuner: the composed pipeline (fake Date: the tuner's windows and the budget's)", function () {
  this.timeout(20_000);
  const proxies: Proxy[] = [];
  let clock: ReturnType<typeof FakeTimers.install> | undefined;
  afterEach(async () => {
    clock?.uninstall();
    clock = undefined;
    for (const p of proxies.splice(0)) await p.close();
  });

  type Mode = { u1: 'ok' | '429' | '500' };
  /** `<upstream>:<outcome>`, `:undialled` when the attempt never reached the upstream. */
  const traceOf = (a: { upstreamId: string; outcome: string; dialled: boolean }) => `${a.upstreamId}:${a.outcome}${a.dialled ? '' : ':undialled'}`;

  async function start(upstream: Record<string, unknown>, mode: Mode) {
    const proxy = createProxy({
      config: {
        logLevel: 'error',
        rateLimiters: { budgets: [{ id: 'up', rules: [{ method: '*', maxCount: 1000, period: 'second' }] }] },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 }, failsafe: [] }],
            upstreams: [
              { id: 'u1', endpoint: 'http://127.0.0.1:9', evm: { chainId: 31337 }, failsafe: [], rateLimitBudget: 'up', ...upstream },
              { id: 'u2', endpoint: 'http://127.0.0.1:9', evm: { chainId: 31337 }, failsafe: [] },
            ],
          },
        ],
      },
      plugins: [
        forwardPlugin(),
        failsafePlugin(),
        rateLimitPlugin(),
        stub({
          u1: () => {
            if (mode.u1 === '429') throw new ErrEndpointCapacityExceeded('too many requests');
            if (mode.u1 === '500') throw new ErrEndpointServerSideException('boom');
            return '0x1';
          },
          u2: () => '0x2',
        }),
      ],
      logger: createLogger('silent'),
      port: 0,
      host: '127.0.0.1',
      metricsPort: 0,
      probeBackoffMs: 600_000,
    });
    await proxy.start();
    proxies.push(proxy);
    const net = proxy.projects.get('main')!.networks.get('evm:31337')!;
    /** One call; its answer and its trace (`<upstream>:<outcome>`). */
    const run = async (): Promise<{ result?: unknown; trace: string[]; error?: SvcError }> => {
      const { ctx, done } = proxy.internalContext(net, 'eth_call', [], 5000);
      ctx.internal = false;
      try {
        const r = await proxy.runCall(ctx);
        return { result: r.result, trace: ctx.record.attempts.map(traceOf) };
      } catch (e) {
        return { error: e as SvcError, trace: ctx.record.attempts.map(traceOf) };
      } finally {
        done();
      }
    };
    const runs = async (n: number) => {
      const out = [];
      for (let i = 0; i < n; i++) out.push(await run());
      return out;
    };
    const gauge = async () => {
      const m = await proxy.metrics.getSingleMetric('svc_rate_limiter_budget_max_count')!.get();
      return m.values.find((v) => v.labels.budget === 'up')?.value;
    };
    return { proxy, run, runs, gauge };
  }

  it('lowers the budget while the upstream answers 429s (calls served by the next upstream) down to minBudget, skips it over the budget, and raises it once the 429s stop', async () => {
    const mode: Mode = { u1: '429' };
    const s = await start({ rateLimitAutoTune: { adjustmentPeriod: '1s', decreaseFactor: 0.5, increaseFactor: 1.5, minBudget: 10 } }, mode);
    const c = (clock = FakeTimers.install({ toFake: ['Date'] }));
    expect(await s.gauge()).to.equal(1000);
    await s.run(); // opens the tuner's window
    const seen: number[] = [];
    for (let round = 0; round < 7; round++) {
      const answers = await s.runs(11);
      expect(answers.every((a) => a.result === '0x2' && a.trace.join() === 'u1:rate_limited,u2:success')).to.equal(true);
      c.tick(1000);
      await s.run(); // closes the window: 12 answers, all 429
      seen.push((await s.gauge())!);
    }
    expect(seen).to.deep.equal([500, 250, 125, 62, 31, 15, 10]);
    // A new one-second window of the budget: 10 attempts reach u1, the other 5 skip it undialled.
    c.tick(1000);
    const over = await s.runs(15);
    expect(over.map((a) => a.trace.join())).to.deep.equal([
      ...Array(10).fill('u1:rate_limited,u2:success'),
      ...Array(5).fill('u1:rate_limited:undialled,u2:success'),
    ]);
    // The 429s stop: a clean window raises the budget by increaseFactor.
    mode.u1 = 'ok';
    c.tick(1000);
    await s.runs(10); // the first closes the 429 window (no change at minBudget), 9 counted
    c.tick(1000);
    expect((await s.run()).result).to.equal('0x1'); // 10 clean answers: 10 x 1.5
    expect(await s.gauge()).to.equal(15);
  });

  it('other failures move nothing; enabled: false turns it off; a budget without rateLimitAutoTune is tuned (eRPC: implicit with a budget)', async () => {
    const failing = await start({ rateLimitAutoTune: { adjustmentPeriod: '1s' } }, { u1: '500' });
    const off = await start({ rateLimitAutoTune: { enabled: false } }, { u1: '429' });
    const implicit = await start({}, { u1: 'ok' });
    const c = (clock = FakeTimers.install({ toFake: ['Date'] }));
    for (const s of [failing, off, implicit]) await s.runs(12);
    c.tick(60_000);
    for (const s of [failing, off, implicit]) await s.run();
    expect(await failing.gauge()).to.equal(1000);
    expect(await off.gauge()).to.equal(1000);
    expect(await implicit.gauge()).to.equal(1050);
  });
});
