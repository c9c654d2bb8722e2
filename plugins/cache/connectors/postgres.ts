/**
 * The PostgreSQL tier (issue #10 items 1 and 6), on node-postgres (pg): one table
 * `(partition_key, range_key, value, expires_at)` with primary key (partition_key, range_key),
 * created if missing. Expired rows are ignored on read and deleted every `purgeInterval`
 * (default 5 minutes). The reverse index of lookups by hash is a row under partition
 * `rvi#<network>` whose value is the partition the entry was last written under; one join reads
 * both.
 *
 * Every operation runs under the connector's {@link StorageBreaker} with its own deadline
 * (`readTimeout`, `writeTimeout`): a PostgreSQL that stops answering costs a call at most one
 * read deadline, and after `breaker.failureThreshold` failures in a row none at all (reads miss,
 * writes are dropped, purges wait) until a probe after the back-off succeeds.
 */
import pg from 'pg';
import type { Registry } from 'prom-client';
import { type Logger, StorageBreaker } from 'svc/plugin';
import { DEFAULT_READ_TIMEOUT_MS, DEFAULT_WRITE_TIMEOUT_MS, READ_TIMEOUT_MS, WRITE_TIMEOUT_MS, type RemoteTierSettings } from '../schema.ts';
import { decodeEntry, TierReporter, encodeEntry, type CacheEntry, type Connector } from './types.ts';

/** See the module comment. */
export class PostgresConnector implements Connector {
  readonly driver = 'postgresql' as const;
  /** The tier's circuit breaker (kind `cache`). */
  readonly breaker: StorageBreaker;
  private readonly pool: pg.Pool;
  private ready?: Promise<void>;
  private purgeTimer?: NodeJS.Timeout;
  private readonly reporter: TierReporter;
  private readonly table: string;
  private readonly readTimeout: number;
  private readonly writeTimeout: number;

  /**
   * @param id connector id (the URI is never logged)
   * @param opts `connectionUri`, `table` (validated as an identifier by the schema), `maxConns`,
   *   `purgeInterval` ms, and the deadlines (ms) and breaker settings of {@link RemoteTierSettings}
   *   (defaults 50 ms reads, 500 ms writes)
   * @param logger where tier failures and breaker edges are reported
   * @param metrics registry of the breaker metrics (none: not exported)
   */
  constructor(
    readonly id: string,
    private readonly opts: { connectionUri: string; table: string; maxConns: number; purgeInterval: number } & Partial<RemoteTierSettings>,
    logger: Logger,
    metrics?: Registry,
  ) {
    this.reporter = new TierReporter(id, 'postgresql', logger, opts.connectionUri);
    this.readTimeout = opts.readTimeout ?? DEFAULT_READ_TIMEOUT_MS;
    this.writeTimeout = opts.writeTimeout ?? DEFAULT_WRITE_TIMEOUT_MS;
    this.breaker = new StorageBreaker({ connector: id, kind: 'cache', logger, metrics, settings: opts.breaker });
    this.table = `"${opts.table}"`;
    // A PostgreSQL that stops answering: besides the breaker's deadlines, every query gives up
    // client-side and server-side, lock waits are bounded, and dead peers are found by keepalive,
    // so a stalled tier never wedges the pool, start-up or shutdown (issue #10 item 1).
    this.pool = new pg.Pool({
      connectionString: opts.connectionUri,
      max: opts.maxConns,
      connectionTimeoutMillis: WRITE_TIMEOUT_MS,
      idleTimeoutMillis: 30_000,
      query_timeout: WRITE_TIMEOUT_MS,
      statement_timeout: WRITE_TIMEOUT_MS,
      lock_timeout: READ_TIMEOUT_MS,
      keepAlive: true,
    });
    // An idle client's error would otherwise crash the process.
    this.pool.on('error', (e: Error) => this.report('connection', e));
  }

  /**
   * Logs a tier failure (rate-limited), naming the connector, never the URI. An operation the
   * open breaker refused is not logged: the breaker logged its edge.
   */
  report(what: string, e: unknown): void {
    if (e === this.breaker.openError) return;
    this.reporter.report(what, e);
  }

