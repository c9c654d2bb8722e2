/**
 * outbound plugin: how requests to an HTTP upstream leave svc when they do not go straight to its origin. eRPC's outbound proxy pools
 * (`proxyPools`, `upstreams[].jsonRpc.proxyPool`: each request through the next proxy in turn) and gzip bodies both ways
 * (`upstreams[].jsonRpc.enableGzip`). Taps `upstreamDispatcher` once per upstream; an upstream using neither gets nothing from it,
 * so its calls cost what a direct call costs.
 */
import { definePlugin, type Plugin, type PluginHost, type ResolvedUpstream } from 'svc-proxy/plugin';
import type { RequestDispatcher } from 'svc-proxy/plugin/contracts';
import { GzipDispatcher } from './gzip.ts';
import { ProxyRotation } from './proxy-rotation.ts';

export { GzipDispatcher } from './gzip.ts';
export { ProxyRotation } from './proxy-rotation.ts';

/** @returns the plugin that gives upstreams with `jsonRpc.proxyPool` or `jsonRpc.enableGzip` their dispatcher */
export function outboundPlugin(): Plugin {
  return definePlugin({
    name: 'outbound',
    apply(host: PluginHost) {
      host.hooks.upstreamDispatcher.tap('outbound', (u, pool) => outboundDispatcher(u, pool, host.config.proxyPools));
    },
  });
}

/**
 * The dispatcher of one upstream, or undefined when it connects directly without gzip.
 * @param pools the config's `proxyPools` by id (read when the upstream is built, so a reload's pools apply to the upstreams it builds)
 * @throws Error when `jsonRpc.proxyPool` names no pool (config validation reports it first)
 */
export function outboundDispatcher(
  u: ResolvedUpstream,
  pool: RequestDispatcher,
  pools: ReadonlyMap<string, readonly string[]> | undefined,
): RequestDispatcher | undefined {
  const jsonRpc = (u.settings.jsonRpc ?? {}) as { enableGzip?: boolean; proxyPool?: string };
  let proxies: ProxyRotation | undefined;
  if (jsonRpc.proxyPool !== undefined) {
    const urls = pools?.get(jsonRpc.proxyPool);
    if (!urls) throw new Error(`upstream ${u.id}: jsonRpc.proxyPool "${jsonRpc.proxyPool}" names no entry of proxyPools`);
    proxies = new ProxyRotation(urls);
  }
  if (jsonRpc.enableGzip === true) return new GzipDispatcher(proxies ?? pool, u.id, proxies !== undefined);
  return proxies;
}
