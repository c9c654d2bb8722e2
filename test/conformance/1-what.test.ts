/**
 * Conformance, spec §1 (what the service does): every numbered rule against a real svc in front
 * of real anvil, with the default response cache on.
 */
import { expect } from 'chai';
import { readSelectionSettings } from '../../plugins/selection/index.ts';
import { startSvc, waitFor } from '../helpers/svc.ts';
import { rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

describe('conformance: §1 what the service does', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture({ database: undefined }, {}, () => [], 120);
  });
  after(() => f?.close());

  it('§1 #1 — a JSON-RPC 2.0 proxy over HTTP with response caching: a repeated read is a cache HIT', async () => {
    const call = rpc('eth_getBlockByNumber', ['0xa', false]);
    const first = await f.svc.post(f.path, call);
    expect(first.status).to.equal(200);
    expect(first.json.jsonrpc).to.equal('2.0');
    expect(first.json.result.number).to.equal('0xa');
    // The cache write-back runs after the answer: poll until the read comes from the cache.
    let second = await f.svc.post(f.path, call);
    await waitFor(async () => (second = await f.svc.post(f.path, call)).headers['x-svc-cache'] === 'HIT', 3000);
    expect(second.json.result).to.deep.equal(first.json.result);
  });

  it('§1 #2 — projects hold networks with ids evm:<chainId> and upstreams serving them', async () => {
    const r = await f.admin('svc_taxonomy');
    const main = r.json.result.projects.find((p: { id: string }) => p.id === 'main');
    expect(main.networks).to.deep.equal([{ id: `evm:${f.anvil.chainId}`, upstreams: [{ id: 'a' }, { id: 'b' }] }]);
  });

  it('§1 #3 — the default policy drops a cordoned upstream; evalInterval defaults to 15s', async () => {
    expect(readSelectionSettings({}, 'selectionPolicy').evalIntervalMs).to.equal(15_000);
    await f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
    try {
      const r = await f.svc.post(f.path, rpc('eth_blockNumber', []));
      expect(r.headers['x-svc-upstream']).to.equal('b');
    } finally {
      await f.admin('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
    }
  });

  it('§1 #4 — POST /<project>/<architecture>/<chainId> takes a request or an array of requests', async () => {
    const one = await f.svc.post(f.path, rpc('eth_chainId', []));
    expect(one.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
    const many = await f.svc.post(f.path, [rpc('eth_chainId', [], 1), rpc('eth_chainId', [], 2)]);
    expect(many.json.map((e: { id: number }) => e.id)).to.deep.equal([1, 2]);
  });

  it('§1 #5 — POST /admin gives introspection, API-key management and manual cordoning', async () => {
    expect((await f.admin('svc_taxonomy')).json.result.projects).to.have.length(2);
    const add = await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: 'k-one-0123456789abcdef0123456789', userId: 'u1' }]);
    expect(add.json.result.success).to.equal(true);
    const c = await f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call' }]);
    expect(c.json.result.cordoned).to.equal(true);
    await f.admin('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call' }]);
  });

  it('§1 #6 — /healthcheck reports readiness and turns unhealthy while the process drains', async () => {
    const s = await startSvc({
      logLevel: 'error',
      server: { waitBeforeShutdown: '300ms', waitAfterShutdown: '0ms' },
      projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }],
    });
    try {
      // Ready once the upstream's chain id is confirmed and its first poll is in (not instant under load).
      await waitFor(async () => (await s.send('GET', '/healthcheck')).status === 200, 10_000);
      const done = s.proxy.shutdown();
      const r = await s.send('GET', '/healthcheck');
      expect(r.status).to.equal(503);
      await done;
    } finally {
      await s.close();
    }
  });

  it('§1 #7 — an inbound batch fans out, identical in-flight calls are multiplexed into one upstream call', async () => {
    const before = (await f.metric('svc_network_multiplexed_request_total', { project: 'main' })) ?? 0;
    const call = rpc('eth_call', [{ to: '0x0000000000000000000000000000000000000001', data: '0x01' }, 'latest']);
    const all = await Promise.all(Array.from({ length: 30 }, (_, i) => f.svc.post(f.path, { ...call, id: i })));
    expect(all).to.have.length(30);
    for (const [i, r] of all.entries()) expect(r.json.id).to.equal(i);
    const after = (await f.metric('svc_network_multiplexed_request_total', { project: 'main' })) ?? 0;
    expect(after).to.be.greaterThan(before);
    const batch = await f.svc.post(f.path, [rpc('eth_chainId', [], 'x'), rpc('eth_blockNumber', [], 'y')]);
    expect(batch.json.map((e: { id: string }) => e.id)).to.deep.equal(['x', 'y']);
  });

  it('§1 #8 — a directive changes routing for one request and the response carries diagnostic headers', async () => {
    const r = await f.svc.post(`${f.path}?use-upstream=b`, rpc('eth_blockNumber', []));
    expect(r.headers['x-svc-upstream']).to.equal('b');
    expect(r.headers['x-svc-upstreams']).to.match(/^b=primary:success:\d+:won$/);
    expect(r.headers['x-svc-upstream-attempts']).to.equal('1');
  });

  it('§1 #9 — a project with no providers, upstreams or endpoint flags gets the default providers (zero-config)', async () => {
    const s = await startSvc({ logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'zero' }] });
    try {
      const providers = (s.proxy.config.projects[0].settings.providers as Array<{ id: string }> | undefined) ?? [];
      expect(providers.map((p) => p.id)).to.have.members(['public', 'hyper']);
      const r = await s.post('/zero/evm/999999', rpc('eth_chainId', []));
      expect(r.status).to.equal(404);
      expect(JSON.stringify(r.json.error)).to.match(/ErrNetworkNotSupported/);
    } finally {
      await s.close();
    }
  });
});
