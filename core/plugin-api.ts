/**
 * `svc/plugin`: the one public entry point for plugins. An in-house plugin in
 * its own package imports only from here (and `svc/presets` to extend a built-in preset); every
 * name below is part of the contract and versioned with svc (semver: a breaking change to any of
 * them is a major version).
 *
 * - the contract: {@link Plugin}, {@link PluginHost}, {@link ServiceRegistry}, contract errors;
 * - typed keys: {@link serviceKey} for services, {@link Slot} for extension slots; the services
 *   built-in plugins offer each other and in-house plugins, key and interface
 *   (`core/services.ts`), and the slots several plugins share (`core/shared-slots.ts`);
 * - hooks and their handler types, the per-call context and execution record;
 * - stage numbers (`core/stages.ts`): taps use these names, never arithmetic on them;
 * - named errors (recognised across installed copies of svc by brand and name) and `RpcResult`;
 * - schema helpers, with TypeBox's `Type` re-exported so a plugin needs no extra dependency;
 * - the attempt-recording helpers the failsafe plugin and the state poller use;
 * - small tools a plugin needs to honour the rules: linear-time globs, bounded labels;
 * - the selection-policy contract (`core/selection.ts`): a plugin installs its own upstream order
 *   through {@link selectionHooks} and reads the selection through {@link SelectionApi}.
 */
export type { Plugin, PluginHost, ServiceRegistry, ListenOverrides } from './host.ts';
export { serviceKey, ServiceKey } from './host.ts';
export type { LifecycleState, LifecycleStatus } from './drain.ts';
export { PluginContractError, PluginDependencyError } from './host.ts';

export type {
  AttemptHandler,
  CallHandler,
  HeaderSink,
  Leg,
  ProxyHooks,
  ResponseMeta,
  UpstreamCall,
  UpstreamSender,
} from './hooks.ts';
export { guardObservationHook, UpstreamCursor } from './hooks.ts';

export type {
  AttemptOutcome,
  AttemptReason,
  AttemptRecord,
  CallContext,
  Directives,
  ExecutionRecord,
  Finality,
  HttpRequestInfo,
  Identity,
} from './context.ts';

export { AttemptDoneStage, AttemptStage, CallStage, DirectiveStage, SelectStage, ShutdownStage, stageBetween, UpstreamStage, ValidateStage } from './stages.ts';

export * from './errors.ts';
export { isPassThrough, toJsonRpcError, wireError, type JsonRpcErrorObject } from './errors-wire.ts';
export { RpcResult } from './jsonrpc.ts';
export type { ParsedCall } from './jsonrpc.ts';

export { Type } from '@sinclair/typebox';
export type { Static, TProperties, TSchema } from '@sinclair/typebox';
export { DIRECTIVE_DEFAULTS_POINT, Duration, Extensible, Size, Strict } from '../config/schema.ts';
export { declareDirectives, Directive, directiveDefaultsSchema, type DirectiveDeclaration, type DirectiveOptions, type DirectiveType } from './directive.ts';
export type { SchemaFragment } from '../config/schema.ts';
export { ConfigError, directiveDefaultsOf, parseDuration, type ConfigProblem } from '../config/load.ts';
export {
  eachAuthBlock,
  eachNetwork,
  eachProject,
  eachUpstream,
  isConfigObject,
  normalizeRedisBlock,
  pathOf,
  renameKey,
  rewriteKey,
  type ConfigDocument,
  type ConfigObject,
  type NormalizeReport,
} from '../config/normalize.ts';
export type { ResolvedConfig, ResolvedNetwork, ResolvedProject, ResolvedServer, ResolvedUpstream, UpstreamInput } from '../config/types.ts';

export { createSweep, finishAttempt, outcomeOf, startAttempt, traceOutcome, tryUpstream } from './sweep.ts';
export { isCharged, isRequestFact, type AttemptCharge, type Blame } from './blame.ts';
export { isDeferred, settleFailedAttempt, whenCharged, wouldConfirm } from './charge.ts';

export type { Network } from './registry/network.ts';
export type { Project } from './registry/project.ts';
export type { Upstream } from './registry/upstream.ts';
export type { CordonChange, HealthSnapshot, HealthTracker } from '../lib/health-window.ts';
export { isDeadline } from './registry/upstream.ts';
export { CHAIN_STATE_SERVICE, NO_CHAIN_STATE, type ChainStateService, type HeadVerdict, type NetworkChainState, type UpstreamChainState } from './chain-state.ts';
export type { ReloadReport } from './reload.ts';
export { leaveNetworks } from './probe.ts';
export type { Logger } from '../lib/logger.ts';

export { Slot, type SlotHolder } from './slots.ts';
export { FINALITY } from './context.ts';
export { compileGlobs, type GlobTest } from '../lib/glob.ts';
export { MatcherCache, MAX_CLIENT_PATTERN_LENGTH, type Matcher } from '../lib/matcher.ts';
export { acquireController, linkedController, releaseController, sleep } from '../lib/abort.ts';
export { type BreakerState, CountBreaker, type CountBreakerSettings } from '../lib/breaker.ts';
export { addressList, inList } from '../lib/client-address.ts';
export { readRequestBody } from './http-io.ts';
export { arrayElements, extractTopLevelValue, type ScannedElement } from '../lib/json-scan.ts';
export type { RouteTarget } from './routing.ts';
export type { JsonRpcInput, JsonRpcOutput } from './serve.ts';
export { excerptOf, redactText, redactTree, redactUrl } from '../lib/redact.ts';
export { closeRedisClient, openRedisClient, type RedisClient } from '../lib/redis.ts';
export {
  StorageBreaker,
  StorageBreakerSchema,
  StorageUnavailableError,
  type StorageBreakerOptions,
  type StorageBreakerSettings,
  type StorageBreakerState,
} from '../lib/storage-breaker.ts';
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
export { resolveConfigBlock } from '../config/block.ts';
export { agentName, BoundedLabel, MAX_LABEL_LENGTH } from '../lib/labels.ts';
export { VERSION } from './version.ts';
export { DeferredCounter, DeferredHistogram, type HistogramCell } from '../lib/deferred-metrics.ts';
export { callParamsHash, paramsHash } from './params-hash.ts';
export { markProvenance, provenanceKey } from './provenance.ts';
export { canonicalHash, canonicalize, compileIgnorePaths, DEFAULT_IGNORE_FIELDS, firstDifference, isEmptyResult, type IgnorePaths } from '../lib/canonical.ts';
export {
  BLOCK_PARAM,
  blockRefOf,
  classifyFinality,
  FINALIZED_METHODS,
  highestNumberOf,
  parseBlockNumber,
  REALTIME_METHODS,
  refOf,
  STATEFUL_METHODS,
  toHex,
  WRITE_METHODS,
  type BlockRef,
} from '../lib/evm/blocks.ts';

export { definePlugin, definePreset, type Preset } from './define.ts';
export { settingsOf, type FragmentSettings, type Resolved, type ResolvedProperties, type SettingsHolder } from './plugin-settings.ts';
export type { TDuration, TSize } from '../config/schema.ts';

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

export { broadcastToWorkers, claimInPrimary, fleetReplicaId, onWorkerBroadcast, registerFleetRelay, svcWorker, type FleetRelay, type FleetRelayRegistration, type WorkerInfo } from '../lib/cluster.ts';
export { ClaimSet, type ClaimOutcome } from '../lib/claim-set.ts';
export { createMetricsServer, type MetricsSource } from '../lib/metrics-listener.ts';
