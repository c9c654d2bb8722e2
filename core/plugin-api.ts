/**
 * `svc-proxy/plugin`: the entry point for plugin authors, with `svc-proxy/plugin/errors` (named errors, JSON-RPC error helpers),
 * `svc-proxy/plugin/contracts` (attempt recording, health, chain state), `svc-proxy/util` (generic utilities) and `svc-proxy/presets`. Every name is
 * versioned with svc (semver: a breaking change to any of them is a major version).
 * Here: the contract ({@link Plugin}, {@link PluginHost}, {@link ServiceRegistry}, {@link definePlugin}), typed keys ({@link serviceKey},
 * {@link Slot}), hooks, the per-call context and record, stage numbers (taps use these names, never arithmetic on them),
 * {@link RpcResult}, schema helpers (TypeBox's `Type`, so a plugin needs no extra dependency) and config-normalisation helpers.
 */
export type { AnyServiceKey, Plugin, PluginHost, ServiceRegistry, ListenOverrides } from './host/host.ts';
export { serviceKey, ServiceKey } from './host/host.ts';
export type { LifecycleState, LifecycleStatus } from './http/drain.ts';

export type {
  Admission,
  AnsweredTask,
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
export type { UpstreamFault } from './wire/fault.ts';
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
export type { ResolvedConfig, ResolvedNetwork, ResolvedProject, ResolvedServer, ResolvedServerTls, ResolvedUpstream, UpstreamInput } from '../config/types.ts';
export { resolveConfigBlock } from '../config/block.ts';

export type { Network } from './registry/project.ts';
export type { Project } from './registry/project.ts';
export type { DialRequest, Upstream, UpstreamState } from './registry/upstream.ts';
export type { ReloadReport } from './pipeline/hooks.ts';
export type { Logger } from '../lib/logger.ts';
export type { RouteTarget } from './http/routing.ts';
export type { JsonRpcInput, JsonRpcOutput } from './http/serve.ts';

export { Slot, type SlotHolder } from './registry/slots.ts';
export { VERSION } from './wire/version.ts';

export { definePlugin, definePreset, type Preset } from './host/define.ts';
export { settingsOf, type FragmentSettings, type Resolved, type ResolvedProperties, type SettingsHolder } from '../config/settings.ts';
