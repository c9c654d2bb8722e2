/**
 * `svc-proxy/plugins/failsafe`: what the failsafe plugin offers other plugins: the network failsafe
 * entry matched for a call, its retry and hedge counters (the `X-SVC-*-Retries` / `-Hedges`
 * headers), and a read-only view of its upstream circuit breakers (the operator page).
 */
import { serviceKey, Slot, type ServiceKey, type Upstream } from 'svc-proxy/plugin';

/**
 * The network failsafe entry matched for a call, as other plugins read it (the failsafe plugin
 * writes its own resolved entry, durations in ms).
 */
export interface FailsafeEntryView {
  /** The entry's method glob, as configured. */
  readonly matchMethod: string;
  /** The entry's `directiveDefaults` (spec §2.8), below the network's own. */
  readonly directiveDefaults?: Readonly<Record<string, unknown>>;
  /** The entry's retry policy; `emptyResultMaxAttempts` caps empty/pending retries (evm-retries). */
  readonly retry?: { readonly emptyResultMaxAttempts?: number };
  /**
   * Keys other plugins add to a network entry through its extension point (the consensus
   * plugin's `consensus`), resolved and defaulted; each is read, with its own type, by the plugin
   * that adds it.
   */
  readonly [added: string]: unknown;
}

/**
 * Call slot `failsafe.entry`: the network failsafe entry matched for the call (written once per
 * call by the failsafe plugin, possibly undefined: none matched). Read by consensus, integrity and
 * evm-retries.
 */
export const FAILSAFE_ENTRY = new Slot<FailsafeEntryView | undefined>('failsafe.entry', undefined);

/**
 * Record slot `failsafe.upstreamRetries`: upstream-scope retries (the same upstream again), written
 * by the failsafe plugin's retry policy (`X-SVC-Upstream-Retries`, summed over a batch).
 */
export const UPSTREAM_RETRIES = new Slot<number>('failsafe.upstreamRetries', 0);
/** Record slot `failsafe.upstreamHedges`: hedge legs started at upstream scope (`X-SVC-Upstream-Hedges`); no built-in policy hedges there. */
export const UPSTREAM_HEDGES = new Slot<number>('failsafe.upstreamHedges', 0);
/**
 * Record slot `failsafe.networkRetries`: extra network rounds, written by the failsafe plugin's
 * network retry (`X-SVC-Network-Retries`); each also adds one to the record's `networkAttempts`.
 */
export const NETWORK_RETRIES = new Slot<number>('failsafe.networkRetries', 0);
/** Record slot `failsafe.networkHedges`: hedge legs started at network scope, by the failsafe plugin (`X-SVC-Network-Hedges`). */
export const NETWORK_HEDGES = new Slot<number>('failsafe.networkHedges', 0);

/**
 * One upstream circuit breaker as other plugins see it (failsafe `circuitBreaker`, upstream
 * scope; spec §2.3): the operator page shows it, nothing outside the failsafe plugin changes it.
 */
export interface CircuitBreakerView {
  /** `closed` (calls pass), `open` (refused until `halfOpenAfter`), `half-open` (trial calls). */
  readonly state: 'closed' | 'open' | 'half-open';
}

/**
 * Key of the failsafe plugin's upstream circuit breakers: upstream → its breakers, one per
 * failsafe entry with a `circuitBreaker` (empty or absent: none). Read by the operator page
 * (`/admin/ui`) and tests.
 */
export const BREAKERS_SERVICE: ServiceKey<ReadonlyMap<Upstream, readonly CircuitBreakerView[]>> =
  serviceKey<ReadonlyMap<Upstream, readonly CircuitBreakerView[]>>('failsafe.breakers');
