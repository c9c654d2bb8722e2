/**
 * How one upstream's requests leave the process: the keep-alive pool of its origin, shared by the upstreams of that origin, or a
 * dispatcher a plugin gives it through the `upstreamDispatcher` hook (outbound proxies, compressed bodies). Chosen once, when the
 * upstream is built, so a feature that is off costs a call nothing.
 */
import type { ResolvedUpstream } from '../../config/types.ts';
import type { SvcError, SvcErrorOptions } from '../wire/errors.ts';
import type { UpstreamFault } from '../wire/fault.ts';
import { Pool, type Dispatcher } from 'undici';
import type { UpstreamTransport } from './plugin-transport.ts';

/** Options for the undici pool behind an upstream. */
export interface UpstreamPoolOptions {
  /** Max sockets to the origin. Default 128. */
  connections?: number;
  /** Idle keep-alive, ms. Default 30 000. */
  keepAliveTimeoutMs?: number;
  /** Pools by origin, shared by upstreams of one origin (one provider, several paths or keys); the map's owner closes them. */
  shared?: Map<string, Pool>;
  /** A plugin's dispatcher for an upstream (the `upstreamDispatcher` hook), given its origin's pool; undefined: that pool. */
  dispatcher?: (upstream: ResolvedUpstream, pool: RequestDispatcher) => RequestDispatcher | undefined;
  /** Names an upstream's error answers (the `upstreamFault` hook); unset: each is `ErrEndpointServerSideException` with the vendor's code. */
  classifyFault?: (fault: UpstreamFault, opts: SvcErrorOptions) => SvcError | undefined;
  /** The transport of an upstream whose endpoint is not http(s) (the `upstreamTransport` hook); undefined when no plugin serves it. */
  transportFor?: (upstream: ResolvedUpstream) => UpstreamTransport | undefined;
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

/**
 * What an upstream's requests are sent through: its origin's pool, or a plugin's dispatcher. A plugin's dispatcher gets every request
 * with its `origin` set (it may serve many), owns what it opens (`close`, `destroy`), and names the secrets it holds (proxy
 * credentials) so the upstream's messages and logs redact them.
 */
export interface RequestDispatcher {
  /**
   * undici's dispatch: starts the request; the handler (undici's legacy handler API) gets its events.
   * @param limit the answer's `maxResponseSize`, bytes: the reader enforces it on the bytes the handler gets; a dispatcher that
   *   decodes the body caps what it reads with it too
   */
  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler, limit?: number): boolean;
  /** Closes its connections once their requests end (the upstream is retired or svc stops). */
  close?(): Promise<void>;
  /** Aborts its requests and closes at once. */
  destroy?(): Promise<void>;
  /** Strings never to show in a message or log line about this upstream (credentials in proxy URLs). */
  readonly secrets?: readonly string[];
}
