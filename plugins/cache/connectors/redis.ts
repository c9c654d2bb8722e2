/**
 * The Redis tier (on keyv): a {@link KeyvConnector}
 * on @keyv/redis, entries `SET key value PX ttl` under `svc:cache:`, the reverse-index pointer
 * written in the same MULTI. svc builds the node-redis client itself and hands it to the adapter,
 * so the client never queues commands while disconnected (`disableOfflineQueue`): a Redis that
 * is down makes reads miss at once instead of holding calls; it reconnects in the background with
 * a capped backoff. The adapter is told to throw (not to swallow failures as misses), so the
 * connector's breaker counts them.
 *
 * A Redis that stops answering with its socket up is the harder case: node-redis's command
 * timeout only covers commands not yet written, so every operation runs under the connector's
 * breaker with its own deadline (`readTimeout`, `writeTimeout`), and after
 * `breaker.failureThreshold` failures in a row the tier is skipped (reads miss, writes are
 * dropped, both at once) until a probe after the back-off succeeds.
 */
import KeyvRedis from '@keyv/redis';
import type { Registry } from 'prom-client';
import { createClient } from 'redis';
import type { Logger } from 'svc-proxy/plugin';
import { backoffDelay, sleep } from 'svc-proxy/util';
import { WRITE_TIMEOUT_MS } from '../schema.ts';
import { KeyvConnector, type KeyvTierSettings } from './keyv.ts';
import { TierReporter } from './types.ts';

/** Commands waiting for a stalled Redis before new ones are refused at once. */
export const MAX_QUEUED_COMMANDS = 1000;
/** How long close waits for a clean QUIT before dropping the connection, ms. */
const CLOSE_TIMEOUT_MS = 2000;
/** Longest wait between reconnect tries, ms. */
const MAX_RECONNECT_DELAY_MS = 2000;

/** See the module comment. */
export class RedisConnector extends KeyvConnector {
  private readonly client: ReturnType<typeof createClient>;
  private closing = false;

  /**
   * @param id connector id (the URI is never logged)
   * @param opts `uri`, optional `password`, `connectTimeout` ms, the deadlines (ms), breaker
   *   settings and failsafe entries of {@link KeyvTierSettings} (defaults 50 ms reads, 500 ms writes)
   * @param logger where tier failures and breaker edges are reported
   * @param metrics registry of the breaker metrics (none: not exported)
   */
  constructor(id: string, opts: { uri: string; password?: string; connectTimeout: number } & KeyvTierSettings, logger: Logger, metrics?: Registry) {
    const client = createClient({
      url: opts.uri,
      password: opts.password,
      disableOfflineQueue: true,
      // A Redis that stops answering with its socket still up: the breaker's deadlines free the
      // calls; commands not yet written leave the queue after the outer write bound, and a full
      // queue refuses new ones at once, so a stalled tier holds no memory either.
      commandsQueueMaxLength: MAX_QUEUED_COMMANDS,
      commandOptions: { timeout: WRITE_TIMEOUT_MS },
      socket: {
        connectTimeout: opts.connectTimeout,
        reconnectStrategy: (retries: number) => backoffDelay({ initialMs: 50, factor: 2, maxMs: MAX_RECONNECT_DELAY_MS }, Math.min(retries, 10) + 1),
      },
    });
    const store = new KeyvRedis(client as unknown as ConstructorParameters<typeof KeyvRedis>[0], { throwOnErrors: true, throwOnConnectError: true });
    super(id, 'redis', store, opts, new TierReporter(id, 'redis', logger, opts.uri, opts.password), logger, metrics);
    this.client = client;
    // An unhandled 'error' event would crash the process: a tier failure is only ever a miss.
    this.client.on('error', (e: unknown) => this.report('connection', e));
  }

  /** Whether the client is connected and ready for commands. */
  get ready(): boolean {
    return this.client.isReady;
  }

  /** Starts connecting; start-up does not wait for it (connect() keeps retrying while Redis is down). */
  override async open(): Promise<void> {
    this.client.connect().catch((e: unknown) => this.report('connect', e));
    await Promise.resolve();
  }

  /** A clean QUIT when connected (dropped after 2 s on a stalled server), else drops the socket. */
  override async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    // A client still reconnecting has nothing to flush: quitting would wait for a server that is gone.
    if (!this.client.isReady) {
      if (this.client.isOpen) this.client.destroy();
      return;
    }
    const quit = this.client.quit().then(
      () => true,
      () => false,
    );
    // The wait is cancelled once the race is over (its rejection is the race's, already settled).
    const waited = new AbortController();
    const clean = await Promise.race([quit, sleep(CLOSE_TIMEOUT_MS, waited.signal, true).then(() => false)]);
    waited.abort();
    if (!clean && this.client.isOpen) this.client.destroy();
  }
}
