/**
 * Providers, the repository vendor and zero-config (spec §2.10, §3.6)
 * on a real server. A local catalog server stands in for the public catalog; fake upstreams for
 * the endpoints. Nothing here dials the internet: the offline fallback is asserted on the
 * vendor's output, not dialled.
 */
import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import { createLogger } from '../../lib/logger.ts';
import type { PluginHost } from '../../core/plugin-api.ts';
import { PROVIDERS_SERVICE, type ProvidersService, type Vendor } from '../../plugins/providers/index.ts';
import { parseCatalog, redactedSuffix, repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort, listenOnLoopback } from '../helpers/ports.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';

const call = (id: number, method = 'eth_chainId', params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

/** A catalog server answering a fixed document; counts its requests. */
async function catalogServer(doc: unknown): Promise<{ url: string; hits: () => number; server: Server }> {
  let hits = 0;
  const server = createServer((_req, res) => {
    hits++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(doc));
  });
  const port = await listenOnLoopback(server, 'catalog');
  return { url: `http://127.0.0.1:${port}/`, hits: () => hits, server };
}

/** The default preset with the repository vendor reading its catalog URL from `env`, and no hyper vendor. */
function presetWithCatalog(url: string) {
  return [...presetWithout('vendor-repository', 'vendor-hyper'), repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: url } })];
}

