/**
 * One WebSocket connection: its messages served through the pipeline or the subscription hub, its
 * subscriptions, and its limits (at most {@link MAX_IN_FLIGHT} messages served at once, the
 * send-buffer cap, the subscription cap, ping/pong liveness). The connection is the hub's
 * {@link SubscriptionSink}: notifications go through {@link WsConnection.send} like answers do,
 * under the same send-buffer cap.
 */
import { setMaxListeners } from 'node:events';
import type { Counter } from 'prom-client';
import { type RawData, WebSocket } from 'ws';
import type { Network, PluginHost } from 'svc-proxy/plugin';
import { asSvcError, ErrCancelled, ErrInternal, ErrInvalidRequest, ErrNetworkNotSupported, SvcError, toJsonRpcError } from 'svc-proxy/plugin/errors';
import type { RateLimitService } from 'svc-proxy/plugins/rate-limit';
import type { SubscriptionType, WebSocketHooks, WsConnectionInfo } from './api.ts';
import { extractTopLevelValue } from 'svc-proxy/util';
import { answerMessage, type MessageHandlers } from './messages.ts';
import type { WebSocketSettings } from './schema.ts';
import type { SubscriptionHub, SubscriptionSink } from './subscriptions/types.ts';
import type { AcceptedUpgrade } from './upgrade.ts';

/**
 * Messages of one connection served at once. Past it the socket is not read (TCP backpressure
 * reaches the client) until half of them are answered, so a client cannot queue unbounded work.
 */
export const MAX_IN_FLIGHT = 64;

/** How long a client closed for being too slow may take to read the close frame before it is cut, ms. */
export const SLOW_CLOSE_GRACE_MS = 2_000;

/** Longest subscription id or network id echoed in an error message, characters. */
const MAX_ECHO = 80;

/** A connection held the most subscriptions allowed (`server.websocket.maxSubscriptionsPerConnection`). -32005 (EIP-1474 "limit exceeded"). */
export class ErrSubscriptionLimitExceeded extends SvcError {
  static override readonly defaultCode = -32005;
  static override readonly httpStatus = 429;
}

/** What every connection shares: the host, the hub, the hooks, the settings and the message counter. */
export interface ConnectionDeps {
  host: PluginHost;
  hub: SubscriptionHub;
  hooks: WebSocketHooks;
  settings: WebSocketSettings;
  /** `svc_ws_messages_total{project,direction}`. */
  messages: Counter<'project' | 'direction'>;
  /** The rate-limit plugin's budgets, each `eth_subscribe` is charged to; absent without that plugin. */
  rateLimit?: RateLimitService;
  /** Counts closes svc decided, by reason (`lifetime`, `auth`). */
  closedBySvc?(reason: 'lifetime' | 'auth'): void;
  /** Called once, when the connection has closed. */
  closed(conn: WsConnection): void;
}

/** Process-wide connection counter (ids). */
let nextId = 0;

/** One open WebSocket connection (see the file comment). */
export class WsConnection implements SubscriptionSink {
  /** Connection id, unique in the process. */
  readonly id: string;
  /** What the lifecycle hooks see. */
  readonly info: WsConnectionInfo;
  /** Whether the peer answered the last ping (set by `pong`, cleared by each ping). */
  private alive = true;
  /** Set once svc decided to close it (too slow, shutdown): nothing more is served or sent. */
  private closing = false;
  private closed = false;
  private inFlight = 0;
  private paused = false;
  private pendingSubscribes = 0;
  private cutTimer?: NodeJS.Timeout;
  private lifetimeTimer?: NodeJS.Timeout;
  private recheckTimer?: NodeJS.Timeout;
  /** Aborted when the connection closes: cancels its calls in flight. */
  private readonly abort = new AbortController();
  /** Live subscription ids of this connection and their types. */
  private readonly subs = new Map<string, SubscriptionType>();
  private readonly messagesIn: { inc(): void };
  private readonly messagesOut: { inc(): void };
  private readonly handlers: MessageHandlers;

