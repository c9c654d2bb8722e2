/**
 * The listener of the proxy port: Node's HTTP server, or one a plugin builds (the `httpServer` hook: the tls plugin's HTTPS server),
 * from `server.*` around the request listener, closed with a bounded grace for busy connections.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { ResolvedConfig } from '../../config/types.ts';
import type { ProxyHooks } from '../pipeline/hooks.ts';
import { httpServerOptions } from './http-io.ts';

/** Time busy connections get after `close()` before they are cut, ms. */
const CLOSE_GRACE_MS = 2000;

/**
 * Binds the proxy port (0: any free one) with the `server.*` timeouts, header limits and `maxConnections` around the request listener.
 * @param hooks asked for a plugin's server (`httpServer`) before Node's HTTP server is made
 * @throws (rejects with) the bind error, e.g. EADDRINUSE; what a plugin building the server throws (a TLS file it cannot read)
 */
export function listen(
  handler: RequestListener,
  server: ResolvedConfig['server'],
  host: string,
  port: number,
  hooks: Pick<ProxyHooks, 'httpServer'>,
): Promise<Server> {
  let s: Server;
  try {
    const options = httpServerOptions(server);
    const built = hooks.httpServer.call(server, options, handler);
    // Never serve in clear what the config asks to encrypt.
    if (!built && server.tls) throw new Error('server.tls is enabled but no plugin of this preset serves TLS (the tls plugin does)');
    s = built ?? createServer(options, handler);
  } catch (e) {
    return Promise.reject(e);
  }
  // Node's own limits, not a timer per socket: 0 = unlimited.
  if (server.maxConnections > 0) s.maxConnections = server.maxConnections;
  return new Promise<Server>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, host, () => resolve(s));
  });
}

/** Stops accepting, closes idle connections at once and busy ones after {@link CLOSE_GRACE_MS}. Never rejects. */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections?.();
    setTimeout(() => {
      server.closeAllConnections?.();
      resolve();
    }, CLOSE_GRACE_MS).unref();
  });
}
