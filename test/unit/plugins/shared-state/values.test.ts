/**
 * Unit tests of the shared-state plugin's key-value contract (plugins/shared-state/values.ts):
 * keys under `<clusterKey>:`, bounded keys and values, at once an error without `sharedState` or
 * while Redis is unreachable, and a deadline on every operation.
 */
import { expect } from 'chai';
import type { RedisClient } from '../../../../lib/redis.ts';
import { MAX_SHARED_KEY_LENGTH, MAX_SHARED_VALUE_BYTES, SHARED_VALUE_TIMEOUT_MS } from '../../../../plugins/shared-state/api.ts';
import { sharedValues } from '../../../../plugins/shared-state/values.ts';

/** A Redis stand-in holding plain keys (what the service sends), optionally never answering. */
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
    const { client } = fakeRedis(true);
    const values = sharedValues({ client: () => client, clusterKey: () => 'fleet' });
    const e = await values.get('k').then(
      () => undefined,
      (x: unknown) => x as Error,
    );
    expect(e?.message).to.contain('did not answer');
  });
});