  /**
   * @param ws the upgraded socket
   * @param accepted its route, request facts and identity
   * @param deps what connections share
   */
  constructor(
    private readonly ws: WebSocket,
    private readonly accepted: AcceptedUpgrade,
    private readonly deps: ConnectionDeps,
  ) {
    this.id = `ws-${++nextId}`;
    // One abort listener per message in flight (each call body listens to the connection's signal).
    setMaxListeners(MAX_IN_FLIGHT + 8, this.abort.signal);
    const { target, info, identity } = accepted;
    this.info = Object.freeze({ id: this.id, project: target.project, network: target.network, http: info, identity });
    this.messagesIn = deps.messages.labels(target.project.id, 'in');
    this.messagesOut = deps.messages.labels(target.project.id, 'out');
    const server = deps.host.config.server;
    this.handlers = {
      serve: (body) => deps.host.serveJsonRpc({ target, info, identity, body, signal: this.abort.signal, session: accepted }),
      subscription: (text, call) => this.answerSubscription(text, call),
      maxBatchSize: server.maxBatchSize,
      maxJsonDepth: server.maxJsonDepth,
    };
    ws.on('message', (data) => this.onMessage(data));
    ws.on('pong', () => {
      this.alive = true;
    });
    // An error (a frame over maxPayload: 1009, a protocol error: 1002) is followed by 'close'.
    ws.on('error', () => undefined);
    ws.on('close', (code, reason) => this.onClose(code, reason.toString('utf8')));
    const { maxConnectionLifetimeMs, authRecheckIntervalMs } = deps.settings;
    if (maxConnectionLifetimeMs > 0) {
      this.lifetimeTimer = setTimeout(() => {
        deps.closedBySvc?.('lifetime');
        this.closeWith(1001, 'connection lifetime reached: reconnect');
      }, maxConnectionLifetimeMs);
      this.lifetimeTimer.unref();
    }
    // A SIWE message is single-use (a replay is refused), so it cannot be presented again: such a
    // connection is bounded by maxConnectionLifetime instead.
    if (authRecheckIntervalMs > 0 && identity && identity.strategy !== 'siwe' && deps.host.hooks.authenticate.isUsed()) {
      this.recheckTimer = setInterval(() => void this.recheck(), authRecheckIntervalMs);
      this.recheckTimer.unref();
    }
  }

  /**
   * Checks the connection's credential again with the project's strategies (a key revoked or
   * disabled, a token expired since the upgrade): a refusal (HTTP 401/403 kind) closes it with
   * 1008 and the reason; any other failure (a key store down) leaves it open until the next check.
   */
  private async recheck(): Promise<void> {
    if (this.closing) return;
    try {
      await this.deps.host.hooks.authenticate.promise(this.accepted.info, this.accepted.target.project);
    } catch (e) {
      const err = asSvcError(e);
      if (err.httpStatus !== 401 && err.httpStatus !== 403) return;
      this.deps.closedBySvc?.('auth');
      this.closeWith(1008, `credential no longer valid: ${err.message}`.slice(0, 120));
    }
  }

  /** Live subscriptions of this connection. */
  get subscriptions(): number {
    return this.subs.size;
  }

  /**
   * Sends one text frame (an answer or a notification), unless the connection is closing. When the
   * bytes already waiting for the client exceed `maxBufferedBytes`, nothing is sent: the client is
   * too slow, and the connection is closed with 1008 (see {@link tooSlow}). The buffer so holds at
   * most `maxBufferedBytes` plus one message.
   */
  send(text: string): void {
    if (this.closing || this.ws.readyState !== WebSocket.OPEN) return;
    if (this.ws.bufferedAmount > this.deps.settings.maxBufferedBytes) {
      this.tooSlow();
      return;
    }
    this.ws.send(text);
    this.messagesOut.inc();
  }

