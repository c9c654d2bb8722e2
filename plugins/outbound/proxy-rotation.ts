/**
 * An upstream's proxy pool (`proxyPools`, `upstreams[].jsonRpc.proxyPool`): one undici ProxyAgent per proxy URL, each request through
 * the next in turn (round robin, as eRPC's pool turns).
 */
import { ProxyAgent, type Dispatcher } from 'undici';
import type { RequestDispatcher } from 'svc-proxy/plugin/contracts';
import { secretsOf } from 'svc-proxy/util';

/**
 * An `https://` upstream is reached through an HTTP CONNECT tunnel; an `http://` upstream behind an `http://` proxy is forwarded (the
 * request line carries the absolute URL), as Go's transport does for eRPC; `socks5://` proxies tunnel both. Every request names its
 * origin (core sets it for a plugin's dispatcher), since one proxy serves many.
 */
export class ProxyRotation implements RequestDispatcher {
  private readonly agents: ProxyAgent[];
  private next = 0;
  /** The proxy URLs: their credentials never appear in the upstream's messages or logs. */
  readonly secrets: readonly string[];

  /**
   * @param urls the pool's proxy URLs (at least one; credentials as `user:password@` become Proxy-Authorization)
   * @throws Error when `urls` is empty or a URL is one undici refuses
   */
  constructor(urls: readonly string[]) {
    if (urls.length === 0) throw new Error('a proxy pool needs at least one URL');
    this.secrets = urls.flatMap((u) => secretsOf(u));
    this.agents = urls.map(
      (uri) =>
        new ProxyAgent({
          uri,
          proxyTunnel: false,
          connections: 128,
          keepAliveTimeout: 30_000,
          // Deadlines come from the call's AbortSignal, not socket timers.
          headersTimeout: 0,
          bodyTimeout: 0,
          connect: { timeout: 10_000 },
        }),
    );
  }

  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const agent = this.agents[this.next] as ProxyAgent;
    this.next = this.next + 1 === this.agents.length ? 0 : this.next + 1;
    return agent.dispatch(opts, handler);
  }

  /** Closes every proxy's connections once their requests end. */
  async close(): Promise<void> {
    await Promise.all(this.agents.map((a) => a.close().catch(() => undefined)));
  }

  /** Aborts every request and closes at once. */
  async destroy(): Promise<void> {
    await Promise.all(this.agents.map((a) => a.destroy().catch(() => undefined)));
  }
}
