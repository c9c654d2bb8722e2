/**
 * Used SIWE messages: each (domain, address, nonce) is recorded on first use
 * until the message could no longer be accepted anyway, atomically, so a second use is refused
 * on this replica and on every replica sharing the store.
 *
 * Drivers, in the tier of the project's API keys (a `siwe.nonces` connector, else the first
 * `database` strategy's connector of the same auth block, else memory):
 * - **memory**: a bounded TTL map per replica (lib/claim-set.ts). Full of unexpired records, it
 *   refuses new messages (fails closed) rather than forgetting one that could then be replayed.
 *   With `server.workers` it lives in the primary and each worker asks it over IPC (500 ms
 *   deadline), so a message is accepted once whichever worker it reaches;
 * - **redis**: `SET <keyPrefix>siwe:<sha256> 1 NX PX <ttl>` on the client the API-key store of
 *   the same settings uses;
 * - **postgresql**: table `svc_siwe_nonces (id text primary key, expires_at bigint)`, created
 *   when missing, on the API-key store's pool; `INSERT … ON CONFLICT (id) DO UPDATE … WHERE
 *   expires_at < now RETURNING id` claims a new or expired row in one statement, and expired
 *   rows are purged at most once a minute, off the request's path.
 *
 * Every remote claim runs under its connector's circuit breaker (kind `siwe-nonces`, the
 * connector's `breaker` settings) with a 500 ms deadline: a store that is down or slow refuses
 * the message at once (fail closed), never holds a request.
 */
import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { claimInPrimary, ClaimSet, type ClaimOutcome, type RedisClient, type StorageBreaker, svcWorker } from 'svc-proxy/util';
import { whenReady } from './api-keys/redis.ts';
import type { ConnectorConfig } from './connectors.ts';

/** Deadline of one claim, ms: an unreachable store refuses the message this fast. */
export const NONCE_TIMEOUT_MS = 500;
/** Most records of the memory driver by default. */
export const DEFAULT_MEMORY_NONCES = 100_000;
/** The PostgreSQL table of used messages. */
export const NONCE_TABLE = 'svc_siwe_nonces';
/** Shortest time between two purges of expired PostgreSQL rows, ms. */
const PURGE_EVERY_MS = 60_000;

/** A memory store full of unexpired records: the message is refused (the store answered; it did not fail). */
export class NonceStoreFull extends Error {
  override readonly name = 'NonceStoreFull';
}

/** A driver: records an id until `expiresAt` unless it is recorded (and unexpired) already. */
export interface NonceStore {
  /**
   * @param id the message's id ({@link nonceId})
   * @param ttlMs how long it must be remembered, ms (at least 1)
   * @returns true on first use, false when the id is already recorded
   * @throws Error when the store fails (callers refuse the message)
   */
  claim(id: string, ttlMs: number): Promise<boolean>;
  /**
   * Opens the store off the request path (its connection, its table), so the first claim pays only its own command within
   * {@link NONCE_TIMEOUT_MS}, not a cold connect: on a machine short of CPU a connect alone can take longer. Never rejects.
   */
  warm?(): Promise<void>;
}

/**
 * The id of a message: a SHA-256 of its lower-cased domain and address and its nonce, so keys
 * are bounded and hold nothing a client chose verbatim.
 */
export function nonceId(domain: string, address: string, nonce: string): string {
  return createHash('sha256').update(`${domain.toLowerCase()}\u0000${address.toLowerCase()}\u0000${nonce}`).digest('hex');
}

/** The `memory` driver in one process (see the module comment). */
export class MemoryNonceStore implements NonceStore {
  private readonly used: ClaimSet;

  /**
   * @param maxItems most unexpired records held; beyond, new messages are refused
   * @param now clock, ms (tests drive it)
   */
  constructor(maxItems: number, now?: () => number) {
    this.used = new ClaimSet(maxItems, now);
  }

  claim(id: string, ttlMs: number): Promise<boolean> {
    return claimed(this.used.claim(id, ttlMs), this.used.maxItems);
  }
}

/** A claim's outcome as a {@link NonceStore} answers it: a full store refuses (fails closed). */
function claimed(outcome: ClaimOutcome, maxItems: number): Promise<boolean> {
  // Evicting an unexpired record would let its message be replayed: refuse instead.
  if (outcome === 'full') return Promise.reject(new NonceStoreFull(`the memory SIWE nonce store is full (maxItems ${maxItems})`));
  return Promise.resolve(outcome === 'claimed');
}

/**
 * The `memory` driver of one of several workers (`server.workers`): every claim is decided by the
 * primary's store of the same scope, so a message is accepted once by the replica, whichever
 * worker it reaches (as the primary holds memory rate-limit budgets). An unanswered claim fails
 * after {@link NONCE_TIMEOUT_MS} (the message is refused).
 */
export class PrimaryNonceStore implements NonceStore {
  /**
   * @param scope the store's name, the same in every worker (its connector's settings)
   * @param maxItems most unexpired records the primary holds for the scope
   */
  constructor(
    private readonly scope: string,
    private readonly maxItems: number,
  ) {}

  async claim(id: string, ttlMs: number): Promise<boolean> {
    return claimed(await claimInPrimary(this.scope, id, ttlMs, this.maxItems, NONCE_TIMEOUT_MS), this.maxItems);
  }
}

