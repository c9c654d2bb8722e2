/**
 * `svc-proxy/plugins/cost`: what pricing plugins use to register a vendor's price table with the cost
 * plugin (credits per request, `X-SVC-Credits`).
 */
import { type Network, serviceKey, type ServiceKey } from 'svc-proxy/plugin';

/**
 * A vendor's price table: the units of one request to that vendor for a method, or undefined
 * when the table does not price it (the provider's `creditUnits`, then the flat 1, apply).
 * Optionally versioned: `version` is what `X-SVC-Credits-Version` carries for the credits this
 * table priced (an in-house table names its own revision), else svc's version. Build one with
 * `Object.assign((method) => ..., { version: '2025-06' })`.
 */
export interface PriceTable {
  /**
   * Units of one request for a method, or undefined when not priced here.
   * @param method the JSON-RPC method sent upstream
   */
  (method: string): number | undefined;
  /** The table's version: 1-64 characters of `A-Z a-z 0-9 . _ ~ : + @ / -` (it goes into a header). */
  readonly version?: string;
}

/** What pricing plugins use (a plugin that registers tables declares `dependsOn: ['cost']`). */
export interface CostService {
  /**
   * Registers (or replaces) the price table of a vendor (`vendorName` / provider vendor); its
   * `version` is read once, here.
   * @throws TypeError when the table is not a function or its version is not a valid header token (see {@link PriceTable.version})
   */
  registerPriceTable(vendor: string, table: PriceTable): void;
  /**
   * The credits one call of `method` costs before it is served (pay per request, spec §5 item 1): the most units any upstream of the
   * network would cost for it under the same precedence as `X-SVC-Credits` (price table, provider `creditUnits`, flat 1), so whichever
   * upstream serves, the quote covers one request; 1 for a network without upstreams yet. Retries and hedges are svc's cost, not quoted.
   * @param network the network the call is routed to
   */
  quoteCredits(network: Network, method: string): number;
}

/** Key of the cost plugin's {@link CostService}: `host.services.require(COST_SERVICE)`, with `dependsOn: ['cost']`. */
export const COST_SERVICE: ServiceKey<CostService> = serviceKey<CostService>('cost');
