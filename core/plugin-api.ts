/**
 * `svc/plugin`: the one public entry point for plugins (issue #9 item 1). An in-house plugin in
 * its own package imports only from here (and `svc/presets` to extend a built-in preset); every
 * name below is part of the contract and versioned with svc (semver: a breaking change to any of
 * them is a major version).
 *
 * - the contract: {@link Plugin}, {@link PluginHost}, {@link ServiceRegistry}, contract errors;
 * - hooks and their handler types, the per-call context and execution record;
 * - stage numbers (`core/stages.ts`): taps use these names, never arithmetic on them;
 * - named errors (recognised across installed copies of svc by brand and name) and `RpcResult`;
 * - schema helpers, with TypeBox's `Type` re-exported so a plugin needs no extra dependency;
 * - the attempt-recording helpers the failsafe plugin and the state poller use;
 * - small tools a plugin needs to honour the rules: linear-time globs, bounded labels.
 */
export type { Plugin, PluginHost, ServiceRegistry, ListenOverrides } from './host.ts';
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
export { UpstreamCursor } from './hooks.ts';

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

export { AttemptDoneStage, AttemptStage, CallStage, DirectiveStage, SelectStage, ShutdownStage, UpstreamStage, ValidateStage } from './stages.ts';

export * from './errors.ts';
export { isPassThrough, toJsonRpcError, wireError, type JsonRpcErrorObject } from './errors-wire.ts';
export { RpcResult } from './jsonrpc.ts';
export type { ParsedCall } from './jsonrpc.ts';

export { Type } from '@sinclair/typebox';
export type { Static, TProperties, TSchema } from '@sinclair/typebox';
export { DIRECTIVE_DEFAULTS_POINT, directiveDefaultsProps, Duration, Extensible, Size, Strict } from './config/schema.ts';
export type { SchemaFragment } from './config/schema.ts';
export { ConfigError, directiveDefaultsOf, parseDuration, type ConfigProblem } from './config/load.ts';
export type { ResolvedConfig, ResolvedNetwork, ResolvedProject, ResolvedServer, ResolvedUpstream, UpstreamInput } from './config/types.ts';

export { createSweep, finishAttempt, outcomeOf, startAttempt, traceOutcome, tryUpstream } from './sweep.ts';
export { agreementSignature, blameOf, errorSignature, isCharged, isRequestFact, normaliseErrorMessage, type Blame } from './blame.ts';
export { isDeferred, settleFailedAttempt, whenCharged, wouldConfirm } from './charge.ts';

export type { Network } from './registry/network.ts';
export type { Project } from './registry/project.ts';
export type { Upstream } from './registry/upstream.ts';
export type { CordonChange, HealthSnapshot, HealthTracker } from './registry/health.ts';
export { isDeadline } from './registry/upstream.ts';
export type { NetworkChainState, UpstreamChainState } from './evm/state.ts';
export type { Logger } from './logger.ts';

export { Slot, type SlotHolder } from './slots.ts';
export { FINALITY } from './context.ts';
export { chainStateOf, SYNCING } from './evm/state.ts';
export { compileGlobs, type GlobTest } from '../lib/glob.ts';
export { MatcherCache, MAX_CLIENT_PATTERN_LENGTH, type Matcher } from '../lib/matcher.ts';
export { linkedController, sleep } from './abort.ts';
export { addressList, inList, ipFamily, normalizeIp } from '../lib/client-address.ts';
export { ADMIN_CORS_DEFAULTS, CorsSchema, corsMiddleware, corsProblem, corsSettings, type CorsInput, type CorsSettings } from './cors.ts';
export { readRequestBody } from './http-io.ts';
export { excerptOf, keyKind, redactedMark, redactText, redactTree, redactUrl, type KeyKind } from '../lib/redact.ts';
export { closeRedisClient, openRedisClient, type RedisClient } from '../lib/redis.ts';
export {
  BREAKER_STATE_VALUE,
  breakerSettings,
  DEFAULT_BREAKER_SETTINGS,
  StorageBreaker,
  StorageBreakerSchema,
  StorageUnavailableError,
  type StorageBreakerOptions,
  type StorageBreakerSettings,
  type StorageBreakerState,
} from '../lib/storage-breaker.ts';
export { AUTH_SERVICE, doorAuthenticator, type ApiKeyManager, type ApiKeyRecord, type AuthScope, type AuthService, type Authenticator } from './auth.ts';
export { AuthConfigSchema, AuthStrategySchema, type AuthConfig, type AuthStrategyConfig } from './config/auth-schema.ts';
export { agentName, BoundedLabel, MAX_LABEL_LENGTH } from './labels.ts';
export { VERSION } from './version.ts';
export { DeferredCounter, DeferredHistogram, type HistogramCell } from '../lib/deferred-metrics.ts';
export { callParamsHash, paramsHash } from './params-hash.ts';
export { markProvenance, provenanceKey, MAX_PROVENANCE_MARK } from './provenance.ts';
export { canonicalHash, canonicalize, compileIgnorePaths, DEFAULT_IGNORE_FIELDS, firstDifference, isEmptyResult, type IgnorePaths } from '../lib/canonical.ts';
export {
  BLOCK_PARAM,
  BLOCK_TAGS,
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
export type { TDuration, TSize } from './config/schema.ts';
