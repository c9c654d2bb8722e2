/**
 * The HTTP listener of the proxy port: Node's server built from `server.*` settings around the
 * Koa app, bound, and closed with a bounded grace for busy connections.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { ResolvedConfig } from '../../config/types.ts';
import { httpServerOptions } from './http-io.ts';

/** Time busy connections get after `close()` before they are cut, ms. */
const CLOSE_GRACE_MS = 2000;

/**
 * Binds the proxy port.
 * @param handler the request listener (the Koa app's callback)
 * @param server `server.*` settings (timeouts, header limits, `maxConnections`)
 * @param host address to bind
 * @param port port to bind (0: any free one)
 * @returns the listening server
 * @throws (rejects with) the bind error, e.g. EADDRINUSE
 */
export function listen(handler: RequestListener, server: ResolvedConfig['server'], host: string, port: number): Promise<Server> {
  const s = createServer(httpServerOptions(server), handler);
  // Node's own limits, not a timer per socket: 0 = unlimited.
  if (server.maxConnections > 0) s.maxConnections = server.maxConnections;
  return new Promise<Server>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, host, () => resolve(s));
  });
}

/**
 * Stops accepting, closes idle connections at once and busy ones after {@link CLOSE_GRACE_MS}.
 * Never rejects.
 */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections?.();
    // Connections still busy after the drain window are cut.
    setTimeout(() => {
      server.closeAllConnections?.();
      resolve();
    }, CLOSE_GRACE_MS).unref();
  });
}
