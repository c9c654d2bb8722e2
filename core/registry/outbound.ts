/**
 * How one upstream's requests leave the process: a keep-alive pool per origin (the direct path), or a `proxyPools` entry (eRPC's outbound
 * proxy pools: each request through the next proxy in turn), and the gzip request bodies of `jsonRpc.enableGzip`. Chosen once, when the
 * upstream is built, so a feature that is off costs a call nothing.
 */
import type { SvcError, SvcErrorOptions } from '../wire/errors.ts';
import type { UpstreamFault } from '../wire/fault.ts';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { Pool, ProxyAgent, type Dispatcher } from 'undici';

/** Options for the undici pool behind an upstream. */
export interface UpstreamPoolOptions {
  /** Max sockets to the origin (per proxy with a proxy pool). Default 128. */
  connections?: number;
  /** Idle keep-alive, ms. Default 30 000. */
  keepAliveTimeoutMs?: number;
  /** Pools by origin, shared by upstreams of one origin (one provider, several paths or keys); the map's owner closes them. */
  shared?: Map<string, Pool>;
  /** `proxyPools` by id, each pool's proxy URLs (`http://`, `https://`, `socks5://`): what `jsonRpc.proxyPool` names. */
  proxyPools?: ReadonlyMap<string, readonly string[]>;
  /** Names an upstream's error answers (the `upstreamFault` hook); unset: each is `ErrEndpointServerSideException` with the vendor's code. */
  classifyFault?: (fault: UpstreamFault, opts: SvcErrorOptions) => SvcError | undefined;
}

/** Creates the keep-alive pool for an origin (deadlines come from AbortSignals, not socket timers). */
export function createOriginPool(origin: string, opts: UpstreamPoolOptions = {}): Pool {
  return new Pool(origin, {
    connections: opts.connections ?? 128,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? 30_000,
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: 10_000 },
  });
}

/** What the answer sink sends a request through: a pool, or a {@link ProxyRotation}. */
export interface RequestDispatcher {
  /** undici's dispatch: starts the request, the handler gets its events. */
  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean;
}

/**
 * An upstream's proxy pool: one undici ProxyAgent per proxy URL, each request through the next (round robin, as eRPC's pool turns).
 * An `https://` upstream is reached through an HTTP CONNECT tunnel; an `http://` upstream behind an `http://` proxy is forwarded (the
 * request line carries the absolute URL), as Go's transport does for eRPC; `socks5://` proxies tunnel both.
 */
export class ProxyRotation implements RequestDispatcher {
  private readonly agents: ProxyAgent[];
  private next = 0;

  /**
   * @param urls the pool's proxy URLs (at least one; credentials as `user:password@` become Proxy-Authorization)
   * @param opts connections and keep-alive of each proxy's connections
   * @throws Error when `urls` is empty or a URL is one undici refuses
   */
  constructor(urls: readonly string[], opts: UpstreamPoolOptions = {}) {
    if (urls.length === 0) throw new Error('a proxy pool needs at least one URL');
    this.agents = urls.map(
      (uri) =>
        new ProxyAgent({
          uri,
          proxyTunnel: false,
          connections: opts.connections ?? 128,
          keepAliveTimeout: opts.keepAliveTimeoutMs ?? 30_000,
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

const gzipAsync = promisify(gzip);

/**
 * The request of an upstream with `jsonRpc.enableGzip` or a proxy pool: the body gzipped with `Content-Encoding: gzip` when asked (in
 * zlib's thread pool, so a large body does not stall other calls), the origin named for the proxy agents (a proxy serves many).
 * @param path the endpoint's path and query
 * @param origin the endpoint's origin through proxies; undefined direct (the pool has it)
 * @param gzipped whether to gzip the body
 * @param headers the request's headers (not changed)
 * @param body the body as text, or as pieces
 */
export async function encodedRequest(
  path: string,
  origin: string | undefined,
  gzipped: boolean,
  headers: Record<string, string>,
  body: string | readonly Buffer[],
): Promise<Dispatcher.DispatchOptions> {
  const bytes = typeof body === 'string' ? body : Buffer.concat(body);
  const opts: Dispatcher.DispatchOptions = gzipped
    ? { path, method: 'POST', headers: { ...headers, 'content-encoding': 'gzip' }, body: await gzipAsync(bytes) }
    : { path, method: 'POST', headers, body: bytes };
  if (origin !== undefined) opts.origin = origin;
  return opts;
}
