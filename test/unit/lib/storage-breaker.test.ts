/**
 * The storage circuit breaker (lib/storage-breaker.ts) on fake timers: per-operation deadlines,
 * opening after `failureThreshold` failures in a row, refusing at once while open, one half-open
 * probe after the back-off, the back-off doubling to its cap on failed probes and resetting on
 * close, results of operations from an earlier state ignored, the metrics and one log line per edge.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { breakerSettings, StorageBreaker, StorageUnavailableError, type StorageBreakerOptions } from '../../../lib/storage-breaker.ts';

/** A logger recording `[level, msg]` of every line. */
function recordingLogger(): { logger: StorageBreakerOptions['logger']; lines: Array<[string, string]> } {
  const lines: Array<[string, string]> = [];
  const logger = pino(
    { level: 'info' },
    {
      write(s: string) {
        const o = JSON.parse(s) as { level: number; msg: string };
        lines.push([o.level >= 40 ? 'warn' : 'info', o.msg]);
      },
    },
  );
  return { logger, lines };
}

/** A promise settled by hand. */
function deferred<T>(): { p: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const p = new Promise<T>((a, b) => ((resolve = a), (reject = b)));
  return { p, resolve, reject };
}

const flush = () => new Promise<void>((r) => setImmediate(r));
const failing = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6379'), { code: 'ECONNREFUSED' }));
const ok = () => Promise.resolve('ok');

