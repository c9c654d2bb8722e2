/**
 * The JSON Schema of svc's config: the single source of truth (DESIGN "Configuration").
 *
 * The core owns the parts below; each plugin contributes a {@link SchemaFragment} for the keys
 * it owns, and {@link buildConfigSchema} assembles one schema at boot. Validation (`svc validate`
 * and start-up), defaults and the README's config reference all come from the assembled schema.
 * Durations and sizes are marked with the `x-svc-kind` annotation and converted to
 * milliseconds / bytes during resolution.
 */
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
  /** Keys under `projects[].networks[].directiveDefaults`. */
  directiveDefaults?: TProperties;
}

/** Tri-state boolean: unset / false / true (spec §2.8). Never defaulted. */
const TriBool = (description: string) => Type.Boolean({ description });

/** Core keys of `directiveDefaults` (spec §2.8 table). */
export const directiveDefaultsProps = {
  retryEmpty: TriBool('#1 retry null/empty results on another upstream (default false)'),
  retryPending: TriBool('#2 retry pending-transaction lookups (default false)'),
  skipCacheRead: Type.Union([Type.String(), Type.Boolean()], { description: '#3 `true`, `false`, or a glob over cache connector ids (YAML booleans become strings)' }),
  useUpstream: Type.String({ description: '#4 upstream selector: ids, `<key>:<value>` tags, `*`, `|`, leading `!`' }),
  skipInterpolation: TriBool('#5 stop block-tag to hex substitution (default false)'),
  skipConsensus: TriBool('#6 bypass consensus (default false)'),
  enforceHighestBlock: TriBool('#7 re-route tagged block answers behind the known head (default true)'),
  enforceGetLogsBlockRange: TriBool('#8 reject over-range getLogs before forwarding (default true); only config changes it'),
  enforceNonNullTaggedBlocks: TriBool('#9 a null tagged block is an error (default true)'),
  integrity: Type.String({ description: '#10 integrity level or profile name' }),
} satisfies TProperties;

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
    httpHostV4: Type.Optional(Type.String({ description: "eRPC alias of httpHost" })),
    httpPortV4: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: "eRPC alias of httpPort" })),
    maxTimeout: Type.Optional(Duration({ default: '150s', description: 'deadline of one call' })),
    maxBodySize: Type.Optional(Size({ default: '10MiB', description: 'largest accepted request body, after decompression; larger gets HTTP 413' })),
    enableGzip: Type.Optional(Type.Boolean({ default: true, description: 'gzip answers over 1 KiB when the client sends `Accept-Encoding: gzip` (request bodies in gzip, deflate or br are always decoded)' })),
    maxBatchSize: Type.Optional(Type.Integer({ minimum: 1, default: 1000, description: 'largest inbound batch; larger gets HTTP 400 / -32600' })),
    batchConcurrency: Type.Optional(Type.Integer({ minimum: 1, default: 100, description: 'sub-calls of one batch run at most this many at a time' })),
    maxJsonDepth: Type.Optional(Type.Integer({ minimum: 2, maximum: 1000, default: 64, description: 'deepest JSON nesting of one request object (the object is 1); deeper gets HTTP 400 / -32600, batch elements one by one' })),
    readTimeout: Type.Optional(Duration({ default: '30s', description: "time for a client's headers and body to arrive; HTTP 408 after (Node's requestTimeout); 0 = none" })),
    keepAliveTimeout: Type.Optional(Duration({ default: '65s', description: 'idle time before a client keep-alive connection is closed' })),
    waitBeforeShutdown: Type.Optional(Duration({ default: '15s', description: 'spec §3.2 drain: after SIGTERM the healthcheck answers 503 and calls are still served this long; set it ≥ readiness periodSeconds × failureThreshold + 1s' })),
    waitAfterShutdown: Type.Optional(Duration({ default: '10s', description: 'spec §3.2 drain: then new requests get 503 `ErrServiceShuttingDown` with `Connection: close`, and in-flight calls get at most this long before the listener closes' })),
    maxConnections: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'most client connections at once (new ones beyond are dropped); 0 = unlimited' })),
    includeErrorDetails: Type.Optional(Type.Boolean({ default: true, description: "put svc's cause chain in error.data (never for eth_call/eth_estimateGas)" })),
    executionHeaders: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('summary'), Type.Literal('off')], { default: 'all', description: 'spec §2.9 diagnostic header mode' })),
    responseHeaders: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'static headers on every response, ${ENV}-expanded at start-up' })),
    aliasing: Type.Optional(Strict({ rules: Type.Optional(Type.Array(aliasRule, { description: 'spec §4.1 alias forms, matched on Host' })) })),
    trustedIPForwarders: Type.Optional(Type.Array(Type.String(), { default: [], description: 'IPs or CIDRs of the proxies in front of svc; only a request whose socket peer is one of them has its trustedIPHeaders read (default none: forwarding headers are ignored)' })),
    trustedIPHeaders: Type.Optional(Type.Array(Type.String(), { default: ['X-Forwarded-For'], description: 'headers naming the client behind a trusted forwarder, read right to left skipping trusted forwarders; the first untrusted address is the client' })),
    ...extra,
  };
}

