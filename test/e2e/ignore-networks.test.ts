/**
 * `providers[].ignoreNetworks` (eRPC's key) on a real server against two anvil nodes: a provider
 * serving every chain its vendor knows, except the ignored ones, whose vendor is never asked for
 * them; a second provider serves the ignored chain instead; with no other provider the first
 * request for it is told which provider ignores it.
 */
import { expect } from 'chai';
import type { Plugin, PluginHost } from '../../core/plugin-api.ts';
import { PROVIDERS_SERVICE, type Vendor } from '../../plugins/providers/index.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';

const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] });
/** A call forwarded upstream (eth_chainId may be answered locally), so X-SVC-Upstream names who served it. */
const forwarded = (id: number) => ({ jsonrpc: '2.0', id, method: 'web3_clientVersion', params: [] });

describe('e2e: providers[].ignoreNetworks', function () {
  this.timeout(20_000);
  let mainnet: AnvilHandle;
  let polygon: AnvilHandle;
  let svc: SvcHandle;
  /** Chain ids the team vendor was asked for, in order. */
  const asked: number[] = [];

  before(async () => {
    [mainnet, polygon] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 137 })]);
    const nodes = new Map([
      [1, mainnet.url],
      [137, polygon.url],
    ]);
    // A vendor serving both chains from the local nodes, as a paid provider's table would.
    const vendor: Vendor = {
      name: 'acme',
      async upstreamsFor(chainId) {
        asked.push(chainId);
        const url = nodes.get(chainId);
        return url ? [{ endpoint: url }] : [];
      },
    };
    const acme: Plugin = {
      name: 'vendor-acme',
      dependsOn: ['providers'],
      apply(host: PluginHost) {
        host.services.require(PROVIDERS_SERVICE).registerVendor(vendor);
      },
    };
    svc = await startSvc(
      {
        ...NO_CACHE,
        metrics: { enabled: false },
        projects: [
          // Everything acme serves, except Polygon.
          { id: 'main', providers: [{ id: 'acme', vendor: 'acme', ignoreNetworks: ['evm:137'] }] },
          // Polygon from a provider of its own; a glob in ignoreNetworks, as in onlyNetworks.
          {
            id: 'split',
            providers: [
              { id: 'bulk', vendor: 'acme', onlyNetworks: ['evm:*'], ignoreNetworks: ['evm:13*'] },
              { id: 'poly', vendor: 'acme', onlyNetworks: ['evm:137'] },
            ],
          },
        ],
      },
      { plugins: [...presetWithout('vendor-repository', 'vendor-hyper'), acme] },
    );
  });
  after(async () => {
    await svc?.close();
    await Promise.all([mainnet?.stop(), polygon?.stop()]);
  });

  it('a chain not ignored is served by the provider', async () => {
    const r = await svc.post('/main/evm/1', call(1));
    expect(r.status).to.equal(200);
    expect(r.json.result).to.equal('0x1');
    expect([...(svc.proxy.projects.get('main')?.upstreams.keys() ?? [])]).to.deep.equal(['acme-evm:1']);
  });

  it('an ignored chain: the vendor is never asked, and the first request is told which provider ignores it (404 ErrNetworkNotSupported)', async () => {
    const before = asked.length;
    const r = await svc.post('/main/evm/137', call(2));
    expect(r.status).to.equal(404);
    expect(r.json.error.data.code).to.equal('ErrNetworkNotSupported');
    expect(r.json.error.message).to.equal(
      'network evm:137 is not supported by project main: provider acme ignores evm:137 (ignoreNetworks); served: /main/evm/1',
    );
    expect(asked.slice(before)).to.deep.equal([]);
    expect(svc.proxy.projects.get('main')?.networks.get('evm:137')).to.equal(undefined);
  });

  it('another provider serves the chain the first one ignores; each serves its own', async () => {
    const r = await svc.post('/split/evm/137', forwarded(3));
    expect(r.status).to.equal(200);
    expect(r.json.result).to.match(/anvil/i);
    expect(r.headers['x-svc-upstream']).to.equal('poly-evm:137');
    const one = await svc.post('/split/evm/1', forwarded(4));
    expect(one.json.result).to.match(/anvil/i);
    expect(one.headers['x-svc-upstream']).to.equal('bulk-evm:1');
    expect([...(svc.proxy.projects.get('split')?.upstreams.keys() ?? [])].sort()).to.deep.equal(['bulk-evm:1', 'poly-evm:137']);
  });
});