describe('StorageBreaker', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ now: 1_000_000, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => clock.uninstall());

  const make = (
    settings: StorageBreakerOptions['settings'] = { failureThreshold: 2, backoff: 1000, maxBackoff: 4000 },
    extra: Partial<StorageBreakerOptions> = {},
  ) => {
    const { logger, lines } = recordingLogger();
    const metrics = new Registry();
    const b = new StorageBreaker({ connector: 'shared', kind: 'cache', logger, metrics, settings, ...extra });
    return { b, lines, metrics };
  };
  const openIt = async (b: StorageBreaker) => {
    for (let i = 0; i < 2; i++) await b.run(failing, 50).catch(() => undefined);
    expect(b.state).to.equal('open');
  };

  it('an operation that does not settle in time rejects with a timeout at its deadline', async () => {
    const { b } = make();
    const never = deferred<string>();
    const p = b.run(() => never.p, 50);
    let err: unknown;
    p.catch((e: unknown) => (err = e));
    clock.tick(49);
    await flush();
    expect(err).to.equal(undefined);
    clock.tick(1);
    await flush();
    expect(err).to.be.instanceOf(StorageUnavailableError);
    expect((err as StorageUnavailableError).reason).to.equal('timeout');
    expect((err as Error).message).to.equal('cache connector shared did not answer within 50 ms');
    // The late answer is dropped, never an unhandled rejection.
    never.reject(new Error('late'));
    await flush();
  });

  it('opens after failureThreshold failures in a row; a success in between resets the count', async () => {
    const { b } = make({ failureThreshold: 3 });
    await b.run(failing, 50).catch(() => undefined);
    await b.run(failing, 50).catch(() => undefined);
    expect(await b.run(ok, 50)).to.equal('ok');
    await b.run(failing, 50).catch(() => undefined);
    await b.run(failing, 50).catch(() => undefined);
    expect(b.state).to.equal('closed');
    const late = b.run(() => new Promise<string>(() => undefined), 50).catch((e: unknown) => e);
    clock.tick(50);
    expect(((await late) as StorageUnavailableError).reason).to.equal('timeout');
    expect(b.state).to.equal('open');
  });

  it('while open, operations are refused at once without being started, and counted as skipped', async () => {
    const { b, metrics } = make();
    await openIt(b);
    let started = 0;
    const op = () => {
      started++;
      return ok();
    };
    expect(b.tryRun(op, 50)).to.equal(undefined);
    const err = await b.run(op, 50).catch((e: unknown) => e);
    expect(err).to.equal(b.openError);
    expect(b.openError.reason).to.equal('open');
    expect(started).to.equal(0);
    const text = await metrics.metrics();
    expect(text).to.include('svc_storage_breaker_skipped_total{connector="shared",kind="cache"} 2');
    expect(text).to.include('svc_storage_breaker_state{connector="shared",kind="cache"} 1');
  });

  it('after the back-off one probe goes through (half-open) while others are still refused; its success closes', async () => {
    const { b, lines, metrics } = make();
    await openIt(b);
    clock.tick(999);
    expect(b.tryRun(ok, 50)).to.equal(undefined);
    clock.tick(1);
    const probe = deferred<string>();
    const p = b.run(() => probe.p, 50);
    expect(b.state).to.equal('half-open');
    expect(b.tryRun(ok, 50)).to.equal(undefined);
    probe.resolve('pong');
    expect(await p).to.equal('pong');
    expect(b.state).to.equal('closed');
    expect(await b.run(ok, 50)).to.equal('ok');
    expect(lines).to.deep.equal([
      ['warn', 'cache connector shared: 2 failures in a row (last: ECONNREFUSED); circuit breaker open, skipped for 1000 ms'],
      ['info', 'cache connector shared: circuit breaker half-open, probing with one operation'],
      ['info', 'cache connector shared: probe succeeded; circuit breaker closed'],
    ]);
    // The error's message (with the store's address) never reaches the log.
    expect(JSON.stringify(lines)).not.to.include('10.0.0.1');
    const text = await metrics.metrics();
    for (const to of ['open', 'half-open', 'closed'])
      expect(text).to.include(`svc_storage_breaker_transitions_total{connector="shared",kind="cache",to="${to}"} 1`);
    expect(text).to.include('svc_storage_breaker_state{connector="shared",kind="cache"} 0');
  });

  it('a failed probe (error or timeout) re-opens with the back-off doubled up to maxBackoff; a close resets it', async () => {
    const { b, lines } = make();
    await openIt(b);
    const backoffs: number[] = [];
    for (let i = 0; i < 4; i++) {
      const openedAt = Date.now();
      // Refused until the back-off passes.
      for (;;) {
        clock.tick(100);
        const p = b.run(() => new Promise<string>(() => undefined), 50).catch((x: unknown) => x);
        if (b.state === 'half-open') {
          backoffs.push(Date.now() - openedAt);
          clock.tick(50);
          expect(((await p) as StorageUnavailableError).reason).to.equal('timeout');
          break;
        }
        expect(await p).to.equal(b.openError);
      }
    }
    expect(backoffs).to.deep.equal([1000, 2000, 4000, 4000]);
    expect(lines.filter(([, m]) => m.includes('probe failed')).map(([, m]) => /skipped for (\d+)/.exec(m)?.[1])).to.deep.equal([
      '2000',
      '4000',
      '4000',
      '4000',
    ]);
    clock.tick(4000);
    expect(await b.run(ok, 50)).to.equal('ok');
    await openIt(b);
    clock.tick(999);
    expect(b.tryRun(ok, 50)).to.equal(undefined);
    clock.tick(1);
    expect(await b.run(ok, 50)).to.equal('ok');
  });

  it('a caller that can do without the store never waits for the probe: tryRun starts it in the background and falls back at once', async () => {
    const { b } = make();
    await openIt(b);
    clock.tick(1000);
    const probe = deferred<string>();
    let started = false;
    expect(
      b.tryRun(() => {
        started = true;
        return probe.p;
      }, 50),
    ).to.equal(undefined);
    expect(started).to.equal(true);
    expect(b.state).to.equal('half-open');
    probe.resolve('pong');
    await Promise.resolve();
    await Promise.resolve();
    expect(b.state).to.equal('closed');
    expect(await b.tryRun(ok, 50)).to.equal('ok');
  });

  it('results of operations started before an edge do not move the breaker', async () => {
    const { b } = make();
    const slow = deferred<string>();
    const old = b.run(() => slow.p, 5000);
    await openIt(b);
    clock.tick(1000);
    const probe = deferred<string>();
    const p = b.run(() => probe.p, 5000).catch((e: unknown) => e);
    expect(b.state).to.equal('half-open');
    // The operation started while closed answers now: not the probe, so the breaker stays half-open.
    slow.resolve('late');
    expect(await old).to.equal('late');
    expect(b.state).to.equal('half-open');
    probe.reject(new Error('still down'));
    await p;
    expect(b.state).to.equal('open');
  });

  it('an answer the store gives (isFailure false) counts as a success', async () => {
    const { b } = make(undefined, { isFailure: (e) => !(e instanceof RangeError) });
    for (let i = 0; i < 5; i++) await b.run(() => Promise.reject(new RangeError('over the limit')), 50).catch(() => undefined);
    expect(b.state).to.equal('closed');
  });

  it('a synchronous throw from the operation is a failure, not a crash', async () => {
    const { b } = make();
    const err = await b
      .run(() => {
        throw new Error('not connected');
      }, 50)
      .catch((e: unknown) => e);
    expect((err as Error).message).to.equal('not connected');
  });

  it('two breakers share one registry (the metrics are registered once)', async () => {
    const { logger } = recordingLogger();
    const metrics = new Registry();
    new StorageBreaker({ connector: 'a', kind: 'cache', logger, metrics });
    new StorageBreaker({ connector: 'keys', kind: 'api-keys', logger, metrics });
    const text = await metrics.metrics();
    expect(text).to.include('svc_storage_breaker_state{connector="a",kind="cache"} 0');
    expect(text).to.include('svc_storage_breaker_state{connector="keys",kind="api-keys"} 0');
  });

  it('settings: defaults 3 failures, 1 s doubling to 30 s; maxBackoff never below backoff', () => {
    expect(breakerSettings(undefined)).to.deep.equal({ failureThreshold: 3, backoff: 1000, maxBackoff: 30_000 });
    expect(breakerSettings({ backoff: 60_000 })).to.deep.equal({ failureThreshold: 3, backoff: 60_000, maxBackoff: 60_000 });
  });
});
