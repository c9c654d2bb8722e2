/**
 * The Redis tier (issue #10 items 1 and 6), on node-redis: entries are `SET key value PX ttl`
 * strings in {@link encodeEntry}'s encoding, and the reverse index is a second key holding the
 * partition a lookup by hash was last written under. The client never queues commands while
 * disconnected (`disableOfflineQueue`), so a Redis that is down makes reads miss at once instead
 * of holding calls; it reconnects in the background with a capped backoff.
 *
 * A Redis that stops answering with its socket up is the harder case: node-redis's command
 * timeout only covers commands not yet written, so every operation runs under the connector's
 * {@link StorageBreaker} with its own deadline (`readTimeout`, `writeTimeout`), and after
 * `breaker.failureThreshold` failures in a row the tier is skipped (reads miss, writes are
 * dropped, both at once) until a probe after the back-off succeeds.
 */
import type { Registry } from 'prom-client';
import { createClient } from 'redis';
import { type Logger, StorageBreaker } from 'svc/plugin';
import { DEFAULT_READ_TIMEOUT_MS, DEFAULT_WRITE_TIMEOUT_MS, WRITE_TIMEOUT_MS, type RemoteTierSettings } from '../schema.ts';
import { decodeEntry, TierReporter, encodeEntry, reverseKey, type CacheEntry, type Connector } from './types.ts';

/** Prefix of every key svc writes, so a shared Redis can hold other data too. */
export const REDIS_KEY_PREFIX = 'svc:cache:';
/** Commands waiting for a stalled Redis before new ones are refused at once. */
export const MAX_QUEUED_COMMANDS = 1000;
/** How long close waits for a clean QUIT before dropping the connection, ms. */
const CLOSE_TIMEOUT_MS = 2000;
/** Longest wait between reconnect tries, ms. */
const MAX_RECONNECT_DELAY_MS = 2000;

/** See the module comment. */
export class RedisConnector implements Connector {
  readonly driver = 'redis' as const;
  /** The tier's circuit breaker (kind `cache`). */
  readonly breaker: StorageBreaker;
  private readonly client: ReturnType<typeof createClient>;
  private readonly reporter: TierReporter;
  private readonly readTimeout: number;
  private readonly writeTimeout: number;
  private closed = false;

