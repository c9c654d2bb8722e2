/**
 * Feeds: one per (network, type, filter), shared by every subscription of it, whatever the
 * client. A notification's `result` is serialised once per feed event; each subscriber's frame
 * is its own prefix (holding its id) + that JSON + `}}`.
 *
 * {@link NetworkFeeds} holds a network's feeds and what drives them: the head follower (started
 * with the first `newHeads`/`logs` feed, stopped with the last), the upstream WebSocket
 * `newHeads` feed that wakes it, and the upstream `newPendingTransactions` pass-through.
 */
import type { Logger, Network, PluginHost } from 'svc-proxy/plugin';
import type { LogFilter } from './filter.ts';
import { HeadFollower, type LogsTarget } from './follower.ts';
import { wsCandidates, wsEndpointOf } from './schema.ts';
import type { SubscriptionSink, SubscriptionType } from './types.ts';
import { UpstreamWsFeed, type WsEndpoint } from './upstream-ws.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

/** Deadline of each call the follower makes through the network's pipeline, ms. */
export const FOLLOWER_CALL_TIMEOUT_MS = 10_000;

/** One subscriber of a feed: its connection and its frame prefix. */
interface Subscriber {
  readonly sink: SubscriptionSink;
  /** `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"<id>","result":` */
  readonly prefix: string;
}

/** One feed: a (network, type, filter) and its subscribers by subscription id. */
export class Feed implements LogsTarget {
  private readonly subscribers = new Map<string, Subscriber>();

  /**
   * @param type the subscription type
   * @param key the feed key within its network (`newHeads`, `logs:<canonical filter>`, ...)
   * @param filter the canonical filter of a `logs` feed (empty otherwise)
   * @param logger reports a sink that threw
   */
  constructor(
    readonly type: SubscriptionType,
    readonly key: string,
    readonly filter: LogFilter = {},
    private readonly logger?: Logger,
  ) {}

  /** Subscribers now. */
  get size(): number {
    return this.subscribers.size;
  }

  /** Adds a subscriber under its id. */
  add(id: string, sink: SubscriptionSink): void {
    this.subscribers.set(id, { sink, prefix: `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":` });
  }

  /** Removes a subscriber; true when it was there. */
  remove(id: string): boolean {
    return this.subscribers.delete(id);
  }

  /**
   * Sends one notification to every subscriber (a sink dropped meanwhile is skipped).
   * @param json the notification's `result`, JSON
   */
  publish(json: string): void {
    for (const [id, s] of this.subscribers) {
      try {
        s.sink.send(`${s.prefix}${json}}}`);
      } catch (e) {
        this.logger?.error(
          { err: e instanceof Error ? e.message : String(e), connection: s.sink.id, subscription: id },
          'websocket subscriptions: a connection failed to take a notification',
        );
      }
    }
  }
}

/** A network's feeds and their drivers (see the module comment). */
export class NetworkFeeds {
  private heads?: Feed;
  private readonly logs = new Map<string, Feed>();
  private pending?: Feed;
  private follower?: HeadFollower;
  private wake?: UpstreamWsFeed;
  private pendingSource?: UpstreamWsFeed;

  /**
   * @param host internal calls through the network's pipeline, logger
   * @param network the network; replaced by its successor when a config reload rebuilds it
   *   (the hub taps `networkRetired`), so the feeds follow the chain the new config describes
   * @param pollIntervalMs the follower's poll interval, ms
   */
  constructor(
    private readonly host: PluginHost,
    public network: Network,
    private readonly pollIntervalMs: number,
  ) {}

  /** True when no feed is left (the hub drops the network). */
  get empty(): boolean {
    return !this.heads && !this.pending && this.logs.size === 0;
  }

