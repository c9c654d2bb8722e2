/**
 * Unit tests of the failsafe plugin's adaptive policies (eRPC's quantile-based timeouts and
 * hedges, `retry.emptyResultDelay`): the pure resolution rules (static, warm, cold, auto floor,
 * clamps), the health tracker's latency quantile over several upstreams, the quantile memo, the
 * flattening of eRPC's object forms, the start-up checks, and the composed pipeline of a started
 * proxy whose upstream transports are in-process stubs, on fake timers (deadlines, hedge
 * delays and data-unavailable waits measured on the fake clock).
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';

type InstalledClock = ReturnType<typeof FakeTimers.install>;
import type { AttemptRecord, CallContext } from '../../../core/context.ts';
import { NO_CHAIN_STATE } from '../../../core/chain-state.ts';
import { ErrCancelled, ErrEndpointMissingData, ErrEndpointRequestTimeout, ErrEndpointServerSideException, ErrFailsafeTimeoutExceeded, ErrUpstreamsExhausted, type SvcError } from '../../../core/errors.ts';
import { CHAIN_STATE_SERVICE, type Plugin } from '../../../core/plugin-api.ts';
import { createProxy, type Proxy } from '../../../core/proxy.ts';
import { NETWORK_HEDGES, NETWORK_RETRIES } from '../../../core/shared-slots.ts';
import { healthOutcome } from '../../../core/blame.ts';
import { HealthTracker } from '../../../lib/health-window.ts';
import { createLogger } from '../../../lib/logger.ts';
import { RpcResult } from '../../../core/jsonrpc.ts';
import { evmRetriesPlugin } from '../../../plugins/evm-retries/index.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import { dataUnavailableDelay, failsafePlugin, flattenAdaptiveForms, hedgeSpec, isDataUnavailable, LatencyQuantiles, QUANTILE_MEMO_MS, resolveAdaptive, timeoutSpec, type FailsafeEntry } from '../../../plugins/failsafe/index.ts';
import { startStubProxy, type Script, type StubProxy } from '../../helpers/stub-proxy.ts';

/** A successful attempt of `ms` on an upstream, as the health plugin records it. */
function sample(upstreamId: string, method: string, ms: number): AttemptRecord {
  return { upstreamId, vendor: 'unknown', method, projectId: 'main', networkId: 'evm:31337', reason: 'primary', outcome: 'success', startedAt: 0, durationMs: ms, won: true, dialled: true, finality: 'unknown', internal: false };
}

/** Feeds `n` samples of `ms` into a project's health window. */
function warm(proxy: Proxy, upstreamId: string, method: string, ms: number, n = 20): void {
  const health = proxy.projects.get('main')!.health;
  for (let i = 0; i < n; i++) health.record(sample(upstreamId, method, ms));
}

/** A script that answers `value` after `ms` (on the fake clock), or never with `'hang'`. */
function after(ms: number | 'hang', value: unknown = '0x1'): Script {
  return () => (ms === 'hang' ? new Promise(() => undefined) : new Promise((r) => setTimeout(() => r(value), ms)));
}

/**
 * Like the helpers' stub transport, but an attempt whose signal aborts (a deadline, a lost hedge
 * leg) fails at once with its reason, as the real transport's socket does.
 */
function abortableStub(scripts: Record<string, Script>): Plugin {
  return {
    name: 'test:abortable-stub',
    apply(host) {
      // Outside the helpers' stub transport (-10 000), which it replaces: it never calls inner.
      host.hooks.upstream.tap({ name: 'test:abortable-stub', stage: -9_000 }, (_inner, u) => (call) => {
        call.attempt.dialled = true;
        const signal = call.signal;
        return new Promise<RpcResult>((resolve, reject) => {
          if (signal.aborted) return reject(signal.reason);
          const onAbort = () => reject(signal.reason);
          signal.addEventListener('abort', onAbort, { once: true });
          Promise.resolve((scripts[u.id] as Script)(call.method, call.params)).then(
            (v) => {
              signal.removeEventListener('abort', onAbort);
              resolve(v instanceof RpcResult ? v : new RpcResult(v));
            },
            (e: unknown) => reject(e),
          );
        });
      });
    },
  };
}

