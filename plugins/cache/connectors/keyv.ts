/**
 * A shared cache tier on any keyv storage adapter: the Redis and PostgreSQL
 * tiers (@keyv/redis, @keyv/postgres) and `driver: keyv` (memcached, Valkey, SQLite, DynamoDB,
 * MongoDB, MySQL, etcd...) all run through this class, so the trust rules hold for each alike:
 * - every operation runs under the connector's {@link StorageBreaker} with its own deadline
 *   (`readTimeout` 50 ms, `writeTimeout` 500 ms by default, or the matching
 *   `failsafeForGets` / `failsafeForSets` entry's timeout and retries): a store that stops
 *   answering costs a call at most one read deadline, and after `breaker.failureThreshold`
 *   failures in a row none at all (reads miss, writes are dropped) until a probe succeeds;
 * - keys are svc's block-hash-aware cache keys (`svc:cache:<partition>#<range>`; a key longer
 *   than {@link MAX_PLAIN_KEY_LENGTH} is replaced by its SHA-256, since memcached refuses keys
 *   over 250 bytes and @keyv/postgres's key column is VARCHAR(255));
 * - the reverse index of lookups by hash is a second key, `svc:cache:rvi#<network>#<range>`,
 *   holding the partition the entry was last written under. keyv offers only key-value
 *   operations (no `LIKE` or secondary index), so the "latest partition for a `*` block ref"
 *   lookup is this pointer key on every store: two gets under one deadline;
 * - values are {@link encodeEntry}'s text inside keyv's own envelope (`{"value","expires"}`),
 *   so keyv enforces the TTL on stores without native expiry (PostgreSQL, SQLite) and a store
 *   with native expiry (Redis, memcached) drops the key itself.
 * keyv is built with `throwOnErrors` so a store failure reaches the breaker instead of being
 * swallowed as a miss.
 */
import { createHash } from 'node:crypto';
import Keyv, { type KeyvStoreAdapter } from 'keyv';
import type { Registry } from 'prom-client';
import type { Finality, Logger } from 'svc-proxy/plugin';
import { sleep, StorageBreaker } from 'svc-proxy/util';
import { FailsafePlans, methodOfRange, type CacheFailsafeEntry, type OpPlan } from '../failsafe.ts';
import { runPlan } from '../failsafe-run.ts';
import { DEFAULT_READ_TIMEOUT_MS, DEFAULT_WRITE_TIMEOUT_MS, WRITE_TIMEOUT_MS, type RemoteTierSettings } from '../schema.ts';
import type { ValueCodec } from '../compression.ts';
import { decodeEntry, encodeEntry, reverseKey, type CacheEntry, type Connector, type ConnectorDriver, type TierReporter } from './types.ts';

/** Prefix of every key svc writes, so a shared store can hold other data too. */
export const KEY_PREFIX = 'svc:cache:';
/** Longest key stored as is; longer keys are stored under their SHA-256 (see the module comment). */
export const MAX_PLAIN_KEY_LENGTH = 200;

/** Settings of a keyv tier (durations in ms). */
export interface KeyvTierSettings extends Partial<RemoteTierSettings> {
  /** Compresses written values and decodes read ones (`compression`); absent: values stored as they are. */
  codec?: ValueCodec;
  /** eRPC's `failsafeForGets`: how reads run per method/finality. */
  failsafeForGets?: CacheFailsafeEntry[];
  /** eRPC's `failsafeForSets`: how writes run per method/finality. */
  failsafeForSets?: CacheFailsafeEntry[];
}

/** A read that found nothing (not counted by a failsafe entry's breaker). */
const isMiss = (v: CacheEntry | undefined): boolean => v === undefined;

/** See the module comment. */
export class KeyvConnector implements Connector {
  /** The tier's circuit breaker (kind `cache`). */
  readonly breaker: StorageBreaker;
  /** The keyv instance (tests and subclasses). */
  readonly keyv: Keyv<string>;
  private readonly gets: FailsafePlans;
  private readonly sets: FailsafePlans;
  private closed = false;
  private readonly codec?: ValueCodec;

  /**
   * @param id connector id (never a URI)
   * @param driver the configured driver (`redis`, `postgresql`, `keyv`)
   * @param store the keyv storage adapter (its connection is the adapter's own)
   * @param settings deadlines (defaults 50 ms reads, 500 ms writes), breaker and failsafe entries
   * @param reporter rate-limited, redacting failure log of this tier
   * @param logger where breaker edges are reported
   * @param metrics registry of the breaker metrics (none: not exported)
   */
  constructor(
    readonly id: string,
    readonly driver: ConnectorDriver,
    readonly store: KeyvStoreAdapter,
    settings: KeyvTierSettings,
    private readonly reporter: TierReporter,
    logger: Logger,
    metrics?: Registry,
  ) {
    this.breaker = new StorageBreaker({ connector: id, kind: 'cache', logger, metrics, settings: settings.breaker });
    this.gets = new FailsafePlans(settings.failsafeForGets, settings.readTimeout ?? DEFAULT_READ_TIMEOUT_MS);
    this.sets = new FailsafePlans(settings.failsafeForSets, settings.writeTimeout ?? DEFAULT_WRITE_TIMEOUT_MS);
    this.codec = settings.codec;
    // No keyv namespace: svc's own prefix is part of every key, identical on every store.
    this.keyv = new Keyv<string>({ store, namespace: undefined, useKeyPrefix: false, throwOnErrors: true });
    // An unhandled 'error' event would crash the process: a tier failure is only ever a miss.
    this.keyv.on('error', (e: unknown) => this.report('store', e));
  }

