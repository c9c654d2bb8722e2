/**
 * Benchmark target: a bare node:http server answering a fixed JSON-RPC body to any POST, no
 * framework (the floor below the Koa target). Like the Koa target it neither reads nor parses
 * the request body (Node discards it for keep-alive): it measures node:http's own request and
 * response cost only.
 *
 * Options: `port` (default 0).
 */
import { createServer } from 'node:http';
import { listenTarget, numberOption, serveTarget } from './common.ts';

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
  return listenTarget(server, port);
});