  /**
   * @param id connector id (the URI is never logged)
   * @param opts `uri`, optional `password`, `connectTimeout` ms, and the deadlines (ms) and
   *   breaker settings of {@link RemoteTierSettings} (defaults 50 ms reads, 500 ms writes)
   * @param logger where tier failures and breaker edges are reported
   * @param metrics registry of the breaker metrics (none: not exported)
   */
  constructor(
    readonly id: string,
    opts: { uri: string; password?: string; connectTimeout: number } & Partial<RemoteTierSettings>,
    logger: Logger,
    metrics?: Registry,
  ) {
    this.reporter = new TierReporter(id, 'redis', logger, opts.uri, opts.password);
    this.readTimeout = opts.readTimeout ?? DEFAULT_READ_TIMEOUT_MS;
    this.writeTimeout = opts.writeTimeout ?? DEFAULT_WRITE_TIMEOUT_MS;
    this.breaker = new StorageBreaker({ connector: id, kind: 'cache', logger, metrics, settings: opts.breaker });
    this.client = createClient({
      url: opts.uri,
      password: opts.password,
      disableOfflineQueue: true,
      // A Redis that stops answering with its socket still up: the breaker's deadlines free the
      // calls; commands not yet written leave the queue after the outer write bound, and a full
      // queue refuses new ones at once, so a stalled tier holds no memory either (issue #10 item 1).
      commandsQueueMaxLength: MAX_QUEUED_COMMANDS,
      commandOptions: { timeout: WRITE_TIMEOUT_MS },
      socket: {
        connectTimeout: opts.connectTimeout,
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 10), MAX_RECONNECT_DELAY_MS),
      },
    });
    // An unhandled 'error' event would crash the process: a tier failure is only ever a miss.
    this.client.on('error', (e: unknown) => this.report('connection', e));
  }

  /** Whether the client is connected and ready for commands. */
  get ready(): boolean {
    return this.client.isReady;
  }

  /**
   * Logs a tier failure (rate-limited), naming the connector, never the URI. An operation the
   * open breaker refused is not logged: the breaker logged its edge.
   */
  report(what: string, e: unknown): void {
    if (e === this.breaker.openError) return;
    this.reporter.report(what, e);
  }

  async open(): Promise<void> {
    // connect() keeps retrying while Redis is down; start-up does not wait for it.
    this.client.connect().catch((e: unknown) => this.report('connect', e));
    await Promise.resolve();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // A client still reconnecting has nothing to flush: quitting would wait for a server that is gone.
    if (!this.client.isReady) {
      if (this.client.isOpen) this.client.destroy();
      return;
    }
    // A stalled server never answers QUIT: drop the connection after a short wait.
    let timer: NodeJS.Timeout | undefined;
    const quit = this.client.quit().then(() => true, () => false);
    const late = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), CLOSE_TIMEOUT_MS);
      timer.unref();
    });
    const clean = await Promise.race([quit, late]);
    clearTimeout(timer);
    if (!clean && this.client.isOpen) this.client.destroy();
  }

  /**
   * The entry, or undefined.
   * @throws StorageUnavailableError synchronously while the breaker is open (the store counts a
   *   get error and serves from the upstream without waiting)
   */
  get(partition: string, range: string): Promise<CacheEntry | undefined> {
    return this.read(() => this.fetch(`${partition}#${range}`));
  }

  /** The entry a lookup by hash points at (two reads under one deadline). See {@link get}. */
  getReverse(network: string, range: string): Promise<CacheEntry | undefined> {
    return this.read(async () => {
      const pk = await this.command().get(`${REDIS_KEY_PREFIX}${reverseKey(network, range)}`);
      return typeof pk === 'string' ? this.fetch(`${pk}#${range}`) : undefined;
    });
  }

  /**
   * Stores an entry (and its reverse-index pointer in the same round trip).
   * @throws StorageUnavailableError synchronously while the breaker is open: the write is dropped
   *   and counted as a set error
   */
  set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): Promise<void> {
    const opts = ttlMs > 0 ? { expiration: { type: 'PX' as const, value: Math.ceil(ttlMs) } } : undefined;
    const key = `${REDIS_KEY_PREFIX}${partition}#${range}`;
    const p = this.breaker.tryRun(async () => {
      const client = this.command();
      if (reverseNetwork === undefined) {
        await client.set(key, encodeEntry(entry), opts);
        return;
      }
      // The entry first, then the pointer, in one round trip.
      await client.multi().set(key, encodeEntry(entry), opts).set(`${REDIS_KEY_PREFIX}${reverseKey(reverseNetwork, range)}`, partition, opts).exec();
    }, this.writeTimeout);
    if (!p) throw this.breaker.openError;
    return p;
  }

  /** Drops an entry; skipped while the breaker is open. */
  async delete(partition: string, range: string): Promise<void> {
    if (!this.client.isReady) return;
    await this.breaker.tryRun(() => this.client.del(`${REDIS_KEY_PREFIX}${partition}#${range}`), this.writeTimeout);
  }

  private read(op: () => Promise<CacheEntry | undefined>): Promise<CacheEntry | undefined> {
    const p = this.breaker.tryRun(op, this.readTimeout);
    if (!p) throw this.breaker.openError;
    return p;
  }

  private async fetch(key: string): Promise<CacheEntry | undefined> {
    const v = await this.command().get(`${REDIS_KEY_PREFIX}${key}`);
    return typeof v === 'string' ? decodeEntry(v) : undefined;
  }

  /** The client, when it can take commands (a failure the breaker counts otherwise). */
  private command(): ReturnType<typeof createClient> {
    if (!this.client.isReady) throw new Error('redis is not connected');
    return this.client;
  }
}