/** Runs a call and advances the fake clock in 5 ms steps until it settles; returns when (ms) and how. */
async function timed<T extends { error?: SvcError }>(clock: InstalledClock, run: () => Promise<T>, limitMs = 4000): Promise<T & { ms: number }> {
  const t0 = clock.now;
  let out: T | undefined;
  void run().then((r) => (out = r));
  while (!out && clock.now - t0 < limitMs) await clock.tickAsync(5);
  if (!out) throw new Error(`the call did not settle within ${limitMs} ms of fake time`);
  return { ...out, ms: clock.now - t0 };
}

describe('failsafe adaptive: resolution rules (eRPC AdaptiveDuration)', () => {
  it('a static spec is its base exactly, min and max ignored', () => {
    expect(resolveAdaptive({ base: 5, quantile: 0, min: 100, max: 1000 }, 700)).to.equal(5);
  });

  it('warm: base + the quantile latency, clamped to [min, max]', () => {
    const spec = { base: 100, quantile: 0.9, min: 150, max: 1000 };
    expect(resolveAdaptive(spec, 300)).to.equal(400);
    expect(resolveAdaptive(spec, 20)).to.equal(150);
    expect(resolveAdaptive(spec, 5000)).to.equal(1000);
  });

  it('cold (no sample): the latency part is min, so base + min, clamped', () => {
    expect(resolveAdaptive({ base: 100, quantile: 0.9, min: 50, max: 1000 }, 0)).to.equal(150);
    expect(resolveAdaptive({ base: 900, quantile: 0.9, min: 500, max: 1000 }, 0)).to.equal(1000);
    expect(resolveAdaptive({ base: 0, quantile: 0.9, min: 0, max: 0 }, 0)).to.equal(0);
  });

  it('timeoutSpec: static with duration only; no duration and no quantile is no timeout', () => {
    expect(timeoutSpec({ duration: 2000 })).to.deep.equal({ base: 2000, quantile: 0, min: 0, max: 0 });
    expect(timeoutSpec({ minDuration: 100 })).to.equal(undefined);
  });

  it('timeoutSpec: the auto floor in quantile mode is duration/2, else 500 ms; an explicit minDuration wins', () => {
    expect(timeoutSpec({ duration: 2000, quantile: 0.99 })).to.deep.equal({ base: 2000, quantile: 0.99, min: 1000, max: 0 });
    expect(timeoutSpec({ quantile: 0.99, maxDuration: 30_000 })).to.deep.equal({ base: 0, quantile: 0.99, min: 500, max: 30_000 });
    expect(timeoutSpec({ duration: 2000, quantile: 0.99, minDuration: 200, maxDuration: 5000 })).to.deep.equal({ base: 2000, quantile: 0.99, min: 200, max: 5000 });
  });

  it('hedgeSpec: delay is the base and minDelay/maxDelay the clamp in quantile mode; a static hedge without delay waits minDelay', () => {
    expect(hedgeSpec({ delay: 250, minDelay: 100, maxDelay: 999_000, maxCount: 1 })).to.deep.equal({ base: 250, quantile: 0, min: 0, max: 0 });
    expect(hedgeSpec({ minDelay: 100, maxDelay: 999_000, maxCount: 1 })).to.deep.equal({ base: 100, quantile: 0, min: 0, max: 0 });
    expect(hedgeSpec({ quantile: 0.7, minDelay: 100, maxDelay: 2000, maxCount: 1 })).to.deep.equal({ base: 0, quantile: 0.7, min: 100, max: 2000 });
    expect(hedgeSpec({ delay: 20, quantile: 0.95, minDelay: 50, maxDelay: 500, maxCount: 2 })).to.deep.equal({ base: 20, quantile: 0.95, min: 50, max: 500 });
  });
});

