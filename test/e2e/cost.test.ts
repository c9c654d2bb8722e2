/**
 * Cost headers (spec §4.5) on a real server with fake upstreams: calls,
 * billable, methods and credits for single calls and batches; failover and timeouts accrue;
 * price tables from a plugin; a provider's creditUnits with `{*: 0}`; cache hits and early
 * errors; off unless `server.costHeaders`.
 */
import { expect } from 'chai';
import type { PluginHost } from '../../core/plugin-api.ts';
import { VERSION } from '../../core/wire/version.ts';
import { COST_SERVICE, type CostService } from '../../plugins/cost/index.ts';
import { PROVIDERS_SERVICE, type ProvidersService } from '../../plugins/providers/index.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';

const PATH = '/main/evm/1';
const ADDR = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;
const balance = (id: number) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [ADDR(id), '0x10'] });
const ethCall = (id: number) => ({ jsonrpc: '2.0', id, method: 'eth_call', params: [{ to: ADDR(id), data: '0x' }, '0x10'] });

/** A pricing plugin of a team: eth_call on acme costs 26 units. */
const pricing = {
  name: 'pricing-acme',
  dependsOn: ['cost'],
  apply(host: PluginHost) {
    host.services.require<CostService>(COST_SERVICE).registerPriceTable('acme', (m) => (m === 'eth_call' ? 26 : undefined));
  },
};

