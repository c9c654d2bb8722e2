/**
 * compression plugin (`server.enableGzip`, as eRPC users expect): the proxy port decodes gzip, deflate and br request bodies and gzips
 * answers over 1 KiB for clients that send `Accept-Encoding: gzip`. Taps `bodyCoding` once, when the HTTP server is built; without
 * this plugin a compressed request body is refused (HTTP 415) and answers go uncompressed.
 */
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { bodyCoding } from './coding.ts';

export { acceptsGzip, bodyCoding, GZIP_MIN_BYTES, gzipAnswer } from './coding.ts';

/** @returns the plugin giving the proxy port its body coding */
export function compressionPlugin(): Plugin {
  return definePlugin({
    name: 'compression',
    apply(host: PluginHost) {
      host.hooks.bodyCoding.tap('compression', (server) => bodyCoding(server.enableGzip));
    },
  });
}
