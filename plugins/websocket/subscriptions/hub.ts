/**
 * PLACEHOLDER (replaced by the subscription hub's implementation): refuses every subscription.
 */
import { ErrEndpointUnsupported, type Network, type PluginHost } from 'svc/plugin';
import type { HubOptions, SubscriptionHub, SubscriptionSink, SubscriptionType } from './types.ts';

/** Creates the hub of a plugin host. */
export function createSubscriptionHub(_host: PluginHost, _opts: HubOptions): SubscriptionHub {
  return {
    subscribe(_network: Network, _sink: SubscriptionSink, _params: unknown): Promise<string> {
      return Promise.reject(new ErrEndpointUnsupported('eth_subscribe is not available yet'));
    },
    unsubscribe: () => false,
    dropSink: () => undefined,
    counts: (): Record<SubscriptionType, number> => ({ newHeads: 0, logs: 0, newPendingTransactions: 0 }),
    close: () => Promise.resolve(),
  };
}