function networkProps(f: SchemaFragment, requireChain: boolean) {
  const evm = Strict({
    chainId: requireChain ? Type.Integer({ minimum: 1, description: 'EVM chain id' }) : Type.Optional(Type.Integer({ minimum: 1, description: 'EVM chain id' })),
    ...optionalAll(f.networkEvm),
  });
  return {
    architecture: requireChain ? Type.Literal('evm', { description: 'only `evm` is supported' }) : Type.Optional(Type.Literal('evm')),
    evm: requireChain ? evm : Type.Optional(evm),
    alias: Type.Optional(Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_-]*$', description: 'path alias: POST /<project>/<alias>' })),
    directiveDefaults: Type.Optional(Strict({ ...optionalAll(directiveDefaultsProps), ...optionalAll(f.directiveDefaults) }, { description: 'spec §2.8 config defaults' })),
    allowClientDirectives: Type.Optional(Type.String({ description: 'matcher over directive query names; unset = all, "" = none' })),
    ...optionalAll(f.network),
  };
}

function upstreamProps(f: SchemaFragment, requireEndpoint: boolean) {
  const endpoint = Type.String({ pattern: '^https?://', description: 'http(s) JSON-RPC URL' });
  return {
    id: Type.Optional(Type.String({ minLength: 1, description: 'unique within the project; default derived from the endpoint host' })),
    endpoint: requireEndpoint ? endpoint : Type.Optional(endpoint),
    vendorName: Type.Optional(Type.String({ description: 'vendor label for metrics' })),
    evm: Type.Optional(Strict({ chainId: Type.Optional(Type.Integer({ minimum: 1, description: 'expected chain id; probed when unset' })), ...optionalAll(f.upstreamEvm) })),
    ignoreMethods: Type.Optional(Type.Array(Type.String(), { description: 'method globs this upstream never serves' })),
    allowMethods: Type.Optional(Type.Array(Type.String(), { description: 'method globs this upstream serves; wins over ignoreMethods; alone implies ignoreMethods ["*"]' })),
    autoIgnoreUnsupportedMethods: Type.Optional(Type.Boolean({ default: false, description: 'an `ErrEndpointUnsupported` answer adds the method to this upstream\'s ignore list for the life of the process (true on `public` provider upstreams)' })),
    tags: Type.Optional(Type.Array(Type.String({ pattern: '^[^:]+:.+$' }), { description: '"<key>:<value>" labels used by use-upstream and selection' })),
    jsonRpc: Type.Optional(
      Strict({
        headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'extra HTTP headers sent upstream' })),
        supportsBatch: Type.Optional(Type.Boolean({ description: 'spec §2.6: queue calls to this upstream and send them as JSON-RPC batches (unset = off)' })),
        batchMaxSize: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'spec §2.6: queue length that flushes at once; 0 = every call flushes at once (set it non-zero)' })),
        batchMaxWait: Type.Optional(Duration({ default: '0ms', description: 'spec §2.6: time from the first queued call to a forced flush; 0 = at once (set it non-zero)' })),
      }),
    ),
    maxResponseSize: Type.Optional(Size({ default: '256MiB', description: 'largest answer read from this upstream; a larger one is cut off while streaming and fails the attempt with ErrUpstreamMalformedResponse (the next upstream is tried)' })),
    ...optionalAll(f.upstream),
  };
}

