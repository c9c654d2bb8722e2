/**
 * Benchmark target: a bare node:http server answering a fixed JSON-RPC body to any POST, no
 * framework (the floor below the Koa target). Like the Koa target it neither reads nor parses
 * the request body (Node discards it for keep-alive): it measures node:http's own request and
 * response cost only.
 *
 * Options: `port` (default 0).
 */
import { createServer } from 'node:http';
import { numberOption, portOf, serveTarget } from './common.ts';

const port = numberOption('port', 0);
/** The same answer as the Koa target's. */
const FIXED = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1234567"}');
const HEADERS = { 'content-type': 'application/json', 'content-length': String(FIXED.length) };

await serveTarget('http', async (counter) => {
  const server = createServer((_req, res) => {
    counter.count++;
    res.writeHead(200, HEADERS);
    res.end(FIXED);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: portOf(server),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
});
