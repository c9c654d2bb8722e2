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
import { definePlugin, type Plugin, type PluginHost, type ResolvedUpstream, settingsOf, Strict, Type } from 'svc-proxy/plugin';
import { BdsTransport, DEFAULT_POOL_SIZE } from './transport.ts';

export { BDS_METHODS } from './requests.ts';
export {
  BdsTransport,
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

/** A metadata name `grpc.headers` may hold. */
export const METADATA_NAME = '^(?![Gg][Rr][Pp][Cc]-)(?!.*-[Bb][Ii][Nn]$)[A-Za-z0-9_.-]+$';

/** Most channels (connections) one upstream keeps. */
export const MAX_POOL_SIZE = 16;

/** The plugin's keys under `projects[].upstreams[]` (and `upstreamDefaults`). */
export const bdsUpstreamSchema = {
  grpc: Type.Optional(
    Strict(
      {
        headers: Type.Optional(
          Type.Record(Type.String(), Type.String(), {
            // Names grpc-js sends as text: no reserved `grpc-*` name, no binary `*-bin` one.
            propertyNames: { pattern: METADATA_NAME },
            description:
              'gRPC metadata sent on every call of a BDS upstream (`authorization: Bearer …`); names are lower-cased; `grpc-*` and binary `*-bin` names are refused',
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
        config.projects.forEach((p, pi) =>
          p.upstreams.forEach((u, ui) => {
            if (u.settings.grpc !== undefined && !isBds(u.endpoint))
              config.warnings.push(
                `projects[${pi}].upstreams[${ui}].grpc: applies to grpc:// endpoints only; this upstream is ${u.endpoint.split('://')[0]}:// (ignored)`,
              );
          }),
        );
      });
      host.hooks.upstreamTransport.tap('bds', (u: ResolvedUpstream) => {
        if (!isBds(u.endpoint)) return undefined;
        const g = settingsOf(u, bdsUpstreamSchema).grpc;
        return new BdsTransport(u, { headers: g?.headers ?? {}, poolSize: g?.poolSize ?? DEFAULT_POOL_SIZE });
      });
    },
  });
}
