/**
 * An upstream WebSocket subscription (`upstreams[].wsEndpoint`): one `eth_subscribe` held on ONE
 * upstream at a time with the `ws` client. When its socket closes or fails, when the upstream
 * refuses the subscription or stops answering pings, the feed moves to the next upstream with a
 * `wsEndpoint` (serving ones first, config order), after a backoff that doubles per failure up to
 * {@link MAX_BACKOFF_MS} and is reset by a successful subscription. It runs until stopped.
 *
 * What the notifications are used for is the caller's: a `newHeads` feed only wakes the network's
 * head follower (the content is not trusted; the follower reads blocks through the pipeline); a
 * `newPendingTransactions` feed is passed through to subscribers (best effort).
 */
import WebSocket, { type RawData } from 'ws';
import type { Logger } from 'svc-proxy/plugin';
import { backoffDelay, redactUrl } from 'svc-proxy/util';

/** One upstream that can feed: its id and WebSocket URL. */
export interface WsEndpoint {
  /** Upstream id (logs). */
  readonly id: string;
  /** `ws://` or `wss://` URL (never logged unredacted). */
  readonly url: string;
}

/** Longest wait before reconnecting, ms. */
export const MAX_BACKOFF_MS = 30_000;
/** Largest message accepted from an upstream socket, bytes (a notification is far smaller). */
export const MAX_UPSTREAM_MESSAGE_BYTES = 1024 * 1024;
/** How long the opening handshake and the `eth_subscribe` answer may take, ms. */
export const SUBSCRIBE_TIMEOUT_MS = 10_000;
/** Ping interval of an upstream socket, ms; a socket that did not pong by the next ping is cut. */
export const UPSTREAM_PING_INTERVAL_MS = 15_000;

/** Options of an {@link UpstreamWsFeed}. */
export interface UpstreamWsFeedOptions {
  /** The subscription held upstream (`eth_subscribe` params). */
  readonly params: readonly unknown[];
  /** The upstreams that can feed, in preference order; read again before each connection. */
  readonly endpoints: () => readonly WsEndpoint[];
  /** Called with each notification's `result`. */
  readonly onEvent: (result: unknown) => void;
  /** Connection changes (debug) and refusals (warn), URLs redacted. */
  readonly logger?: Logger;
  /** First reconnect delay, ms (default 500; doubles per failure). */
  readonly baseBackoffMs?: number;
  /** Ping interval, ms (default {@link UPSTREAM_PING_INTERVAL_MS}). */
  readonly pingIntervalMs?: number;
}

/** See the module comment. */
export class UpstreamWsFeed {
  private socket?: WebSocket;
  private cursor = 0;
  private failures = 0;
  private retryTimer?: NodeJS.Timeout;
  private stopped = false;
  private feedingId?: string;

  /** @param opts subscription, endpoints, callbacks (connects at once) */
  constructor(private readonly opts: UpstreamWsFeedOptions) {
    this.connect();
  }

  /** Id of the upstream the current socket goes to (subscribed or not yet). */
  private socketUpstreamId: string | undefined;

  /** Id of the upstream whose subscription is live, if any. */
  get feeding(): string | undefined {
    return this.feedingId;
  }

  /**
   * The upstream left its network (config reload, wrong chain): when it is the one feeding, its
   * socket is cut and the feed moves to the next upstream with a `wsEndpoint`, as on a failure.
   * @param upstreamId the upstream's id
   */
  leave(upstreamId: string): void {
    // Also while its eth_subscribe is unanswered: a socket still subscribing is that upstream's too.
    if (this.feedingId !== upstreamId && this.socketUpstreamId !== upstreamId) return;
    this.socket?.terminate();
  }

