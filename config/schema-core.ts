/**
 * The keys the core owns in the config tree: the `server` block, and the core's keys of networks
 * and upstreams (plus the fragments' keys for those places). ./schema.ts assembles them into the
 * whole schema; {@link coreKeys} lists them so a plugin fragment cannot redefine one.
 */
import { Type, type TProperties } from '@sinclair/typebox';
import { Extensible, DIRECTIVE_DEFAULTS_POINT, Duration, Size, Strict, type FragmentSlot, type SchemaFragment } from './schema-kinds.ts';
import { optionalAll } from './schema-extend.ts';
import { serverTlsSchema, upstreamJsonRpcTransport } from './schema-transport.ts';

const aliasRule = Strict({
  matchDomain: Type.String({ description: 'glob matched on the request Host (without port)' }),
  serveProject: Type.String({ description: 'project id served on that domain' }),
  serveArchitecture: Type.Optional(Type.Literal('evm', { description: 'architecture served on that domain (path may then omit it)' })),
  serveChain: Type.Optional(Type.Union([Type.String(), Type.Integer()], { description: 'chain id served on that domain (path may then be `/`)' })),
});

/**
 * The properties of the `server` object: the core's keys, then `extra` (the fragments' `server` keys).
 * @param extra keys added after the core's
 */
export function serverProps(extra: TProperties) {
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

/**
 * The properties of a network (`requireChain`) or of `networkDefaults`: the core's keys and the
 * fragments' `network` and `networkEvm` keys, all optional.
 * @param f the merged fragments
 * @param requireChain true for a network (architecture and chain id required), false for the defaults
 */
export function networkProps(f: Omit<SchemaFragment, 'extend'>, requireChain: boolean) {
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

/**
 * The properties of an upstream (`requireEndpoint`) or of `upstreamDefaults`: the core's keys and
 * the fragments' `upstream` and `upstreamEvm` keys, all optional.
 * @param f the merged fragments
 * @param requireEndpoint true for an upstream (endpoint required), false for the defaults
 */
export function upstreamProps(f: Omit<SchemaFragment, 'extend'>, requireEndpoint: boolean) {
  const endpoint = Type.String(endpointPattern(f.endpointSchemes ?? []));
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

/** Schemes every preset serves (the core's HTTP transport). */
const HTTP_ENDPOINT = '^https?://';

/**
 * The `upstreams[].endpoint` string schema: http(s), plus the schemes the preset's plugins serve
 * (`SchemaFragment.endpointSchemes`), so a scheme no applied plugin serves is refused at validation.
 * @param schemes lower-case schemes without `://`
 */
export function endpointPattern(schemes: readonly string[]): { pattern: string; description: string } {
  if (schemes.length === 0) return { pattern: HTTP_ENDPOINT, description: 'http(s) JSON-RPC URL' };
  const alt = schemes.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  return {
    pattern: `^(https?|${alt})://`,
    description: `http(s) JSON-RPC URL, or ${schemes.map((s) => `${s}://`).join(', ')} (served by a plugin of the preset)`,
  };
}

/** The keys the core owns in each fragment slot (a plugin may add keys, never redefine these). */
export function coreKeys(): Record<FragmentSlot, string[]> {
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
