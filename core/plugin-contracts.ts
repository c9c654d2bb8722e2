/**
 * `svc/plugin/contracts`: the contracts built-in plugins offer each other and in-house plugins.
 *
 * - typed services (`core/services.ts`) and the slots several plugins share (`core/shared-slots.ts`);
 * - the selection-policy contract (`core/selection.ts`): a plugin installs its own upstream order
 *   through {@link selectionHooks} and reads the selection through {@link SelectionApi};
 * - the attempt-recording helpers the failsafe plugin and the state poller use, and attempt blame;
 * - chain state, provenance, params hashes, health and cost.
 *
 * Versioned with svc like `svc/plugin`.
 */
export { createSweep, finishAttempt, outcomeOf, startAttempt, traceOutcome, tryUpstream, type TraceOutcome } from './sweep.ts';
export { isCharged, isRequestFact, type AttemptCharge, type Blame } from './blame.ts';
export { isDeferred, settleFailedAttempt, whenCharged, wouldConfirm } from './charge.ts';
export type { CordonChange, HealthClassifier, HealthOutcome, HealthSnapshot, HealthTracker } from '../lib/health-window.ts';
export { isDeadline } from './registry/upstream.ts';
export { CHAIN_STATE_SERVICE, NO_CHAIN_STATE, type ChainStateService, type HeadVerdict, type NetworkChainState, type UpstreamChainState } from './chain-state.ts';
export { leaveNetworks } from './probe.ts';
export {
  AUTH_SERVICE,
  BREAKERS_SERVICE,
  type CircuitBreakerView,
  AuthBlockSchema,
  CORS_SERVICE,
  CorsBlockSchema,
  COST_SERVICE,
  DIRECTIVES_SERVICE,
  doorAuthenticator,
  PROVIDERS_SERVICE,
  RATE_LIMIT_SERVICE,
  STATE_POLLERS_SERVICE,
  type ApiKeyManager,
  type ApiKeyRecord,
  type AuthScope,
  type AuthService,
  type Authenticator,
  type CorsPolicy,
  type CorsService,
  type CorsSettings,
  type CostService,
  type DirectivesService,
  type PriceTable,
  type ProvidersService,
  type RateLimitService,
  type Vendor,
  type VendorUpstream,
  type SubscriptionType,
  WEBSOCKET_SERVICE,
  type WebSocketHooks,
  type WebSocketService,
  type WsConnectionInfo,
} from './services.ts';
export {
  CACHE_ATTEMPTS,
  CACHE_HEDGES,
  CACHE_OUTCOME,
  CACHE_RETRIES,
  CONSENSUS_DISPUTES,
  CONSENSUS_LOW_PARTICIPANTS,
  CONSENSUS_SLOTS,
  FAILSAFE_ENTRY,
  NETWORK_HEDGES,
  NETWORK_RETRIES,
  PROVIDER_ORIGIN,
  SHADOW_UPSTREAM,
  SYNCING,
  UPSTREAM_HEDGES,
  UPSTREAM_LAG,
  UPSTREAM_RETRIES,
  type FailsafeEntryView,
  type ProviderOrigin,
} from './shared-slots.ts';
export { callParamsHash, paramsHash } from './params-hash.ts';
export { markProvenance, provenanceKey } from './provenance.ts';
export {
  SCORE_ORDER_STEP,
  SELECTION_API_SERVICE,
  SELECTION_HOOKS_SERVICE,
  selectionHooks,
  type DecisionDraft,
  type EvalFunc,
  type PolicyContext,
  type PolicyMetrics,
  type PolicyUpstream,
  type ScoreWeights,
  type SelectionApi,
  type SelectionDecision,
  type SelectionHooks,
  type SelectionState,
  type UpstreamsView,
} from './selection.ts';
