/**
 * Config resolution, the last step of loading (./load.ts reads, expands and validates first):
 * merges `networkDefaults`/`upstreamDefaults`, applies schema defaults, converts durations and
 * sizes (`x-svc-kind`) to milliseconds and bytes, and builds the resolved config the core runs on.
 * Everything exported here is re-exported by ./load.ts, the `svc-proxy/config` entry.
 */
import { availableParallelism } from 'node:os';
import { Value } from '@sinclair/typebox/value';
import type { TObject, TSchema } from '@sinclair/typebox';
import ms from 'ms';
import bytes from 'bytes';
import type {
  AliasRule,
  Directives,
  NetworkInput,
  ResolvedConfig,
  ResolvedNetwork,
  ResolvedProject,
  ResolvedServerTls,
  ResolvedUpstream,
  SvcConfigInput,
  UpstreamInput,
} from './types.ts';

/** Parses a duration (`"15s"`, `"50ms"`, or ms as a number) into milliseconds. */
export function parseDuration(v: string | number): number {
  if (typeof v === 'number') return v;
  const t = v.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t);
  const n = ms(t as ms.StringValue);
  if (typeof n !== 'number' || Number.isNaN(n)) throw new Error(`invalid duration "${v}"`);
  return n;
}

/** Parses a size (`10MiB`, `512kb`, or bytes) into bytes; K/M/G are 1024-based. */
export function parseSize(v: string | number): number {
  if (typeof v === 'number') return v;
  const t = v.trim().replace(/([kKmMgGtT])i?[bB]$/, '$1b');
  const n = /^\d+$/.test(t) ? Number(t) : bytes.parse(t);
  if (n === null || Number.isNaN(n)) throw new Error(`invalid size "${v}"`);
  return n;
}

/**
 * Walks a value alongside its schema, converting `x-svc-kind` durations to ms and sizes to
 * bytes. Returns a new value; the input is not mutated.
 */
export function convertKinds(schema: TSchema, value: unknown): unknown {
  if (value === undefined || value === null) return value;
  const kind = (schema as { 'x-svc-kind'?: string })['x-svc-kind'];
  if (kind === 'duration' && (typeof value === 'string' || typeof value === 'number')) return parseDuration(value);
  if (kind === 'size' && (typeof value === 'string' || typeof value === 'number')) return parseSize(value);
  const s = schema as {
    type?: string;
    properties?: Record<string, TSchema>;
    items?: TSchema;
    anyOf?: TSchema[];
    additionalProperties?: unknown;
    patternProperties?: Record<string, TSchema>;
  };
  if (s.anyOf) {
    // Pick the branch the value matches best: an object branch for objects, an array branch for arrays.
    const branch = s.anyOf.find((b) => Value.Check(b, value)) ?? s.anyOf[0];
    return branch ? convertKinds(branch, value) : value;
  }
  if (Array.isArray(value) && s.items) return value.map((v) => convertKinds(s.items as TSchema, v));
  if (typeof value === 'object' && !Array.isArray(value) && s.properties) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const child = s.properties[k];
      out[k] = child ? convertKinds(child, v) : v;
    }
    return out;
  }
  return value;
}

/**
 * Deep copy of plain config data that keeps functions (TypeScript configs may hold
 * `evalFunc` and similar) by reference, where `structuredClone` would throw.
 */
export function cloneConfig<T>(v: T): T {
  if (Array.isArray(v)) return v.map((x) => cloneConfig(x)) as T;
  if (isPlainObject(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = cloneConfig(x);
    return out as T;
  }
  return v;
}

/** Applies schema defaults then converts kinds: the resolved form of one config node. */
function settle(schema: TSchema, value: unknown): Record<string, unknown> {
  const withDefaults = Value.Default(schema, cloneConfig(value ?? {}));
  return convertKinds(schema, withDefaults) as Record<string, unknown>;
}

/**
 * Deep merge for `networkDefaults`/`upstreamDefaults`: objects merge recursively; an array or
 * scalar set on the entry replaces the default.
 */
export function mergeDefaults<T>(defaults: unknown, entry: T): T {
  if (defaults === undefined) return entry;
  if (entry === undefined) return cloneConfig(defaults) as T;
  if (isPlainObject(defaults) && isPlainObject(entry)) {
    const out: Record<string, unknown> = { ...(cloneConfig(defaults) as Record<string, unknown>) };
    for (const [k, v] of Object.entries(entry as Record<string, unknown>)) out[k] = mergeDefaults(out[k], v);
    return out as T;
  }
  return entry;
}

/** True for a plain object (an object literal or one without a prototype): config data, not an array, class instance or function. */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);
}

