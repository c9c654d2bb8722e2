/**
 * The PostgreSQL tier (on keyv): a
 * {@link KeyvConnector} on @keyv/postgres, one table `(key VARCHAR(255) PRIMARY KEY, value TEXT)`
 * (keyv's layout), created if missing. Entries carry keyv's expiry inside the value: expired rows
 * are ignored on read and deleted every `purgeInterval` (default 5 minutes). The reverse index of
 * lookups by hash is a pointer row (see keyv.ts): keyv has no `LIKE` or join, and the pointer is
 * one more primary-key read.
 *
 * Two things the adapter does not do are added here, on its own `query` function:
 * - its pool is a module-wide singleton (a second connector with another URI would replace it,
 *   and closing one would end the other's), so each connector gets a pool of its own, with the
 *   bounds below;
 * - it tries `CREATE TABLE` once at construction; a PostgreSQL that is down at start-up would
 *   leave the table missing for good, so creation is retried before the next operation until it
 *   succeeds.
 *
 * Every operation runs under the connector's breaker with its own deadline (`readTimeout`,
 * `writeTimeout`): a PostgreSQL that stops answering costs a call at most one read deadline, and
 * after `breaker.failureThreshold` failures in a row none at all (reads miss, writes are dropped,
 * purges wait) until a probe after the back-off succeeds.
 */
import KeyvPostgres from '@keyv/postgres';
import pg from 'pg';
import type { Registry } from 'prom-client';
import type { Logger } from 'svc-proxy/plugin';
import { READ_TIMEOUT_MS, WRITE_TIMEOUT_MS } from '../schema.ts';
import { KEY_PREFIX, KeyvConnector, type KeyvTierSettings } from './keyv.ts';
import { TierReporter } from './types.ts';

type Query = (sql: string, values?: unknown[]) => Promise<Array<Record<string, unknown>>>;

/** Each adapter's own pool (set while the adapter's constructor runs, before subclass fields exist). */
const pools = new WeakMap<KeyvPostgres, pg.Pool>();

/** @keyv/postgres with a pool per instance (see the module comment). */
class OwnPoolPostgres extends KeyvPostgres {
  override async connect(): Promise<Query> {
    // A PostgreSQL that stops answering: besides the breaker's deadlines, every query gives up
    // client-side and server-side, lock waits are bounded, and dead peers are found by keepalive,
    // so a stalled tier never wedges the pool, start-up or shutdown.
    const pool = new pg.Pool({
      connectionString: this.opts.uri,
      max: this.opts.max,
      connectionTimeoutMillis: WRITE_TIMEOUT_MS,
      idleTimeoutMillis: 30_000,
      query_timeout: WRITE_TIMEOUT_MS,
      statement_timeout: WRITE_TIMEOUT_MS,
      lock_timeout: READ_TIMEOUT_MS,
      keepAlive: true,
    });
    // An idle client's error would otherwise crash the process.
    pool.on('error', (e: Error) => this.emit('error', e));
    pools.set(this, pool);
    return async (sql, values) => (await pool.query(sql, values as unknown[])).rows as Array<Record<string, unknown>>;
  }

  override async disconnect(): Promise<void> {
    await pools.get(this)?.end();
  }
}

/** See the module comment. */
export class PostgresConnector extends KeyvConnector {
  private purgeTimer?: NodeJS.Timeout;
  private ready?: Promise<void>;
  private readonly pgStore: OwnPoolPostgres;
  private readonly rawQuery: Query;
  private readonly table: string;

  /**
   * @param id connector id (the URI is never logged)
   * @param opts `connectionUri`, `table` (validated as an identifier by the schema), `maxConns`,
   *   `purgeInterval` ms, the deadlines (ms), breaker settings and failsafe entries of
   *   {@link KeyvTierSettings} (defaults 50 ms reads, 500 ms writes)
   * @param logger where tier failures and breaker edges are reported
   * @param metrics registry of the breaker metrics (none: not exported)
   */
  constructor(
    id: string,
    private readonly opts: { connectionUri: string; table: string; maxConns: number; purgeInterval: number } & KeyvTierSettings,
    private readonly logger: Logger,
    metrics?: Registry,
  ) {
    const store = new OwnPoolPostgres({ uri: opts.connectionUri, table: opts.table, max: opts.maxConns });
    super(id, 'postgresql', store, opts, new TierReporter(id, 'postgresql', logger, opts.connectionUri), logger, metrics);
    this.pgStore = store;
    this.table = `public."${opts.table}"`;
    this.rawQuery = store.query as Query;
    // Every operation first makes sure the table exists (see the module comment).
    store.query = (async (sql: string, values?: unknown[]) => {
      await this.ensureTable();
      return this.rawQuery(sql, values);
    }) as typeof store.query;
  }

  /**
   * Creates the table once; a failure is retried by the next operation. A table in the layout of
   * svc before keyv (`partition_key, range_key, value, expires_at`) cannot be read by keyv: it is
   * renamed to `<table>_pre_keyv` (kept for the operator; its entries are misses from now on) and
   * a fresh table is created, with one warning.
   */
  private ensureTable(): Promise<void> {
    this.ready ??= this.migrateOldLayout()
      .then(() => this.rawQuery(`CREATE TABLE IF NOT EXISTS ${this.table} (key VARCHAR(255) PRIMARY KEY, value TEXT)`))
      .then(() => undefined)
      .catch((e: unknown) => {
        this.ready = undefined;
        throw e;
      });
    return this.ready;
  }

  /** See {@link ensureTable}. */
  private async migrateOldLayout(): Promise<void> {
    const cols = await this.rawQuery(`SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`, [this.opts.table]);
    const names = new Set(cols.map((r) => r.column_name));
    if (!names.has('partition_key') || names.has('key')) return;
    const old = `${this.opts.table.slice(0, 63 - '_pre_keyv'.length)}_pre_keyv`;
    await this.rawQuery(`ALTER TABLE ${this.table} RENAME TO "${old}"`);
    this.logger.warn(
      { connector: this.id, table: this.opts.table, renamedTo: old },
      `cache connector ${this.id}: table ${this.opts.table} had the layout of svc before keyv; renamed to ${old} (its entries are misses; drop it when no older svc reads it) and created anew`,
    );
  }

  /** Creates the table in the background (start-up never waits for the tier) and starts the purge timer. */
  override async open(): Promise<void> {
    this.ensureTable().catch((e: unknown) => this.report('open', e));
    await Promise.resolve();
    this.purgeTimer = setInterval(() => void this.purge().catch((e: unknown) => this.report('purge', e)), this.opts.purgeInterval);
    this.purgeTimer.unref();
  }

  /** Stops the purge timer and ends the pool (given up after the outer write bound). */
  override async close(): Promise<void> {
    if (this.purgeTimer) clearInterval(this.purgeTimer);
    await super.close();
  }

  /**
   * Deletes svc's expired rows (not while the breaker is open or probing: the tier is not
   * answering). keyv keeps the expiry inside the value's JSON envelope, which ends with
   * `"expires":<ms>}`; the pattern reads it without parsing the value.
   * @returns rows deleted
   */
  async purge(): Promise<number> {
    if (this.breaker.state !== 'closed') return 0;
    const rows = await this.pgStore.query(
      `WITH d AS (DELETE FROM ${this.table} WHERE key LIKE $1 AND substring(value from '"expires":([0-9]+)}$')::bigint <= $2 RETURNING 1) SELECT count(*)::int AS n FROM d`,
      [`${KEY_PREFIX}%`, Date.now()],
    );
    return (rows[0]?.n as number | undefined) ?? 0;
  }
}