  /** Creates the table and indexes once; a failure is retried by the next operation. */
  private ensureTable(): Promise<void> {
    this.ready ??= (async () => {
      await this.pool.query(`CREATE TABLE IF NOT EXISTS ${this.table} (partition_key TEXT NOT NULL, range_key TEXT NOT NULL, value TEXT NOT NULL, expires_at TIMESTAMPTZ, PRIMARY KEY (partition_key, range_key))`);
      await this.pool.query(`CREATE INDEX IF NOT EXISTS "${this.opts.table}_expires_at" ON ${this.table} (expires_at) WHERE expires_at IS NOT NULL`);
    })().catch((e: unknown) => {
      this.ready = undefined;
      throw e;
    });
    return this.ready;
  }

  async open(): Promise<void> {
    // In the background: start-up never waits for the tier (a lock or a slow server would hold it).
    this.ensureTable().catch((e: unknown) => this.report('open', e));
    await Promise.resolve();
    this.purgeTimer = setInterval(() => void this.purge().catch((e: unknown) => this.report('purge', e)), this.opts.purgeInterval);
    this.purgeTimer.unref();
  }

  async close(): Promise<void> {
    if (this.purgeTimer) clearInterval(this.purgeTimer);
    // Queries end within their timeout; shutdown never waits longer than that.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((r) => {
      timer = setTimeout(r, WRITE_TIMEOUT_MS);
      timer.unref();
    });
    await Promise.race([this.pool.end().catch(() => undefined), late]);
    clearTimeout(timer);
  }

  /**
   * Deletes expired rows (not while the breaker is open or probing: the tier is not answering).
   * @returns rows deleted
   */
  async purge(): Promise<number> {
    if (this.breaker.state !== 'closed') return 0;
    await this.ensureTable();
    const r = await this.pool.query(`DELETE FROM ${this.table} WHERE expires_at IS NOT NULL AND expires_at <= now()`);
    return r.rowCount ?? 0;
  }

  /**
   * The entry, or undefined.
   * @throws StorageUnavailableError synchronously while the breaker is open (the store counts a
   *   get error and serves from the upstream without waiting)
   */
  get(partition: string, range: string): Promise<CacheEntry | undefined> {
    return this.guarded(async () => {
      await this.ensureTable();
      const r = await this.pool.query<{ value: string }>(`SELECT value FROM ${this.table} WHERE partition_key = $1 AND range_key = $2 AND (expires_at IS NULL OR expires_at > now())`, [partition, range]);
      const v = r.rows[0]?.value;
      return v === undefined ? undefined : decodeEntry(v);
    }, this.readTimeout);
  }

  /** The entry a lookup by hash points at (one join). See {@link get}. */
  getReverse(network: string, range: string): Promise<CacheEntry | undefined> {
    return this.guarded(async () => {
      await this.ensureTable();
      const r = await this.pool.query<{ value: string }>(
        `SELECT c.value FROM ${this.table} r JOIN ${this.table} c ON c.partition_key = r.value AND c.range_key = r.range_key
         WHERE r.partition_key = $1 AND r.range_key = $2 AND (r.expires_at IS NULL OR r.expires_at > now()) AND (c.expires_at IS NULL OR c.expires_at > now())`,
        [`rvi#${network}`, range],
      );
      const v = r.rows[0]?.value;
      return v === undefined ? undefined : decodeEntry(v);
    }, this.readTimeout);
  }

  /**
   * Upserts an entry (and its reverse-index row).
   * @throws StorageUnavailableError synchronously while the breaker is open: the write is dropped
   *   and counted as a set error
   */
  set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): Promise<void> {
    return this.guarded(async () => {
      await this.ensureTable();
      const expires = ttlMs > 0 ? new Date(Date.now() + ttlMs) : null;
      const upsert = `INSERT INTO ${this.table} (partition_key, range_key, value, expires_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT (partition_key, range_key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`;
      await this.pool.query(upsert, [partition, range, encodeEntry(entry), expires]);
      if (reverseNetwork !== undefined) await this.pool.query(upsert, [`rvi#${reverseNetwork}`, range, partition, expires]);
    }, this.writeTimeout);
  }

  /** Drops an entry; skipped while the breaker is open. */
  async delete(partition: string, range: string): Promise<void> {
    await this.breaker.tryRun(async () => {
      await this.ensureTable();
      await this.pool.query(`DELETE FROM ${this.table} WHERE partition_key = $1 AND range_key = $2`, [partition, range]);
    }, this.writeTimeout);
  }

  private guarded<T>(op: () => Promise<T>, timeoutMs: number): Promise<T> {
    const p = this.breaker.tryRun(op, timeoutMs);
    if (!p) throw this.breaker.openError;
    return p;
  }
}
