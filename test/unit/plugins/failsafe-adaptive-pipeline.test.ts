/**
 * Unit tests of the failsafe plugin's adaptive policies through the composed pipeline of a
 * started proxy whose upstream transports are in-process stubs, on fake timers: adaptive network
 * and upstream timeouts, the adaptive hedge delay and `retry.emptyResultDelay`, measured on the
 * fake clock (the pure rules are in failsafe-adaptive.test.ts).
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import type { AttemptRecord } from '../../../core/pipeline/context.ts';
import { NO_CHAIN_STATE } from 'svc-proxy/plugins/evm-state';
import { ErrEndpointRequestTimeout, ErrFailsafeTimeoutExceeded, type SvcError } from '../../../core/wire/errors.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import type { Plugin } from '../../../core/plugin-api.ts';
import { CHAIN_STATE_SERVICE } from 'svc-proxy/plugins/evm-state';
import type { Proxy } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { NETWORK_HEDGES, NETWORK_RETRIES } from 'svc-proxy/plugins/failsafe';
import { createLogger } from '../../../lib/logger.ts';
import { evmRetriesPlugin } from '../../../plugins/evm-retries/index.ts';
import { failsafePlugin, QUANTILE_MEMO_MS } from '../../../plugins/failsafe/index.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import { startStubProxy, type Script, type StubProxy } from '../../helpers/stub-proxy.ts';

type InstalledClock = ReturnType<typeof FakeTimers.install>;

/** A successful attempt of `ms` on an upstream, as the health plugin records it. */
function sample(upstreamId: string, method: string, ms: number): AttemptRecord {
  return {
    upstreamId,
    vendor: 'unknown',
    method,
    projectId: 'main',
    networkId: 'evm:31337',
    reason: 'primary',
    outcome: 'success',
    startedAt: 0,
    durationMs: ms,
    won: true,
    dialled: true,
    finality: 'unknown',
    internal: false,
  };
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
    const h = await startStubProxy(scripts, [forwardPlugin(), failsafePlugin(), abortableStub(scripts)], {
      failsafe: [{ timeout: { duration: '100ms', quantile: 0.9, minDuration: '50ms', maxDuration: '1s' } }],
    });
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
    const fired = (await h.proxy.metrics.getSingleMetricAsString('svc_network_timeout_fired_total'))
      .split('\n')
      .find((l) => l.includes('category="eth_getBalance"'));
    expect(fired).to.match(/scope="network"\} 2$/);
    expect(await h.proxy.metrics.getSingleMetricAsString('svc_network_timeout_duration_seconds')).to.match(
      /svc_network_timeout_duration_seconds_count\{[^}]*category="eth_getBalance"[^}]*scope="network"\} 3/,
    );
  });

  it("network hedge: delay + minDelay before any sample, delay + the quantile of the network's latency once warm", async () => {
    const scripts: Record<string, Script> = { u1: after('hang'), u2: after(0, '0xb') };
    const h = await startStubProxy(scripts, [forwardPlugin(), failsafePlugin(), abortableStub(scripts)], {
      failsafe: [{ hedge: { delay: '20ms', quantile: 0.9, minDelay: '50ms', maxDelay: '500ms', maxCount: 1 } }],
    });
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
              {
                id: 'u1',
                endpoint: 'http://127.0.0.1:9',
                evm: { chainId: 31337 },
                failsafe: [{ timeout: { duration: '50ms', quantile: 0.99, minDuration: '20ms', maxDuration: '2s' } }],
              },
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
          return { ctx, result: await proxy.runCall(ctx) };
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
    const chain: Plugin = {
      name: 'chain-state',
      apply: (host) => host.services.provide(CHAIN_STATE_SERVICE, { of: () => ({ ...NO_CHAIN_STATE, blockTimeMs }) }),
    };
    let n = 0;
    const script: Script = () => (n++ % 2 === 0 ? null : { hash: TX, blockNumber: '0x5', blockHash: `0x${'cd'.repeat(32)}`, transactionIndex: '0x0' });
    const withDelay = await startStubProxy({ u1: script }, [chain, forwardPlugin(), failsafePlugin(), evmRetriesPlugin()], {
      failsafe: [{ retry: { maxAttempts: 3, emptyResultDelay: '400ms' } }],
    });
    const without = await startStubProxy({ u1: script }, [chain, forwardPlugin(), failsafePlugin(), evmRetriesPlugin()], {
      failsafe: [{ retry: { maxAttempts: 3 } }],
    });
    stubs.push(withDelay, without);
    const c = fake();
    const waited = await timed(c, () => withDelay.run('eth_getTransactionByHash', [TX], { retryEmpty: true }));
    expect((waited.result?.result as { blockNumber: string }).blockNumber).to.equal('0x5');
    expect(waited.ms).to.be.within(400, 405);
    expect(NETWORK_RETRIES.get(waited.ctx.record)).to.equal(1);
    expect(await withDelay.proxy.metrics.getSingleMetricAsString('svc_network_data_unavailable_wait_seconds')).to.match(
      /_sum\{[^}]*category="eth_getTransactionByHash"[^}]*\} 0\.4\n/,
    );
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
