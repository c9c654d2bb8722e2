/**
 * Vendor providers and eRPC's vendor endpoint shortcuts on a real server, against anvil nodes:
 * every vendor URL is sent to a local router (the test-only base URL) that forwards each vendor
 * host to the anvil node of its chain, and stands in for QuickNode's account API. Asserted: the
 * vendor's documented URL per chain (key included) is what svc dials, one upstream per chain on
 * its first request; `alchemy://KEY`, `drpc://KEY` and `quicknode://KEY` upstreams become
 * providers; a chain the vendor's table lacks answers 404 naming the provider; a key never shows
 * in an answer or a log line, even when the vendor echoes it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import type { Proxy } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { LOG_REDACTION, redactChildren } from '../../lib/logger.ts';
import { VENDOR_TEST_BASE_URL_ENV, vendorsPlugin } from '../../plugins/vendors/index.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { listenOnLoopback } from '../helpers/ports.ts';
import { httpRequest, NO_CACHE, presetWithout, type SvcResponse } from '../helpers/svc.ts';

const ALCHEMY_KEY = 'alchemyKey7f3a9c';
const DRPC_KEY = 'drpcKey5b21e0';
const QN_KEY = 'qnAdminKey88d4';
const QN_TOKEN = 'qnNodeToken42aa';
const BD_KEY = 'blockdaemonKey61c7';

/** The local stand-in for the vendors' hosts: JSON-RPC forwarded to anvil by host, QuickNode's API answered. */
async function vendorRouter(nodes: { mainnet: AnvilHandle; polygon: AnvilHandle }) {
  const seen: string[] = [];
  /** Request headers by vendor host, last request. */
  const headers = new Map<string, IncomingMessage['headers']>();
  let echo = false;
  const byHost: Record<string, (path: string) => AnvilHandle | undefined> = {
    'eth-mainnet.g.alchemy.com': () => nodes.mainnet,
    'polygon-mainnet.g.alchemy.com': () => nodes.polygon,
    'lb.drpc.org': (path) => (path.includes('network=ethereum&') ? nodes.mainnet : path.includes('network=polygon&') ? nodes.polygon : undefined),
    'node-a.quiknode.pro': () => nodes.polygon,
    'mainnet.infura.io': () => nodes.mainnet,
    'svc.blockdaemon.com': (path) => (path === '/ethereum/mainnet/native' ? nodes.mainnet : undefined),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const [, host = '', ...rest] = (req.url ?? '/').split('/');
    const path = `/${rest.join('/')}`;
    seen.push(`${host}${path}`);
    headers.set(host, req.headers);
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (host === 'api.quicknode.com') {
        const ok = req.headers['x-api-key'] === QN_KEY;
        res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify(ok ? { data: [{ id: 'ep1', http_url: `https://node-a.quiknode.pro/${QN_TOKEN}/` }] } : { error: 'unauthorized' }));
      }
      if (echo) {
        // A vendor error page that echoes the URL it was called with, key included.
        res.writeHead(500, { 'content-type': 'text/plain' });
        return void res.end(`internal error serving ${req.url}`);
      }
      const node = byHost[host]?.(path);
      if (!node) {
        res.writeHead(404);
        return void res.end('no such vendor host');
      }
      fetch(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
        async (r) => {
          res.writeHead(r.status, { 'content-type': 'application/json' });
          res.end(await r.text());
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  });
  const port = await listenOnLoopback(server, 'vendor-router');
  return {
    base: `http://127.0.0.1:${port}`,
    seen,
    headers,
    setEcho: (on: boolean) => (echo = on),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('e2e: vendor providers and endpoint shortcuts (eRPC)', function () {
  this.timeout(20_000);
  let mainnet: AnvilHandle;
  let polygon: AnvilHandle;
  let router: Awaited<ReturnType<typeof vendorRouter>>;
  let proxy: Proxy;
  let url: string;
  const logs: string[] = [];
  const post = (path: string, method: string, id = 1): Promise<SvcResponse> =>
    httpRequest('POST', `${url}${path}`, JSON.stringify({ jsonrpc: '2.0', id, method, params: [] }), { 'content-type': 'application/json' });

  before(async () => {
    [mainnet, polygon] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 137 })]);
    router = await vendorRouter({ mainnet, polygon });
    // As written in an eRPC file; the config load rewrites the shortcuts into providers (the vendors plugin's normalize).
    const config = {
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          upstreams: [
            { endpoint: `alchemy://${ALCHEMY_KEY}`, tags: ['tier:paid'] },
            { endpoint: `evm+drpc://${DRPC_KEY}` },
            { id: 'qn', endpoint: `quicknode://${QN_KEY}` },
          ],
        },
        { id: 'native', providers: [{ id: 'paid', vendor: 'alchemy', settings: { apiKey: ALCHEMY_KEY } }] },
        { id: 'bd', upstreams: [{ endpoint: `blockdaemon://${BD_KEY}`, jsonRpc: { headers: { 'X-Team': 'payments' } } }] },
      ],
    };
    const logger = redactChildren(pino({ level: 'debug', ...LOG_REDACTION }, { write: (s: string) => void logs.push(s) }));
    const plugins = [...presetWithout('vendors', 'vendor-repository', 'vendor-hyper'), vendorsPlugin({ testBaseUrl: router.base })];
    proxy = createProxy({ config, plugins, logger, port: 0, host: '127.0.0.1', metricsPort: 0, probeBackoffMs: 50 });
    url = `http://127.0.0.1:${(await proxy.start()).port}`;
  });
  after(async () => {
    await proxy?.close();
    await router?.close();
    await Promise.all([mainnet?.stop(), polygon?.stop()]);
  });

  it('a provider of vendor alchemy: the first request for a chain creates its upstream at the documented URL, key in the path', async () => {
    const r = await post('/native/evm/137', 'web3_clientVersion');
    expect(r.status).to.equal(200);
    expect(r.json.result).to.match(/anvil/i);
    expect(r.headers['x-svc-upstream']).to.equal('paid-evm:137');
    expect(router.seen).to.include(`polygon-mainnet.g.alchemy.com/v2/${ALCHEMY_KEY}`);
    expect([...(proxy.projects.get('native')?.upstreams.keys() ?? [])]).to.deep.equal(['paid-evm:137']);
  });

  it('shortcut upstreams become providers: alchemy://KEY (its tags on every generated upstream) and evm+drpc://KEY serve chain 1', async () => {
    const r = await post('/main/evm/1', 'web3_clientVersion');
    expect(r.status).to.equal(200);
    const ups = proxy.projects.get('main')?.upstreams;
    expect([...(ups?.keys() ?? [])].sort()).to.deep.equal(['alchemy-1-evm:1', 'drpc-1-evm:1']);
    expect(ups?.get('alchemy-1-evm:1')?.tags.has('tier:paid')).to.equal(true);
    expect(ups?.get('alchemy-1-evm:1')?.vendor).to.equal('alchemy');
    expect(router.seen).to.include(`eth-mainnet.g.alchemy.com/v2/${ALCHEMY_KEY}`);
    expect(router.seen).to.include(`lb.drpc.org/ogrpc?network=ethereum&dkey=${DRPC_KEY}`);
  });

  it('quicknode://KEY: the account endpoints from the QuickNode API, each serving the chain it answers', async () => {
    const r = await post('/main/evm/137', 'web3_clientVersion');
    expect(r.status).to.equal(200);
    expect(proxy.projects.get('main')?.upstreams.has('qn-evm:137-ep1')).to.equal(true);
    expect(router.seen).to.include(`node-a.quiknode.pro/${QN_TOKEN}/`);
  });

  it("blockdaemon://KEY: the key travels as a bearer token next to the upstream's own headers, never in the URL", async () => {
    const r = await post('/bd/evm/1', 'web3_clientVersion');
    expect(r.status).to.equal(200);
    expect(router.seen).to.include('svc.blockdaemon.com/ethereum/mainnet/native');
    const h = router.headers.get('svc.blockdaemon.com');
    expect(h?.authorization).to.equal(`Bearer ${BD_KEY}`);
    expect(h?.['x-team']).to.equal('payments');
  });

  it('a chain no vendor table lists: 404 ErrNetworkNotSupported naming each provider, at once', async () => {
    const started = Date.now();
    const r = await post('/native/evm/31337', 'eth_blockNumber');
    expect(r.status).to.equal(404);
    expect(r.json.error.data.code).to.equal('ErrNetworkNotSupported');
    expect(r.json.error.message).to.equal(
      'network evm:31337 is not supported by project native: provider paid (vendor alchemy) does not serve evm:31337; served: /native/evm/137',
    );
    expect(Date.now() - started).to.be.below(2000);
  });

  it('keys never show: a vendor error echoing its URL reaches the client redacted, and no log line holds a key', async () => {
    router.setEcho(true);
    let r: SvcResponse;
    try {
      r = await post('/native/evm/137', 'eth_getBalance', 9);
    } finally {
      router.setEcho(false);
    }
    expect(r.json.error.message).to.match(/^internal error serving .*#redacted/);
    expect(r.text).to.not.include(ALCHEMY_KEY);
    const all = logs.join('');
    expect(all.length).to.be.above(0);
    for (const key of [ALCHEMY_KEY, DRPC_KEY, QN_KEY, QN_TOKEN, BD_KEY]) expect(all, key).to.not.include(key);
  });
});