describe('e2e: providers and zero-config (spec §2.10)', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let catalog: Awaited<ReturnType<typeof catalogServer>>;

  before(async () => {
    a = await startFaultServer({ chainId: 1 });
    b = await startFaultServer({ chainId: 1 });
    catalog = await catalogServer({
      '1': { endpoints: [a.url, b.url, 'wss://ws.example/rpc'] },
      mainnet: { endpoints: ['http://skipped.example'] },
      '10': { endpoints: [] },
    });
  });
  after(async () => {
    catalog?.server.close();
    await a?.close();
    await b?.close();
  });

  describe('zero-config', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await startSvc(
        { ...NO_CACHE, metrics: { enabled: false }, projects: [{ id: 'main', providers: [] }] },
        { plugins: presetWithCatalog(catalog.url) },
      );
    });
    after(async () => svc?.close());

    it('§2.10 public — a project with no upstreams and an empty providers list gets `public`; the first request for a listed chain is served by catalog upstreams', async () => {
      const r = await svc.post('/main/evm/1', call(1));
      expect(r.status).to.equal(200);
      expect(r.json.result).to.equal('0x1');
      const ids = [...(svc.proxy.projects.get('main')?.upstreams.keys() ?? [])].sort();
      // One upstream per http(s) endpoint; ws skipped; ids embed scheme, host and a hash, never the path.
      expect(ids).to.deep.equal([`public-evm:1-${redactedSuffix(a.url)}`, `public-evm:1-${redactedSuffix(b.url)}`].sort());
      expect(ids[0]).to.match(/^public-evm:1-http:\/\/127\.0\.0\.1:\d+#redacted=[0-9a-f]{5}$/);
      const up = svc.proxy.projects.get('main')?.upstreams.get(ids[0] as string);
      expect(up?.config.settings.autoIgnoreUnsupportedMethods).to.equal(true);
    });

    it('§4.1 ¶2 — a chain the catalog does not list answers 404 ErrNetworkNotSupported within 5 s; the catalog is fetched once', async () => {
      const started = Date.now();
      const r = await svc.post('/main/evm/999', call(2));
      expect(r.status).to.equal(404);
      expect(r.json.error.data.code).to.equal('ErrNetworkNotSupported');
      expect(Date.now() - started).to.be.below(5000);
      expect((await svc.post('/main/evm/10', call(3))).status).to.equal(404);
      expect(catalog.hits()).to.equal(1);
    });

    it('§2.10 ¶1 — a project with no providers and no upstreams logs the zero-config warning', () => {
      expect(svc.proxy.config.warnings.some((w) => w.includes('zero-config'))).to.equal(true);
    });
  });

  it('§3.6 project with no providers/upstreams/endpoint flags — the default preset injects both public and hyper; an unknown chain still answers 404 within 5 s', async () => {
    // The root hooks point both vendors at local stand-ins (an empty catalog, hyper.invalid).
    const svc = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, projects: [{ id: 'main' }] });
    try {
      const ids = (svc.proxy.config.projects[0]?.settings.providers as Array<{ id: string; vendor: string }>).map((p) => `${p.id}:${p.vendor}`);
      expect(ids).to.deep.equal(['public:repository', 'hyper:hyper']);
      const started = Date.now();
      expect((await svc.post('/main/evm/999999', call(1))).status).to.equal(404);
      expect(Date.now() - started).to.be.below(5000);
    } finally {
      await svc.close();
    }
  });

  it("the first request's wait for a provider upstream never outlasts the request's own deadline (server.maxTimeout)", async () => {
    const dead = `http://127.0.0.1:${await freePort()}/`;
    const cat = await catalogServer({ '1': { endpoints: [dead] } });
    const svc = await startSvc(
      { ...NO_CACHE, metrics: { enabled: false }, server: { maxTimeout: '1s' }, projects: [{ id: 'main' }] },
      { plugins: presetWithCatalog(cat.url) },
    );
    try {
      const started = Date.now();
      const r = await svc.post('/main/evm/1', call(1, 'eth_blockNumber'));
      expect(Date.now() - started).to.be.below(4000);
      expect(r.json.error).to.not.equal(undefined);
    } finally {
      await svc.close();
      cat.server.close();
    }
  });

  it('autoIgnoreUnsupportedMethods: an upstream answering "method not found" stops getting that method', async () => {
    const only = await startFaultServer({ chainId: 1 });
    const cat = await catalogServer({ '1': { endpoints: [only.url] } });
    const svc = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, projects: [{ id: 'main' }] }, { plugins: presetWithCatalog(cat.url) });
    try {
      expect((await svc.post('/main/evm/1', call(1))).json.result).to.equal('0x1');
      only.script({ kind: 'rpcError', code: -32601, message: 'the method debug_fancy does not exist/is not available' });
      const first = await svc.post('/main/evm/1', call(2, 'debug_fancy'));
      expect(first.json.error).to.not.equal(undefined);
      const before = only.calls.filter((c) => c.method === 'debug_fancy').length;
      const second = await svc.post('/main/evm/1', call(3, 'debug_fancy'));
      expect(second.json.error).to.not.equal(undefined);
      expect(JSON.stringify(second.json.error)).to.include('ErrUpstreamMethodIgnored');
      expect(only.calls.filter((c) => c.method === 'debug_fancy').length).to.equal(before);
    } finally {
      await svc.close();
      cat.server.close();
      await only.close();
    }
  });

  it('§2.10 ¶3 — explicit providers: onlyNetworks, upstreamIdTemplate, overrides, a vendor plugin of a team, and a duplicate id logged, not added', async () => {
    const asked: number[] = [];
    const c5 = await startFaultServer({ chainId: 5 });
    const teamVendor: Vendor = {
      name: 'acme',
      async upstreamsFor(chainId) {
        asked.push(chainId);
        return [{ endpoint: a.url }];
      },
    };
    const acme = {
      name: 'vendor-acme',
      dependsOn: ['providers'],
      apply(host: PluginHost) {
        host.services.require<ProvidersService>(PROVIDERS_SERVICE).registerVendor(teamVendor);
      },
    };
    const svc = await startSvc(
      {
        ...NO_CACHE,
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            // Already holds the id the provider generates for evm:5.
            upstreams: [{ id: 'acme-evm:5', endpoint: c5.url, evm: { chainId: 5 } }],
            providers: [
              {
                id: 'acme',
                vendor: 'acme',
                onlyNetworks: ['evm:1', 'evm:5'],
                upstreamIdTemplate: '<PROVIDER>-<NETWORK>',
                overrides: { 'evm:1': { tags: ['tier:paid'] } },
              },
            ],
          },
        ],
      },
      { plugins: [...presetWithout('vendor-repository', 'vendor-hyper'), acme] },
    );
    try {
      const r = await svc.post('/main/evm/1', call(1));
      expect(r.json.result).to.equal('0x1');
      const up = svc.proxy.projects.get('main')?.upstreams.get('acme-evm:1');
      expect(up?.tags.has('tier:paid')).to.equal(true);
      expect(up?.vendor).to.equal('acme');
      // Not in onlyNetworks: the vendor is never asked.
      expect((await svc.post('/main/evm/7', call(2))).status).to.equal(404);
      expect(asked).to.not.include(7);
      // A network the project already has bootstraps at start; the generated id collides and is not added.
      await new Promise((r) => setTimeout(r, 100));
      expect(asked).to.include(5);
      const five = svc.proxy.projects.get('main')?.networks.get('evm:5');
      expect(five?.upstreams.map((u) => [u.id, u.config.endpoint])).to.deep.equal([['acme-evm:5', c5.url]]);
    } finally {
      await svc.close();
      await c5.close();
    }
  });

  describe('repository vendor', () => {
    it('parses the catalog: integer keys only, endpoints as given', () => {
      const c = parseCatalog(JSON.stringify({ '1': { endpoints: ['https://x/1'] }, '0x2': { endpoints: ['https://y'] }, abc: { endpoints: [] }, '3': 'junk' }));
      expect([...c.keys()]).to.deep.equal([1]);
      expect(c.get(1)).to.deep.equal(['https://x/1']);
    });

    it('offline fallback: with the catalog unreachable, chain 1 comes from viem/chains, with a warning', async () => {
      const closed = `http://127.0.0.1:${await freePort()}/`;
      const warnings: string[] = [];
      const logger = createLogger('silent');
      const spyLogger = Object.assign(Object.create(logger) as typeof logger, { warn: (_o: unknown, msg?: string) => void warnings.push(String(msg)) });
      let vendor: Vendor | undefined;
      const fakeHost = { services: { get: () => ({ registerVendor: (v: Vendor) => (vendor = v) }) } } as unknown as PluginHost;
      repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: closed } }).apply(fakeHost);
      const list = await vendor!.upstreamsFor(1, {}, { id: 'public', logger: spyLogger });
      expect(list.length).to.be.greaterThan(0);
      for (const u of list) expect(u.endpoint).to.match(/^https?:\/\//);
      expect(warnings.some((w) => w.includes('viem/chains'))).to.equal(true);
      // The unknown-to-viem chain has no fallback: a bootstrap failure (retried) saying why.
      let err: unknown;
      await vendor!.upstreamsFor(987654321, {}, { id: 'public', logger: spyLogger }).catch((e: unknown) => (err = e));
      expect(String(err)).to.include(`endpoints catalog ${closed} unreachable`);
    });
  });

  it('the providers plugin refuses a provider whose vendor no plugin registers', async () => {
    let err: unknown;
    try {
      await startSvc(
        { ...NO_CACHE, metrics: { enabled: false }, projects: [{ id: 'main', providers: [{ id: 'x', vendor: 'nobody' }] }] },
        { plugins: [...presetWithout('vendor-repository', 'vendor-hyper')] },
      );
    } catch (e) {
      err = e;
    }
    expect(String(err)).to.include('vendor "nobody"');
  });
});
