/**
 * The subscription hub: `eth_subscribe` / `eth_unsubscribe` served from svc's own head tracking.
 *
 * - `newHeads` and `logs`: a head follower per network (follower.ts) reads the chain through the
 *   network's pipeline, across every upstream, and emits each block once, in order, never
 *   backwards; a reorg emits the new branch and re-emits the abandoned blocks' logs with
 *   `removed: true`; after any failure (an upstream dying included) it resumes from the last block
 *   it emitted, so the gap is filled. An upstream `wsEndpoint` only makes it poll early.
 * - `newPendingTransactions`: passed through from one upstream with a `wsEndpoint` (best effort);
 *   refused with ErrEndpointUnsupported when the network has none.
 * - Subscriptions of the same (network, type, filter) share one feed (feeds.ts); each has its own
 *   id (`0x` + 32 random hex digits). At most `maxPerConnection` per connection.
 */
import { randomBytes } from 'node:crypto';
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { ErrEndpointUnsupported, ErrServiceShuttingDown } from 'svc-proxy/plugin/errors';
import { ErrSubscriptionLimitExceeded } from '../connection.ts';
import { type Feed, NetworkFeeds } from './feeds.ts';
import { parseSubscribe } from './filter.ts';
import { wsCandidates } from './schema.ts';
import type { HubOptions, SubscriptionHub, SubscriptionSink, SubscriptionType } from './types.ts';

/** Longest a subscribe waits for a new follower's first head, ms (so the client sees every later block). */
export const FIRST_HEAD_WAIT_MS = 5_000;

/** One live subscription. */
interface Subscription {
  readonly type: SubscriptionType;
  readonly sink: SubscriptionSink;
  readonly feed: Feed;
  readonly network: NetworkFeeds;
}

/**
 * Creates the hub of a plugin host (see the module comment).
 * @param host internal calls (`internalContext`, each network's `handler`) and the logger
 * @param opts poll interval (ms) and per-connection cap
 */
export function createSubscriptionHub(host: PluginHost, opts: HubOptions): SubscriptionHub {
  const networks = new Map<Network, NetworkFeeds>();
  const subs = new Map<string, Subscription>();
  const bySink = new Map<SubscriptionSink, Set<string>>();
  const counts: Record<SubscriptionType, number> = { newHeads: 0, logs: 0, newPendingTransactions: 0 };
  let closed = false;

  const remove = (id: string, s: Subscription): void => {
    subs.delete(id);
    counts[s.type]--;
    const own = bySink.get(s.sink);
    own?.delete(id);
    if (own?.size === 0) bySink.delete(s.sink);
    s.feed.remove(id);
    s.network.drop(s.feed);
    if (s.network.empty) {
      s.network.close();
      if (networks.get(s.network.network) === s.network) networks.delete(s.network.network);
    }
  };

  return {
    upstreamLeft(u: Upstream): void {
      for (const feeds of networks.values()) if (feeds.network.project.id === u.projectId) feeds.upstreamLeft(u.id);
    },

    networkReplaced(old: Network): void {
      const feeds = networks.get(old);
      const next = old.project.networks.get(old.id);
      if (!feeds || !next || next === old || networks.has(next)) return;
      networks.delete(old);
      feeds.network = next;
      networks.set(next, feeds);
    },

    async subscribe(network: Network, sink: SubscriptionSink, params: unknown): Promise<string> {
      if (closed) throw new ErrServiceShuttingDown('svc is shutting down: no new subscriptions');
      const req = parseSubscribe(params);
      const own = bySink.get(sink);
      if ((own?.size ?? 0) >= opts.maxPerConnection) {
        throw new ErrSubscriptionLimitExceeded(
          `limit exceeded: this connection holds ${opts.maxPerConnection} subscriptions (server.websocket.maxSubscriptionsPerConnection); eth_unsubscribe one first`,
        );
      }
      let nf = networks.get(network);
      if (req.type === 'newPendingTransactions' && wsCandidates(network.upstreams).length === 0) {
        throw new ErrEndpointUnsupported(
          `newPendingTransactions is passed through from an upstream WebSocket, and no upstream of network ${network.id} has a wsEndpoint`,
        );
      }
      if (!nf) {
        nf = new NetworkFeeds(host, network, opts.pollIntervalMs);
        networks.set(network, nf);
      }
      const feed = nf.feed(req.type, req.key, req.type === 'logs' ? req.filter : undefined);
      const id = `0x${randomBytes(16).toString('hex')}`;
      feed.add(id, sink);
      subs.set(id, { type: req.type, sink, feed, network: nf });
      counts[req.type]++;
      if (own) own.add(id);
      else bySink.set(sink, new Set([id]));
      if (req.type !== 'newPendingTransactions') await nf.ready(FIRST_HEAD_WAIT_MS);
      return id;
    },

    unsubscribe(sink: SubscriptionSink, id: string): boolean {
      const s = subs.get(id);
      if (!s || s.sink !== sink) return false;
      remove(id, s);
      return true;
    },

    dropSink(sink: SubscriptionSink): void {
      const own = bySink.get(sink);
      if (!own) return;
      for (const id of [...own]) {
        const s = subs.get(id);
        if (s) remove(id, s);
      }
      bySink.delete(sink);
    },

    counts(): Record<SubscriptionType, number> {
      return { ...counts };
    },

    close(): Promise<void> {
      closed = true;
      for (const nf of networks.values()) nf.close();
      networks.clear();
      subs.clear();
      bySink.clear();
      counts.newHeads = counts.logs = counts.newPendingTransactions = 0;
      return Promise.resolve();
    },
  };
}