function optionalAll(p: TProperties | undefined): TProperties {
  const out: TProperties = {};
  if (!p) return out;
  for (const [k, v] of Object.entries(p)) out[k] = Type.Optional(v);
  return out;
}

function merge(fragments: readonly SchemaFragment[]): SchemaFragment {
  const out: Required<SchemaFragment> = { root: {}, server: {}, project: {}, network: {}, networkEvm: {}, upstream: {}, upstreamEvm: {}, directiveDefaults: {} };
  for (const f of fragments) {
    for (const k of Object.keys(out) as (keyof SchemaFragment)[]) Object.assign(out[k], f[k] ?? {});
  }
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
    allowClientDirectives: Type.Optional(Type.String({ description: 'spec §2.8: unset = all, "" = none, "*" = all, or a matcher such as "!skip-cache-read & !use-upstream"' })),
    scoreMetricsWindowSize: Type.Optional(Duration({ default: '10m', description: 'rolling window of the health tracker (error/throttle rates, latency quantiles)' })),
    ...optionalAll(f.project),
  });
  return Strict(
    {
      logLevel: Type.Optional(Type.Union(['trace', 'debug', 'info', 'warn', 'error'].map((l) => Type.Literal(l)), { default: 'info' })),
      preset: Type.Optional(Type.String({ description: 'preset: a built-in name (`default`, `minimal`), an installed package (`@acme/svc-preset`, resolved from this file\'s folder, then the working directory) or a module path relative to this file; CLI --preset wins' })),
      server: Type.Optional(Strict(serverProps(optionalAll(f.server)))),
      metrics: Type.Optional(
        Strict({
          enabled: Type.Optional(Type.Boolean({ default: true })),
          host: Type.Optional(Type.String({ default: '0.0.0.0' })),
          hostV4: Type.Optional(Type.String({ description: 'eRPC alias of host' })),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, default: 4001 })),
        }),
      ),
      projects: Type.Optional(Type.Array(project)),
      ...optionalAll(f.root),
    },
  );
}

/** The keys the core owns in each fragment slot (a plugin may add keys, never redefine these). */
function coreKeys(): Record<keyof SchemaFragment, string[]> {
  const none: SchemaFragment = {};
  return {
    root: ['logLevel', 'preset', 'server', 'metrics', 'projects'],
    server: Object.keys(serverProps({})),
    project: ['id', 'networks', 'upstreams', 'networkDefaults', 'upstreamDefaults', 'allowClientDirectives', 'scoreMetricsWindowSize'],
    network: Object.keys(networkProps(none, true)),
    networkEvm: ['chainId'],
    upstream: Object.keys(upstreamProps(none, true)),
    upstreamEvm: ['chainId'],
    directiveDefaults: Object.keys(directiveDefaultsProps),
  };
}

/**
 * Every config key two owners claim (issue #9 item 4): a fragment may add keys, but never
 * redefine a core key or another plugin's key, so no plugin can loosen another's validation
 * (e.g. make `alias: 42` valid).
 * @param owned each plugin's name and fragment, in plugin order
 * @returns one message per collision, naming both owners; empty when there is none
 */
export function fragmentCollisions(owned: ReadonlyArray<{ owner: string; fragment: SchemaFragment }>): string[] {
  const core = coreKeys();
  const owners = new Map<string, string>();
  for (const [slot, keys] of Object.entries(core)) for (const k of keys) owners.set(`${slot}.${k}`, 'the core');
  const out: string[] = [];
  for (const { owner, fragment } of owned) {
    for (const slot of Object.keys(core) as (keyof SchemaFragment)[]) {
      for (const k of Object.keys(fragment[slot] ?? {})) {
        const id = `${slot}.${k}`;
        const prev = owners.get(id);
        if (prev !== undefined) out.push(`config key ${id} of plugin "${owner}" is already defined by ${prev === 'the core' ? 'the core' : `plugin "${prev}"`}`);
        else owners.set(id, owner);
      }
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
