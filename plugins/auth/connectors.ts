/**
 * Database connectors of API keys: a strategy's `connector` names a driver
 * (`memory`, `redis`, `postgresql`) with the same settings as the cache connectors. Clients are
 * opened on first use, shared by every key space on the same URI, and closed at shutdown. Their
 * drivers are imported only when a connector uses them. Connection URIs and passwords are never
 * logged: failures name the connector id only, at most once every 30 s.
 *
 * Every remote store runs behind a circuit breaker per connector ({@link Connectors.breakerFor}:
 * per-operation deadlines, skipped at once while open), so a stalled Redis or PostgreSQL never
 * holds a request or an admin call (api-keys/guarded.ts).
 */
import type { Pool } from 'pg';
import type { Registry } from 'prom-client';
import type { Logger } from 'svc-proxy/plugin';
import { closeRedisClient, openRedisClient, type RedisClient, StorageBreaker, type StorageBreakerSettings } from 'svc-proxy/util';
import { DEFAULT_LOOKUP_TIMEOUT_MS, DEFAULT_WRITE_TIMEOUT_MS, GuardedApiKeyStore, isStoreFailure } from './api-keys/guarded.ts';
import { MemoryApiKeyStore, type ApiKeyStore } from './api-keys/store.ts';

/**
 * Deadlines and breaker settings of a remote store block, as validated (durations are ms after
 * config resolution; the schema's static type still allows the duration strings).
 */
export interface StoreGuardConfig {
  lookupTimeout?: number | string;
  writeTimeout?: number | string;
  breaker?: { failureThreshold?: number; backoff?: number | string; maxBackoff?: number | string };
}

/** A resolved duration (ms), or undefined. */
const ms = (v: number | string | undefined): number | undefined => (v === undefined ? undefined : Number(v));

/** A `connector` of a `database` strategy, validated. */
export interface ConnectorConfig {
  id: string;
  driver: 'memory' | 'redis' | 'postgresql';
  memory?: { maxItems?: number };
  redis?: { uri: string; password?: string; keyPrefix?: string } & StoreGuardConfig;
  postgresql?: { connectionUri: string; table?: string } & StoreGuardConfig;
}

/** Minimum time between two failure logs of one connector, ms. */
const LOG_EVERY_MS = 30_000;

/** See the module comment. */
export class Connectors {
  private readonly redis = new Map<string, RedisClient>();
  private readonly postgres = new Map<string, Promise<Pool>>();
  private readonly lastLog = new Map<string, number>();
  private readonly breakers = new Map<string, StorageBreaker>();

  /**
   * @param logger failures and breaker edges
   * @param metrics registry of the breaker metrics (none: not exported)
   */
  constructor(
    private readonly logger: Logger,
    private readonly metrics?: Registry,
  ) {}

  /**
   * The circuit breaker of a remote connector for one kind of data (`api-keys`, `siwe-nonces`...),
   * shared by every key space on the same connector id and server: one breaker per store, labelled
   * with the connector id. A corrupt record is the store answering, not failing.
   * @param c a `redis` or `postgresql` connector (its `breaker` block is used)
   */
  breakerFor(c: ConnectorConfig, kind: string): StorageBreaker {
    const guard = c.redis ?? c.postgresql;
    const name = `${kind}\u0000${c.id}\u0000${c.redis ? `${c.redis.uri}\u0000${c.redis.password ?? ''}` : (c.postgresql?.connectionUri ?? '')}`;
    let b = this.breakers.get(name);
    const raw = guard?.breaker;
    const settings: Partial<StorageBreakerSettings> = { failureThreshold: raw?.failureThreshold, backoff: ms(raw?.backoff), maxBackoff: ms(raw?.maxBackoff) };
    if (!b)
      this.breakers.set(
        name,
        (b = new StorageBreaker({ connector: c.id, kind, logger: this.logger, metrics: this.metrics, settings, isFailure: isStoreFailure })),
      );
    return b;
  }

  /** `lookupTimeout` and `writeTimeout` of a remote connector, defaults filled in (ms). */
  private timeoutsOf(c: ConnectorConfig): { lookupTimeout: number; writeTimeout: number } {
    const g: StoreGuardConfig = c.redis ?? c.postgresql ?? {};
    return { lookupTimeout: ms(g.lookupTimeout) ?? DEFAULT_LOOKUP_TIMEOUT_MS, writeTimeout: ms(g.writeTimeout) ?? DEFAULT_WRITE_TIMEOUT_MS };
  }

