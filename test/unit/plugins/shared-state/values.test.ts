/**
 * Unit tests of the shared-state plugin's key-value contract (plugins/shared-state/values.ts):
 * keys under `<clusterKey>:`, bounded keys and values, at once an error without `sharedState` or
 * while Redis is unreachable, and a deadline on every operation.
 */
import { expect } from 'chai';
import type { RedisClient } from '../../../../lib/redis.ts';
import { MAX_SHARED_KEY_LENGTH, MAX_SHARED_VALUE_BYTES, SHARED_VALUE_TIMEOUT_MS } from '../../../../plugins/shared-state/api.ts';
import FakeTimers from '@sinonjs/fake-timers';
import { GET_BOUNDED_SCRIPT, RELEASE_SCRIPT, REPLACE_SCRIPT, sha1Hex, sharedValues } from '../../../../plugins/shared-state/values.ts';

/** A Redis stand-in holding plain keys (what the service sends; its Lua scripts run as Redis would), optionally never answering. */
function fakeRedis(hang = false) {
  const kv = new Map<string, { value: string; px?: number }>();
  const wait = <T>(v: T) => (hang ? new Promise<T>(() => undefined) : Promise.resolve(v));
  const client = {
    get: (k: string) => wait(kv.get(k)?.value ?? null),
    set: (k: string, value: string, o: { NX?: boolean; PX?: number }) => {
      if (o.NX && kv.has(k)) return wait(null);
      kv.set(k, { value, px: o.PX });
      return wait('OK');
    },
    del: (k: string) => wait(kv.delete(k) ? 1 : 0),
    eval: (script: string, o: { keys: string[]; arguments: string[] }) => {
      const k = o.keys[0] as string;
      const [a1, a2, a3] = o.arguments;
      const v = kv.get(k)?.value;
      if (script === GET_BOUNDED_SCRIPT) return wait(v !== undefined && Buffer.byteLength(v) > Number(a1) ? -1 : (v ?? null));
      if (script === RELEASE_SCRIPT) return wait(v === a1 && kv.delete(k) ? 1 : 0);
      if (script === REPLACE_SCRIPT) {
        if (v === undefined || sha1Hex(v) !== a1) return wait(0);
        kv.set(k, { value: a2 as string, px: Number(a3) });
        return wait(1);
      }
      throw new Error('unknown script');
    },
  };
  return { kv, client: client as unknown as RedisClient };
}

describe('shared-state: shared values', () => {
  it('keys live under <clusterKey>: with their TTL; claim is SET NX; delete says whether the key was there', async () => {
    const { kv, client } = fakeRedis();
    const values = sharedValues({ client: () => client, clusterKey: () => 'fleet' });
    expect(values.enabled).to.equal(true);
    await values.set('filter:1', '{"a":1}', 300_000);
    expect(kv.get('fleet:filter:1')).to.deep.equal({ value: '{"a":1}', px: 300_000 });
    expect(await values.get('filter:1')).to.equal('{"a":1}');
    expect(await values.get('nothing')).to.equal(undefined);
    expect(await values.claim('lock', 1000)).to.equal(true);
    expect(await values.claim('lock', 1000)).to.equal(false);
    expect(await values.delete('lock')).to.equal(true);
    expect(await values.delete('lock')).to.equal(false);
  });

  it('a lock is claimed with a token and released only with it; replace writes only over the value read (compare-and-set)', async () => {
    const { kv, client } = fakeRedis();
    const values = sharedValues({ client: () => client, clusterKey: () => 'fleet' });
    expect(await values.claim('lock', 1000, 'mine')).to.equal(true);
    expect(kv.get('fleet:lock')?.value).to.equal('mine');
    expect(await values.release('lock', 'theirs')).to.equal(false);
    expect(await values.release('lock', 'mine')).to.equal(true);
    expect(kv.has('fleet:lock')).to.equal(false);
    await values.set('f', 'v1', 1000);
    expect(await values.replace('f', 'v0', 'v2', 2000)).to.equal(false);
    expect(await values.replace('f', 'v1', 'v2', 2000)).to.equal(true);
    expect(kv.get('fleet:f')).to.deep.equal({ value: 'v2', px: 2000 });
    await values.delete('f');
    expect(await values.replace('f', 'v2', 'v3', 2000)).to.equal(false);
    expect(kv.has('fleet:f')).to.equal(false);
  });

  it('a stored value over the bound (written by something else) is never read whole: get throws RangeError', async () => {
    const { kv, client } = fakeRedis();
    const values = sharedValues({ client: () => client, clusterKey: () => 'fleet' });
    kv.set('fleet:big', { value: 'x'.repeat(MAX_SHARED_VALUE_BYTES + 1) });
    const e = await values.get('big').then(
      () => undefined,
      (x: unknown) => x as Error,
    );
    expect(e).to.be.instanceOf(RangeError);
  });

  it('refuses a key or a value over its bound, and fails at once without sharedState or while Redis is unreachable', async () => {
    const { client } = fakeRedis();
    const values = sharedValues({ client: () => client, clusterKey: () => 'fleet' });
    const err = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(await err(values.get('k'.repeat(MAX_SHARED_KEY_LENGTH + 1)))).to.be.instanceOf(RangeError);
    expect(await err(values.set('k', 'v'.repeat(MAX_SHARED_VALUE_BYTES + 1), 1))).to.be.instanceOf(RangeError);
    const off = sharedValues({ client: () => client, clusterKey: () => undefined });
    expect(off.enabled).to.equal(false);
    expect((await err(off.get('k')))?.message).to.contain('not configured');
    const down = sharedValues({ client: () => undefined, clusterKey: () => 'fleet' });
    expect((await err(down.get('k')))?.message).to.contain('unreachable');
  });

  it(`an operation Redis does not answer fails after ${SHARED_VALUE_TIMEOUT_MS} ms`, async () => {
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { client } = fakeRedis(true);
      const values = sharedValues({ client: () => client, clusterKey: () => 'fleet' });
      let e: Error | undefined;
      const p = values.get('k').then(
        () => undefined,
        (x: unknown) => void (e = x as Error),
      );
      await clock.tickAsync(SHARED_VALUE_TIMEOUT_MS - 1);
      expect(e).to.equal(undefined);
      await clock.tickAsync(1);
      await p;
      expect(e?.message).to.contain('did not answer');
    } finally {
      clock.uninstall();
    }
  });
});
