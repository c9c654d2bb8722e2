/**
 * `svc-proxy/plugins/rate-limit`: what the rate-limit plugin offers doors whose traffic is not calls
 * (WebSocket subscriptions), charged to the same budgets as calls (spec §5, §8).
 */
import { serviceKey, type Identity, type Network, type ServiceKey } from 'svc-proxy/plugin';

/** What the rate-limit plugin offers doors whose traffic is not calls (WebSocket subscriptions). */
export interface RateLimitService {
  /**
   * Charges one unit of work that is not a pipeline call (an `eth_subscribe`: each subscription,
   * each `logs` filter) to the budgets a call of `method` to `network` by this caller is charged
   * to: its auth strategy's or API key's, the project's, the network's (the call pipeline's order; spec §5, §8).
   * @param network the network the work is for
   * @param method the method counted against the budgets' rules (`eth_subscribe`)
   * @param caller the client's address and identity, as the call pipeline sees them
   * @throws ErrAuthRateLimitRuleExceeded, ErrProjectRateLimitRuleExceeded or
   *   ErrNetworkRateLimitRuleExceeded (HTTP 429, -32005) over one; nothing when none applies
   */
  charge(network: Network, method: string, caller: { clientAddress: string; identity?: Identity }): Promise<void>;
}

/** Key of the rate-limit plugin's {@link RateLimitService}. */
export const RATE_LIMIT_SERVICE: ServiceKey<RateLimitService> = serviceKey<RateLimitService>('rate-limit');