describe('e2e: cost headers (spec §4.5)', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await startFaultServer({ chainId: 1 });
    b = await startFaultServer({ chainId: 1 });
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
              { id: 'a', endpoint: a.url, vendorName: 'acme', evm: { chainId: 1 } },
              { id: 'b', endpoint: b.url, evm: { chainId: 1 } },
            ],
          },
        ],
      },
      { plugins: [...presetWithout(), pricing] },
    );
  });
  after(async () => {
    await svc?.close();
    await a?.close();
    await b?.close();
  });
  afterEach(() => {
    a.reset();
    b.reset();
  });

  it('a single call: one call, billable, its method, one credit at the flat rate, the total and the version', async () => {
    const r = await svc.post(PATH, balance(1));
    expect(r.json.error).to.equal(undefined);
    expect(r.headers).to.include({
      'x-svc-calls': '1',
      'x-svc-billable': '1',
      'x-svc-methods': 'eth_getBalance',
      'x-svc-credits': 'acme:eth_getBalance=1',
      'x-svc-credits-total': '1',
      'x-svc-credits-version': VERSION,
    });
  });

  it('a batch: calls summed, methods sorted and distinct, credit segments sorted, a price table from a plugin', async () => {
    const r = await svc.post(PATH, [ethCall(2), balance(3), balance(4)]);
    expect(r.headers).to.include({
      'x-svc-calls': '3',
      'x-svc-billable': '3',
      'x-svc-methods': 'eth_call,eth_getBalance',
      'x-svc-credits': 'acme:eth_call=26;acme:eth_getBalance=2',
      'x-svc-credits-total': '28',
    });
  });

  it('failover: the failed request accrues too; a call failing everywhere is not billable but still costs', async () => {
    a.script({ kind: 'status', status: 500 });
    const r = await svc.post(PATH, balance(5));
    expect(r.json.error).to.equal(undefined);
    expect(r.headers).to.include({ 'x-svc-billable': '1', 'x-svc-credits': 'acme:eth_getBalance=1;unknown:eth_getBalance=1', 'x-svc-credits-total': '2' });
    a.setDefault({ kind: 'status', status: 500 });
    b.setDefault({ kind: 'status', status: 500 });
    const failed = await svc.post(PATH, balance(6));
    expect(failed.json.error).to.not.equal(undefined);
    expect(failed.headers['x-svc-billable']).to.equal('0');
    expect(Number(failed.headers['x-svc-credits-total'])).to.be.at.least(2);
  });

  it('a timed-out request accrues; the answer from the next upstream is billable', async () => {
    const t = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      server: { costHeaders: true },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe: [] }],
          upstreamDefaults: { failsafe: [{ matchMethod: '*', timeout: { duration: '200ms' } }] },
          upstreams: [
            { id: 'a', endpoint: a.url, vendorName: 'acme', evm: { chainId: 1 } },
            { id: 'b', endpoint: b.url, vendorName: 'beta', evm: { chainId: 1 } },
          ],
        },
      ],
    });
    try {
      a.setDefault({ kind: 'hang' });
      const r = await t.post(PATH, balance(11));
      expect(r.json.error).to.equal(undefined);
      expect(r.headers['x-svc-upstreams']).to.match(/^a=primary:timeout:/);
      expect(r.headers).to.include({ 'x-svc-billable': '1', 'x-svc-credits': 'acme:eth_getBalance=1;beta:eth_getBalance=1', 'x-svc-credits-total': '2' });
    } finally {
      await t.close();
    }
  });

  it('an execution revert is billable', async () => {
    a.script({ kind: 'rpcError', code: 3, message: 'execution reverted', data: '0x' });
    const r = await svc.post(PATH, ethCall(7));
    expect(r.json.error).to.not.equal(undefined);
    expect(r.headers).to.include({ 'x-svc-billable': '1', 'x-svc-credits': 'acme:eth_call=26' });
  });

  it('an early error that routed no call has no cost headers', async () => {
    const r = await svc.post(PATH, '{"jsonrpc":');
    expect(r.status).to.equal(400);
    expect(r.headers['x-svc-calls']).to.equal(undefined);
    expect(r.headers['x-svc-credits']).to.equal(undefined);
  });

  it('provider upstreams: settings.creditUnits by method glob, {*: 0} opting the rest out (no credits header when nothing accrued)', async () => {
    const acmeVendor = {
      name: 'vendor-acme',
      dependsOn: ['providers'],
      apply(host: PluginHost) {
        host.services.require<ProvidersService>(PROVIDERS_SERVICE).registerVendor({ name: 'acme2', upstreamsFor: async () => [{ endpoint: a.url }] });
      },
    };
    const p = await startSvc(
      {
        ...NO_CACHE,
        metrics: { enabled: false },
        server: { costHeaders: true },
        projects: [{ id: 'main', providers: [{ id: 'acme', vendor: 'acme2', settings: { creditUnits: { 'eth_get*': 5, '*': 0 } } }] }],
      },
      { plugins: [...presetWithout('vendor-repository', 'vendor-hyper'), acmeVendor] },
    );
    try {
      const r = await p.post(PATH, balance(8));
      expect(r.headers).to.include({ 'x-svc-credits': 'acme2:eth_getBalance=5', 'x-svc-credits-total': '5' });
      const free = await p.post(PATH, ethCall(9));
      expect(free.headers['x-svc-calls']).to.equal('1');
      expect(free.headers['x-svc-credits']).to.equal(undefined);
      expect(free.headers['x-svc-credits-total']).to.equal(undefined);
    } finally {
      await p.close();
    }
  });

  it('a cache hit accrues nothing; without server.costHeaders there are no cost headers', async () => {
    const cached = await startSvc({
      metrics: { enabled: false },
      server: { costHeaders: true },
      projects: [{ id: 'main', upstreams: [{ id: 'a', endpoint: a.url, vendorName: 'acme', evm: { chainId: 1 } }] }],
    });
    const off = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [{ id: 'main', upstreams: [{ id: 'a', endpoint: a.url, evm: { chainId: 1 } }] }],
    });
    try {
      const body = { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByHash', params: [`0x${'ab'.repeat(32)}`, false] };
      a.setDefault({ kind: 'ok', result: { number: '0x1', hash: `0x${'ab'.repeat(32)}` } });
      expect((await cached.post(PATH, body)).headers['x-svc-credits']).to.equal('acme:eth_getBlockByHash=1');
      let hit;
      for (let i = 0; i < 20; i++) {
        hit = await cached.post(PATH, body);
        if (hit.headers['x-svc-cache'] === 'HIT') break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(hit?.headers['x-svc-cache']).to.equal('HIT');
      expect(hit?.headers).to.include({ 'x-svc-calls': '1', 'x-svc-billable': '1' });
      expect(hit?.headers['x-svc-credits']).to.equal(undefined);
      const plain = await off.post(PATH, balance(10));
      expect(plain.headers['x-svc-calls']).to.equal(undefined);
    } finally {
      await cached.close();
      await off.close();
    }
  });
});
