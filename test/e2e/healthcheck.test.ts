/**
 * The healthcheck plugin (spec §4.3, §2.4, §5.7) on a real server with fake
 * upstreams: paths, the eight strategies, the live eth_chainId probe and its 5 s reuse, the three
 * response shapes, 503 for unhealthy and unknown strategies, auth, and 503 while draining.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

function project(a: FaultServer, b: FaultServer) {
  return {
    id: 'main',
    networks: [{ architecture: 'evm', evm: { chainId: 1 }, alias: 'mainnet' }],
    upstreamDefaults: { evm: { statePollerInterval: '100ms' } },
    upstreams: [
      { id: 'a', endpoint: a.url, evm: { chainId: 1 } },
      // b's chain is flipped by a test: polled at start-up only, so the state poller's chain id
      // re-check (which takes it out of service) leaves the healthcheck's own probe to see it.
      { id: 'b', endpoint: b.url, evm: { chainId: 1, statePollerInterval: '1h' } },
    ],
  };
}

describe('e2e: healthcheck (spec §4.3)', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  /** What b answers to eth_chainId: flipped to a wrong chain by a test. */
  let bChain = 1;
  let svc: SvcHandle;

  before(async () => {
    a = await startFaultServer({ chainId: 1 });
    b = await startFaultServer({ chainId: 1, handler: (r) => (r.method === 'eth_chainId' ? `0x${bChain.toString(16)}` : undefined) });
    svc = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, healthCheck: { mode: 'networks' }, projects: [project(a, b)] });
    // Initialised = chain-id probe and first state poll both succeeded.
    await waitFor(async () => (await svc.send('GET', '/healthcheck?eval=all:activeUpstreams')).status === 200);
  });
  after(async () => {
    await svc?.close();
    await a?.close();
    await b?.close();
  });

  it('GET /healthcheck, /<project>/evm/<chainId>[/healthcheck] and /<project>/<alias> answer 200 with the networks shape', async () => {
    for (const path of ['/healthcheck', '/', '/main', '/main/evm/1', '/main/evm/1/healthcheck', '/main/mainnet']) {
      const r = await svc.send('GET', path);
      expect(r.status, path).to.equal(200);
      expect(r.json.status, path).to.equal('OK');
      const net = r.json.details.main.networks['evm:1'];
      expect(net, path).to.include({ networkId: 'evm:1', alias: 'mainnet', healthy: true, status: 'OK' });
      expect(net, path).to.have.property('blockTimeMs');
    }
  });

  it('any non-POST, non-OPTIONS method on a proxy path is a healthcheck; OPTIONS stays a preflight', async () => {
    for (const m of ['PUT', 'DELETE', 'PATCH']) expect((await svc.send(m, '/main/evm/1')).json.status, m).to.equal('OK');
    expect((await svc.send('OPTIONS', '/main/evm/1')).status).to.equal(204);
  });

  it('unknown project or chain: 404 with the error name', async () => {
    const p = await svc.send('GET', '/nope/evm/1');
    expect(p.status).to.equal(404);
    expect(p.json.code).to.equal('ErrProjectNotFound');
    const n = await svc.send('GET', '/main/evm/999');
    expect(n.status).to.equal(404);
    expect(n.json.code).to.equal('ErrNetworkNotSupported');
  });

  it('§4.3 ¶3 — every strategy of §4.3 passes on two healthy upstreams; an unknown one is 503 "unknown evaluation strategy: <name>"', async () => {
    for (const s of [
      'any:initializedUpstreams',
      'any:errorRateBelow90',
      'all:errorRateBelow90',
      'any:errorRateBelow100',
      'all:errorRateBelow100',
      'any:evm:eth_chainId',
      'all:evm:eth_chainId',
      'all:activeUpstreams',
    ]) {
      const r = await svc.send('GET', `/healthcheck?eval=${s}`);
      expect(r.status, s).to.equal(200);
    }
    const bad = await svc.send('GET', '/healthcheck?eval=most:vibes');
    expect(bad.status).to.equal(503);
    expect(bad.json.message).to.equal('unknown evaluation strategy: most:vibes');
  });

  it('§4.3 ¶5 — all:evm:eth_chainId fails when one upstream answers a wrong chain id (any: still passes); answers are reused for 5 s', async function () {
    // The earlier test cached both answers; wait for them to expire so b is asked again.
    this.timeout(20_000);
    bChain = 5;
    await new Promise((r) => setTimeout(r, 5100));
    const before = b.calls.filter((c) => c.method === 'eth_chainId').length;
    const all = await svc.send('GET', '/main/evm/1/healthcheck?eval=all:evm:eth_chainId');
    expect(all.status).to.equal(503);
    expect(all.json).to.include({ status: 'ERROR', code: 'HealthcheckUnhealthy' });
    expect(all.json.message).to.equal('1 / 2 upstreams passed (1 failed)');
    expect(all.json.details.main.networks['evm:1'].healthy).to.equal(false);
    const any = await svc.send('GET', '/main/evm/1/healthcheck?eval=any:evm:eth_chainId');
    expect(any.status).to.equal(200);
    await svc.send('GET', '/healthcheck?eval=all:evm:eth_chainId');
    // Three healthchecks within 5 s: b was asked once.
    expect(b.calls.filter((c) => c.method === 'eth_chainId').length - before).to.equal(1);
    bChain = 1;
  });

  it('§4.3 ¶4 — error-rate strategies read the health scores: an upstream failing every call fails all:errorRateBelow90, any: passes', async () => {
    const bad = await startFaultServer({ chainId: 1 });
    const good = await startFaultServer({ chainId: 1 });
    // Everything but the chain-id probe fails on `bad`, so its state polls are errors from the start.
    bad.setDefault({ kind: 'status', status: 500 });
    const s = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, projects: [project(bad, good)] });
    try {
      await waitFor(async () => (await s.send('GET', '/healthcheck?eval=any:errorRateBelow90')).status === 200);
      const all = await s.send('GET', '/healthcheck?eval=all:errorRateBelow90');
      expect(all.status).to.equal(503);
      expect(all.json.message).to.equal('main: 1 / 2 upstreams with traffic have an error rate below 90%');
      expect((await s.send('GET', '/healthcheck?eval=all:errorRateBelow100')).status).to.equal(503);
    } finally {
      await s.close();
      await bad.close();
      await good.close();
    }
  });

  it('from SIGTERM (drain) the healthcheck answers 503 "shutting down" in every mode while calls are still served', async () => {
    const c = await startFaultServer({ chainId: 1 });
    const d = await startFaultServer({ chainId: 1 });
    const s = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      server: { waitBeforeShutdown: '300ms', waitAfterShutdown: '1s' },
      projects: [project(c, d)],
    });
    try {
      await waitFor(async () => (await s.send('GET', '/healthcheck')).status === 200);
      const done = s.proxy.shutdown();
      const r = await s.send('GET', '/healthcheck');
      expect(r.status).to.equal(503);
      expect(r.json).to.include({ code: 'HealthcheckUnhealthy', message: 'shutting down' });
      const call = await s.post('/main/evm/1', { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
      expect(call.json.result).to.equal('0x1');
      await done;
    } finally {
      await s.close();
      await c.close();
      await d.close();
    }
  });
});

