/** The HTTP listener of the proxy port: Node's server from `server.*` around the Koa app, closed with a bounded grace for busy connections. */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { ResolvedConfig } from '../../config/types.ts';
import { httpServerOptions } from './http-io.ts';

/** Time busy connections get after `close()` before they are cut, ms. */
const CLOSE_GRACE_MS = 2000;

/**
 * Binds the proxy port (0: any free one) with the `server.*` timeouts, header limits and `maxConnections` around the Koa app's callback.
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
