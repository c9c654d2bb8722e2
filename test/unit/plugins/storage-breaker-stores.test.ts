/**
 * The stores that use the storage breaker, on fake timers and stores that never answer: the
 * API-key store (lookups fail closed at their deadline, then at once; cached keys still work; a
 * corrupt record is an answer; an admin change says it may still land) and the rate-limit budgets
 * (a stalled shared store is waited for only until its deadline, then skipped; a full window is
 * the store answering, not failing).
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { pino } from 'pino';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { StorageBreaker, type StorageUnavailableError } from '../../../lib/storage-breaker.ts';
import { GuardedApiKeyStore, isStoreFailure } from '../../../plugins/auth/api-keys/guarded.ts';
import { ApiKeySpace } from '../../../plugins/auth/api-keys/space.ts';
import { MemoryApiKeyStore, type ApiKeyStore } from '../../../plugins/auth/api-keys/store.ts';
import { Budget } from '../../../plugins/rate-limit/budgets.ts';

const silent = pino({ level: 'silent' });
const never = <T>() => new Promise<T>(() => undefined);
const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
};

describe('storage breaker in the key and rate-limit stores', () => {
  let clock: ReturnType<typeof FakeTimers.install>;
  beforeEach(() => {
    clock = FakeTimers.install({ now: 1_000_000, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => clock.uninstall());

  describe('API keys', () => {
    /** A memory store that stalls every call once `stalled` is set. */
    const stalling = () => {
      const inner = new MemoryApiKeyStore(100);
      const state = { stalled: false };
      const store: ApiKeyStore = {
        get: (k) => (state.stalled ? never() : inner.get(k)),
        add: (r) => (state.stalled ? never() : inner.add(r)),
        put: (r, p) => (state.stalled ? never() : inner.put(r, p)),
        delete: (k) => (state.stalled ? never() : inner.delete(k)),
        list: (l, a) => (state.stalled ? never() : inner.list(l, a)),
        keysOf: (u) => (state.stalled ? never() : inner.keysOf(u)),
        close: () => inner.close(),
      };
      const breaker = new StorageBreaker({ connector: 'keys', kind: 'api-keys', logger: silent, isFailure: isStoreFailure });
      const guarded = new GuardedApiKeyStore(() => Promise.resolve(store), breaker, { lookupTimeout: 500, writeTimeout: 2000 });
      return {
        state,
        breaker,
        space: new ApiKeySpace(
          () => Promise.resolve(guarded),
          60_000,
          () => true,
          () => Date.now(),
        ),
      };
    };

    it('an unknown key fails closed at the lookup deadline, then at once once the breaker is open; a cached key still works', async () => {
      const { state, breaker, space } = stalling();
      await space.add({ apiKey: 'known', userId: 'alice' });
      expect(await space.lookup('known')).to.include({ userId: 'alice' });
      state.stalled = true;
      const results = [1, 2, 3].map((n) =>
        space.lookup(`ghost-${n}`).then(
          () => 'found',
          (e: unknown) => e,
        ),
      );
      await flush();
      clock.tick(499);
      await flush();
      let settled = false;
      void Promise.all(results).then(() => (settled = true));
      await flush();
      expect(settled).to.equal(false);
      clock.tick(1);
      for (const r of await Promise.all(results)) expect((r as StorageUnavailableError).reason).to.equal('timeout');
      expect(breaker.state).to.equal('open');
      const err = await space.lookup('ghost-4').catch((e: unknown) => e);
      expect((err as StorageUnavailableError).reason).to.equal('open');
      expect(await space.lookup('known')).to.include({ userId: 'alice' });
    });

    it('an admin change that misses its deadline says it may still be applied', async () => {
      const { state, space } = stalling();
      state.stalled = true;
      const p = space.add({ apiKey: 'new', userId: 'bob' }).catch((e: unknown) => e);
      await flush();
      clock.tick(2000);
      const err = (await p) as StorageUnavailableError;
      expect(err.message).to.equal(
        'api-keys connector keys did not answer within 2000 ms; a change may or may not have been applied: read the key back before retrying',
      );
    });

    it('a corrupt record is the store answering: it never opens the breaker', () => {
      expect(isStoreFailure(new Error('missing or invalid userId in current data'))).to.equal(false);
      expect(isStoreFailure(new Error('ECONNRESET'))).to.equal(true);
    });
  });

  describe('rate-limit budgets', () => {
    /** A node-redis-shaped client: the limiter's EVAL never answers while stalled. */
    const budgetWith = (consume: () => Promise<unknown>) => {
      let fallbacks = 0;
      const breaker = new StorageBreaker({
        connector: 'rate-limit-store',
        kind: 'rate-limit',
        logger: silent,
        isFailure: (e) => !(e instanceof RateLimiterRes),
      });
      const budget = new Budget('b', [{ maxCount: 2, period: 'second' }], {
        client: {},
        keyPrefix: 't:',
        timeoutMs: 50,
        breaker,
        onFallback: () => fallbacks++,
      });
      // The shared limiter of the rule, replaced by the scripted one.
      const rule = (budget as unknown as { rules: Array<{ shared: { consume: () => Promise<unknown> } }> }).rules[0]!;
      rule.shared = { consume };
      return { budget, breaker, fallbacks: () => fallbacks };
    };
    const subject = { method: 'eth_call', clientAddress: '1.2.3.4', userId: undefined, networkId: 'evm:1' };

    it('a stalled store is waited for until its deadline only, then skipped: the per-process limiter decides at once', async () => {
      const { budget, breaker, fallbacks } = budgetWith(never);
      for (let i = 0; i < 3; i++) {
        const p = budget.admit(subject);
        clock.tick(50);
        await flush();
        expect(await p).to.equal(i < 2);
      }
      expect(breaker.state).to.equal('open');
      // Open: no timer to wait for, the per-process window (2 per second) is already full.
      expect(await budget.admit(subject)).to.equal(false);
      expect(fallbacks()).to.equal(4);
    });

    it('a full window is an answer of the store: refusals never open the breaker', async () => {
      const { budget, breaker } = budgetWith(() => Promise.reject(new RateLimiterRes(0, 1000, 3, false)));
      for (let i = 0; i < 5; i++) expect(await budget.admit(subject)).to.equal(false);
      expect(breaker.state).to.equal('closed');
    });
  });
});
