/**
 * The Redis driver of API keys, on node-redis. Per (projectId, connectorId)
 * under `<keyPrefix><project>:<connector>:`:
 * - `k:<key>`: the record as JSON (the main row);
 * - `u:<userId>`: a set of the user's keys (the reverse index, removed on delete);
 * - `all`: a sorted set of every key at score 0, paged in key order with ZRANGE BYLEX.
 * Writes go in one MULTI so a reader never sees a row without its index entries.
 */
import { checkedRecord, tokenAfter, type ApiKeyPage, type ApiKeyStore } from './store.ts';
import type { ApiKeyRecord } from '../api.ts';
import type { RedisClient } from 'svc-proxy/util';

/**
 * Resolves once the client is ready, or after `ms` (commands then fail fast, as while Redis is
 * down): the first lookups after start-up wait for the connection instead of failing.
 */
export function whenReady(client: RedisClient, ms: number): Promise<void> {
  if (client.isReady) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      client.off('ready', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    client.on('ready', done);
  });
}

/** See the module comment. */
export class RedisApiKeyStore implements ApiKeyStore {
  private readonly base: string;

  /**
   * @param client an open client (closed by its owner, not here)
   * @param prefix `redis.keyPrefix`
   */
  constructor(
    private readonly client: RedisClient,
    prefix: string,
    projectId: string,
    connectorId: string,
  ) {
    this.base = `${prefix}${projectId}:${connectorId}:`;
  }

  async get(key: string): Promise<ApiKeyRecord | undefined> {
    const raw = await this.client.get(`${this.base}k:${key}`);
    return raw === null ? undefined : checkedRecord(JSON.parse(raw) as unknown);
  }

  async add(record: ApiKeyRecord): Promise<boolean> {
    const created = await this.client.set(`${this.base}k:${record.key}`, JSON.stringify(record), { NX: true });
    if (created === null) return false;
    await this.client.multi().sAdd(`${this.base}u:${record.userId}`, record.key).zAdd(`${this.base}all`, { score: 0, value: record.key }).exec();
    return true;
  }

  async put(record: ApiKeyRecord, previousUserId: string | undefined): Promise<void> {
    const m = this.client.multi().set(`${this.base}k:${record.key}`, JSON.stringify(record)).sAdd(`${this.base}u:${record.userId}`, record.key);
    if (previousUserId !== undefined && previousUserId !== record.userId) m.sRem(`${this.base}u:${previousUserId}`, record.key);
    await m.exec();
  }

  async delete(key: string): Promise<ApiKeyRecord | undefined> {
    const raw = await this.client.get(`${this.base}k:${key}`);
    if (raw === null) return undefined;
    const parsed = JSON.parse(raw) as Partial<ApiKeyRecord>;
    const m = this.client.multi().del(`${this.base}k:${key}`).zRem(`${this.base}all`, key);
    if (typeof parsed.userId === 'string') m.sRem(`${this.base}u:${parsed.userId}`, key);
    await m.exec();
    return checkedRecord(parsed);
  }

  async list(limit: number, after: string | undefined): Promise<ApiKeyPage> {
    // Exclusive lower bound in lexicographic order; one extra key says whether more follow.
    const keys = await this.client.zRange(`${this.base}all`, after === undefined ? '-' : `(${after}`, '+', {
      BY: 'LEX',
      LIMIT: { offset: 0, count: limit + 1 },
    });
    const hasMore = keys.length > limit;
    const pageKeys = keys.slice(0, limit);
    const raws = pageKeys.length ? await this.client.mGet(pageKeys.map((k) => `${this.base}k:${k}`)) : [];
    const records = raws.filter((r): r is string => r !== null).map((r) => checkedRecord(JSON.parse(r) as unknown));
    return { records, hasMore, nextToken: hasMore && pageKeys.length ? tokenAfter(pageKeys[pageKeys.length - 1] as string) : '' };
  }

  async keysOf(userId: string): Promise<string[]> {
    return (await this.client.sMembers(`${this.base}u:${userId}`)).sort();
  }

  async close(): Promise<void> {
    // The client is shared; its owner closes it.
  }
}