describe('e2e: healthcheck modes and auth (spec §2.4, §5.7)', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let verbose: SvcHandle;
  let guarded: SvcHandle;

  before(async () => {
    a = await startFaultServer({ chainId: 1 });
    b = await startFaultServer({ chainId: 1 });
    verbose = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, healthCheck: { mode: 'verbose' }, projects: [project(a, b)] });
    guarded = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      healthCheck: {
        defaultEval: 'any:initializedUpstreams',
        auth: {
          strategies: [
            { type: 'secret', secret: { value: 's3cret' } },
            { type: 'network', network: { allowedCIDRs: ['10.0.0.0/8'] } },
          ],
        },
      },
      projects: [project(a, b)],
    });
    await waitFor(async () => (await verbose.send('GET', '/healthcheck')).status === 200);
  });
  after(async () => {
    await verbose?.close();
    await guarded?.close();
    await a?.close();
    await b?.close();
  });

  it('verbose adds per-project message and config counts, and per-network upstream health', async () => {
    const r = await verbose.send('GET', '/healthcheck');
    expect(r.status).to.equal(200);
    const p = r.json.details.main;
    expect(p.status).to.equal('OK');
    expect(p.message).to.be.a('string');
    expect(p.config).to.deep.equal({ networks: 1, upstreams: 2, providers: 0 });
    const ups = p.networks['evm:1'].upstreams;
    expect(Object.keys(ups).sort()).to.deep.equal(['a', 'b']);
    expect(ups.a).to.include({ healthy: true });
    expect(ups.a.errorRate).to.be.a('number');
  });

  it('§4.3 ¶2 — simple mode (the default) answers 200 {status: OK}; with auth, no secret is 401, the secret by query or X-SVC-Secret-Token passes', async () => {
    const none = await guarded.send('GET', '/healthcheck');
    expect(none.status).to.equal(401);
    const wrong = await guarded.send('GET', '/healthcheck?secret=nope');
    expect(wrong.status).to.equal(401);
    await waitFor(async () => (await guarded.send('GET', '/healthcheck?secret=s3cret')).status === 200);
    const byQuery = await guarded.send('GET', '/healthcheck?secret=s3cret');
    expect(byQuery.json).to.deep.include({ status: 'OK' });
    expect(byQuery.json.details).to.equal(undefined);
    const byHeader = await guarded.send('GET', '/main/evm/1', undefined, { 'x-svc-secret-token': 's3cret' });
    expect(byHeader.status).to.equal(200);
  });

  it('a zero-config project with no network initialised yet is healthy: "no networks initialized yet"', async () => {
    // The mocha root hooks point zero-config at an empty local catalog.
    const s = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, projects: [{ id: 'main' }] });
    try {
      const r = await s.send('GET', '/healthcheck');
      expect(r.status).to.equal(200);
      expect(r.json.message).to.equal('main: no networks initialized yet');
    } finally {
      await s.close();
    }
  });

  it('simple mode unhealthy is 503 {code: HealthcheckUnhealthy, message, details}: an upstream that never answers is not initialised', async () => {
    const dead = await startFaultServer({ chainId: 1 });
    const url = dead.url;
    await dead.close();
    const s = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [{ id: 'main', upstreams: [{ id: 'gone', endpoint: url, evm: { chainId: 1 } }] }],
    });
    try {
      const r = await s.send('GET', '/healthcheck');
      expect(r.status).to.equal(503);
      expect(r.json).to.include({ status: 'ERROR', code: 'HealthcheckUnhealthy' });
      expect(r.json.message).to.equal('main: no upstream initialized yet (0 / 1)');
      expect(r.json.details.main).to.deep.equal({ status: 'ERROR', message: 'no upstream initialized yet (0 / 1)' });
    } finally {
      await s.close();
    }
  });
});
