/**
 * The JSON Schema of svc's config: the single source of truth (docs/architecture.md).
 *
 * The core owns the parts below; each plugin contributes a {@link SchemaFragment} for the keys
 * it owns, and {@link buildConfigSchema} assembles one schema at boot. Validation (`svc validate`
 * and start-up), defaults and the README's config reference all come from the assembled schema.
 * Durations and sizes are marked with the `x-svc-kind` annotation and converted to
 * milliseconds / bytes during resolution.
 */
import type { ConfigDocument, NormalizeReport } from './normalize.ts';
import { proxyPoolsSchema, serverTlsSchema, upstreamJsonRpcTransport } from './schema-transport.ts';
import { Type, type TInteger, type TNumber, type TObject, type TProperties, type TSchema, type TString, type TUnion, type Static } from '@sinclair/typebox';

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
}

/** The `directiveDefaults` extension point: the network's object and every object marked with it. */
export const DIRECTIVE_DEFAULTS_POINT = 'directiveDefaults';

/** The `metrics` extension point: the top-level `metrics` object, whose listener keys the core owns. */
export const METRICS_POINT = 'metrics';

/** Schema annotation naming an object's extension point (removed from the assembled schema). */
const EXTEND_MARK = 'x-svc-extend';

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

/** The extension point an object schema declares, if any. */
function pointOf(node: TSchema): string | undefined {
  const p = (node as Record<string, unknown>)[EXTEND_MARK];
  return typeof p === 'string' ? p : undefined;
}

/** Keywords whose value is one sub-schema, a list of them, or a map of them. */
const ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains'] as const;
const LIST = ['anyOf', 'allOf', 'oneOf'] as const;
const MAP = ['properties', 'patternProperties'] as const;

/**
 * Walks a schema tree and calls `visit` on every object schema that declares an extension point
 * (the fragments' own sub-schemas, before any extension).
 */
function eachPoint(node: unknown, visit: (point: string, node: TSchema) => void): void {
  if (!node || typeof node !== 'object') return;
  const s = node as Record<string, unknown>;
  const point = pointOf(s as TSchema);
  if (point !== undefined) visit(point, s as TSchema);
  for (const k of ONE) eachPoint(s[k], visit);
  for (const k of LIST) if (Array.isArray(s[k])) for (const c of s[k] as unknown[]) eachPoint(c, visit);
  for (const k of MAP) if (s[k] && typeof s[k] === 'object') for (const c of Object.values(s[k] as object)) eachPoint(c, visit);
}

/**
 * A copy of a schema tree with every extension point's added keys in place and the marks
 * removed; nodes without a mark below them are shared, never mutated (fragments are reused).
 */
function extendTree(node: TSchema, points: ReadonlyMap<string, TProperties>): TSchema {
  if (!node || typeof node !== 'object') return node;
  let out: Record<string, unknown> | undefined;
  const own = (): Record<string, unknown> => (out ??= { ...node });
  const point = pointOf(node);
  if (point !== undefined) {
    const o = own();
    delete o[EXTEND_MARK];
    const add = points.get(point);
    if (add) o.properties = { ...(node as { properties?: TProperties }).properties, ...optionalAll(add) };
  }
  const cur = (out ?? node) as Record<string, unknown>;
  for (const k of ONE) {
    const c = cur[k];
    if (c && typeof c === 'object') {
      const n = extendTree(c as TSchema, points);
      if (n !== c) own()[k] = n;
    }
  }
  for (const k of LIST) {
    const list = cur[k];
    if (!Array.isArray(list)) continue;
    const mapped = list.map((c: TSchema) => extendTree(c, points));
    if (mapped.some((c, i) => c !== list[i])) own()[k] = mapped;
  }
  for (const k of MAP) {
    const m = cur[k] as Record<string, TSchema> | undefined;
    if (!m || typeof m !== 'object') continue;
    let copy: Record<string, TSchema> | undefined;
    for (const [name, c] of Object.entries(m)) {
      const n = extendTree(c, points);
      if (n !== c) (copy ??= { ...m })[name] = n;
    }
    if (copy) own()[k] = copy;
  }
  return (out ?? node) as TSchema;
}

const aliasRule = Strict({
  matchDomain: Type.String({ description: 'glob matched on the request Host (without port)' }),
  serveProject: Type.String({ description: 'project id served on that domain' }),
  serveArchitecture: Type.Optional(Type.Literal('evm', { description: 'architecture served on that domain (path may then omit it)' })),
  serveChain: Type.Optional(Type.Union([Type.String(), Type.Integer()], { description: 'chain id served on that domain (path may then be `/`)' })),
});

