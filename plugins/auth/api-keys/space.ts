/**
 * One (projectId, connectorId) key space: lookups for the `database` strategy
 * through a bounded cache (found keys for `cache.ttl`, unknown ones for 5 s), and the admin
 * methods' changes, each evicting the key from this replica's cache at once.
 */
import { LRUCache } from 'lru-cache';
import type { ApiKeyManager, ApiKeyRecord } from '../api.ts';
import { keyAfter, type ApiKeyStore } from './store.ts';

/** How long an unknown key is remembered, ms (spec: negative lookups for 5 s). */
export const NEGATIVE_TTL_MS = 5000;
/** Most lookups cached per key space. */
const MAX_CACHED = 10_000;
/** Longest accepted API key, characters. */
export const MAX_API_KEY_CHARS = 1024;
/** Largest `svc_listApiKeys` page. */
export const MAX_PAGE = 1000;

/** A cached lookup: the record, or null for "no such key". */
type Cached = { record: ApiKeyRecord | null };

/** See the module comment. */
export class ApiKeySpace implements ApiKeyManager {
  private readonly cache: LRUCache<string, Cached>;

  /**
   * @param store the driver, opened lazily (the first lookup or admin call waits for it)
   * @param ttlMs how long a found key is trusted without a lookup, ms
   * @param budgetExists whether a budget id is declared (`rateLimitBudget` of a record)
   * @param now the clock of the cache TTLs, ms (tests drive it)
   * @param shared whether the store is shared between processes (not the memory driver)
   */
  constructor(
    private readonly store: () => Promise<ApiKeyStore>,
    ttlMs: number,
    private readonly budgetExists: (id: string) => boolean,
    now: () => number = () => performance.now(),
    readonly shared = false,
  ) {
    this.cache = new LRUCache<string, Cached>({ max: MAX_CACHED, ttl: Math.max(1, ttlMs), ttlAutopurge: false, ttlResolution: 0, perf: { now } });
  }

  /**
   * The record of a presented key, from the cache or the store.
   * @throws Error when the store fails or holds a corrupt record (`missing or invalid userId in current data`)
   */
  async lookup(key: string): Promise<ApiKeyRecord | undefined> {
    if (key.length > MAX_API_KEY_CHARS) return undefined;
    const hit = this.cache.get(key);
    if (hit) return hit.record ?? undefined;
    const record = await (await this.store()).get(key);
    if (record) this.cache.set(key, { record });
    else this.cache.set(key, { record: null }, { ttl: NEGATIVE_TTL_MS });
    return record;
  }

  async add(input: { apiKey: string; userId: string; rateLimitBudget?: string; enabled?: boolean }): Promise<ApiKeyRecord> {
    this.checkBudget(input.rateLimitBudget);
    const now = new Date().toISOString();
    const record: ApiKeyRecord = {
      key: input.apiKey,
      userId: input.userId,
      enabled: input.enabled !== false,
      ...(input.rateLimitBudget ? { rateLimitBudget: input.rateLimitBudget } : {}),
      createdAt: now,
      updatedAt: now,
    };
    if (!(await (await this.store()).add(record))) throw new Error('api key already exists');
    this.cache.delete(input.apiKey);
    return record;
  }

  async list(
    limit: number,
    paginationToken: string | undefined,
  ): Promise<{ apiKeys: ApiKeyRecord[]; nextToken: string; hasMore: boolean; totalReturned: number }> {
    const page = await (await this.store()).list(Math.min(Math.max(1, limit), MAX_PAGE), keyAfter(paginationToken));
    return { apiKeys: page.records, nextToken: page.nextToken, hasMore: page.hasMore, totalReturned: page.records.length };
  }

  async update(apiKey: string, updates: Record<string, unknown>): Promise<ApiKeyRecord> {
    const store = await this.store();
    const current = await store.get(apiKey);
    if (!current) throw new Error('api key not found');
    const next: ApiKeyRecord = { ...current };
    for (const [field, value] of Object.entries(updates)) {
      if (field === 'userId') {
        if (typeof value !== 'string' || value === '') throw new Error('missing or invalid userId in current data');
        next.userId = value;
      } else if (field === 'enabled') {
        if (value === null) next.enabled = true;
        else if (typeof value === 'boolean') next.enabled = value;
        else throw new Error('updates.enabled must be a boolean');
      } else if (field === 'rateLimitBudget') {
        if (value === null) delete next.rateLimitBudget;
        else if (typeof value === 'string' && value !== '') {
          this.checkBudget(value);
          next.rateLimitBudget = value;
        } else throw new Error('updates.rateLimitBudget must be a budget id or null');
      } else throw new Error(`updates.${field.slice(0, 64)} cannot be changed (userId, enabled, rateLimitBudget)`);
    }
    next.updatedAt = new Date().toISOString();
    await store.put(next, current.userId);
    this.cache.delete(apiKey);
    return next;
  }

  async delete(apiKey: string): Promise<ApiKeyRecord> {
    const gone = await (await this.store()).delete(apiKey);
    this.cache.delete(apiKey);
    if (!gone) throw new Error('api key not found');
    return gone;
  }

  private checkBudget(id: string | undefined): void {
    if (id !== undefined && !this.budgetExists(id)) throw new Error(`rateLimitBudget "${id.slice(0, 64)}" is not declared in rateLimiters.budgets`);
  }
}
