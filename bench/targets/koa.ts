/**
 * Benchmark target: a bare Koa 3 + @koa/router server answering a fixed JSON-RPC body to
 * `POST /main/evm/1` (the same path svc serves). It neither reads nor parses the request body:
 * it measures the framework floor (Koa context, router dispatch, response writing) only.
 *
 * Options: `port` (default 0).
 */
import Koa from 'koa';
import Router from '@koa/router';
import { createServer } from 'node:http';
import { listenTarget, numberOption, serveTarget } from './common.ts';

const port = numberOption('port', 0);
const FIXED = '{"jsonrpc":"2.0","id":1,"result":"0x1234567"}';

await serveTarget('koa', async (counter) => {
  const app = new Koa();
  const router = new Router();
  router.post('/main/evm/1', (k) => {
    counter.count++;
    k.type = 'application/json';
    k.body = FIXED;
  });
  app.use(router.routes());
  return listenTarget(createServer(app.callback()), port);
});