describe('e2e: vendors through `svc start` (the test base URL from the environment)', function () {
  this.timeout(40_000);
  let mainnet: AnvilHandle;
  let polygon: AnvilHandle;
  let router: Awaited<ReturnType<typeof vendorRouter>>;
  let svc: SvcProcess;
  let dir: string;

  before(async () => {
    await ensureBuilt();
    [mainnet, polygon] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 137 })]);
    router = await vendorRouter({ mainnet, polygon });
    dir = mkdtempSync(join(tmpdir(), 'svc-vendors-'));
    // The child inherits the environment at spawn time.
    process.env[VENDOR_TEST_BASE_URL_ENV] = router.base;
    try {
      svc = await spawnSvc(dir, 'vendors', {
        logLevel: 'debug',
        ...NO_CACHE,
        metrics: { host: '127.0.0.1' },
        projects: [
          {
            id: 'main',
            providers: [
              { id: 'paid', vendor: 'infura', settings: { apiKey: 'infuraKey9c04d2' } },
              { id: 'dr', vendor: 'drpc', settings: { apiKey: DRPC_KEY }, onlyNetworks: ['evm:137'] },
            ],
          },
        ],
      });
    } finally {
      delete process.env[VENDOR_TEST_BASE_URL_ENV];
    }
  });
  after(async () => {
    await svc?.stop();
    await router?.close();
    await Promise.all([mainnet?.stop(), polygon?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('infura for chain 1 and drpc for chain 137 serve from their documented URLs; no key in the debug log', async () => {
    const call = (path: string) =>
      httpRequest('POST', `${svc.url}${path}`, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'web3_clientVersion', params: [] }), {
        'content-type': 'application/json',
      });
    const one = await call('/main/evm/1');
    expect(one.status).to.equal(200);
    expect(one.headers['x-svc-upstream']).to.equal('paid-evm:1');
    const poly = await call('/main/evm/137');
    expect(poly.headers['x-svc-upstream']).to.equal('dr-evm:137');
    expect(router.seen).to.include('mainnet.infura.io/v3/infuraKey9c04d2');
    expect(router.seen).to.include(`lb.drpc.org/ogrpc?network=polygon&dkey=${DRPC_KEY}`);
    expect(svc.logs()).to.include('"level":20');
    for (const key of ['infuraKey9c04d2', DRPC_KEY]) expect(svc.logs(), key).to.not.include(key);
  });
});