/** The `redis` driver (see the module comment). */
export class RedisNonceStore implements NonceStore {
  /**
   * @param client the shared client (closed by its owner)
   * @param prefix the connector's `keyPrefix` (default `svc_auth:`)
   */
  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
  ) {}

  async claim(id: string, ttlMs: number): Promise<boolean> {
    const r = await this.client.set(`${this.prefix}siwe:${id}`, '1', { NX: true, PX: Math.max(1, Math.ceil(ttlMs)) });
    return r !== null;
  }
}

/** The `postgresql` driver (see the module comment). */
export class PostgresNonceStore implements NonceStore {
  private lastPurge = 0;
  private ready?: Promise<unknown>;

  /**
   * @param pool the shared pool (ended by its owner)
   * @param onError where a failed purge is reported
   */
  constructor(
    private readonly pool: Pool,
    private readonly onError: (e: unknown) => void,
  ) {}

  /** Creates the table (and with it a pooled connection) ahead of the first claim; a failure is retried by the claim. */
  async warm(): Promise<void> {
    await this.table().catch(() => undefined);
  }

  private table(): Promise<unknown> {
    const ready = (this.ready ??= this.pool.query(`CREATE TABLE IF NOT EXISTS ${NONCE_TABLE} (id text PRIMARY KEY, expires_at bigint NOT NULL)`));
    ready.catch(() => {
      if (this.ready === ready) this.ready = undefined;
    });
    return ready;
  }

  async claim(id: string, ttlMs: number): Promise<boolean> {
    await this.table();
    const now = Date.now();
    const r = await this.pool.query(
      `INSERT INTO ${NONCE_TABLE} (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE ${NONCE_TABLE}.expires_at < $3 RETURNING id`,
      [id, now + Math.max(1, Math.ceil(ttlMs)), now],
    );
    if (now - this.lastPurge >= PURGE_EVERY_MS) {
      this.lastPurge = now;
      this.pool.query(`DELETE FROM ${NONCE_TABLE} WHERE expires_at < $1`, [now]).catch(this.onError);
    }
    return r.rowCount === 1;
  }
}

/**
 * A remote store behind its connector's breaker (kind `siwe-nonces`): every claim gets
 * {@link NONCE_TIMEOUT_MS}; while the breaker is open claims fail at once.
 */
export class GuardedNonceStore implements NonceStore {
  /**
   * @param open the driver, opened on first use (a failed open is retried by the next claim)
   * @param breaker the connector's breaker for SIWE nonces
   */
  constructor(
    private readonly open: () => Promise<NonceStore>,
    private readonly breaker: StorageBreaker,
  ) {}

  claim(id: string, ttlMs: number): Promise<boolean> {
    return this.breaker.run(async () => (await this.open()).claim(id, ttlMs), NONCE_TIMEOUT_MS);
  }

  /** Opens the driver without the claim deadline or the breaker: a slow first connect is not a refused message. */
  async warm(): Promise<void> {
    try {
      await (await this.open()).warm?.();
    } catch {
      // The first claim opens it again, within its deadline.
    }
  }
}

/** What {@link openNonceStore} needs from the auth plugin's connectors (shared clients). */
export interface SharedClients {
  /** The circuit breaker of a remote connector for one kind of data. */
  breakerFor(c: ConnectorConfig, kind: string): StorageBreaker;
  redisClient(c: ConnectorConfig & { redis: NonNullable<ConnectorConfig['redis']> }): RedisClient;
  postgresPool(c: ConnectorConfig & { postgresql: NonNullable<ConnectorConfig['postgresql']> }): Promise<Pool>;
}

/**
 * The guarded store of a connector (see the module comment): memory, or the Redis client /
 * PostgreSQL pool shared with the API-key stores on the same settings.
 * @param clients the auth plugin's connectors
 * @param c the connector (`siwe.nonces`, a `database` strategy's, or the default memory one)
 * @param path config path for the error of a connector without its driver block
 * @throws Error when the driver's block (`redis`, `postgresql`) is missing
 */
export function openNonceStore(clients: SharedClients, c: ConnectorConfig, path: string): NonceStore {
  let open: () => Promise<NonceStore>;
  // Nothing to wait for in memory: no deadline, no breaker.
  if (c.driver === 'memory') {
    const max = c.memory?.maxItems ?? DEFAULT_MEMORY_NONCES;
    return svcWorker() ? new PrimaryNonceStore(JSON.stringify(c), max) : new MemoryNonceStore(max);
  }
  if (c.driver === 'redis') {
    const r = c.redis;
    if (!r) throw new Error(`${path}: driver redis needs a redis block`);
    open = async () => {
      const client = clients.redisClient({ ...c, redis: r });
      // Commands fail at once while disconnected (no offline queue): wait for the first connection within the claim's deadline.
      // (Warming at start-up created the client and started connecting, so a claim rarely waits here.)
      if (!client.isReady) await whenReady(client, NONCE_TIMEOUT_MS);
      return new RedisNonceStore(client, r.keyPrefix ?? 'svc_auth:');
    };
  } else {
    const p = c.postgresql;
    if (!p) throw new Error(`${path}: driver postgresql needs a postgresql block`);
    let store: PostgresNonceStore | undefined;
    open = async () => (store ??= new PostgresNonceStore(await clients.postgresPool({ ...c, postgresql: p }), () => undefined));
  }
  return new GuardedNonceStore(open, clients.breakerFor(c, 'siwe-nonces'));
}
