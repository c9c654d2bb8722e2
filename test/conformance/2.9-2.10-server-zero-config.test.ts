/**
 * Conformance, spec §2.9 (server settings) and §2.10 (zero-config providers): small svc
 * instances in front of one real anvil node, and a loopback endpoints catalog listing a
 * scripted upstream for the `public` provider.
 */
import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import { repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { HYPER_ALLOW_METHODS } from '../../plugins/vendor-hyper/index.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { rpc } from './fixture-core.ts';

describe('conformance: §2.9 server settings, §2.10 zero-config providers', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  const started: SvcHandle[] = [];
  const svcWith = async (server: Record<string, unknown>, plugins?: Parameters<typeof startSvc>[1]) => {
    const s = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: false },
        server,
        projects: [{ id: 'p', upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: anvil.chainId } }] }],
      },
      plugins,
    );
    started.push(s);
    return s;
  };
  const call = (s: SvcHandle) => s.post(`/p/evm/${anvil.chainId}`, rpc('eth_blockNumber', []));
  before(async () => {
    anvil = await startAnvil();
  });
  after(async () => {
    for (const s of started) await s.close();
    await anvil?.stop();
  });

  it('§2.9 server.executionHeaders — all (default): counters and X-SVC-Upstreams; summary: counters only; off: version and commit only', async () => {
    const all = await call(await svcWith({}));
    expect(all.headers['x-svc-upstream-attempts']).to.equal('1');
    expect(all.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won$/);
    const summary = await call(await svcWith({ executionHeaders: 'summary' }));
    expect(summary.headers['x-svc-upstream-attempts']).to.equal('1');
    expect(summary.headers['x-svc-upstreams']).to.equal(undefined);
    const off = await call(await svcWith({ executionHeaders: 'off' }));
    const svcHeaders = Object.keys(off.headers)
      .filter((h) => h.startsWith('x-svc-'))
      .sort();
    expect(svcHeaders).to.deep.equal(['x-svc-commit', 'x-svc-version']);
  });

  it('§2.9 server.costHeaders — opt-in: cost headers only when true', async () => {
    const on = await call(await svcWith({ costHeaders: true }));
    expect(on.headers['x-svc-calls']).to.equal('1');
    expect(on.headers['x-svc-methods']).to.equal('eth_blockNumber');
    const off = await call(await svcWith({}));
    expect(off.headers['x-svc-calls']).to.equal(undefined);
  });

  it('§2.9 server.responseHeaders — static headers on every response, environment-expanded at start-up', async () => {
    process.env.SVC_CONFORMANCE_REGION = 'eu-west';
    const s = await svcWith({ responseHeaders: { 'X-Region': '${SVC_CONFORMANCE_REGION}', 'X-Static': 'yes' } });
    delete process.env.SVC_CONFORMANCE_REGION;
    for (const r of [await call(s), await s.post('/p/evm/999', rpc('eth_chainId', [])), await s.post(`/p/evm/${anvil.chainId}`, '{bad')]) {
      expect(r.headers['x-region']).to.equal('eu-west');
      expect(r.headers['x-static']).to.equal('yes');
    }
  });

  it('§2.9 server.waitBeforeShutdown / server.waitAfterShutdown — the drain windows of SIGTERM', async () => {
    const s = await svcWith({ waitBeforeShutdown: '200ms', waitAfterShutdown: '100ms' });
    const t0 = performance.now();
    const done = s.proxy.shutdown();
    expect(s.proxy.lifecycle).to.equal('draining');
    await done;
    expect(s.proxy.lifecycle).to.equal('stopped');
    expect(performance.now() - t0).to.be.at.least(190);
  });

  describe('zero-config', () => {
    let up: FaultServer;
    let catalog: Server;
    let catalogUrl: string;
    let zero: SvcHandle;
    before(async () => {
      up = await startFaultServer({ chainId: 1 });
      catalog = createServer((_q, res) =>
        res.end(JSON.stringify({ '1': { endpoints: [up.url, 'wss://ws.example/rpc'] }, mainnet: { endpoints: ['http://skipped.example'] } })),
      );
      await new Promise<void>((r) => catalog.listen(0, '127.0.0.1', () => r()));
      catalogUrl = `http://127.0.0.1:${(catalog.address() as { port: number }).port}/`;
      zero = await startSvc(
        { ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'z', providers: [] }] },
        { plugins: [...presetWithout('vendor-repository'), repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: catalogUrl } })] },
      );
      started.push(zero);
    });
    after(async () => {
      catalog?.close();
      await up?.close();
    });

    it('§2.10 public — the repository catalog: http(s) entries become upstreams with autoIgnoreUnsupportedMethods and redacted ids; ws skipped; an empty providers list still injects', async () => {
      const ids = (zero.proxy.config.projects[0]?.settings.providers as Array<{ id: string; vendor: string }>).map((p) => `${p.id}:${p.vendor}`);
      expect(ids).to.deep.equal(['public:repository', 'hyper:hyper']);
      const r = await zero.post('/z/evm/1', rpc('eth_chainId', []));
      expect(r.json.result).to.equal('0x1');
      const ups = [...(zero.proxy.projects.get('z')?.upstreams.values() ?? [])].filter((u) => u.id.startsWith('public'));
      expect(ups).to.have.length(1);
      expect(ups[0]!.id).to.match(/^public-evm:1-http:\/\/127\.0\.0\.1:\d+#redacted=[0-9a-f]+$/);
      expect(ups[0]!.config.settings.autoIgnoreUnsupportedMethods).to.equal(true);
      const withUpstream = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [{ id: 'x', upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: anvil.chainId } }] }],
      });
      started.push(withUpstream);
      expect(withUpstream.proxy.config.projects[0]?.settings.providers ?? []).to.deep.equal([]);
    });

    it('§2.10 hyper (neutral name) — injected with ignoreMethods * and the 14-method read-only allow-list', () => {
      expect([...HYPER_ALLOW_METHODS].sort()).to.deep.equal(
        [
          'eth_chainId',
          'eth_blockNumber',
          'eth_getBlockByNumber',
          'eth_getBlockByHash',
          'eth_getTransactionByHash',
          'eth_getTransactionByBlockHashAndIndex',
          'eth_getTransactionByBlockNumberAndIndex',
          'eth_getTransactionReceipt',
          'eth_getBlockReceipts',
          'eth_getLogs',
          'eth_getFilterLogs',
          'eth_getFilterChanges',
          'eth_uninstallFilter',
          'eth_newFilter',
        ].sort(),
      );
    });
  });
});