  /**
   * One ping-interval tick: a peer that did not answer the previous ping is cut; otherwise it is
   * pinged again. A connection not being read (paused for {@link MAX_IN_FLIGHT}) cannot see its
   * pongs, so it is only pinged.
   */
  heartbeat(): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (!this.alive && !this.paused) {
      this.ws.terminate();
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

  /** Closes the connection with 1001 (svc is shutting down). */
  shutdown(): void {
    this.closeWith(1001, 'server shutting down');
  }

  /** Cuts the connection at once (no close handshake). */
  terminate(): void {
    this.ws.terminate();
  }

  /** Closes with a code and reason, stops serving and sending, drops the subscriptions, and cuts the socket if the peer does not finish the handshake in {@link SLOW_CLOSE_GRACE_MS}. */
  private closeWith(code: number, reason: string): void {
    if (this.closing || this.closed) return;
    this.closing = true;
    this.abort.abort();
    this.dropSubscriptions();
    clearTimeout(this.lifetimeTimer);
    clearInterval(this.recheckTimer);
    this.ws.close(code, reason);
    this.cutTimer = setTimeout(() => this.ws.terminate(), SLOW_CLOSE_GRACE_MS);
    this.cutTimer.unref();
  }

  /** The client does not read its answers fast enough: 1008, with the cap in the reason. */
  private tooSlow(): void {
    this.closeWith(1008, `send buffer over ${this.deps.settings.maxBufferedBytes} bytes: client too slow`);
  }

  private dropSubscriptions(): void {
    this.deps.hub.dropSink(this);
    this.subs.clear();
  }

  private onMessage(data: RawData): void {
    if (this.closing) return;
    // Text and binary frames alike are read as UTF-8 JSON-RPC.
    const text = Buffer.isBuffer(data)
      ? data.toString('utf8')
      : Array.isArray(data)
        ? Buffer.concat(data).toString('utf8')
        : Buffer.from(data).toString('utf8');
    this.messagesIn.inc();
    this.deps.hooks.message.call(this.info, text);
    if (++this.inFlight >= MAX_IN_FLIGHT && !this.paused) {
      this.paused = true;
      this.ws.pause();
    }
    answerMessage(text, this.handlers)
      .then(
        (answer) => this.send(answer),
        (e: unknown) =>
          this.deps.host.logger.error({ err: e instanceof Error ? e.stack : String(e), connection: this.id }, 'websocket: a message could not be answered'),
      )
      .finally(() => {
        this.inFlight--;
        if (this.paused && this.inFlight <= MAX_IN_FLIGHT / 2) {
          this.paused = false;
          this.ws.resume();
        }
      });
  }

  private onClose(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closing = true;
    clearTimeout(this.cutTimer);
    clearTimeout(this.lifetimeTimer);
    clearInterval(this.recheckTimer);
    this.abort.abort();
    this.dropSubscriptions();
    this.deps.closed(this);
    this.deps.hooks.close.call(this.info, code, reason);
  }

  /**
   * Answers one `eth_subscribe` / `eth_unsubscribe` call with the caller's id as sent; never rejects.
   * @param text the call's raw JSON text
   * @param call the parsed call
   */
  private async answerSubscription(text: string, call: Readonly<Record<string, unknown>>): Promise<string> {
    const method = call.method as string;
    const id = rawIdOf(text);
    try {
      if (id === undefined) throw new ErrInvalidRequest('invalid request: id must be a string, a number or null');
      if (call.jsonrpc !== '2.0') throw new ErrInvalidRequest('invalid request: "jsonrpc" must be "2.0"');
      const result = method === 'eth_subscribe' ? JSON.stringify(await this.subscribe(call)) : String(this.unsubscribe(call.params));
      return `{"jsonrpc":"2.0","id":${id},"result":${result}}`;
    } catch (e) {
      if (!(e instanceof SvcError))
        this.deps.host.logger.error({ err: e instanceof Error ? e.stack : String(e), method }, 'websocket: subscription call failed inside svc');
      const err = e instanceof SvcError ? e : new ErrInternal('internal error serving a subscription call', { cause: e });
      const wire = toJsonRpcError(asSvcError(err), method, this.deps.host.config.server.includeErrorDetails);
      const obj =
        wire.raw ??
        JSON.stringify(wire.data === undefined ? { code: wire.code, message: wire.message } : { code: wire.code, message: wire.message, data: wire.data });
      return `{"jsonrpc":"2.0","id":${id ?? 'null'},"error":${obj}}`;
    }
  }

  /** `eth_subscribe`: checks the cap, resolves the network, asks the hub. */
  private async subscribe(call: Readonly<Record<string, unknown>>): Promise<string> {
    const max = this.deps.settings.maxSubscriptionsPerConnection;
    if (this.subs.size + this.pendingSubscribes >= max) {
      throw new ErrSubscriptionLimitExceeded(
        `limit exceeded: this connection holds ${max} subscriptions (server.websocket.maxSubscriptionsPerConnection); eth_unsubscribe one first`,
      );
    }
    const params = call.params;
    this.pendingSubscribes++;
    let subId: string;
    try {
      const network = await this.networkOf(call);
      // Each subscription (each logs filter) costs a call of the caller's budgets.
      await this.deps.rateLimit?.charge(network, 'eth_subscribe', { clientAddress: this.accepted.info.clientAddress, identity: this.accepted.identity });
      subId = await this.deps.hub.subscribe(network, this, params);
    } finally {
      this.pendingSubscribes--;
    }
    if (this.closing) {
      // The connection went away while the hub was subscribing: nothing must feed a dead sink.
      this.deps.hub.unsubscribe(this, subId);
      throw new ErrCancelled('the connection closed');
    }
    const [type, filter] = Array.isArray(params) ? params : [];
    this.subs.set(subId, type as SubscriptionType);
    this.deps.hooks.subscribe.call(this.info, type as SubscriptionType, filter);
    return subId;
  }

  /** `eth_unsubscribe`: true when the id was one of this connection's live subscriptions. */
  private unsubscribe(params: unknown): boolean {
    if (!Array.isArray(params) || params.length !== 1 || typeof params[0] !== 'string') {
      throw new ErrInvalidRequest('invalid params: eth_unsubscribe expects [subscriptionId]', { code: -32602 });
    }
    const subId = params[0];
    if (subId.length > MAX_ECHO) return false;
    const ok = this.deps.hub.unsubscribe(this, subId);
    if (ok) this.subs.delete(subId);
    return ok;
  }

  /**
   * The network of a subscription: the one the path names, else the call's `networkId`
   * (`evm:<chainId>`, decimal or hex), as on HTTP.
   * @throws ErrNetworkNotSupported when neither names one the project serves
   */
  private async networkOf(call: Readonly<Record<string, unknown>>): Promise<Network> {
    const { project, network } = this.accepted.target;
    if (network) return network;
    const raw = call.networkId;
    if (typeof raw !== 'string') throw new ErrNetworkNotSupported(`no network: connect to /${project.id}/evm/<chainId> or set the body field networkId`);
    const m = /^evm:(0x[0-9a-fA-F]+|\d+)$/.exec(raw.trim());
    const chain = m ? Number(m[1]) : NaN;
    const t = Number.isSafeInteger(chain) && chain > 0 ? await this.deps.host.resolveRoute(`/${encodeURIComponent(project.id)}/evm/${chain}`, '') : undefined;
    if (!t?.network) throw new ErrNetworkNotSupported(`network ${JSON.stringify(raw.slice(0, MAX_ECHO))} is not supported by project ${project.id}`);
    return t.network;
  }
}

/** The raw text of a call's `id` ('null' when absent), or undefined when it is not a string, a number or null. */
function rawIdOf(text: string): string | undefined {
  const t = extractTopLevelValue(text, 'id');
  if (t === undefined) return 'null';
  const c = t.charCodeAt(0);
  return c === 34 /* " */ || c === 45 /* - */ || (c >= 48 && c <= 57) || t === 'null' ? t : undefined;
}
