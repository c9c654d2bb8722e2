/**
 * API-key lookups and changes (plugins/auth/api-keys): found keys are cached
 * for the TTL, unknown ones for 5 s, changes evict at once; the memory driver's pages and
 * reverse index; a corrupt record's §7 message.
 */
import { expect } from 'chai';
import { ApiKeySpace, NEGATIVE_TTL_MS } from '../../../plugins/auth/api-keys/space.ts';
import { checkedRecord, keyAfter, MemoryApiKeyStore, type ApiKeyStore } from '../../../plugins/auth/api-keys/store.ts';

/** A memory store that counts reads. */
function counted(): { store: ApiKeyStore; reads: () => number } {
  const inner = new MemoryApiKeyStore(1000);
  let n = 0;
  const store = Object.assign(Object.create(inner) as ApiKeyStore, {
    get: (k: string) => {
      n++;
      return inner.get(k);
    },
  });
  return { store, reads: () => n };
}

describe('API keys: lookups, cache and store', () => {
  let clock = 0;
  const now = () => clock;
  beforeEach(() => (clock = 1_000_000));

  it('a found key is trusted for the TTL without a lookup; an unknown key is remembered 5 s', async () => {
    const { store, reads } = counted();
    const space = new ApiKeySpace(
      () => Promise.resolve(store),
      60_000,
      () => true,
      now,
    );
    await space.add({ apiKey: 'k1', userId: 'u' });
    expect(await space.lookup('k1')).to.include({ userId: 'u', enabled: true });
    clock += 59_000;
    await space.lookup('k1');
    expect(reads()).to.equal(1);
    clock += 2_000;
    await space.lookup('k1');
    expect(reads()).to.equal(2);

    expect(await space.lookup('ghost')).to.equal(undefined);
    clock += NEGATIVE_TTL_MS - 1;
    await space.lookup('ghost');
    expect(reads()).to.equal(3);
    clock += 2;
    await space.lookup('ghost');
    expect(reads()).to.equal(4);
  });

  it('add, update and delete evict the key at once', async () => {
    const { store } = counted();
    const space = new ApiKeySpace(
      () => Promise.resolve(store),
      60_000,
      (id) => id === 'gold',
      now,
    );
    expect(await space.lookup('k')).to.equal(undefined);
    await space.add({ apiKey: 'k', userId: 'u' });
    expect(await space.lookup('k')).to.not.equal(undefined);
    await space.update('k', { enabled: false, rateLimitBudget: 'gold' });
    expect(await space.lookup('k')).to.include({ enabled: false, rateLimitBudget: 'gold' });
    await space.update('k', { rateLimitBudget: null });
    expect((await space.lookup('k'))?.rateLimitBudget).to.equal(undefined);
    await space.delete('k');
    expect(await space.lookup('k')).to.equal(undefined);
    let err: Error | undefined;
    await space.update('k', {}).catch((e: Error) => (err = e));
    expect(err?.message).to.equal('api key not found');
  });

  it('refuses unknown budgets, unchangeable fields and a userId that is not a string', async () => {
    const store = new MemoryApiKeyStore(10);
    const space = new ApiKeySpace(
      () => Promise.resolve(store),
      1000,
      () => false,
      now,
    );
    await space.add({ apiKey: 'k', userId: 'u' });
    for (const [updates, msg] of [
      [{ rateLimitBudget: 'x' }, /not declared/],
      [{ key: 'other' }, /cannot be changed/],
      [{ userId: 5 }, /missing or invalid userId/],
    ] as const) {
      let err: Error | undefined;
      await space.update('k', updates as Record<string, unknown>).catch((e: Error) => (err = e));
      expect(err?.message).to.match(msg);
    }
  });

  it('the memory driver pages in key order and keeps the reverse index', async () => {
    const s = new MemoryApiKeyStore(100);
    for (const k of ['c', 'a', 'b']) await s.add({ key: k, userId: k === 'c' ? 'x' : 'y', enabled: true, createdAt: '', updatedAt: '' });
    const p1 = await s.list(2, undefined);
    expect(p1.records.map((r) => r.key)).to.deep.equal(['a', 'b']);
    expect(p1.hasMore).to.equal(true);
    const p2 = await s.list(2, keyAfter(p1.nextToken));
    expect(p2.records.map((r) => r.key)).to.deep.equal(['c']);
    expect(p2).to.include({ hasMore: false, nextToken: '' });
    expect(await s.keysOf('y')).to.deep.equal(['a', 'b']);
    await s.delete('a');
    expect(await s.keysOf('y')).to.deep.equal(['b']);
    expect(keyAfter('')).to.equal(undefined);
    expect(keyAfter('   ')).to.equal(undefined);
    expect(() => keyAfter('not a token!')).to.throw(/paginationToken/);
  });

  it('a stored record without a string userId is corrupt (spec §7)', () => {
    expect(() => checkedRecord({ key: 'k', userId: null })).to.throw('missing or invalid userId in current data');
    expect(checkedRecord({ key: 'k', userId: 'u' })).to.include({ enabled: true });
  });
});