function prop(schema: TSchema, ...path: string[]): TSchema {
  let cur: TSchema = schema;
  for (const p of path) {
    const s = cur as { properties?: Record<string, TSchema>; items?: TSchema; anyOf?: TSchema[] };
    const next = s.properties?.[p] ?? (p === '[]' ? s.items : undefined);
    if (!next) throw new Error(`schema has no ${path.join('.')}`);
    cur = next;
  }
  return cur;
}

/**
 * Directive defaults from config (a network's or a failsafe entry's `directiveDefaults`), tri-state
 * preserved: booleans and strings as given (the keys and their types are the declaring plugins'
 * schema fragments'; a `string` directive set to a YAML boolean reads as its text through its
 * `Directive`).
 */
export function directiveDefaultsOf(dd: Record<string, unknown> | undefined): Directives {
  const out: Directives = {};
  if (!dd) return out;
  for (const [k, v] of Object.entries(dd)) if (typeof v === 'boolean' || typeof v === 'string') out[k] = v;
  return out;
}

/** Default upstream id: the endpoint's host (with port), made unique within the project. */
function defaultUpstreamId(endpoint: string, taken: Set<string>): string {
  let base: string;
  try {
    base = new URL(endpoint).host;
  } catch {
    base = 'upstream';
  }
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
  return id;
}

/**
 * Resolves one network entry (used at start-up and for networks created on demand).
 * @param schema the assembled config schema
 * @param defaults the project's raw `networkDefaults`
 * @param entry the raw network (chain id required)
 */
export function resolveNetwork(schema: TObject, defaults: NetworkInput | undefined, entry: NetworkInput): ResolvedNetwork {
  const merged = mergeDefaults(defaults, entry);
  const netSchema = prop(schema, 'projects', '[]', 'networks', '[]');
  const settings = settle(netSchema, merged);
  const chainId = Number((merged.evm as { chainId?: number } | undefined)?.chainId);
  return {
    id: `evm:${chainId}`,
    architecture: 'evm',
    chainId,
    alias: merged.alias,
    directiveDefaults: directiveDefaultsOf(merged.directiveDefaults),
    allowClientDirectives: merged.allowClientDirectives,
    settings,
  };
}

/** Resolves one upstream entry; the id is taken from config or derived from the endpoint. */
export function resolveUpstream(schema: TObject, defaults: UpstreamInput | undefined, entry: UpstreamInput, taken: Set<string>): ResolvedUpstream {
  const merged = mergeDefaults(defaults, entry);
  const upSchema = prop(schema, 'projects', '[]', 'upstreams', '[]');
  const settings = settle(upSchema, merged);
  const endpoint = String(merged.endpoint);
  const id = merged.id ?? defaultUpstreamId(endpoint, taken);
  taken.add(id);
  const allow = merged.allowMethods ?? [];
  // allowMethods alone implies ignoreMethods ["*"].
  const ignore = merged.ignoreMethods ?? (allow.length ? ['*'] : []);
  return {
    id,
    endpoint,
    vendor: merged.vendorName ?? 'unknown',
    chainId: merged.evm?.chainId,
    ignoreMethods: ignore,
    allowMethods: allow,
    tags: merged.tags ?? [],
    headers: merged.jsonRpc?.headers ?? {},
    settings,
  };
}

/**
 * Turns a validated raw config into the resolved config.
 * @param doc env-expanded, validated raw config
 * @param schema the assembled schema it was validated against
 * @param warnings warnings collected so far (kept on the result)
 */