function serverProps(extra: TProperties) {
  return {
    httpHost: Type.Optional(Type.String({ default: '0.0.0.0', description: 'listen address' })),
    httpPort: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, default: 4000, description: 'listen port' })),
    httpHostV4: Type.Optional(Type.String({ description: 'eRPC alias of httpHost' })),
    httpPortV4: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'eRPC alias of httpPort' })),
    maxTimeout: Type.Optional(Duration({ default: '150s', description: 'deadline of one call' })),
    maxBodySize: Type.Optional(Size({ default: '10MiB', description: 'largest accepted request body, after decompression; larger gets HTTP 413' })),
    maxResponseBytesInFlight: Type.Optional(
      Size({
        default: '512MiB',
        description:
          'most bytes of upstream answers read and parsed at once, over every upstream of the process (a declared length counts when the headers arrive, an undeclared one as it streams in, until parsed); a call whose answer would pass it gets HTTP 503 / -32005 `ErrResponseBytesInFlightExceeded` at once, other calls and batch members go on; read at start',
      }),
    ),
    enableGzip: Type.Optional(
      Type.Boolean({
        default: true,
        description: 'gzip answers over 1 KiB when the client sends `Accept-Encoding: gzip` (request bodies in gzip, deflate or br are always decoded)',
      }),
    ),
    maxBatchSize: Type.Optional(Type.Integer({ minimum: 1, default: 1000, description: 'largest inbound batch; larger gets HTTP 400 / -32600' })),
    batchConcurrency: Type.Optional(Type.Integer({ minimum: 1, default: 100, description: 'sub-calls of one batch run at most this many at a time' })),
    maxJsonDepth: Type.Optional(
      Type.Integer({
        minimum: 2,
        maximum: 1000,
        default: 64,
        description: 'deepest JSON nesting of one request object (the object is 1); deeper gets HTTP 400 / -32600, batch elements one by one',
      }),
    ),
    readTimeout: Type.Optional(
      Duration({ default: '30s', description: "time for a client's headers and body to arrive; HTTP 408 after (Node's requestTimeout); 0 = none" }),
    ),
    keepAliveTimeout: Type.Optional(Duration({ default: '65s', description: 'idle time before a client keep-alive connection is closed' })),
    waitBeforeShutdown: Type.Optional(
      Duration({
        default: '15s',
        description:
          'spec §3.2 drain: after SIGTERM the healthcheck answers 503 and calls are still served this long; set it ≥ readiness periodSeconds × failureThreshold + 1s',
      }),
    ),
    waitAfterShutdown: Type.Optional(
      Duration({
        default: '10s',
        description:
          'spec §3.2 drain: then new requests get 503 `ErrServiceShuttingDown` with `Connection: close`, and in-flight calls get at most this long before the listener closes',
      }),
    ),
    workers: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: 256 }), Type.Literal('auto')], {
        default: 1,
        description:
          "processes serving the proxy port (node:cluster workers behind one listening socket; `auto` = the machine's available parallelism); 1 = one process, no primary",
      }),
    ),
    maxConnections: Type.Optional(
      Type.Integer({ minimum: 0, default: 0, description: 'most client connections at once (new ones beyond are dropped); 0 = unlimited' }),
    ),
    includeErrorDetails: Type.Optional(
      Type.Boolean({ default: true, description: "put svc's cause chain in error.data (never for eth_call/eth_estimateGas)" }),
    ),
    executionHeaders: Type.Optional(
      Type.Union([Type.Literal('all'), Type.Literal('summary'), Type.Literal('off')], { default: 'all', description: 'spec §2.9 diagnostic header mode' }),
    ),
    responseHeaders: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'static headers on every response, ${ENV}-expanded at start-up' })),
    aliasing: Type.Optional(Strict({ rules: Type.Optional(Type.Array(aliasRule, { description: 'spec §4.1 alias forms, matched on Host' })) })),
    trustedIPForwarders: Type.Optional(
      Type.Array(Type.String(), {
        default: [],
        description:
          'IPs or CIDRs of the proxies in front of svc; only a request whose socket peer is one of them has its trustedIPHeaders read (default none: forwarding headers are ignored)',
      }),
    ),
    tls: Type.Optional(serverTlsSchema),
    trustedIPHeaders: Type.Optional(
      Type.Array(Type.String(), {
        default: ['X-Forwarded-For'],
        description:
          'headers naming the client behind a trusted forwarder, read right to left skipping trusted forwarders; the first untrusted address is the client',
      }),
    ),
    ...extra,
  };
}