describe('health tracker: latencyQuantile over several upstreams', () => {
  it('merges the windows of the given upstreams for one method; 0 without samples', () => {
    let t = 1_000_000;
    const h = new HealthTracker(healthOutcome, 10_000, 10, () => t);
    expect(h.latencyQuantile(['a', 'b'], 'eth_call', 0.9)).to.equal(0);
    for (let i = 0; i < 10; i++) h.record(sample('a', 'eth_call', 100));
    for (let i = 0; i < 10; i++) h.record(sample('b', 'eth_call', 1000));
    h.record(sample('a', 'eth_getBalance', 5000));
    expect(h.latencyQuantile(['a'], 'eth_call', 0.9)).to.be.closeTo(0.1, 0.003);
    expect(h.latencyQuantile(['a', 'b'], 'eth_call', 0.25)).to.be.closeTo(0.1, 0.003);
    expect(h.latencyQuantile(['a', 'b'], 'eth_call', 0.9)).to.be.closeTo(1, 0.03);
    expect(h.latencyQuantile(['c'], 'eth_call', 0.9)).to.equal(0);
    // Failures are no latency samples.
    h.record({ ...sample('c', 'eth_call', 9000), outcome: 'timeout', error: new ErrEndpointRequestTimeout('t') });
    expect(h.latencyQuantile(['c'], 'eth_call', 0.9)).to.equal(0);
    // Out of the window, gone.
    t += 10_001;
    expect(h.latencyQuantile(['a', 'b'], 'eth_call', 0.9)).to.equal(0);
  });

  it('LatencyQuantiles reuses a value for QUANTILE_MEMO_MS, per network, method and quantile; never "no sample yet"', () => {
    let t = 0;
    let asked = 0;
    const network = { upstreams: [{ id: 'a' }] };
    const health = {
      latencyQuantile: (ids: readonly string[], method: string, q: number) => {
        asked++;
        expect(ids).to.deep.equal(['a']);
        return method === 'eth_call' ? q : method === 'eth_chainId' ? 0 : 0.001;
      },
    };
    const ctx = (method: string) => ({ network, project: { health }, request: { method } }) as unknown as CallContext;
    const lq = new LatencyQuantiles(() => t);
    expect(lq.latencyMs(ctx('eth_call'), 0.5)).to.equal(500);
    expect(lq.latencyMs(ctx('eth_call'), 0.9)).to.equal(900);
    expect(lq.latencyMs(ctx('eth_getBalance'), 0.9)).to.equal(1);
    expect(asked).to.equal(3);
    t += QUANTILE_MEMO_MS - 1;
    expect(lq.latencyMs(ctx('eth_call'), 0.5)).to.equal(500);
    expect(asked).to.equal(3);
    t += 1;
    lq.latencyMs(ctx('eth_call'), 0.5);
    expect(asked).to.equal(4);
    // "No sample yet" is asked again every time.
    lq.latencyMs(ctx('eth_chainId'), 0.5);
    lq.latencyMs(ctx('eth_chainId'), 0.5);
    expect(asked).to.equal(6);
    // A static spec never asks.
    expect(lq.resolve(ctx('eth_call'), { base: 42, quantile: 0, min: 0, max: 0 })).to.equal(42);
    expect(asked).to.equal(6);
  });
});

describe("failsafe adaptive: eRPC's object forms flattened into svc's keys", () => {
  it('timeout.duration {base, quantile, min, max} and hedge.delay {...} become the flat keys', () => {
    const out = flattenAdaptiveForms([
      { matchMethod: '*', timeout: { duration: { base: '2s', quantile: 0.99, min: '500ms', max: '30s' } }, hedge: { delay: { quantile: 0.95, min: '100ms', max: '2s' }, maxCount: 1 } },
    ]);
    expect(out).to.deep.equal([
      { matchMethod: '*', timeout: { duration: '2s', quantile: 0.99, minDuration: '500ms', maxDuration: '30s' }, hedge: { quantile: 0.95, minDelay: '100ms', maxDelay: '2s', maxCount: 1 } },
    ]);
  });

  it('a field the object sets wins over its flat sibling; a sibling fills what the object leaves at zero', () => {
    const out = flattenAdaptiveForms({ hedge: { delay: { base: '100ms', quantile: 0.95 }, minDelay: '50ms', quantile: 0.5, maxCount: 1 }, timeout: { duration: { base: '5s', min: '0' }, minDuration: '1s', quantile: 0.9 } });
    expect(out).to.deep.equal({ hedge: { delay: '100ms', quantile: 0.95, minDelay: '50ms', maxCount: 1 }, timeout: { duration: '5s', quantile: 0.9, minDuration: '1s' } });
  });

  it('null policies (eRPC `hedge: null`) are dropped; flat forms and other values are returned as they are', () => {
    expect(flattenAdaptiveForms([{ matchMethod: 'eth_get*', timeout: { duration: '5s' }, hedge: null, retry: null }])).to.deep.equal([{ matchMethod: 'eth_get*', timeout: { duration: '5s' } }]);
    const flat = [{ timeout: { duration: '5s', quantile: 0.9, maxDuration: '10s' } }];
    expect(flattenAdaptiveForms(flat)).to.equal(flat);
    expect(flattenAdaptiveForms(undefined)).to.equal(undefined);
  });
});