  /** Closes the upstream socket and stops reconnecting. Idempotent. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const ws = this.socket;
    this.socket = undefined;
    this.feedingId = undefined;
    if (ws) ws.terminate();
  }

  private connect(): void {
    if (this.stopped) return;
    const list = this.opts.endpoints();
    if (list.length === 0) {
      this.retry();
      return;
    }
    const ep = list[this.cursor % list.length] as WsEndpoint;
    this.cursor = (this.cursor + 1) % list.length;
    const log = { upstream: ep.id, url: redactUrl(ep.url), subscription: String(this.opts.params[0]) };
    let ws: WebSocket;
    try {
      ws = new WebSocket(ep.url, { perMessageDeflate: false, handshakeTimeout: SUBSCRIBE_TIMEOUT_MS, maxPayload: MAX_UPSTREAM_MESSAGE_BYTES });
    } catch (e) {
      this.opts.logger?.warn({ ...log, err: e instanceof Error ? e.message : String(e) }, 'websocket subscriptions: upstream wsEndpoint unusable');
      this.retry();
      return;
    }
    this.socket = ws;
    this.socketUpstreamId = ep.id;
    let subId: string | undefined;
    let alive = true;
    let pinger: NodeJS.Timeout | undefined;
    const answerTimer = setTimeout(() => ws.terminate(), SUBSCRIBE_TIMEOUT_MS + 1_000);
    answerTimer.unref();
    ws.on('open', () => {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: this.opts.params }));
      pinger = setInterval(() => {
        if (!alive) {
          ws.terminate();
          return;
        }
        alive = false;
        ws.ping();
      }, this.opts.pingIntervalMs ?? UPSTREAM_PING_INTERVAL_MS);
      pinger.unref();
    });
    ws.on('pong', () => {
      alive = true;
    });
    ws.on('message', (data: RawData) => {
      alive = true;
      const msg = parse(data);
      if (!msg) return;
      if (msg.id === 1 && subId === undefined) {
        clearTimeout(answerTimer);
        if (typeof msg.result !== 'string') {
          this.opts.logger?.warn(
            { ...log, error: JSON.stringify(msg.error ?? null).slice(0, 200) },
            'websocket subscriptions: upstream refused eth_subscribe; trying the next upstream with a wsEndpoint',
          );
          ws.terminate();
          return;
        }
        subId = msg.result;
        this.failures = 0;
        this.feedingId = ep.id;
        this.opts.logger?.debug(log, 'websocket subscriptions: upstream feed subscribed');
        return;
      }
      if (msg.method === 'eth_subscription' && subId !== undefined && msg.params?.subscription === subId) this.opts.onEvent(msg.params.result);
    });
    ws.on('error', (e: Error) => this.opts.logger?.debug({ ...log, err: e.message }, 'websocket subscriptions: upstream feed socket error'));
    ws.on('close', () => {
      clearTimeout(answerTimer);
      clearInterval(pinger);
      if (this.socket !== ws) return;
      this.socket = undefined;
      this.feedingId = undefined;
      this.opts.logger?.debug(log, 'websocket subscriptions: upstream feed closed; moving to the next upstream with a wsEndpoint');
      this.retry();
    });
  }

  /** Reconnects (to the next endpoint) after the backoff. */
  private retry(): void {
    if (this.stopped) return;
    const base = this.opts.baseBackoffMs ?? 500;
    const delay = backoffDelay({ initialMs: base, factor: 2, maxMs: MAX_BACKOFF_MS }, Math.min(this.failures, 16) + 1);
    this.failures++;
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.retryTimer.unref();
  }
}

/** The fields of an upstream message the feed reads. */
interface UpstreamMessage {
  id?: unknown;
  result?: unknown;
  error?: unknown;
  method?: unknown;
  params?: { subscription?: unknown; result?: unknown };
}

/** An upstream message as an object, or undefined when it is not JSON or not an object. */
function parse(data: RawData): UpstreamMessage | undefined {
  try {
    const text = Buffer.isBuffer(data)
      ? data.toString('utf8')
      : Array.isArray(data)
        ? Buffer.concat(data).toString('utf8')
        : Buffer.from(data).toString('utf8');
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as UpstreamMessage) : undefined;
  } catch {
    return undefined;
  }
}
