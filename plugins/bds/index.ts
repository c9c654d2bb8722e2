/**
 * bds plugin: upstreams that speak the Blockchain Data Standards (BDS) protobuf gRPC API instead of JSON-RPC over HTTP, as eRPC
 * serves them (`endpoint: grpc://…`, `grpc+bds://…` or `grpcs://…`, with `grpc.headers` and `grpc.poolSize`). A BDS upstream
 * answers seven lookups (./requests.ts: eth_chainId, eth_getBlockByNumber, eth_getBlockByHash, eth_getTransactionByHash,
 * eth_getTransactionReceipt, eth_getBlockReceipts, eth_getLogs) with the JSON-RPC shapes an HTTP node gives, and every other
 * method with `ErrEndpointUnsupported`, so the call goes to another upstream of the network, as for an HTTP node that lacks it.
 * Its answers then go through the upstream's chain like any other: validation, cache, failsafe, health.
 *
 * How: the plugin declares the three schemes (`SchemaFragment.endpointSchemes`, so the core's endpoint check accepts them only
 * in a preset that applies this plugin) and gives such an upstream its transport through the `upstreamTransport` hook
 * (./transport.ts). The chain id: svc's own probe (`eth_chainId`, the BDS `ChainId` RPC) takes an upstream that answers another
 * chain out of service, and each request carries the configured chain id, which a chain-aware BDS server checks.
 */
import { definePlugin, type Plugin, type PluginHost, type ResolvedUpstream, settingsOf, Size, Strict, Type } from 'svc-proxy/plugin';
import { ConfigError, type ConfigProblem } from 'svc-proxy/plugin/errors';
import { METADATA_NAME, METADATA_VALUE, TE_VALUE } from './metadata.ts';
import { BdsTransport, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_POOL_SIZE, MAX_MESSAGE_BYTES } from './transport.ts';

export { ErrEndpointParamsUnsupported } from './errors.ts';
export { CONNECTION_HEADERS, METADATA_NAME, METADATA_VALUE, metadataOf } from './metadata.ts';
export { BDS_METHODS } from './requests.ts';
export {
  BdsTransport,
  CONVERT_SLICE,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_POOL_SIZE,
  DEFAULT_PORT,
  HARD_CALL_TIMEOUT_MS,
  MAX_MESSAGE_BYTES,
  targetOf,
  type BdsSettings,
  type BdsTarget,
} from './transport.ts';

/** The endpoint schemes a BDS upstream is written with (eRPC's; `grpc+bds` is an alias of `grpc`, `grpcs` is TLS). */
export const BDS_SCHEMES: readonly string[] = ['grpc', 'grpc+bds', 'grpcs'];

/** Most channels (connections) one upstream keeps. */
export const MAX_POOL_SIZE = 16;

/** The plugin's keys under `projects[].upstreams[]` (and `upstreamDefaults`). */
export const bdsUpstreamSchema = {
  grpc: Type.Optional(
    Strict(
      {
        headers: Type.Optional(
          Type.Record(Type.String(), Type.String({ pattern: METADATA_VALUE }), {
            // What grpc-js or HTTP/2 would refuse later (./metadata.ts) is refused at load, naming the key, before a reload retires anything.
            propertyNames: { pattern: METADATA_NAME },
            description:
              'gRPC metadata sent on every call of a BDS upstream (`authorization: Bearer …`); names are lower-cased; values printable ASCII; `grpc-*`, binary `*-bin` and HTTP/2 connection headers (connection, keep-alive, proxy-connection, transfer-encoding, upgrade, host; te other than `trailers`) are refused',
          }),
        ),
        poolSize: Type.Optional(
          Type.Integer({
            minimum: 1,
            maximum: MAX_POOL_SIZE,
            default: DEFAULT_POOL_SIZE,
            description: 'gRPC connections to a BDS upstream, used in turn (a stalled HTTP/2 connection holds up only its share of calls)',
          }),
        ),
        maxMessageSize: Type.Optional(
          Size({
            default: '32MiB',
            description:
              "largest BDS answer message received, bytes (at most 100MiB, eRPC's cap); the upstream's maxResponseSize caps it too. A larger one fails the attempt with ErrUpstreamMalformedResponse before it is decoded; its JSON is about twice as large",
          }),
        ),
      },
      { description: 'a BDS gRPC upstream (`endpoint: grpc://`, `grpc+bds://`, `grpcs://`): ignored on an http(s) upstream' },
    ),
  ),
};

/** Whether an endpoint is a BDS upstream's (one of {@link BDS_SCHEMES}). */
function isBds(endpoint: string): boolean {
  const scheme = /^([^:]+):\/\//.exec(endpoint)?.[1]?.toLowerCase();
  return scheme !== undefined && BDS_SCHEMES.includes(scheme);
}

/**
 * Creates the bds plugin (name `bds`).
 * @returns a plugin declaring the `grpc`, `grpc+bds` and `grpcs` endpoint schemes and tapping `upstreamTransport` for them
 */
export function bdsPlugin(): Plugin {
  return definePlugin({
    name: 'bds',
    schema: { upstream: bdsUpstreamSchema, endpointSchemes: BDS_SCHEMES },
    apply(host: PluginHost) {
      host.hooks.configured.tap('bds', (config) => {
        const problems: ConfigProblem[] = [];
        config.projects.forEach((p, pi) =>
          p.upstreams.forEach((u, ui) => {
            if (u.settings.grpc !== undefined && !isBds(u.endpoint))
              config.warnings.push(
                `projects[${pi}].upstreams[${ui}].grpc: applies to grpc:// endpoints only; this upstream is ${u.endpoint.split('://')[0]}:// (ignored)`,
              );
            const g = settingsOf(u, bdsUpstreamSchema).grpc;
            const at = `projects[${pi}].upstreams[${ui}].grpc`;
            if (g?.maxMessageSize !== undefined && g.maxMessageSize > MAX_MESSAGE_BYTES)
              problems.push({ path: `${at}.maxMessageSize`, message: `at most ${MAX_MESSAGE_BYTES} bytes (100MiB, eRPC's cap)` });
            // The schema sees names or values, not both: `te` is the one name whose value HTTP/2 restricts.
            for (const [name, value] of Object.entries(g?.headers ?? {}))
              if (name.toLowerCase() === 'te' && value !== TE_VALUE)
                problems.push({ path: `${at}.headers.${name}`, message: `must be "${TE_VALUE}" (HTTP/2 allows no other te)` });
          }),
        );
        if (problems.length) throw new ConfigError(problems);
      });
      host.hooks.upstreamTransport.tap('bds', (u: ResolvedUpstream) => {
        if (!isBds(u.endpoint)) return undefined;
        const g = settingsOf(u, bdsUpstreamSchema).grpc;
        return new BdsTransport(u, {
          headers: g?.headers ?? {},
          poolSize: g?.poolSize ?? DEFAULT_POOL_SIZE,
          maxMessageSize: g?.maxMessageSize ?? DEFAULT_MAX_MESSAGE_BYTES,
        });
      });
    },
  });
}
