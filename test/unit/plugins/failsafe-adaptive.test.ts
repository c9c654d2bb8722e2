/**
 * Unit tests of the failsafe plugin's adaptive policies (eRPC's quantile-based timeouts and
 * hedges, `retry.emptyResultDelay`): the pure resolution rules (static, warm, cold, auto floor,
 * clamps), the health tracker's latency quantile over several upstreams, the quantile memo, the
 * flattening of eRPC's object forms (and their load), the start-up checks and the
 * data-unavailable wait. The composed pipeline on fake timers is in
 * failsafe-adaptive-pipeline.test.ts.
 */
import { expect } from 'chai';
import type { AttemptRecord, CallContext } from '../../../core/pipeline/context.ts';
import {
  ErrCancelled,
  ErrEndpointMissingData,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrUpstreamsExhausted,
} from '../../../core/wire/errors.ts';
import { createProxy } from '../../../core/host/create.ts';
import { healthOutcome } from '../../../core/pipeline/blame.ts';
import { HealthTracker } from '../../../lib/health-window.ts';
import { createLogger } from '../../../lib/logger.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import {
  dataUnavailableDelay,
  failsafePlugin,
  flattenAdaptiveForms,
  hedgeSpec,
  isDataUnavailable,
  LatencyQuantiles,
  QUANTILE_MEMO_MS,
  resolveAdaptive,
  timeoutSpec,
  type FailsafeEntry,
} from '../../../plugins/failsafe/index.ts';

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
    expect(timeoutSpec({ duration: 2000, quantile: 0.99, minDuration: 200, maxDuration: 5000 })).to.deep.equal({
      base: 2000,
      quantile: 0.99,
      min: 200,
      max: 5000,
    });
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
      {
        matchMethod: '*',
        timeout: { duration: { base: '2s', quantile: 0.99, min: '500ms', max: '30s' } },
        hedge: { delay: { quantile: 0.95, min: '100ms', max: '2s' }, maxCount: 1 },
      },
    ]);
    expect(out).to.deep.equal([
      {
        matchMethod: '*',
        timeout: { duration: '2s', quantile: 0.99, minDuration: '500ms', maxDuration: '30s' },
        hedge: { quantile: 0.95, minDelay: '100ms', maxDelay: '2s', maxCount: 1 },
      },
    ]);
  });

  it('a field the object sets wins over its flat sibling; a sibling fills what the object leaves at zero', () => {
    const out = flattenAdaptiveForms({
      hedge: { delay: { base: '100ms', quantile: 0.95 }, minDelay: '50ms', quantile: 0.5, maxCount: 1 },
      timeout: { duration: { base: '5s', min: '0' }, minDuration: '1s', quantile: 0.9 },
    });
    expect(out).to.deep.equal({
      hedge: { delay: '100ms', quantile: 0.95, minDelay: '50ms', maxCount: 1 },
      timeout: { duration: '5s', quantile: 0.9, minDuration: '1s' },
    });
  });

  it("eRPC's current config (object forms, a one-object failsafe, hedge: null) loads into the flat keys the policies read", () => {
    const proxy = createProxy({
      config: {
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            networks: [
              {
                architecture: 'evm',
                evm: { chainId: 1 },
                failsafe: {
                  matchMethod: '*',
                  timeout: { duration: { quantile: 0.99, base: '2s', min: '500ms', max: '30s' } },
                  hedge: { delay: { base: '100ms', quantile: 0.95 }, minDelay: '50ms', maxCount: 1 },
                },
              },
            ],
            upstreams: [
              {
                id: 'u',
                endpoint: 'http://127.0.0.1:9',
                evm: { chainId: 1 },
                failsafe: [
                  { matchMethod: 'eth_get*', timeout: { duration: { quantile: 0.9, base: '5s', min: '200ms', max: '5s' } }, hedge: null, retry: null },
                ],
              },
            ],
          },
        ],
      },
      plugins: [failsafePlugin()],
      logger: createLogger('silent'),
    });
    const [net] = proxy.config.projects[0]!.networks[0]!.settings.failsafe as FailsafeEntry[];
    expect(net!.timeout).to.deep.equal({ duration: 2000, quantile: 0.99, minDuration: 500, maxDuration: 30_000 });
    expect(net!.hedge).to.deep.equal({ delay: 100, quantile: 0.95, minDelay: 50, maxDelay: 999_000, maxCount: 1 });
    const [up] = proxy.config.projects[0]!.upstreams[0]!.settings.failsafe as FailsafeEntry[];
    expect(up).to.deep.equal({ matchMethod: 'eth_get*', timeout: { duration: 5000, quantile: 0.9, minDuration: 200, maxDuration: 5000 } });
    expect(timeoutSpec(net!.timeout!)).to.deep.equal({ base: 2000, quantile: 0.99, min: 500, max: 30_000 });
  });

  it('null policies (eRPC `hedge: null`) are dropped; flat forms and other values are returned as they are', () => {
    expect(flattenAdaptiveForms([{ matchMethod: 'eth_get*', timeout: { duration: '5s' }, hedge: null, retry: null }])).to.deep.equal([
      { matchMethod: 'eth_get*', timeout: { duration: '5s' } },
    ]);
    const flat = [{ timeout: { duration: '5s', quantile: 0.9, maxDuration: '10s' } }];
    expect(flattenAdaptiveForms(flat)).to.equal(flat);
    expect(flattenAdaptiveForms(undefined)).to.equal(undefined);
  });
});