  /** Logs a connector failure, rate-limited, naming the connector and never its URI. */
  private report(id: string, e: unknown): void {
    const now = Date.now();
    if (now - (this.lastLog.get(id) ?? 0) < LOG_EVERY_MS) return;
    this.lastLog.set(id, now);
    const code = (e as { code?: unknown }).code;
    this.logger.warn({ connector: id, code: typeof code === 'string' ? code : undefined }, 'API key connector failed');
  }

  /**
   * The store of one (project, connector), opened on first use.
   * @param path config path for the error of a connector without its driver block
   * @throws Error when the driver's block (`redis`, `postgresql`) is missing
   */
  storeFor(projectId: string, c: ConnectorConfig, path: string): () => Promise<ApiKeyStore> {
    const onError = (e: unknown) => this.report(c.id, e);
    if (c.driver === 'memory') {
      const store = new MemoryApiKeyStore(c.memory?.maxItems ?? 100_000);
      return () => Promise.resolve(store);
    }
    if (c.driver === 'redis') {
      const r = c.redis;
      if (!r) throw new Error(`${path}: driver redis needs a redis block`);
      let store: Promise<ApiKeyStore> | undefined;
      const open = () =>
        (store ??= (async () => {
          const { RedisApiKeyStore, whenReady } = await import('./api-keys/redis.ts');
          const name = `${r.uri}\u0000${r.password ?? ''}`;
          let client = this.redis.get(name);
          if (!client) this.redis.set(name, (client = openRedisClient(r, onError)));
          await whenReady(client, 2000);
          return new RedisApiKeyStore(client, r.keyPrefix ?? 'svc_auth:', projectId, c.id);
        })());
      const guarded = Promise.resolve(new GuardedApiKeyStore(open, this.breakerFor(c, 'api-keys'), this.timeoutsOf(c)));
      return () => guarded;
    }
    const p = c.postgresql;
    if (!p) throw new Error(`${path}: driver postgresql needs a postgresql block`);
    const table = p.table ?? 'svc_api_keys';
    let store: Promise<ApiKeyStore> | undefined;
    const open = () => {
      if (store) return store;
      const name = `${p.connectionUri}\u0000${table}`;
      const opened = (async () => {
        const { openPostgres, PostgresApiKeyStore } = await import('./api-keys/postgres.ts');
        let pool = this.postgres.get(name);
        if (!pool) this.postgres.set(name, (pool = openPostgres(p.connectionUri, table, onError)));
        return new PostgresApiKeyStore(await pool, table, projectId, c.id);
      })();
      store = opened;
      // A failed open (database down at first use) is retried by the next lookup.
      opened.catch((e: unknown) => {
        onError(e);
        if (store === opened) store = undefined;
        this.postgres.delete(name);
      });
      return opened;
    };
    const guarded = Promise.resolve(new GuardedApiKeyStore(open, this.breakerFor(c, 'api-keys'), this.timeoutsOf(c)));
    return () => guarded;
  }

  /**
   * The Redis client of a connector's settings, shared with the API-key stores on the same
   * settings (the SIWE nonce store uses it: plugins/auth/siwe-nonces.ts). Opened on first use.
   */
  redisClient(c: ConnectorConfig & { redis: NonNullable<ConnectorConfig['redis']> }): RedisClient {
    const name = `${c.redis.uri}\u0000${c.redis.password ?? ''}`;
    let client = this.redis.get(name);
    if (!client) this.redis.set(name, (client = openRedisClient(c.redis, (e) => this.report(c.id, e))));
    return client;
  }

  /**
   * The PostgreSQL pool of a connector's settings, shared with the API-key store on the same
   * settings (its table is created too). A failed open is forgotten, so the next call retries.
   */
  postgresPool(c: ConnectorConfig & { postgresql: NonNullable<ConnectorConfig['postgresql']> }): Promise<Pool> {
    const table = c.postgresql.table ?? 'svc_api_keys';
    const name = `${c.postgresql.connectionUri}\u0000${table}`;
    let pool = this.postgres.get(name);
    if (!pool) {
      const opened = import('./api-keys/postgres.ts').then((m) => m.openPostgres(c.postgresql.connectionUri, table, (e) => this.report(c.id, e)));
      this.postgres.set(name, (pool = opened));
      opened.catch((e: unknown) => {
        this.report(c.id, e);
        if (this.postgres.get(name) === opened) this.postgres.delete(name);
      });
    }
    return pool;
  }

  /** Closes every client. */
  async close(): Promise<void> {
    const redis = [...this.redis.values()];
    this.redis.clear();
    await Promise.all(redis.map(closeRedisClient));
    const pools = [...this.postgres.values()];
    this.postgres.clear();
    await Promise.all(pools.map((p) => p.then((pool) => pool.end()).catch(() => undefined)));
  }
}