describe('failsafe adaptive: start-up checks', () => {
  const boot = (network: unknown, upstream: unknown = []): { warnings: string[] } => {
    const proxy = createProxy({
      config: { logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe: network }], upstreams: [{ id: 'u', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 }, failsafe: upstream }] }] },
      plugins: [forwardPlugin(), failsafePlugin()],
      logger: createLogger('silent'),
    });
    return { warnings: proxy.config.warnings };
  };
  const refused = (network: unknown, upstream?: unknown): string => {
    try {
      boot(network, upstream);
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error('accepted');
  };

  it('an adaptive timeout needs duration or maxDuration; an empty timeout is refused', () => {
    expect(refused([{ timeout: { quantile: 0.99 } }])).to.match(/projects\[0\]\.networks\[0\]\.failsafe\[0\]\.timeout: an adaptive timeout \(quantile\) needs duration or maxDuration/);
    expect(refused([{ timeout: {} }])).to.match(/failsafe\[0\]\.timeout: timeout sets no duration/);
    expect(() => boot([{ timeout: { quantile: 0.99, maxDuration: '30s' } }])).not.to.throw();
    expect(() => boot([{ timeout: { duration: '2s', quantile: 0.99, minDuration: '500ms', maxDuration: '30s' } }])).not.to.throw();
  });

  it('a floor above its ceiling is refused (timeout and hedge)', () => {
    expect(refused([{ timeout: { duration: '1s', quantile: 0.9, minDuration: '5s', maxDuration: '2s' } }])).to.match(/timeout\.minDuration: minDuration is larger than maxDuration/);
    expect(refused([{ hedge: { quantile: 0.9, minDelay: '3s', maxDelay: '1s' } }])).to.match(/hedge\.minDelay: minDelay is larger than maxDelay/);
  });

  it('emptyResultDelay on an upstream is refused naming where it belongs', () => {
    expect(refused([], [{ retry: { maxAttempts: 2, emptyResultDelay: '1s' } }])).to.match(/upstreams\[0\]\.failsafe\[0\]\.retry\.emptyResultDelay: emptyResultDelay paces network-scope retries only .* move it to networks\[\]\.failsafe\[\]\.retry/);
    expect(() => boot([{ retry: { maxAttempts: 2, emptyResultDelay: '1s' } }])).not.to.throw();
  });

  it('minDuration/maxDuration on a static timeout are reported as having no effect', () => {
    expect(boot([{ timeout: { duration: '5s', maxDuration: '30s' } }]).warnings.join('\n')).to.match(/failsafe\[0\]\.timeout: minDuration\/maxDuration only bound an adaptive timeout/);
  });
});

describe('failsafe adaptive: data-unavailable waits (eRPC computeDelay)', () => {
  const retry = (emptyResultDelay?: number): NonNullable<FailsafeEntry['retry']> => ({ maxAttempts: 3, delay: 0, backoffFactor: 1.2, backoffMaxDelay: 3000, jitter: 0, emptyResultMaxAttempts: 2, emptyResultDelay });
  const missing = new ErrEndpointMissingData('empty', { details: { reason: 'empty_result' } });

  it('missing data (and a sweep that found only missing data) is "not there yet"; a pending transaction or any other failure is not', () => {
    expect(isDataUnavailable(missing)).to.equal(true);
    expect(isDataUnavailable(new ErrUpstreamsExhausted([missing, new ErrEndpointMissingData('trie node'), new ErrCancelled('lost')]))).to.equal(true);
    expect(isDataUnavailable(new ErrEndpointMissingData('pending', { details: { reason: 'pending_tx' } }))).to.equal(false);
    expect(isDataUnavailable(new ErrUpstreamsExhausted([missing, new ErrEndpointServerSideException('500')]))).to.equal(false);
    expect(isDataUnavailable(new ErrUpstreamsExhausted([new ErrCancelled('lost')]))).to.equal(false);
  });

  it('waits one block time when it is known, else emptyResultDelay, else leaves it to the backoff', () => {
    expect(dataUnavailableDelay(missing, retry(400), 2000)).to.equal(2000);
    expect(dataUnavailableDelay(missing, retry(400), undefined)).to.equal(400);
    expect(dataUnavailableDelay(missing, retry(), undefined)).to.equal(undefined);
    expect(dataUnavailableDelay(new ErrEndpointServerSideException('500'), retry(400), 2000)).to.equal(undefined);
  });
});

