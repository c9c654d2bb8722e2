/**
 * The subscription hub's config keys on upstream entries: `upstreams[].wsEndpoint`, the node's
 * own WebSocket URL. The websocket plugin includes {@link hubUpstreamSchema} in its schema
 * fragment (`upstream: { ...hubUpstreamSchema }`), so the key is valid under `upstreams[]` and
 * `upstreamDefaults`.
 */
import { Type, type Upstream } from 'svc-proxy/plugin';

/** Longest accepted `wsEndpoint`, characters. */
export const MAX_WS_ENDPOINT_LENGTH = 2048;

/** The `wsEndpoint` key of an upstream entry. */
export const hubUpstreamSchema = {
  wsEndpoint: Type.Optional(
    Type.String({
      pattern: '^wss?://',
      maxLength: MAX_WS_ENDPOINT_LENGTH,
      description:
        "the node's WebSocket URL (ws:// or wss://; redacted in logs like `endpoint`). While a network has `newHeads` or `logs` subscribers, svc subscribes to `newHeads` on one such upstream only to learn early that a block arrived (the block itself is always fetched through the network's pipeline); `newPendingTransactions` subscriptions are passed through from one such upstream",
    }),
  ),
};

/**
 * An upstream's configured WebSocket URL, or undefined when it has none.
 * @param u the upstream
 */
export function wsEndpointOf(u: Upstream): string | undefined {
  const v = u.config.settings.wsEndpoint;
  return typeof v === 'string' && /^wss?:\/\//i.test(v) ? v : undefined;
}

/**
 * The upstreams of a list that have a `wsEndpoint`, in config order, serving ones first.
 * @param upstreams a network's upstreams
 */
export function wsCandidates(upstreams: readonly Upstream[]): Upstream[] {
  const withWs = upstreams.filter((u) => wsEndpointOf(u) !== undefined);
  return [...withWs.filter((u) => u.serving), ...withWs.filter((u) => !u.serving)];
}
