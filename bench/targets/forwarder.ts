/**
 * Benchmark target: the minimal Node.js JSON-RPC forwarder, the floor cost of any Node.js
 * proxy. node:http server; reads the whole request body, sends it verbatim to the upstream
 * through one undici Pool (same pool settings as svc's `Upstream`), buffers the answer and
 * writes it back with the upstream's status. No parsing, no routing, no per-call work: a batch
 * is forwarded as one upstream request (svc splits it into one upstream request per call).
 *
 * With `--framework=koa` the same forwarding runs inside Koa 3 + @koa/router on `POST
 * /main/evm/1` (svc's path): the floor of any Koa-based proxy, svc included (the
 * targets are ratios to the node:http forwarder, so this shows how much of them Koa alone uses).
 *
 * Options: `port` (default 0), `upstream` (origin URL, required), `connections` (pool size,
 * default 128 like svc), `framework` (`http` default, or `koa`).
 */
import Router from '@koa/router';
import Koa from 'koa';
import { createServer, type RequestListener } from 'node:http';
import { Pool } from 'undici';
import { listenTarget, numberOption, option, readBody, serveTarget } from './common.ts';

const port = numberOption('port', 0);
const upstream = option('upstream', '');
if (!upstream) throw new Error('forwarder: --upstream=<url> (or BENCH_UPSTREAM) is required');
const url = new URL(upstream);
const path = `${url.pathname || '/'}${url.search}`;
const pool = new Pool(url.origin, {
  connections: numberOption('connections', 128),
  keepAliveTimeout: 30_000,
  headersTimeout: 0,
  bodyTimeout: 0,
});
const upstreamHeaders = { 'content-type': 'application/json' };

const framework = option('framework', 'http');
if (framework !== 'http' && framework !== 'koa') throw new Error(`forwarder: --framework must be http or koa, not ${framework}`);

/** The same forwarding as a Koa route: Koa's context, router dispatch and response writing on top. */
function koaListener(counter: { count: number }): RequestListener {
  const app = new Koa();
  const router = new Router();
  router.post('/main/evm/1', async (k) => {
    counter.count++;
    const body = await readBody(k.req);
    const r = await pool.request({ path, method: 'POST', headers: upstreamHeaders, body });
    k.status = r.statusCode;
    k.type = 'application/json';
    k.body = Buffer.from(await r.body.arrayBuffer());
  });
  app.use(router.routes());
  return app.callback();
}

await serveTarget('forwarder', async (counter) => {
  const server = createServer(
    framework === 'koa'
      ? koaListener(counter)
      : (req, res) => {
          counter.count++;
          readBody(req)
            .then(async (body) => {
              const r = await pool.request({ path, method: 'POST', headers: upstreamHeaders, body });
              const out = Buffer.from(await r.body.arrayBuffer());
              res.writeHead(r.statusCode, { 'content-type': 'application/json', 'content-length': out.length });
              res.end(out);
            })
            .catch((e: unknown) => {
              if (res.headersSent) return void res.destroy();
              const msg = JSON.stringify(e instanceof Error ? e.message : String(e));
              res.writeHead(502, { 'content-type': 'application/json' });
              res.end(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":${msg}}}`);
            });
        },
  );
  const listening = await listenTarget(server, port);
  return {
    port: listening.port,
    close: async () => {
      await listening.close();
      await pool.close();
    },
  };
});
