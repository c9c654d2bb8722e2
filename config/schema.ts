/**
 * The JSON Schema of svc's config: the single source of truth (docs/architecture.md).
 *
 * The core owns the parts below; each plugin contributes a {@link SchemaFragment} for the keys
 * it owns, and {@link buildConfigSchema} assembles one schema at boot. Validation (`svc validate`
 * and start-up), defaults and the README's config reference all come from the assembled schema.
 * Durations and sizes are marked with the `x-svc-kind` annotation and converted to
 * milliseconds / bytes during resolution.
 */
import { proxyPoolsSchema } from './schema-transport.ts';
import { Type, type TObject, type TProperties, type TSchema, type Static } from '@sinclair/typebox';
import { DIRECTIVE_DEFAULTS_POINT, METRICS_POINT, Extensible, SLOTS, Strict, Duration, type SchemaFragment } from './schema-kinds.ts';
import { eachPoint, extendTree, optionalAll } from './schema-extend.ts';
import { coreKeys, networkProps, serverProps, upstreamProps } from './schema-core.ts';

export {
  DURATION_PATTERN,
  DIRECTIVE_DEFAULTS_POINT,
  Duration,
  Extensible,
  METRICS_POINT,
  Size,
  Strict,
  type SchemaFragment,
  type TDuration,
  type TSize,
} from './schema-kinds.ts';

function merge(
  fragments: readonly SchemaFragment[],
): Required<Omit<SchemaFragment, 'extend' | 'normalize' | 'endpointSchemes'>> & { extend: Map<string, TProperties>; endpointSchemes: string[] } {
  const out = {
    endpointSchemes: [] as string[],
    root: {},
    server: {},
    project: {},
    network: {},
    networkEvm: {},
    upstream: {},
    upstreamEvm: {},
    directiveDefaults: {},
    extend: new Map<string, TProperties>(),
  };
  for (const f of fragments) {
    for (const k of SLOTS) Object.assign(out[k], f[k] ?? {});
    for (const s of f.endpointSchemes ?? []) if (!out.endpointSchemes.includes(s)) out.endpointSchemes.push(s);
    for (const [point, props] of Object.entries(f.extend ?? {})) out.extend.set(point, { ...out.extend.get(point), ...props });
  }
  const dd = out.extend.get(DIRECTIVE_DEFAULTS_POINT);
  out.extend.set(DIRECTIVE_DEFAULTS_POINT, { ...out.directiveDefaults, ...dd });
  return out;
}

/**
 * Assembles the whole config schema from the core's part and the plugins' fragments.
 * @param fragments plugin fragments, in plugin order; a later fragment may not redefine a core key
 */
export function buildConfigSchema(fragments: readonly SchemaFragment[] = []): TObject {
  const f = merge(fragments);
  const network = Strict(networkProps(f, true));
  const networkDefaults = Strict(networkProps(f, false));
  const upstream = Strict(upstreamProps(f, true));
  const upstreamDefaults = Strict(upstreamProps(f, false));
  const project = Strict({
    id: Type.String({ pattern: '^[A-Za-z0-9_.-]+$', description: 'project id: the first path segment' }),
    networks: Type.Optional(Type.Array(network)),
    upstreams: Type.Optional(Type.Array(upstream)),
    networkDefaults: Type.Optional(networkDefaults),
    upstreamDefaults: Type.Optional(upstreamDefaults),
    allowClientDirectives: Type.Optional(
      Type.String({ description: 'spec §2.8: unset = all, "" = none, "*" = all, or a matcher such as "!skip-cache-read & !use-upstream"' }),
    ),
    scoreMetricsWindowSize: Type.Optional(
      Duration({ default: '10m', description: 'rolling window of the health tracker (error/throttle rates, latency quantiles)' }),
    ),
    ...optionalAll(f.project),
  });
  const root = Strict({
    logLevel: Type.Optional(
      Type.Union(
        ['trace', 'debug', 'info', 'warn', 'error'].map((l) => Type.Literal(l)),
        { default: 'info' },
      ),
    ),
    preset: Type.Optional(
      Type.String({
        description:
          "preset: a built-in name (`default`, `minimal`), an installed package (`@acme/svc-preset`, resolved from this file's folder, then the working directory) or a module path relative to this file; CLI --preset wins",
      }),
    ),
    server: Type.Optional(Strict(serverProps(optionalAll(f.server)))),
    metrics: Type.Optional(
      // `metrics`: the metrics plugin adds its keys (histogram options, error labels).
      Extensible(METRICS_POINT, {
        enabled: Type.Optional(Type.Boolean({ default: true })),
        host: Type.Optional(Type.String({ default: '0.0.0.0' })),
        hostV4: Type.Optional(Type.String({ description: 'eRPC alias of host' })),
        port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, default: 4001 })),
      }),
    ),
    proxyPools: Type.Optional(proxyPoolsSchema),
    projects: Type.Optional(Type.Array(project)),
    ...optionalAll(f.root),
  });
  // Keys plugins add to other owners' objects (directive defaults, `failsafe[].consensus`...).
  return extendTree(root, f.extend) as TObject;
}

