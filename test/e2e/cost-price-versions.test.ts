/**
 * `X-SVC-Credits-Version` names the price table that priced the credits (spec §4.5, §9): a
 * pricing plugin registers a versioned table with the cost service; credits it priced carry its
 * version, credits priced by the flat rate (or a table without a version) carry svc's; a response
 * with both lists the distinct versions, sorted, comma-joined. A version that cannot go into a
 * header is refused at boot, naming the vendor.
 */
import { expect } from 'chai';
import type { PluginHost } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { createLogger } from '../../lib/logger.ts';
import { VERSION } from '../../core/wire/version.ts';
import { COST_SERVICE, type CostService, type PriceTable } from '../../plugins/cost/index.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';

const PATH = '/main/evm/1';
const call = (id: number, method: string) => ({ jsonrpc: '2.0', id, method, params: [] });

/** A pricing plugin registering one table per vendor. */
const pricing = (tables: Record<string, PriceTable>) => ({
  name: 'pricing-acme',
  dependsOn: ['cost'],
  apply(host: PluginHost) {
    const cost = host.services.require<CostService>(COST_SERVICE);
    for (const [vendor, table] of Object.entries(tables)) cost.registerPriceTable(vendor, table);
  },
});

describe('e2e: X-SVC-Credits-Version from the price table that priced the call', function () {
  this.timeout(20_000);
  let acme: FaultServer;
  let beta: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    acme = await startFaultServer({ chainId: 1 });
    beta = await startFaultServer({ chainId: 1 });
    svc = await startSvc(
      {
        ...NO_CACHE,
        metrics: { enabled: false },
        server: { costHeaders: true },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe: [] }],
            upstreams: [
              { id: 'acme', endpoint: acme.url, vendorName: 'acme', evm: { chainId: 1 } },
              { id: 'beta', endpoint: beta.url, vendorName: 'beta', evm: { chainId: 1 } },
            ],
          },
        ],
      },
      {
        plugins: [
          ...presetWithout(),
          pricing({
            acme: Object.assign((m: string) => (m === 'eth_gasPrice' ? 26 : undefined), { version: 'acme-2025-06' }),
            beta: (m: string) => (m === 'eth_gasPrice' ? 4 : undefined),
          }),
        ],
      },
    );
  });
  after(async () => {
    await svc?.close();
    await acme?.close();
    await beta?.close();
  });

  it('credits priced by a versioned table carry its version', async () => {
    const r = await svc.post(PATH, call(1, 'eth_gasPrice'));
    expect(r.json.error).to.equal(undefined);
    expect(r.headers).to.include({ 'x-svc-credits': 'acme:eth_gasPrice=26', 'x-svc-credits-total': '26', 'x-svc-credits-version': 'acme-2025-06' });
  });

  it("credits the table does not price (the flat rate) carry svc's version", async () => {
    const r = await svc.post(PATH, call(2, 'eth_blockNumber'));
    expect(r.headers).to.include({ 'x-svc-credits': 'acme:eth_blockNumber=1', 'x-svc-credits-version': VERSION });
  });

  it("a table without a version: svc's version", async () => {
    const r = await svc.post(`${PATH}?use-upstream=beta`, call(3, 'eth_gasPrice'));
    expect(r.headers).to.include({ 'x-svc-credits': 'beta:eth_gasPrice=4', 'x-svc-credits-version': VERSION });
  });

  it('a batch priced by both: the distinct versions, sorted, comma-joined', async () => {
    const r = await svc.post(PATH, [call(4, 'eth_gasPrice'), call(5, 'eth_blockNumber'), call(6, 'eth_gasPrice')]);
    expect(r.headers).to.include({
      'x-svc-credits': 'acme:eth_blockNumber=1;acme:eth_gasPrice=52',
      'x-svc-credits-version': [VERSION, 'acme-2025-06'].sort().join(','),
    });
  });

  it('a table version that cannot go into a header fails boot, naming the plugin and the vendor', () => {
    const bad = Object.assign(() => 1, { version: 'v1\r\nX-Injected: 1' });
    expect(() =>
      createProxy({ config: { metrics: { enabled: false } }, plugins: [...presetWithout(), pricing({ acme: bad })], logger: createLogger('silent') }),
    ).to.throw(/pricing-acme[\s\S]*vendor "acme" has an invalid version/);
  });
});
