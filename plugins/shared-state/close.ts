/**
 * Closing the shared-state Redis connections at shutdown so that none is left open, whatever
 * state each is in: a ready one is sent QUIT when Redis answers PINGs (else destroyed: a frozen
 * Redis never answers, and node-redis cannot drop a socket once QUIT was sent; shutdown waits at
 * most {@link CLOSE_WAIT_MS} for the answer), one that is not ready is destroyed
 * (never QUIT: it would wait for a connection that may never come), and one whose TCP connect is
 * still pending is destroyed as soon as that connect ends: node-redis cannot drop a socket it
 * does not have yet, and a `destroy()` in that window would leave the socket it gets next open
 * and ready, owned by nobody.
 */
import { type RedisClient, sleep } from 'svc-proxy/util';

/** Longest wait for a clean QUIT at shutdown before the socket is dropped, ms. */
export const CLOSE_WAIT_MS = 500;

/** Where a client's connection stands, as its events tell. */
interface Tracked {
  /** A TCP connect is under way (connect() called or a reconnect started, no `connect`/`error` yet). */
  connecting: boolean;
  /** Closed with QUIT when ready (else destroyed at once even when ready: a reader blocked in XREAD). */
  quit: boolean;
}

/** The Redis clients of one plugin instance, closed together at shutdown. */
export class ClientCloser {
  private readonly clients = new Map<RedisClient, Tracked>();

  /**
   * Tracks a client; call it before `connect()` (or right after {@link openRedisClient}, which
   * connects in the background: its events come later).
   * @param client the client
   * @param quit whether a ready client is sent QUIT at close (false: a reader blocked in XREAD,
   *   whose QUIT would wait behind it; it is destroyed)
   */
  track(client: RedisClient, quit = true): void {
    const t: Tracked = { connecting: true, quit };
    this.clients.set(client, t);
    client.on('connect', () => (t.connecting = false));
    client.on('ready', () => (t.connecting = false));
    client.on('error', () => (t.connecting = false));
    client.on('reconnecting', () => (t.connecting = true));
  }

  /** How many clients are tracked and not closed yet. */
  get size(): number {
    return this.clients.size;
  }

  /**
   * Closes every tracked client (see the module comment). Resolves once the ready ones are
   * closed (at most {@link CLOSE_WAIT_MS}); one whose TCP connect is pending is destroyed when
   * that connect ends (node-redis's connect timeout bounds it). Never rejects.
   * @param answering whether Redis answers (PINGs): false destroys ready clients too
   */
  async closeAll(answering: boolean): Promise<void> {
    const all = [...this.clients];
    this.clients.clear();
    await Promise.all(all.map(([c, t]) => close(c, t, answering)));
  }
}

/** Destroys a client if it is still open. */
function destroy(c: RedisClient): void {
  try {
    if (c.isOpen) c.destroy();
  } catch {
    // Already closed.
  }
}

async function close(c: RedisClient, t: Tracked, answering: boolean): Promise<void> {
  if (!c.isOpen) return;
  if (c.isReady && t.quit && answering) {
    // The wait is cancelled once the race is over (its rejection is the race's, already settled).
    const waited = new AbortController();
    await Promise.race([c.quit().catch(() => undefined), sleep(CLOSE_WAIT_MS, waited.signal)]);
    waited.abort();
    destroy(c);
    return;
  }
  if (c.isReady || !t.connecting) {
    destroy(c);
    return;
  }
  // The TCP connect is pending: destroy once it ends (connected or failed).
  const drop = (): void => {
    c.off('connect', drop);
    c.off('error', drop);
    destroy(c);
  };
  c.on('connect', drop);
  c.on('error', drop);
}
