/**
 * Free TCP port helper for tests: listen on port 0, read the port the kernel picked, close.
 */
import { createServer, type Server } from 'node:net';

/**
 * Returns a TCP port that was free on 127.0.0.1 a moment ago.
 * @param host interface to probe (default 127.0.0.1)
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('could not determine a free port'));
        return;
      }
      const { port } = addr;
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/**
 * Starts a server listening on a free port of 127.0.0.1.
 * @param server any node:net or node:http server
 * @param what names the server in the error when it has no TCP address
 * @param port port to listen on (default 0: a free one)
 * @returns the port it listens on
 * @throws the listen error, or Error when the address is not TCP
 */
export async function listenOnLoopback(server: Server, what: string, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error(`${what} has no TCP address`);
  return addr.port;
}