describe('failsafe adaptive: start-up checks', () => {
  const boot = (network: unknown, upstream: unknown = []): { warnings: string[] } => {
    const proxy = createProxy({
      config: {
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe: network }],
            upstreams: [{ id: 'u', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 }, failsafe: upstream }],
          },
        ],
      },
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
    expect(refused([{ timeout: { quantile: 0.99 } }])).to.match(
      /projects\[0\]\.networks\[0\]\.failsafe\[0\]\.timeout: an adaptive timeout \(quantile\) needs duration or maxDuration/,
    );
    expect(refused([{ timeout: {} }])).to.match(/failsafe\[0\]\.timeout: timeout sets no duration/);
    expect(() => boot([{ timeout: { quantile: 0.99, maxDuration: '30s' } }])).not.to.throw();
    expect(() => boot([{ timeout: { duration: '2s', quantile: 0.99, minDuration: '500ms', maxDuration: '30s' } }])).not.to.throw();
  });

  it('a floor above its ceiling is refused (timeout and hedge)', () => {
    expect(refused([{ timeout: { duration: '1s', quantile: 0.9, minDuration: '5s', maxDuration: '2s' } }])).to.match(
      /timeout\.minDuration: minDuration is larger than maxDuration/,
    );
    expect(refused([{ hedge: { quantile: 0.9, minDelay: '3s', maxDelay: '1s' } }])).to.match(/hedge\.minDelay: minDelay is larger than maxDelay/);
  });

  it('emptyResultDelay on an upstream is refused naming where it belongs', () => {
    expect(refused([], [{ retry: { maxAttempts: 2, emptyResultDelay: '1s' } }])).to.match(
      /upstreams\[0\]\.failsafe\[0\]\.retry\.emptyResultDelay: emptyResultDelay paces network-scope retries only .* move it to networks\[\]\.failsafe\[\]\.retry/,
    );
    expect(() => boot([{ retry: { maxAttempts: 2, emptyResultDelay: '1s' } }])).not.to.throw();
  });

  it('minDuration/maxDuration on a static timeout are reported as having no effect', () => {
    expect(boot([{ timeout: { duration: '5s', maxDuration: '30s' } }]).warnings.join('\n')).to.match(
      /failsafe\[0\]\.timeout: minDuration\/maxDuration only bound an adaptive timeout/,
    );
  });
});

describe('failsafe adaptive: data-unavailable waits (eRPC computeDelay)', () => {
  const retry = (emptyResultDelay?: number): NonNullable<FailsafeEntry['retry']> => ({
    maxAttempts: 3,
    delay: 0,
    backoffFactor: 1.2,
    backoffMaxDelay: 3000,
    jitter: 0,
    emptyResultMaxAttempts: 2,
    emptyResultDelay,
  });
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