  /**
   * The feed of a (type, key), created (and its drivers started) when new.
   * @param type subscription type
   * @param key feed key
   * @param filter canonical filter of a `logs` feed
   */
  feed(type: SubscriptionType, key: string, filter?: LogFilter): Feed {
    const logger = this.host.logger;
    if (type === 'newPendingTransactions') {
      if (!this.pending) {
        const feed = (this.pending = new Feed(type, key, {}, logger));
        this.pendingSource = new UpstreamWsFeed({
          params: ['newPendingTransactions'],
          endpoints: () => this.endpoints(),
          onEvent: (result) => {
            const json = JSON.stringify(result);
            if (json !== undefined) feed.publish(json);
          },
          logger,
        });
      }
      return this.pending;
    }
    let f: Feed;
    if (type === 'newHeads') f = this.heads ??= new Feed(type, key, {}, logger);
    else {
      const known = this.logs.get(key);
      f = known ?? new Feed(type, key, filter, logger);
      if (!known) this.logs.set(key, f);
    }
    this.startFollower();
    return f;
  }

  /**
   * Waits (at most `maxWaitMs`) until the follower knows the head, so a subscription answered
   * after it sees every later block.
   * @param maxWaitMs longest wait, ms
   */
  ready(maxWaitMs: number): Promise<void> {
    return this.follower ? this.follower.ready(maxWaitMs) : Promise.resolve();
  }

  /** Drops a feed that lost its last subscriber, and stops what only it needed. */
  drop(feed: Feed): void {
    if (feed.size > 0) return;
    if (feed === this.pending) {
      this.pending = undefined;
      this.pendingSource?.stop();
      this.pendingSource = undefined;
      return;
    }
    if (feed === this.heads) this.heads = undefined;
    else if (this.logs.get(feed.key) === feed) {
      this.logs.delete(feed.key);
      this.follower?.forget(feed);
    }
    if (!this.heads && this.logs.size === 0) this.stopFollower();
  }

  /** Stops every driver (shutdown). */
  close(): void {
    this.stopFollower();
    this.pendingSource?.stop();
    this.pendingSource = undefined;
    this.heads = undefined;
    this.pending = undefined;
    this.logs.clear();
  }

  /** An upstream left the network: the upstream feeds it held move to another upstream. */
  upstreamLeft(upstreamId: string): void {
    this.wake?.leave(upstreamId);
    this.pendingSource?.leave(upstreamId);
  }

  /** The id of the upstream whose pending-transactions feed is live, if any (tests, logs). */
  get pendingUpstream(): string | undefined {
    return this.pendingSource?.feeding;
  }

  /** The id of the upstream whose WebSocket feed wakes the follower, if one is live (tests, logs). */
  get wakingUpstream(): string | undefined {
    return this.wake?.feeding;
  }

  private startFollower(): void {
    if (this.follower) return;
    const network = this.network;
    this.follower = new HeadFollower(
      (method, params) => this.call(method, params),
      { heads: () => this.heads, logs: () => this.logs.values() },
      {
        pollIntervalMs: this.pollIntervalMs,
        logger: this.host.logger,
        label: `${network.project.id}/${network.id}`,
        // The current network each time: a config reload replaces it.
        judge: (n) => networkChainState(this.host, this.network).judgeHead(n, 'latest'),
        onBlock: (n, hash, parentHash) => networkChainState(this.host, this.network).observeBlockHash(n, hash, parentHash),
      },
    );
    this.follower.start();
    if (wsCandidates(network.upstreams).length > 0) {
      const follower = this.follower;
      this.wake = new UpstreamWsFeed({ params: ['newHeads'], endpoints: () => this.endpoints(), onEvent: () => follower.wake(), logger: this.host.logger });
    }
  }

  private stopFollower(): void {
    this.follower?.stop();
    this.follower = undefined;
    this.wake?.stop();
    this.wake = undefined;
  }

  /** The network's upstreams with a `wsEndpoint`, serving ones first. */
  private endpoints(): WsEndpoint[] {
    return wsCandidates(this.network.upstreams).map((u) => ({ id: u.id, url: wsEndpointOf(u) as string }));
  }

  /** One call through the network's pipeline (internal: no cache, no multiplexing); its parsed result. */
  private async call(method: string, params: unknown[]): Promise<unknown> {
    const { ctx, done } = this.host.internalContext(this.network, method, params, FOLLOWER_CALL_TIMEOUT_MS);
    try {
      return (await this.host.runCall(ctx)).result;
    } finally {
      done();
    }
  }
}
