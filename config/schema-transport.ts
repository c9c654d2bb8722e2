/**
 * The core's transport keys of the config schema (config/schema.ts assembles them): TLS on the proxy port (`server.tls`), outbound
 * proxy pools (`proxyPools`) and the upstream transport switches of `upstreams[].jsonRpc` (`enableGzip`, `proxyPool`). Their meaning
 * follows eRPC's keys of the same names (docs/migrating-from-erpc.md); the tls plugin (plugins/tls) honours `server.tls`, the outbound
 * plugin (plugins/outbound) the rest.
 */
import { Type } from '@sinclair/typebox';

/** The proxy URL schemes a pool takes (eRPC's list, any case): HTTP forwarding / CONNECT, CONNECT over TLS, SOCKS5. */
export const PROXY_URL_PATTERN = '^([hH][tT][tT][pP][sS]?|[sS][oO][cC][kK][sS]5)://';

/** `server.tls`: HTTPS (and WSS) on the proxy port, mutual TLS with `caFile`. */
export const serverTlsSchema = Type.Object(
  {
    enabled: Type.Optional(
      Type.Boolean({ default: false, description: 'serve HTTPS (and WSS on the WebSocket endpoint) on the proxy port; TLS 1.2 or later' }),
    ),
    certFile: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'PEM certificate chain of the server (leaf first), a path relative to the working directory; read at start (restart to rotate); required when enabled',
      }),
    ),
    keyFile: Type.Optional(
      Type.String({ minLength: 1, description: 'PEM private key of certFile, a path relative to the working directory; required when enabled' }),
    ),
    caFile: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'PEM CA certificates: when set, mutual TLS is required (as in eRPC): a client must present a certificate signed by one of them, or its handshake fails',
      }),
    ),
  },
  { additionalProperties: false, description: "TLS termination in svc (eRPC's `server.tls`); off unless `enabled: true`" },
);

/** Top-level `proxyPools`: named lists of outbound proxies, referenced by `upstreams[].jsonRpc.proxyPool`. */
export const proxyPoolsSchema = Type.Array(
  Type.Object(
    {
      id: Type.String({ minLength: 1, description: 'pool name, unique; `upstreams[].jsonRpc.proxyPool` refers to it' }),
      urls: Type.Array(
        Type.String({
          pattern: PROXY_URL_PATTERN,
          description:
            'proxy URL: `http://host:port` (an https upstream is reached through CONNECT, an http one by forwarding), `https://` (the same over TLS to the proxy) or `socks5://`; credentials as `user:password@`',
        }),
        { minItems: 1, description: 'the pool; each request of an upstream goes through the next one in turn (round robin)' },
      ),
    },
    { additionalProperties: false },
  ),
  { description: "outbound HTTP(S)/SOCKS5 proxies for upstream requests (eRPC's `proxyPools`); upstreams without `jsonRpc.proxyPool` connect directly" },
);

/** The transport keys of `upstreams[].jsonRpc` (beside `headers` and the batching keys). */
export const upstreamJsonRpcTransport = {
  enableGzip: Type.Optional(
    Type.Boolean({
      default: false,
      description:
        'gzip request bodies (`Content-Encoding: gzip`) and ask for gzip answers (`Accept-Encoding: gzip`); a gzip answer is decompressed within maxResponseSize (an answer that decompresses beyond it fails like a larger one)',
    }),
  ),
  proxyPool: Type.Optional(
    Type.String({ minLength: 1, description: 'id of a `proxyPools` entry: requests to this upstream go through its proxies in turn; unset = direct' }),
  ),
};