function networkProps(f: Omit<SchemaFragment, 'extend'>, requireChain: boolean) {
  const evm = Strict({
    chainId: requireChain
      ? Type.Integer({ minimum: 1, description: 'EVM chain id' })
      : Type.Optional(Type.Integer({ minimum: 1, description: 'EVM chain id' })),
    ...optionalAll(f.networkEvm),
  });
  return {
    architecture: requireChain ? Type.Literal('evm', { description: 'only `evm` is supported' }) : Type.Optional(Type.Literal('evm')),
    evm: requireChain ? evm : Type.Optional(evm),
    alias: Type.Optional(Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_-]*$', description: 'path alias: POST /<project>/<alias>' })),
    directiveDefaults: Type.Optional(
      Extensible(DIRECTIVE_DEFAULTS_POINT, {}, { description: "spec §2.8 config defaults: one key per directive the preset's plugins declare" }),
    ),
    allowClientDirectives: Type.Optional(Type.String({ description: 'matcher over directive query names; unset = all, "" = none' })),
    ...optionalAll(f.network),
  };
}

function upstreamProps(f: Omit<SchemaFragment, 'extend'>, requireEndpoint: boolean) {
  const endpoint = Type.String({ pattern: '^https?://', description: 'http(s) JSON-RPC URL' });
  return {
    id: Type.Optional(Type.String({ minLength: 1, description: 'unique within the project; default derived from the endpoint host' })),
    endpoint: requireEndpoint ? endpoint : Type.Optional(endpoint),
    vendorName: Type.Optional(Type.String({ description: 'vendor label for metrics' })),
    evm: Type.Optional(
      Strict({ chainId: Type.Optional(Type.Integer({ minimum: 1, description: 'expected chain id; probed when unset' })), ...optionalAll(f.upstreamEvm) }),
    ),
    ignoreMethods: Type.Optional(Type.Array(Type.String(), { description: 'method globs this upstream never serves' })),
    allowMethods: Type.Optional(
      Type.Array(Type.String(), { description: 'method globs this upstream serves; wins over ignoreMethods; alone implies ignoreMethods ["*"]' }),
    ),
    autoIgnoreUnsupportedMethods: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          "an `ErrEndpointUnsupported` answer adds the method to this upstream's ignore list for the life of the process (true on `public` provider upstreams)",
      }),
    ),
    tags: Type.Optional(Type.Array(Type.String({ pattern: '^[^:]+:.+$' }), { description: '"<key>:<value>" labels used by use-upstream and selection' })),
    jsonRpc: Type.Optional(
      Strict({
        headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'extra HTTP headers sent upstream' })),
        supportsBatch: Type.Optional(Type.Boolean({ description: 'spec §2.6: queue calls to this upstream and send them as JSON-RPC batches (unset = off)' })),
        batchMaxSize: Type.Optional(
          Type.Integer({
            minimum: 0,
            default: 0,
            description: 'spec §2.6: queue length that flushes at once; 0 = every call flushes at once (set it non-zero)',
          }),
        ),
        batchMaxWait: Type.Optional(
          Duration({ default: '0ms', description: 'spec §2.6: time from the first queued call to a forced flush; 0 = at once (set it non-zero)' }),
        ),
        ...upstreamJsonRpcTransport,
      }),
    ),
    maxResponseSize: Type.Optional(
      Size({
        default: '256MiB',
        description:
          'largest answer read from this upstream; a larger one is cut off while streaming and fails the attempt with ErrUpstreamMalformedResponse (the next upstream is tried)',
      }),
    ),
    ...optionalAll(f.upstream),
  };
}

function optionalAll(p: TProperties | undefined): TProperties {
  const out: TProperties = {};
  if (!p) return out;
  for (const [k, v] of Object.entries(p)) out[k] = Type.Optional(v);
  return out;
}

/** The fragment slots that hold keys of one place in the tree (all but `extend`). */
type FragmentSlot = Exclude<keyof SchemaFragment, 'extend' | 'normalize'>;
const SLOTS: readonly FragmentSlot[] = ['root', 'server', 'project', 'network', 'networkEvm', 'upstream', 'upstreamEvm', 'directiveDefaults'];

function merge(fragments: readonly SchemaFragment[]): Required<Omit<SchemaFragment, 'extend' | 'normalize'>> & { extend: Map<string, TProperties> } {
  const out = {
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

/** The keys the core owns in each fragment slot (a plugin may add keys, never redefine these). */
function coreKeys(): Record<FragmentSlot, string[]> {
  const none: SchemaFragment = {};
  return {
    root: ['logLevel', 'preset', 'server', 'metrics', 'proxyPools', 'projects'],
    server: Object.keys(serverProps({})),
    project: ['id', 'networks', 'upstreams', 'networkDefaults', 'upstreamDefaults', 'allowClientDirectives', 'scoreMetricsWindowSize'],
    network: Object.keys(networkProps(none, true)),
    networkEvm: ['chainId'],
    upstream: Object.keys(upstreamProps(none, true)),
    upstreamEvm: ['chainId'],
    directiveDefaults: [],
  };
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