export function resolveConfig(doc: SvcConfigInput, schema: TObject, warnings: string[] = []): ResolvedConfig {
  const server = settle(prop(schema, 'server'), doc.server ?? {});
  const metrics = settle(prop(schema, 'metrics'), doc.metrics ?? {});
  const projectsIn = doc.projects ?? [];
  const projects: ResolvedProject[] = (projectsIn.length ? projectsIn : [{ id: 'main' }]).map((p) => {
    const taken = new Set<string>((p.upstreams ?? []).map((u) => u.id).filter((x): x is string => !!x));
    const upstreams = (p.upstreams ?? []).map((u) => {
      if (u.id) taken.delete(u.id);
      return resolveUpstream(schema, p.upstreamDefaults, u, taken);
    });
    const { networks: _n, upstreams: _u, networkDefaults, upstreamDefaults, ...rest } = p;
    return {
      id: p.id,
      networks: (p.networks ?? []).map((n) => resolveNetwork(schema, networkDefaults, n)),
      upstreams,
      allowClientDirectives: p.allowClientDirectives,
      networkDefaults: networkDefaults ?? {},
      upstreamDefaults: upstreamDefaults ?? {},
      settings: settle(prop(schema, 'projects', '[]'), { ...rest }),
    };
  });
  const rules = (server.aliasing as { rules?: AliasRule[] } | undefined)?.rules;
  const { server: _s, metrics: _m, projects: _p, logLevel, preset, ...rootRest } = doc;
  const rootSettings = settle(schema, rootRest);
  delete rootSettings.server;
  delete rootSettings.metrics;
  delete rootSettings.logLevel;
  delete rootSettings.proxyPools;
  const metricsIn = doc.metrics ?? {};
  return {
    logLevel: logLevel ?? 'info',
    preset,
    server: {
      httpHost: String(doc.server?.httpHost ?? doc.server?.httpHostV4 ?? server.httpHost),
      httpPort: Number(doc.server?.httpPort ?? doc.server?.httpPortV4 ?? server.httpPort),
      maxTimeoutMs: server.maxTimeout as number,
      maxBodySize: server.maxBodySize as number,
      maxResponseBytesInFlight: server.maxResponseBytesInFlight as number,
      enableGzip: server.enableGzip !== false,
      maxBatchSize: server.maxBatchSize as number,
      batchConcurrency: server.batchConcurrency as number,
      maxJsonDepth: server.maxJsonDepth as number,
      readTimeoutMs: server.readTimeout as number,
      keepAliveTimeoutMs: server.keepAliveTimeout as number,
      waitBeforeShutdownMs: server.waitBeforeShutdown as number,
      waitAfterShutdownMs: server.waitAfterShutdown as number,
      maxConnections: server.maxConnections as number,
      workers: server.workers === 'auto' ? availableParallelism() : ((server.workers as number | undefined) ?? 1),
      includeErrorDetails: server.includeErrorDetails as boolean,
      executionHeaders: server.executionHeaders as 'all' | 'summary' | 'off',
      responseHeaders: (server.responseHeaders as Record<string, string> | undefined) ?? {},
      // With no projects at all, `/evm/<chainId>` works out of the box.
      aliasing: { rules: rules ?? (projectsIn.length ? [] : [{ matchDomain: '*', serveProject: 'main' }]) },
      trustedIPForwarders: (server.trustedIPForwarders as string[] | undefined) ?? [],
      trustedIPHeaders: (server.trustedIPHeaders as string[] | undefined) ?? ['X-Forwarded-For'],
      tls: resolveTls(server.tls),
      settings: server,
    },
    metrics: {
      enabled: metrics.enabled as boolean,
      host: String(metricsIn.host ?? metricsIn.hostV4 ?? metrics.host),
      port: metrics.port as number,
      settings: metrics,
    },
    projects,
    proxyPools: new Map((doc.proxyPools ?? []).map((p) => [p.id, [...p.urls]])),
    settings: rootSettings,
    warnings,
  };
}

/** `server.tls` when enabled (checks.ts made sure both files are named), else undefined. */
function resolveTls(tls: unknown): ResolvedServerTls | undefined {
  const t = tls as NonNullable<SvcConfigInput['server']>['tls'];
  if (!t?.enabled || !t.certFile || !t.keyFile) return undefined;
  return { certFile: t.certFile, keyFile: t.keyFile, ...(t.caFile ? { caFile: t.caFile } : {}) };
}
