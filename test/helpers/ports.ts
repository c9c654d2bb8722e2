/**
 * Free TCP port helper for tests: listen on port 0, read the port the kernel picked, close.
 */
import { createServer } from 'node:net';

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