/** The extension points a fragment declares ({@link Extensible} objects anywhere in it), with their own keys. */
function pointsOf(fragment: SchemaFragment): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const visit = (point: string, node: TSchema) => {
    const keys = out.get(point) ?? new Set<string>();
    for (const k of Object.keys((node as { properties?: object }).properties ?? {})) keys.add(k);
    out.set(point, keys);
  };
  for (const slot of SLOTS) for (const v of Object.values(fragment[slot] ?? {})) eachPoint(v, visit);
  for (const props of Object.values(fragment.extend ?? {})) for (const v of Object.values(props)) eachPoint(v, visit);
  return out;
}

const ownerName = (o: string) => (o === 'the core' ? 'the core' : `plugin "${o}"`);

/**
 * Every config key two owners claim: a fragment may add keys, but never
 * redefine a core key or another plugin's key, so no plugin can loosen another's validation
 * (e.g. make `alias: 42` valid). Keys added to an extension point ({@link SchemaFragment.extend},
 * `directiveDefaults`) are checked against the keys of every object declaring that point and
 * against other plugins' additions; a point no one declares is reported too.
 * @param owned each plugin's name and fragment, in plugin order
 * @returns one message per collision, naming both owners; empty when there is none
 */
export function fragmentCollisions(owned: ReadonlyArray<{ owner: string; fragment: SchemaFragment }>): string[] {
  const core = coreKeys();
  const owners = new Map<string, string>();
  for (const [slot, keys] of Object.entries(core)) for (const k of keys) owners.set(`${slot}.${k}`, 'the core');
  // Extension points: the core's `directiveDefaults` and `metrics`, then each plugin's, with the keys their objects already have.
  const declared = new Set<string>([DIRECTIVE_DEFAULTS_POINT, METRICS_POINT]);
  for (const k of ['enabled', 'host', 'hostV4', 'port']) owners.set(`${METRICS_POINT}.${k}`, 'the core');
  for (const { owner, fragment } of owned) {
    for (const [point, keys] of pointsOf(fragment)) {
      declared.add(point);
      for (const k of keys) if (!owners.has(`${point}.${k}`)) owners.set(`${point}.${k}`, owner);
    }
  }
  const out: string[] = [];
  const claim = (id: string, owner: string) => {
    const prev = owners.get(id);
    if (prev !== undefined) out.push(`config key ${id} of plugin "${owner}" is already defined by ${ownerName(prev)}`);
    else owners.set(id, owner);
  };
  for (const { owner, fragment } of owned) {
    for (const slot of SLOTS) for (const k of Object.keys(fragment[slot] ?? {})) claim(`${slot}.${k}`, owner);
    for (const [point, props] of Object.entries(fragment.extend ?? {})) {
      if (!declared.has(point)) {
        out.push(`plugin "${owner}" adds config keys to the extension point "${point}", which no applied plugin declares`);
        continue;
      }
      for (const k of Object.keys(props)) claim(`${point}.${k}`, owner);
    }
  }
  return out;
}

/** The core-only schema (no plugins), for typing raw config. */
export const CoreConfigSchema = buildConfigSchema();
/** Raw config input as written by users (YAML/JSON/TS), core keys only; plugin keys are open. */
export type RawConfig = Static<typeof CoreConfigSchema> & Record<string, unknown>;

/** Schema of a whole schema tree node, re-exported for walkers. */
export type { TSchema };