  /**
   * Logs a tier failure (rate-limited), naming the connector, never the URI. An operation the
   * open breaker refused is not logged: the breaker logged its edge.
   */
  report(what: string, e: unknown): void {
    if (e === this.breaker.openError) return;
    this.reporter.report(what, e);
  }

  /** Nothing to wait for: adapters connect on first use, in the background. */
  open(): Promise<void> {
    return Promise.resolve();
  }

  /** Disconnects the adapter; a stalled store is given up after the outer write bound. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const d = (this.store as { disconnect?: () => Promise<void> }).disconnect;
    if (typeof d !== 'function') return;
    // The wait is cancelled once the race is over (its rejection is the race's, already settled).
    const waited = new AbortController();
    await Promise.race([d.call(this.store).catch((e: unknown) => this.report('close', e)), sleep(WRITE_TIMEOUT_MS, waited.signal, true)]);
    waited.abort();
  }

  /** The stored key of an entry (see the module comment). */
  static keyOf(key: string): string {
    const k = KEY_PREFIX + key;
    return k.length <= MAX_PLAIN_KEY_LENGTH ? k : `${KEY_PREFIX}sha256:${createHash('sha256').update(k).digest('hex')}`;
  }

  /**
   * The entry, or undefined.
   * @param finality the call's finality class (selects a `failsafeForGets` entry)
   * @throws StorageUnavailableError synchronously while the breaker is open (the store counts a
   *   get error and serves from the upstream without waiting)
   */
  get(partition: string, range: string, finality?: Finality): Promise<CacheEntry | undefined> {
    return this.run(this.gets.plan(methodOfRange(range), finality), () => this.fetch(`${partition}#${range}`), isMiss);
  }

  /** The entry a lookup by hash points at (two gets under one deadline). See {@link get}. */
  getReverse(network: string, range: string, finality?: Finality): Promise<CacheEntry | undefined> {
    return this.run(
      this.gets.plan(methodOfRange(range), finality),
      async () => {
        const pk = await this.keyv.get(KeyvConnector.keyOf(reverseKey(network, range)));
        return typeof pk === 'string' ? this.fetch(`${pk}#${range}`) : undefined;
      },
      isMiss,
    );
  }

  /**
   * Stores an entry and, for a lookup by hash, its reverse-index pointer (one `setMany`: a
   * single MULTI round trip on Redis).
   * @throws StorageUnavailableError synchronously while the breaker is open: the write is dropped
   *   and counted as a set error
   */
  set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): Promise<void> {
    const ttl = ttlMs > 0 ? Math.ceil(ttlMs) : undefined;
    const key = KeyvConnector.keyOf(`${partition}#${range}`);
    const value = this.codec ? this.codec.encode(encodeEntry(entry)) : encodeEntry(entry);
    return this.run(this.sets.plan(methodOfRange(range), entry.finality), async () => {
      if (reverseNetwork === undefined) await this.keyv.set(key, value, ttl);
      else
        await this.keyv.setMany([
          { key, value, ttl },
          { key: KeyvConnector.keyOf(reverseKey(reverseNetwork, range)), value: partition, ttl },
        ]);
    });
  }

  /** Drops an entry; skipped while the breaker is open. */
  async delete(partition: string, range: string): Promise<void> {
    await this.breaker.tryRun(() => this.keyv.delete(KeyvConnector.keyOf(`${partition}#${range}`)), this.sets.plan('', undefined).timeoutMs);
  }

  private async fetch(key: string): Promise<CacheEntry | undefined> {
    const v = await this.keyv.get(KeyvConnector.keyOf(key));
    if (typeof v !== 'string') return undefined;
    if (!this.codec) return decodeEntry(v);
    const text = this.codec.decode(v);
    return text === undefined ? undefined : decodeEntry(text);
  }

  /** Runs one operation by its plan (failsafe-run.ts): a plain plan throws synchronously while the breaker is open. */
  private run<T>(plan: OpPlan, op: () => Promise<T>, isMiss?: (v: T) => boolean): Promise<T> {
    return runPlan(plan, this.breaker, op, isMiss);
  }
}
