/**
 * A cache connector's `failsafeForGets` / `failsafeForSets`, as eRPC runs them (data/failsafe.go,
 * data/cache_executor.go): the most specific entry wins (method+finality, method, finality,
 * `*`); only connection-level failures are retried, hedged past or counted by the entry's
 * circuit breaker; the timeout bounds each try; `consensus` and a hedge `quantile` are refused.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { pino } from 'pino';
import { StorageBreaker, StorageUnavailableError } from '../../../../lib/storage-breaker.ts';
import { FailsafePlans, resolveFailsafe, type RawFailsafeEntry } from '../../../../plugins/cache/failsafe.ts';
import { EntryBreaker, isConnectionError, runPlan } from '../../../../plugins/cache/failsafe-run.ts';

const silent = pino({ level: 'silent' });
const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:11211'), { code: 'ECONNREFUSED' });
const storage = (failureThreshold = 100) => new StorageBreaker({ connector: 'c', kind: 'cache', logger: silent, settings: { failureThreshold } });
const plans = (raw: RawFailsafeEntry[], def = 50) => {
  const problems: Array<{ path: string; message: string }> = [];
  const resolved = resolveFailsafe(raw, 'fs', problems, 1000);
  expect(problems).to.deep.equal([]);
  return new FailsafePlans(resolved, def);
};

describe('cache connector failsafe: entry matching', () => {
  const p = plans([
    { matchMethod: '*', timeout: { duration: 1 } },
    { matchMethod: '*', matchFinality: ['realtime'], timeout: { duration: 2 } },
    { matchMethod: 'eth_getLogs|eth_call', timeout: { duration: 3 } },
    { matchMethod: 'eth_getLogs', matchFinality: ['unfinalized', 'realtime'], timeout: { duration: 4 } },
    { matchMethod: 'eth_get*', timeout: { duration: 5 } },
  ]);
  const t = (m: string, f?: Parameters<typeof p.plan>[1]) => p.plan(m, f).timeoutMs;

  it('method and finality beat method alone, which beats finality alone, which beats `*` (whatever the list order)', () => {
    expect(t('eth_getLogs', 'unfinalized')).to.equal(4);
    expect(t('eth_getLogs', 'finalized')).to.equal(3);
    expect(t('eth_call', 'realtime')).to.equal(3);
    expect(t('eth_chainId', 'realtime')).to.equal(2);
    expect(t('eth_chainId', 'finalized')).to.equal(1);
    expect(t('eth_chainId', undefined)).to.equal(1);
  });

  it('within one tier the first entry in the list wins', () => {
    expect(t('eth_getLogs', undefined)).to.equal(3);
    expect(t('eth_getBalance', 'finalized')).to.equal(5);
  });

  it('no matching entry: one try under the tier deadline', () => {
    const only = plans([{ matchMethod: 'eth_call', timeout: { duration: 9 } }], 50);
    const plan = only.plan('eth_getBalance', 'finalized');
    expect(plan.timeoutMs).to.equal(50);
    expect(plan.attempts).to.equal(1);
  });
});

describe('cache connector failsafe: config', () => {
  it('refuses consensus and a quantile hedge, naming what to do instead', () => {
    const problems: Array<{ path: string; message: string }> = [];
    resolveFailsafe(
      [{ consensus: { maxParticipants: 3 } }, { hedge: { delay: 10, quantile: 0.9 } }, { timeout: { duration: 2000 } }],
      'c.failsafeForGets',
      problems,
      1000,
    );
    expect(problems.map((x) => x.path)).to.deep.equal([
      'c.failsafeForGets[0].consensus',
      'c.failsafeForGets[1].hedge.quantile',
      'c.failsafeForGets[2].timeout.duration',
    ]);
    expect(problems[0]?.message).to.match(/eRPC refuses it too/);
    expect(problems[1]?.message).to.match(/fixed `delay`/);
    expect(problems[2]?.message).to.match(/at most 1000 ms/);
  });

  it("fills eRPC's defaults: hedge maxCount 1, breaker 20 of 80, 5 min, 8 of 10", () => {
    const [e] = resolveFailsafe([{ hedge: { delay: 100 }, circuitBreaker: { failureThresholdCount: 3 } }], 'x', [], 1000) ?? [];
    expect(e?.hedge).to.deep.equal({ delay: 100, maxCount: 1 });
    expect(e?.circuitBreaker).to.deep.equal({
      failureThresholdCount: 3,
      failureThresholdCapacity: 80,
      halfOpenAfter: 300_000,
      successThresholdCount: 8,
      successThresholdCapacity: 10,
    });
  });
});

describe('cache connector failsafe: running an operation', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ now: 1_000_000, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => clock.uninstall());

  it('classifies connection failures by code, cause, AggregateError and message; never its own timeout or an open breaker', () => {
    expect(isConnectionError(refused())).to.equal(true);
    expect(isConnectionError(new Error('wrapped', { cause: refused() }))).to.equal(true);
    expect(isConnectionError(new AggregateError([refused()], 'all failed'))).to.equal(true);
    expect(isConnectionError(new Error('The client is closed'))).to.equal(true);
    expect(isConnectionError(new StorageUnavailableError('did not answer within 50 ms', 'c', 'cache', 'timeout'))).to.equal(false);
    expect(isConnectionError(storage().openError)).to.equal(false);
    expect(isConnectionError(new Error('WRONGTYPE Operation against a key'))).to.equal(false);
  });

  it('retries a connection failure with the backoff (delay × factor, capped), then answers', async () => {
    const p = plans([{ retry: { maxAttempts: 4, delay: 10, backoffFactor: 3, backoffMaxDelay: 20 } }]).plan('eth_call', 'finalized');
    expect([1, 2, 3].map((n) => p.delayMs(n))).to.deep.equal([10, 20, 20]);
    const starts: number[] = [];
    let tries = 0;
    const out = runPlan(p, storage(), async () => {
      starts.push(Date.now() - 1_000_000);
      if (++tries < 3) throw refused();
      return 'v';
    });
    await clock.runAllAsync();
    expect(await out).to.equal('v');
    expect(starts).to.deep.equal([0, 10, 30]);
  });

  it('does not retry a try that timed out, an open breaker, or another error', async () => {
    const p = plans([{ timeout: { duration: 40 }, retry: { maxAttempts: 3 } }]).plan('eth_call', undefined);
    let tries = 0;
    const stalled = runPlan(p, storage(), () => {
      tries++;
      return new Promise<string>(() => undefined);
    });
    const caught = stalled.catch((e: unknown) => e);
    await clock.tickAsync(40);
    expect(await caught).to.be.instanceOf(StorageUnavailableError);
    expect(tries).to.equal(1);

    tries = 0;
    const other = runPlan(p, storage(), async () => {
      tries++;
      throw new Error('WRONGTYPE');
    }).catch((e: unknown) => e);
    await clock.runAllAsync();
    expect(((await other) as Error).message).to.equal('WRONGTYPE');
    expect(tries).to.equal(1);

    const open = storage(1);
    await open.run(() => Promise.reject(refused()), 10).catch(() => undefined);
    tries = 0;
    const skipped = runPlan(p, open, async () => {
      tries++;
      return 'v';
    }).catch((e: unknown) => e);
    expect(await skipped).to.equal(open.openError);
    expect(tries).to.equal(0);
  });

  it('the timeout bounds each try (eRPC applies it per try), and gives up after maxAttempts', async () => {
    const p = plans([{ timeout: { duration: 30 }, retry: { maxAttempts: 2 } }]).plan('eth_call', undefined);
    let tries = 0;
    const out = runPlan(p, storage(), () => {
      tries++;
      return tries === 1 ? Promise.reject(refused()) : new Promise<string>((r) => setTimeout(() => r('late'), 25));
    });
    await clock.runAllAsync();
    expect(await out).to.equal('late');
    let n = 0;
    const fails = runPlan(p, storage(), () => {
      n++;
      return Promise.reject(refused());
    }).catch((e: unknown) => e);
    await clock.runAllAsync();
    expect((await fails) as Error).to.have.property('code', 'ECONNREFUSED');
    expect(n).to.equal(2);
  });

  it('a fixed-delay hedge starts another try after `delay` and the first answer wins', async () => {
    const p = plans([{ hedge: { delay: 20, maxCount: 2 }, timeout: { duration: 500 } }]).plan('eth_call', undefined);
    const starts: number[] = [];
    const out = runPlan(p, storage(), () => {
      const at = Date.now() - 1_000_000;
      starts.push(at);
      // The first try stalls for 100 ms, the hedge answers in 5.
      return new Promise<string>((r) => setTimeout(() => r(`from ${at}`), at === 0 ? 100 : 5));
    });
    await clock.tickAsync(25);
    expect(await out).to.equal('from 20');
    expect(starts).to.deep.equal([0, 20]);
  });

  it('a hedge that fails on the connection keeps the race going; another error ends it', async () => {
    const p = plans([{ hedge: { delay: 10, maxCount: 1 } }], 500).plan('', undefined);
    const out = runPlan(p, storage(), () =>
      Date.now() === 1_000_000 ? new Promise<string>((r) => setTimeout(() => r('first'), 50)) : Promise.reject(refused()),
    );
    await clock.tickAsync(60);
    expect(await out).to.equal('first');
  });

  it("the entry's circuit breaker opens on connection failures once its window is full, skips, and closes after successful trials", async () => {
    const p = plans([
      { circuitBreaker: { failureThresholdCount: 2, failureThresholdCapacity: 3, halfOpenAfter: 1000, successThresholdCount: 1, successThresholdCapacity: 1 } },
    ]).plan('eth_call', undefined);
    const b = p.breaker as EntryBreaker;
    let tries = 0;
    let fail = true;
    const op = async (): Promise<string | undefined> => {
      tries++;
      if (fail) throw refused();
      return 'v';
    };
    const go = () => runPlan(p, storage(), op, (v) => v === undefined).catch((e: unknown) => e);
    await go();
    await go();
    expect(b.state).to.equal('closed'); // window of 3 not full yet
    // A miss is not counted; a timeout is not counted.
    await runPlan(
      p,
      storage(),
      async () => undefined,
      (v) => v === undefined,
    );
    expect(b.state).to.equal('closed');
    await go();
    expect(b.state).to.equal('open');
    tries = 0;
    expect(await go()).to.equal(b.openError);
    expect(tries).to.equal(0);
    clock.tick(1000);
    fail = false;
    expect(await go()).to.equal('v');
    expect(b.state).to.equal('closed');
  });

  it('a failed half-open trial reopens the entry breaker', () => {
    let now = 0;
    const b = new EntryBreaker(
      { failureThresholdCount: 1, failureThresholdCapacity: 1, halfOpenAfter: 100, successThresholdCount: 2, successThresholdCapacity: 3 },
      () => now,
    );
    b.record(true);
    expect(b.state).to.equal('open');
    now = 100;
    expect(b.permit()).to.equal(true);
    expect(b.state).to.equal('half-open');
    b.record(false);
    expect(b.permit()).to.equal(true);
    b.record(true);
    expect(b.state).to.equal('open');
    expect(b.permit()).to.equal(false);
  });
});
