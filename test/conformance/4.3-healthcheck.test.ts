/**
 * Conformance of the healthcheck (docs/interface.md §4.3) against real anvil nodes: the three
 * paths, the eight strategies (each both passing and failing where a fault can fail it), and the
 * three response modes. The main svc runs in `networks` mode with one project per situation;
 * two small svcs show the `simple` and `verbose` shapes.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const NET = `evm:${CHAIN}`;

describe('conformance §4.3: healthcheck', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let bad: FaultServer;
  let wrong: FaultServer;
  /** What `wrong` answers to eth_chainId: flipped to another chain once svc initialised it. */
  let wrongChain = CHAIN;
  let deadUrl: string;
  let svc: SvcHandle;
  let simple: SvcHandle;
  let verbose: SvcHandle;

  const up = (id: string, url: string) => ({ id, endpoint: url, evm: { chainId: CHAIN } });
  const project = (id: string, upstreams: object[]) => ({
    id,
    networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, alias: 'local' }],
    upstreamDefaults: { evm: { statePollerInterval: '100ms' } },
    upstreams,
  });
  const get = (h: SvcHandle, path: string) => h.send('GET', path);
  const admin = (method: string, params: unknown[]) =>
    svc.post('/admin', { jsonrpc: '2.0', id: 1, method, params }, { 'x-svc-secret-token': 'admin-secret-0123456789' });

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    bad = await startFaultServer({ chainId: CHAIN });
    // Everything but eth_chainId fails, so its state polls are errors from the start (no test
    // here sends it a healthcheck eth_chainId, which would be a scored success).
    bad.setDefault({ kind: 'status', status: 500 });
    wrong = await startFaultServer({ chainId: CHAIN, handler: (r) => (r.method === 'eth_chainId' ? `0x${wrongChain.toString(16)}` : undefined) });
    const gone = await startFaultServer({ chainId: CHAIN });
    deadUrl = gone.url;
    await gone.close();
    svc = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      healthCheck: { mode: 'networks' },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: 'admin-secret-0123456789' } }] } },
      projects: [
        project('main', [up('a', anvil.url), up('b', anvil.url)]),
        project('mixed', [up('good', anvil.url), up('bad', bad.url)]),
        // `wrong` is polled once, at start-up: the state poller's chain id re-check would take it out
        // of service before the healthcheck's own probe sees its other chain.
        project('chains', [up('good', anvil.url), { ...up('wrong', wrong.url), evm: { chainId: CHAIN, statePollerInterval: '1h' } }]),
        project('cord', [up('a', anvil.url), up('b', anvil.url)]),
        project('dead', [up('gone', deadUrl)]),
      ],
    });
    simple = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [project('main', [up('a', anvil.url)]), project('dead', [up('gone', deadUrl)])],
    });
    verbose = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      healthCheck: { mode: 'verbose' },
      projects: [project('main', [up('a', anvil.url), up('b', anvil.url)])],
    });
    await waitFor(async () => {
      const ready = await Promise.all([
        get(svc, `/main/evm/${CHAIN}/healthcheck?eval=all:activeUpstreams`),
        get(svc, `/chains/evm/${CHAIN}/healthcheck?eval=all:activeUpstreams`),
        get(svc, `/cord/evm/${CHAIN}/healthcheck?eval=all:activeUpstreams`),
        get(svc, `/mixed/evm/${CHAIN}/healthcheck?eval=any:errorRateBelow90`),
        get(simple, `/main/evm/${CHAIN}/healthcheck`),
        get(verbose, '/healthcheck'),
      ]);
      return ready.every((r) => r.status === 200);
    }, 10_000);
    await waitFor(async () => (await get(svc, `/mixed/evm/${CHAIN}/healthcheck?eval=all:errorRateBelow100`)).status === 503, 10_000);
    wrongChain = 5;
  });
  after(async () => {
    await Promise.all([svc?.close(), simple?.close(), verbose?.close()]);
    await Promise.all([anvil?.stop(), bad?.close(), wrong?.close()]);
  });

  it('§4.3 GET / /healthcheck — checks all projects and networks', async () => {
    const r = await get(svc, '/healthcheck?eval=any:errorRateBelow100');
    expect(Object.keys(r.json.details).sort()).to.deep.equal(['chains', 'cord', 'dead', 'main', 'mixed']);
    // One unhealthy project (dead has no traffic) makes the whole check unhealthy.
    expect(r.status).to.equal(503);
  });

  it('§4.3 GET / /<project>/evm/<chainId>/healthcheck — checks one network', async () => {
    const r = await get(svc, `/main/evm/${CHAIN}/healthcheck`);
    expect(r.status).to.equal(200);
    expect(Object.keys(r.json.details)).to.deep.equal(['main']);
    expect(Object.keys(r.json.details.main.networks)).to.deep.equal([NET]);
    expect((await get(svc, `/dead/evm/${CHAIN}/healthcheck`)).status).to.equal(503);
  });

  it('§4.3 GET / /<project>/evm/<chainId> — the same check as …/healthcheck', async () => {
    const a = await get(svc, `/main/evm/${CHAIN}`);
    const b = await get(svc, `/main/evm/${CHAIN}/healthcheck`);
    expect(a.status).to.equal(200);
    expect(a.json.details).to.deep.equal(b.json.details);
    expect((await get(svc, `/dead/evm/${CHAIN}`)).status).to.equal(503);
  });

  it('§4.3 any:initializedUpstreams — passes with an initialised upstream, fails when none finished initialising (the default eval)', async () => {
    expect((await get(svc, `/main/evm/${CHAIN}/healthcheck?eval=any:initializedUpstreams`)).status).to.equal(200);
    expect((await get(svc, `/dead/evm/${CHAIN}/healthcheck?eval=any:initializedUpstreams`)).status).to.equal(503);
    expect((await get(svc, `/dead/evm/${CHAIN}/healthcheck`)).status).to.equal(503);
  });

  it('§4.3 any:errorRateBelow90 — passes when one upstream is below 90% though another fails every call', async () => {
    expect((await get(svc, `/mixed/evm/${CHAIN}/healthcheck?eval=any:errorRateBelow90`)).status).to.equal(200);
  });

  it('§4.3 all:errorRateBelow90 — fails when one upstream fails every call', async () => {
    expect((await get(svc, `/mixed/evm/${CHAIN}/healthcheck?eval=all:errorRateBelow90`)).status).to.equal(503);
    expect((await get(svc, `/main/evm/${CHAIN}/healthcheck?eval=all:errorRateBelow90`)).status).to.equal(200);
  });

  it('§4.3 any:errorRateBelow100 — passes when one upstream is below 100%', async () => {
    expect((await get(svc, `/mixed/evm/${CHAIN}/healthcheck?eval=any:errorRateBelow100`)).status).to.equal(200);
  });

  it('§4.3 all:errorRateBelow100 — fails when one upstream is at 100%', async () => {
    expect((await get(svc, `/mixed/evm/${CHAIN}/healthcheck?eval=all:errorRateBelow100`)).status).to.equal(503);
    expect((await get(svc, `/main/evm/${CHAIN}/healthcheck?eval=all:errorRateBelow100`)).status).to.equal(200);
  });

  it('§4.3 any:evm:eth_chainId — passes when one upstream answers eth_chainId with the expected chain id', async () => {
    expect((await get(svc, `/chains/evm/${CHAIN}/healthcheck?eval=any:evm:eth_chainId`)).status).to.equal(200);
  });

  it('§4.3 all:evm:eth_chainId — fails when one upstream answers another chain id; passes when every one answers right', async () => {
    expect((await get(svc, `/chains/evm/${CHAIN}/healthcheck?eval=all:evm:eth_chainId`)).status).to.equal(503);
    expect((await get(svc, `/main/evm/${CHAIN}/healthcheck?eval=all:evm:eth_chainId`)).status).to.equal(200);
  });

  it('§4.3 all:activeUpstreams — fails while one upstream is cordoned, passes again once uncordoned', async () => {
    const path = `/cord/evm/${CHAIN}/healthcheck?eval=all:activeUpstreams`;
    expect((await get(svc, path)).status).to.equal(200);
    expect((await admin('svc_cordonUpstream', [{ projectId: 'cord', upstream: 'b' }])).json.result.cordoned).to.equal(true);
    expect((await get(svc, path)).status).to.equal(503);
    await admin('svc_uncordonUpstream', [{ projectId: 'cord', upstream: 'b' }]);
    expect((await get(svc, path)).status).to.equal(200);
  });

  it('§4.3 simple — healthy is HTTP 200; unhealthy is HTTP 503 {code: HealthcheckUnhealthy, message, details}', async () => {
    expect((await get(simple, `/main/evm/${CHAIN}/healthcheck`)).status).to.equal(200);
    const r = await get(simple, `/dead/evm/${CHAIN}/healthcheck`);
    expect(r.status).to.equal(503);
    expect(r.json).to.include({ code: 'HealthcheckUnhealthy' });
    expect(r.json.message).to.be.a('string');
    expect(r.json.details).to.be.an('object');
  });

  it('§4.3 networks — JSON {status, message, details: {<projectId>: {status, networks: {<networkId>: {networkId, alias, blockTimeMs, healthy, status}}}}}; non-200 when unhealthy', async () => {
    const r = await get(svc, `/main/evm/${CHAIN}/healthcheck`);
    expect(r.status).to.equal(200);
    expect(r.json).to.include.keys('status', 'message', 'details');
    expect(r.json.status).to.equal('OK');
    expect(r.json.details.main).to.include.keys('status', 'networks');
    const net = r.json.details.main.networks[NET];
    expect(net).to.include.keys('networkId', 'alias', 'blockTimeMs', 'healthy', 'status');
    expect(net).to.include({ networkId: NET, alias: 'local', healthy: true });
    expect(net.blockTimeMs === null || typeof net.blockTimeMs === 'number').to.equal(true);
    expect((await get(svc, `/dead/evm/${CHAIN}/healthcheck`)).status).not.to.equal(200);
  });

  it('§4.3 verbose — as networks plus per project message and config counts, and per network upstreams {healthy, errorRate}', async () => {
    const r = await get(verbose, '/healthcheck');
    expect(r.status).to.equal(200);
    expect(r.json.status).to.equal('OK');
    const p = r.json.details.main;
    expect(p.message).to.be.a('string');
    expect(p.config).to.deep.equal({ networks: 1, upstreams: 2, providers: 0 });
    const net = p.networks[NET];
    expect(net).to.include.keys('networkId', 'alias', 'blockTimeMs', 'healthy', 'status', 'upstreams');
    expect(Object.keys(net.upstreams).sort()).to.deep.equal(['a', 'b']);
    expect(net.upstreams.a.healthy).to.equal(true);
    expect(net.upstreams.a.errorRate).to.be.a('number');
  });
});