describe('failsafe adaptive: the composed pipeline on fake timers', function () {
  this.timeout(20_000);
  let clock: InstalledClock | undefined;
  const stubs: StubProxy[] = [];
  afterEach(async () => {
    clock?.uninstall();
    clock = undefined;
    for (const s of stubs.splice(0)) await s.close();
  });
  const fake = () => (clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'], shouldClearNativeTimers: true }));

  it('network timeout: base + min before any sample, base + the method quantile once warm, capped at maxDuration, per method', async () => {
    const scripts: Record<string, Script> = { u1: after('hang') };
    const h = await startStubProxy(scripts, [forwardPlugin(), failsafePlugin(), abortableStub(scripts)], { failsafe: [{ timeout: { duration: '100ms', quantile: 0.9, minDuration: '50ms', maxDuration: '1s' } }] });
    stubs.push(h);
    const c = fake();
    const cold = await timed(c, () => h.run('eth_getBalance', []));
    expect(cold.error).to.be.instanceOf(ErrFailsafeTimeoutExceeded);
    expect(cold.ms).to.be.within(150, 155);
    warm(h.proxy, 'u1', 'eth_getBalance', 300);
    warm(h.proxy, 'u1', 'eth_getLogs', 3000);
    await c.tickAsync(QUANTILE_MEMO_MS);
    const hot = await timed(c, () => h.run('eth_getBalance', []));
    expect(hot.error).to.be.instanceOf(ErrFailsafeTimeoutExceeded);
    expect(hot.ms).to.be.within(392, 412);
    expect((await timed(c, () => h.run('eth_getLogs', [{}]))).ms).to.be.within(1000, 1005);
    // Another method is still cold.
    expect((await timed(c, () => h.run('eth_call', [{}, 'latest']))).ms).to.be.within(150, 155);
    // A call faster than its deadline is answered.
    scripts.u1 = after(250, '0x2a');
    const ok = await timed(c, () => h.run('eth_getBalance', []));
    expect(ok.error).to.equal(undefined);
    expect(ok.ms).to.be.within(250, 255);
    const fired = (await h.proxy.metrics.getSingleMetricAsString('svc_network_timeout_fired_total')).split('\n').find((l) => l.includes('category="eth_getBalance"'));
    expect(fired).to.match(/scope="network"\} 2$/);
    expect(await h.proxy.metrics.getSingleMetricAsString('svc_network_timeout_duration_seconds')).to.match(/svc_network_timeout_duration_seconds_count\{[^}]*category="eth_getBalance"[^}]*scope="network"\} 3/);
  });

  it("network hedge: delay + minDelay before any sample, delay + the quantile of the network's latency once warm", async () => {
    const scripts: Record<string, Script> = { u1: after('hang'), u2: after(0, '0xb') };
    const h = await startStubProxy(scripts, [forwardPlugin(), failsafePlugin(), abortableStub(scripts)], { failsafe: [{ hedge: { delay: '20ms', quantile: 0.9, minDelay: '50ms', maxDelay: '500ms', maxCount: 1 } }] });
    stubs.push(h);
    const c = fake();
    const cold = await timed(c, () => h.run('eth_getBalance', []));
    expect(cold.result?.result).to.equal('0xb');
    expect(cold.ms).to.be.within(70, 75);
    expect(NETWORK_HEDGES.get(cold.ctx.record)).to.equal(1);
    // Both upstreams' samples count (eRPC's per network x method latency).
    warm(h.proxy, 'u1', 'eth_getBalance', 200, 10);
    warm(h.proxy, 'u2', 'eth_getBalance', 200, 10);
    await c.tickAsync(QUANTILE_MEMO_MS);
    const hot = await timed(c, () => h.run('eth_getBalance', []));
    expect(hot.result?.result).to.equal('0xb');
    expect(hot.ms).to.be.within(215, 230);
    expect(hot.ctx.record.attempts.map((a) => `${a.upstreamId}=${a.reason}`)).to.deep.equal(['u1=primary', 'u2=hedge']);
  });

  it('upstream timeout: adaptive on the network latency of the method; the attempt fails with ErrEndpointRequestTimeout and the sweep moves on', async () => {
    const slowFirst: Script = after('hang');
    const proxy = createProxy({
      config: {
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 }, failsafe: [] }],
            upstreams: [
              { id: 'u1', endpoint: 'http://127.0.0.1:9', evm: { chainId: 31337 }, failsafe: [{ timeout: { duration: '50ms', quantile: 0.99, minDuration: '20ms', maxDuration: '2s' } }] },
              { id: 'u2', endpoint: 'http://127.0.0.1:9', evm: { chainId: 31337 }, failsafe: [] },
            ],
          },
        ],
      },
      plugins: [forwardPlugin(), failsafePlugin(), abortableStub({ u1: slowFirst, u2: after(10, '0xb') })],
      logger: createLogger('silent'),
      port: 0,
      host: '127.0.0.1',
      metricsPort: 0,
      probeBackoffMs: 600_000,
    });
    await proxy.start();
    try {
      const net = proxy.projects.get('main')!.networks.get('evm:31337')!;
      const run = async () => {
        const { ctx, done } = proxy.internalContext(net, 'eth_getBalance', [], 5000);
        ctx.internal = false;
        try {
          return { ctx, result: await net.handler(ctx) };
        } catch (e) {
          return { ctx, error: e as SvcError };
        } finally {
          done();
        }
      };
      const c = fake();
      const cold = await timed(c, run);
      expect(cold.result?.result).to.equal('0xb');
      expect(cold.ms).to.be.within(80, 85); // 50 + 20 on u1, then 10 on u2
      expect(cold.ctx.record.attempts[0]!.error).to.be.instanceOf(ErrEndpointRequestTimeout);
      warm(proxy, 'u1', 'eth_getBalance', 400);
      await c.tickAsync(QUANTILE_MEMO_MS);
      const hot = await timed(c, run);
      expect(hot.ms).to.be.within(458, 475); // 50 + 400 (±2 %) on u1, then 10 on u2
      expect(hot.ctx.record.attempts.map((a) => `${a.upstreamId}:${a.outcome}`)).to.deep.equal(['u1:timeout', 'u2:success']);
    } finally {
      clock?.uninstall();
      clock = undefined;
      await proxy.close();
    }
  });

  it('retry.emptyResultDelay: a round that found only empty answers waits emptyResultDelay (one block time once known) before the next', async () => {
    const TX = `0x${'ab'.repeat(32)}`;
    let blockTimeMs: number | undefined;
    const chain: Plugin = { name: 'chain-state', apply: (host) => host.services.provide(CHAIN_STATE_SERVICE, { of: () => ({ ...NO_CHAIN_STATE, blockTimeMs }) }) };
    let n = 0;
    const script: Script = () => (n++ % 2 === 0 ? null : { hash: TX, blockNumber: '0x5', blockHash: `0x${'cd'.repeat(32)}`, transactionIndex: '0x0' });
    const withDelay = await startStubProxy({ u1: script }, [chain, forwardPlugin(), failsafePlugin(), evmRetriesPlugin()], { failsafe: [{ retry: { maxAttempts: 3, emptyResultDelay: '400ms' } }] });
    const without = await startStubProxy({ u1: script }, [chain, forwardPlugin(), failsafePlugin(), evmRetriesPlugin()], { failsafe: [{ retry: { maxAttempts: 3 } }] });
    stubs.push(withDelay, without);
    const c = fake();
    const waited = await timed(c, () => withDelay.run('eth_getTransactionByHash', [TX], { retryEmpty: true }));
    expect((waited.result?.result as { blockNumber: string }).blockNumber).to.equal('0x5');
    expect(waited.ms).to.be.within(400, 405);
    expect(NETWORK_RETRIES.get(waited.ctx.record)).to.equal(1);
    expect(await withDelay.proxy.metrics.getSingleMetricAsString('svc_network_data_unavailable_wait_seconds')).to.match(/_sum\{[^}]*category="eth_getTransactionByHash"[^}]*\} 0\.4\n/);
    // Without emptyResultDelay the backoff applies (delay 0): at once.
    const immediate = await timed(c, () => without.run('eth_getTransactionByHash', [TX], { retryEmpty: true }));
    expect(immediate.ms).to.be.at.most(5);
    expect(NETWORK_RETRIES.get(immediate.ctx.record)).to.equal(1);
    // Once the block time is known, one block time instead.
    blockTimeMs = 1000;
    const block = await timed(c, () => withDelay.run('eth_getTransactionByHash', [TX], { retryEmpty: true }));
    expect(block.ms).to.be.within(1000, 1005);
  });
});
