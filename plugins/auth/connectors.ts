/**
 * Database connectors of API keys (issue #13 item 2): a strategy's `connector` names a driver
 * (`memory`, `redis`, `postgresql`) with the same settings as the cache connectors. Clients are
 * opened on first use, shared by every key space on the same URI, and closed at shutdown. Their
 * drivers are imported only when a connector uses them. Connection URIs and passwords are never
 * logged: failures name the connector id only, at most once every 30 s.
 */
import type { Pool } from 'pg';
import { closeRedisClient, openRedisClient, type Logger, type RedisClient } from '../../core/plugin-api.ts';
import { MemoryApiKeyStore, type ApiKeyStore } from './api-keys/store.ts';

/** A `connector` of a `database` strategy, validated. */
export interface ConnectorConfig {
  id: string;
  driver: 'memory' | 'redis' | 'postgresql';
  memory?: { maxItems?: number };
  redis?: { uri: string; password?: string; keyPrefix?: string };
  postgresql?: { connectionUri: string; table?: string };
}

/** Minimum time between two failure logs of one connector, ms. */
const LOG_EVERY_MS = 30_000;

/** See the module comment. */
export class Connectors {
  private readonly redis = new Map<string, RedisClient>();
  private readonly postgres = new Map<string, Promise<Pool>>();
  private readonly lastLog = new Map<string, number>();

  constructor(private readonly logger: Logger) {}

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
      return () =>
        (store ??= (async () => {
          const { RedisApiKeyStore, whenReady } = await import('./api-keys/redis.ts');
          const name = `${r.uri}\u0000${r.password ?? ''}`;
          let client = this.redis.get(name);
          if (!client) this.redis.set(name, (client = openRedisClient(r, onError)));
          await whenReady(client, 2000);
          return new RedisApiKeyStore(client, r.keyPrefix ?? 'svc_auth:', projectId, c.id);
        })());
    }
    const p = c.postgresql;
    if (!p) throw new Error(`${path}: driver postgresql needs a postgresql block`);
    const table = p.table ?? 'svc_api_keys';
    let store: Promise<ApiKeyStore> | undefined;
    return () => {
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
