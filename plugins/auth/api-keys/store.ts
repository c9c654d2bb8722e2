/**
 * API key storage (spec §2.3, §3.3, §4.4): records per (projectId, connectorId),
 * a main row keyed by the key and a reverse index by userId, lookups by key alone. This file
 * holds the record shape, the store contract, its pagination token and the `memory` driver; the
 * Redis and PostgreSQL drivers are in their own files and loaded only when configured.
 */
import type { ApiKeyRecord } from '../api.ts';

/** A page of keys, in key order. */
export interface ApiKeyPage {
  records: ApiKeyRecord[];
  /** Token of the next page ('' when there is none). */
  nextToken: string;
  hasMore: boolean;
}

/** One (projectId, connectorId) key space on a driver. */
export interface ApiKeyStore {
  /** The record of a key, or undefined. Throws when the driver cannot answer. */
  get(key: string): Promise<ApiKeyRecord | undefined>;
  /** Adds a record; false when the key already exists. */
  add(record: ApiKeyRecord): Promise<boolean>;
  /** Replaces a record (the key exists: callers read it first). */
  put(record: ApiKeyRecord, previousUserId: string | undefined): Promise<void>;
  /** Deletes a key and its reverse index entry; the deleted record, or undefined. */
  delete(key: string): Promise<ApiKeyRecord | undefined>;
  /** Up to `limit` records with keys after the token's, in key order. */
  list(limit: number, after: string | undefined): Promise<ApiKeyPage>;
  /** Keys of a user (the reverse index). */
  keysOf(userId: string): Promise<string[]>;
  /** Releases connections. */
  close(): Promise<void>;
}

/** The pagination token of a page ending at `lastKey`: opaque to clients. */
export function tokenAfter(lastKey: string): string {
  return Buffer.from(lastKey, 'utf8').toString('base64url');
}

/**
 * The last key of the previous page, from a client's token.
 * @returns undefined for the first page (no token, or a blank one: spec §4.4 rule 2)
 * @throws Error when the token is not one svc wrote
 */
export function keyAfter(token: string | undefined): string | undefined {
  if (token === undefined || token.trim() === '') return undefined;
  if (token.length > 4096 || !/^[A-Za-z0-9_-]+$/.test(token)) throw new Error('paginationToken is not a token returned by svc_listApiKeys');
  return Buffer.from(token, 'base64url').toString('utf8');
}

/**
 * A stored record read back: anything without a string userId is corrupt (spec §7).
 * @throws Error `missing or invalid userId in current data`
 */
export function checkedRecord(raw: unknown): ApiKeyRecord {
  const r = raw as Partial<ApiKeyRecord> | undefined;
  if (!r || typeof r.key !== 'string' || typeof r.userId !== 'string' || r.userId === '') throw new Error('missing or invalid userId in current data');
  return {
    key: r.key,
    userId: r.userId,
    enabled: r.enabled !== false,
    ...(typeof r.rateLimitBudget === 'string' ? { rateLimitBudget: r.rateLimitBudget } : {}),
    createdAt: String(r.createdAt ?? ''),
    updatedAt: String(r.updatedAt ?? ''),
  };
}

/** The `memory` driver: per process, lost on restart; for tests and single-replica setups. */
export class MemoryApiKeyStore implements ApiKeyStore {
  private readonly rows = new Map<string, ApiKeyRecord>();
  private readonly byUser = new Map<string, Set<string>>();

  /** @param maxItems most keys held; adding beyond fails */
  constructor(private readonly maxItems: number) {}

  get(key: string): Promise<ApiKeyRecord | undefined> {
    const r = this.rows.get(key);
    return Promise.resolve(r ? { ...r } : undefined);
  }

  add(record: ApiKeyRecord): Promise<boolean> {
    if (this.rows.has(record.key)) return Promise.resolve(false);
    if (this.rows.size >= this.maxItems) return Promise.reject(new Error(`the memory API-key store is full (maxItems ${this.maxItems})`));
    this.rows.set(record.key, { ...record });
    this.index(record.userId, record.key);
    return Promise.resolve(true);
  }

  put(record: ApiKeyRecord, previousUserId: string | undefined): Promise<void> {
    if (previousUserId !== undefined && previousUserId !== record.userId) this.unindex(previousUserId, record.key);
    this.rows.set(record.key, { ...record });
    this.index(record.userId, record.key);
    return Promise.resolve();
  }

  delete(key: string): Promise<ApiKeyRecord | undefined> {
    const r = this.rows.get(key);
    if (r) {
      this.rows.delete(key);
      this.unindex(r.userId, key);
    }
    return Promise.resolve(r);
  }

  list(limit: number, after: string | undefined): Promise<ApiKeyPage> {
    const keys = [...this.rows.keys()].filter((k) => after === undefined || k > after).sort();
    const page = keys.slice(0, limit).map((k) => ({ ...(this.rows.get(k) as ApiKeyRecord) }));
    const hasMore = keys.length > limit;
    return Promise.resolve({ records: page, hasMore, nextToken: hasMore && page.length ? tokenAfter(page[page.length - 1]!.key) : '' });
  }

  keysOf(userId: string): Promise<string[]> {
    return Promise.resolve([...(this.byUser.get(userId) ?? [])].sort());
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private index(userId: string, key: string): void {
    let s = this.byUser.get(userId);
    if (!s) this.byUser.set(userId, (s = new Set()));
    s.add(key);
  }

  private unindex(userId: string, key: string): void {
    const s = this.byUser.get(userId);
    s?.delete(key);
    if (s?.size === 0) this.byUser.delete(userId);
  }
}
