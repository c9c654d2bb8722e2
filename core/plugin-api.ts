/**
 * `svc/plugin`: the public entry point for plugin authors. An in-house plugin in its own package
 * imports from here, and from three companion entries when it needs them:
 *
 * - `svc/plugin/errors`: named errors (recognised across installed copies of svc by brand and
 *   name) and the JSON-RPC error helpers;
 * - `svc/plugin/contracts`: the services, shared slots, selection policy, attempt recording,
 *   chain state, provenance and params hashes built-in plugins offer each other;
 * - `svc/util`: generic utilities (globs, redaction, canonical JSON, labels, breakers, Redis...);
 *
 * and `svc/presets` to extend a built-in preset. Every name is part of the contract and
 * versioned with svc (semver: a breaking change to any of them is a major version).
 *
 * This entry holds:
 * - the contract: {@link Plugin} (with the {@link AnyServiceKey} lists it `provides` and `needs`),
 *   {@link PluginHost}, {@link ServiceRegistry}, {@link definePlugin};
 * - typed keys: {@link serviceKey} for services, {@link Slot} for extension slots;
 * - hooks and their handler types, the per-call context and execution record;
 * - stage numbers (`core/pipeline/stages.ts`): taps use these names, never arithmetic on them;
 * - {@link RpcResult}, schema helpers (TypeBox's `Type` re-exported so a plugin needs no extra
 *   dependency), directives and config-normalisation helpers.
 */
export type { AnyServiceKey, Plugin, PluginHost, ServiceRegistry, ListenOverrides } from './host/host.ts';
export { serviceKey, ServiceKey } from './host/host.ts';
export type { LifecycleState, LifecycleStatus } from './http/drain.ts';

export type {
  AttemptHandler,
  CallHandler,
  HeaderSink,
  Leg,
  ProxyHooks,
  RegisteredTap,
  ResponseMeta,
  UpstreamCall,
  UpstreamSender,
} from './pipeline/hooks.ts';
export { guardObservationHook, UpstreamCursor } from './pipeline/hooks.ts';

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
} from './pipeline/context.ts';
export { FINALITY } from './pipeline/context.ts';

export {
  AttemptDoneStage,
  AttemptStage,
  CallStage,
  DirectiveStage,
  SelectStage,
  ShutdownStage,
  stageBetween,
  UpstreamStage,
  ValidateStage,
} from './pipeline/stages.ts';

export { RpcResult } from './wire/jsonrpc.ts';
export type { ParsedCall } from './wire/jsonrpc.ts';

export { Type } from '@sinclair/typebox';
export type { Static, TProperties, TSchema } from '@sinclair/typebox';
export { DIRECTIVE_DEFAULTS_POINT, Duration, Extensible, Size, Strict } from '../config/schema.ts';
export type { SchemaFragment, TDuration, TSize } from '../config/schema.ts';
export { directiveDefaultsOf, parseDuration } from '../config/load.ts';
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
export { resolveConfigBlock } from '../config/block.ts';

export type { Network } from './registry/project.ts';
export type { Project } from './registry/project.ts';
export type { DialRequest, Upstream, UpstreamState } from './registry/upstream.ts';
export type { UpstreamPoolOptions } from './registry/transport.ts';
export type { ReloadReport } from './pipeline/hooks.ts';
export type { Logger } from '../lib/logger.ts';
export type { RouteTarget } from './http/routing.ts';
export type { JsonRpcInput, JsonRpcOutput } from './http/serve.ts';

export { Slot, type SlotHolder } from './registry/slots.ts';
export { VERSION } from './wire/version.ts';

export { definePlugin, definePreset, type Preset } from './host/define.ts';
export { settingsOf, type FragmentSettings, type Resolved, type ResolvedProperties, type SettingsHolder } from '../config/settings.ts';
