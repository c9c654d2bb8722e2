/**
 * The building blocks a config schema fragment is written with (config/schema.ts re-exports
 * them, and svc-proxy/plugin re-exports them from there): the duration and size kinds, closed and
 * extensible objects, the {@link SchemaFragment} shape and its slots, and the core's extension
 * point names. Below the core's keys (./schema-core.ts) and the assembly (./schema.ts).
 */
import type { ConfigDocument, NormalizeReport } from './normalize.ts';
import { Type, type TInteger, type TNumber, type TObject, type TProperties, type TString, type TUnion } from '@sinclair/typebox';

/** Duration string such as `50ms`, `15s`, `1h`, or a number of milliseconds. */
export const DURATION_PATTERN = '^\\s*\\d+(\\.\\d+)?\\s*(ms|s|m|h|d)?\\s*$';

/** The schema type of {@link Duration}: the `x-svc-kind` mark is in the type, so typed settings read it as a number (ms). */
export type TDuration = TUnion<[TString, TNumber]> & { readonly 'x-svc-kind': 'duration' };
/** The schema type of {@link Size}: the `x-svc-kind` mark is in the type, so typed settings read it as a number (bytes). */
export type TSize = TUnion<[TInteger, TString]> & { readonly 'x-svc-kind': 'size' };

/** A duration field (`"15s"` or milliseconds); resolved to milliseconds. */
export function Duration(opts: { default?: string; description?: string } = {}): TDuration {
  return Type.Union([Type.String({ pattern: DURATION_PATTERN }), Type.Number({ minimum: 0 })], {
    'x-svc-kind': 'duration',
    ...opts,
  }) as TDuration;
}

/** A size field (integer bytes or `"10MiB"`, `"512kb"`); resolved to bytes. */
export function Size(opts: { default?: string | number; description?: string } = {}): TSize {
  return Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: '^\\s*\\d+(\\.\\d+)?\\s*([kKmMgGtT]i?[bB]|[bB])?\\s*$' })], {
    'x-svc-kind': 'size',
    ...opts,
  }) as TSize;
}

/** Closed object: unknown keys are an error naming their path. */
export function Strict<T extends TProperties>(props: T, opts: { description?: string; default?: unknown } = {}): TObject<T> {
  return Type.Object(props, { additionalProperties: false, ...opts });
}

/** Where a plugin's keys plug into the config tree. Every property is optional in the raw config. */
export interface SchemaFragment {
  /** Top-level keys (e.g. `admin`, `healthCheck`, `database`). */
  root?: TProperties;
  /** Keys under `server`. */
  server?: TProperties;
  /** Keys under `projects[]`. */
  project?: TProperties;
  /** Keys under `projects[].networks[]` and `networkDefaults`. */
  network?: TProperties;
  /** Keys under `projects[].networks[].evm`. */
  networkEvm?: TProperties;
  /** Keys under `projects[].upstreams[]` and `upstreamDefaults`. */
  upstream?: TProperties;
  /** Keys under `projects[].upstreams[].evm`. */
  upstreamEvm?: TProperties;
  /**
   * Keys under `projects[].networks[].directiveDefaults` (and every other object marked as the
   * `directiveDefaults` extension point, such as a failsafe entry's): one per directive the
   * plugin declares (spec §2.8).
   */
  directiveDefaults?: TProperties;
  /**
   * Keys added to an object another plugin owns, by the name of the extension point that object
   * declares with {@link Extensible} (e.g. the consensus plugin adds `consensus` to the failsafe
   * plugin's `projects[].networks[].failsafe[]` entries). Every added key is optional; a key the
   * object already has, or one another plugin adds to the same point, fails boot naming both
   * owners, and so does a point no applied plugin declares.
   */
  extend?: Readonly<Record<string, TProperties>>;
  /**
   * Load-time rewrite of other shapes of this plugin's keys (eRPC's, mostly) into the shape its
   * schema accepts, run before validation on the env-expanded document, in plugin order after the
   * core's own rewrites (config/normalize.ts). Rewrite only keys this plugin owns, record each
   * rewrite with `out.rewrite(path, from, to)` (`svc validate --print` shows them) and report a
   * shape that cannot keep its meaning with `out.problem(path, message)`. Walk networks and
   * upstreams with `eachNetwork` / `eachUpstream` from `svc-proxy/plugin`.
   */
  normalize?: (doc: ConfigDocument, out: NormalizeReport) => void;
  /**
   * URL schemes of upstream endpoints this plugin serves besides http and https (lower case, no
   * `://`, e.g. `grpc`): the plugin gives such an upstream its transport through the
   * `upstreamTransport` hook. The core's `upstreams[].endpoint` pattern accepts exactly http, https
   * and the schemes the preset's plugins declare, so a preset without the plugin refuses them.
   */
  endpointSchemes?: readonly string[];
}

/** The `directiveDefaults` extension point: the network's object and every object marked with it. */
export const DIRECTIVE_DEFAULTS_POINT = 'directiveDefaults';

/** The `metrics` extension point: the top-level `metrics` object, whose listener keys the core owns. */
export const METRICS_POINT = 'metrics';

/** Schema annotation naming an object's extension point (removed from the assembled schema). */
export const EXTEND_MARK = 'x-svc-extend';

/**
 * A closed object other plugins may add keys to ({@link SchemaFragment.extend}): like
 * {@link Strict}, plus the name of its extension point. Choose a name that reads as the object's
 * place in the config file (`projects[].networks[].failsafe[]`): the start-up log prints an added
 * key as `<point>.<key>`.
 * @param point the extension point's name, unique among applied plugins
 * @param props the object's own keys
 */
export function Extensible<T extends TProperties>(point: string, props: T, opts: { description?: string; default?: unknown } = {}): TObject<T> {
  return Type.Object(props, { additionalProperties: false, ...opts, [EXTEND_MARK]: point });
}

/** The fragment slots that hold keys of one place in the tree (all but `extend`). */
export type FragmentSlot = Exclude<keyof SchemaFragment, 'extend' | 'normalize' | 'endpointSchemes'>;
export const SLOTS: readonly FragmentSlot[] = ['root', 'server', 'project', 'network', 'networkEvm', 'upstream', 'upstreamEvm', 'directiveDefaults'];
