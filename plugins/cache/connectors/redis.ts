/**
 * The Redis tier (issue #10 items 1 and 6), on node-redis: entries are `SET key value PX ttl`
 * strings in {@link encodeEntry}'s encoding, and the reverse index is a second key holding the
 * partition a lookup by hash was last written under. The client never queues commands while
 * disconnected (`disableOfflineQueue`), so a Redis that is down makes reads miss at once instead
 * of holding calls; it reconnects in the background with a capped backoff.
 */
import { createClient } from 'redis';
import type { Logger } from '../../../core/plugin-api.ts';
import { READ_TIMEOUT_MS, WRITE_TIMEOUT_MS } from '../schema.ts';
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
  private readonly client: ReturnType<typeof createClient>;
  private readonly reporter: TierReporter;
  private closed = false;

  /**
   * @param id connector id (the URI is never logged)
   * @param opts `uri`, optional `password`, `connectTimeout` ms
   * @param logger where tier failures are reported
   */
  constructor(
    readonly id: string,
    opts: { uri: string; password?: string; connectTimeout: number },
    logger: Logger,
  ) {
    this.reporter = new TierReporter(id, 'redis', logger, opts.uri, opts.password);
    this.client = createClient({
      url: opts.uri,
      password: opts.password,
      disableOfflineQueue: true,
      // A Redis that stops answering with its socket still up: commands give up (and leave the
      // queue) after the read timeout, and a full queue refuses new ones at once, so a stalled
      // tier holds neither calls nor memory (issue #10 item 1).
      commandsQueueMaxLength: MAX_QUEUED_COMMANDS,
      commandOptions: { timeout: READ_TIMEOUT_MS },
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

  /** Logs a tier failure (rate-limited), naming the connector, never the URI. */
  report(what: string, e: unknown): void {
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

  async get(partition: string, range: string): Promise<CacheEntry | undefined> {
    if (!this.client.isReady) throw new Error('redis is not connected');
    const v = await this.client.get(`${REDIS_KEY_PREFIX}${partition}#${range}`);
    return typeof v === 'string' ? decodeEntry(v) : undefined;
  }

  async getReverse(network: string, range: string): Promise<CacheEntry | undefined> {
    if (!this.client.isReady) throw new Error('redis is not connected');
    const pk = await this.client.get(`${REDIS_KEY_PREFIX}${reverseKey(network, range)}`);
    return typeof pk === 'string' ? this.get(pk, range) : undefined;
  }

  async set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): Promise<void> {
    if (!this.client.isReady) throw new Error('redis is not connected');
    const opts = ttlMs > 0 ? { expiration: { type: 'PX' as const, value: Math.ceil(ttlMs) } } : undefined;
    const key = `${REDIS_KEY_PREFIX}${partition}#${range}`;
    const writer = this.client.withCommandOptions({ timeout: WRITE_TIMEOUT_MS });
    if (reverseNetwork === undefined) {
      await writer.set(key, encodeEntry(entry), opts);
      return;
    }
    // The entry first, then the pointer, in one round trip.
    await writer.multi().set(key, encodeEntry(entry), opts).set(`${REDIS_KEY_PREFIX}${reverseKey(reverseNetwork, range)}`, partition, opts).exec();
  }

  async delete(partition: string, range: string): Promise<void> {
    if (!this.client.isReady) return;
    await this.client.del(`${REDIS_KEY_PREFIX}${partition}#${range}`);
  }
}
