/**
 * Conformance, spec §5 (authentication): project, admin and healthcheck auth on a real svc in
 * front of real anvil.
 */
import { expect } from 'chai';
import { NO_CACHE, startSvc, waitFor } from '../helpers/svc.ts';
import { ADMIN, ADMIN_H, configProblems, expectBudgetExceeded, expectUnauthorized, rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

const SECRET = 'project-secret-0123456789abcdef';

describe('conformance: §5 authentication', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture({ rateLimiters: { budgets: [{ id: 'one', rules: [{ method: '*', maxCount: 1, period: 'minute' }] }] } }, {}, (anvil) => {
      const p = (id: string, strategies: unknown[]) => ({
        id,
        networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
        upstreams: [{ id: 'u', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
        auth: { strategies },
      });
      return [
        p('sec', [{ type: 'secret', secret: { value: SECRET, id: 'ops' } }]),
        p('cidr', [{ type: 'network', network: { allowedCIDRs: ['10.1.0.0/16'] } }]),
        p('local', [{ type: 'network', network: { allowLocalhost: true } }]),
      ];
    });
  });
  after(() => f?.close());
  const call = (project: string, query = '', headers: Record<string, string> = {}) =>
    f.svc.post(`/${project}/evm/${f.anvil.chainId}${query}`, rpc('eth_blockNumber', []), headers);

  it('§5 #1 — one strategy schema for project auth, admin.auth and healthCheck.auth (secret, network, jwt, siwe types)', async () => {
    const s = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      healthCheck: { auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
      projects: [
        {
          id: 'p',
          upstreams: [{ id: 'u', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }],
          auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] },
        },
      ],
    });
    try {
      expect((await s.send('GET', '/healthcheck')).status).to.equal(401);
      // 200 once the upstream is initialised (its chain id confirmed and its first poll in).
      await waitFor(async () => (await s.send('GET', `/healthcheck?secret=${SECRET}`)).status === 200, 10_000);
      expect((await s.post('/admin', rpc('svc_taxonomy'))).status).to.equal(401);
      expect((await s.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': SECRET })).json.result).to.deep.equal({
        projects: [{ id: 'p', networks: [{ id: `evm:${f.anvil.chainId}`, upstreams: [{ id: 'u' }] }] }],
      });
      expect((await s.post(`/p/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []))).status).to.equal(401);
      expect((await s.post(`/p/evm/${f.anvil.chainId}?secret=${SECRET}`, rpc('eth_blockNumber', []))).json.result).to.match(/^0x/);
    } finally {
      await s.close();
    }
    // An unknown strategy type is a config error on that strategy's type (no other problem).
    const problems = await configProblems({ logLevel: 'error', projects: [{ id: 'p', auth: { strategies: [{ type: 'password' }] } }] });
    expect([...new Set(problems.map((p) => p.path.split('.').slice(0, 3).join('.')))]).to.deep.equal(['projects[0].auth.strategies[0]']);
    // One line naming every valid type, not one line per strategy type.
    const onType = problems.filter((p) => p.path === 'projects[0].auth.strategies[0].type').map((p) => p.message);
    expect(onType).to.have.length(1);
    for (const t of ['secret', 'network', 'jwt', 'siwe']) expect(onType[0]).to.include(`"${t}"`);
  });

  it('§5 #1 — the pay-per-request strategy type (x402): without credentials, HTTP 402 with the payment requirements instead of an answer; a secret holder of the same block is served; a door refuses it', async () => {
    const payTo = '0x1234567890AbcdEF1234567890aBcdef12345678';
    const x402 = {
      accepts: [{ network: `eip155:${f.anvil.chainId}`, asset: payTo, payTo, eip712: { name: 'USD Coin', version: '2' } }],
      price: { perCall: '25' },
      facilitator: { url: 'http://127.0.0.1:9' },
    };
    const s = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      projects: [
        {
          id: 'paid',
          upstreams: [{ id: 'u', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }],
          auth: {
            strategies: [
              { type: 'secret', secret: { value: SECRET } },
              { type: 'x402', x402 },
            ],
          },
        },
      ],
    });
    try {
      const path = `/paid/evm/${f.anvil.chainId}`;
      const unpaid = await s.post(path, rpc('eth_blockNumber', []));
      expect(unpaid.status).to.equal(402);
      const required = JSON.parse(Buffer.from(unpaid.headers['payment-required']!, 'base64').toString('utf8'));
      expect(required.x402Version).to.equal(2);
      expect(required.accepts[0]).to.include({ scheme: 'exact', network: `eip155:${f.anvil.chainId}`, amount: '25', payTo });
      expect(unpaid.json).to.include({ x402Version: 1 });
      expect(unpaid.json.result).to.equal(undefined);
      expect((await s.post(`${path}?secret=${SECRET}`, rpc('eth_blockNumber', []))).json.result).to.match(/^0x/);
    } finally {
      await s.close();
    }
    const problems = await configProblems({ logLevel: 'error', admin: { auth: { strategies: [{ type: 'x402', x402 }] } }, projects: [] });
    expect(problems.map((p) => p.path)).to.deep.equal(['admin.auth.strategies[0].x402']);
    // It accepts every caller the strategies before it did not: listed before another, that one would never run.
    const first = await configProblems({
      logLevel: 'error',
      projects: [
        {
          id: 'p',
          auth: {
            strategies: [
              { type: 'x402', x402 },
              { type: 'secret', secret: { value: SECRET } },
            ],
          },
        },
      ],
    });
    expect(first.map((p) => p.path)).to.deep.equal(['projects[0].auth.strategies[0]']);
    expect(first[0]!.message).to.match(/list the x402 strategy last/);
  });

  it('§5 #2 — secret: sent as query secret=<SECRET> or header X-SVC-Secret-Token', async () => {
    expect((await call('sec')).status).to.equal(401);
    expect((await call('sec', `?secret=${SECRET}`)).json.result).to.match(/^0x/);
    expect((await call('sec', '', { 'x-svc-secret-token': SECRET })).json.result).to.match(/^0x/);
    expect((await call('sec', '?secret=wrong-secret-0123456789')).status).to.equal(401);
  });

  it('§5 #3 — network: allowLocalhost admits a loopback client; allowedCIDRs alone do not list loopback', async () => {
    expect((await call('local')).json.result).to.match(/^0x/);
    expect((await call('cidr')).status).to.equal(401);
  });

  it('§5 #4 — API-key strategies use a database connector; keys are managed by admin methods; rateLimitBudget counts the key requests', async () => {
    const key = 'k_auth_0123456789abcdef0123456789abcdef';
    const keys = (k: string) => f.svc.post(`/keys/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []), { authorization: `Bearer ${k}` });
    expectUnauthorized(await keys(key), 'a key not added yet');
    await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: key, userId: 'bob', rateLimitBudget: 'one' }]);
    expect((await keys(key)).json.result).to.match(/^0x/);
    expectBudgetExceeded(await keys(key), 'budget of one request');
  });

  it('§5 #5 — credential headers are parsed before directives: a secret header and a directive header work together', async () => {
    const r = await f.svc.post(`/sec/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []), { 'x-svc-secret-token': SECRET, 'x-svc-use-upstream': 'u' });
    expect(r.json.result).to.match(/^0x/);
    expect(r.headers['x-svc-upstream']).to.equal('u');
    const noCred = await f.svc.post(`/sec/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []), { 'x-svc-use-upstream': 'u' });
    expect(noCred.status).to.equal(401);
  });

  it('§5 #6 — the admin endpoint has its own auth, independent of project auth; closed with no strategy', async () => {
    expect((await f.svc.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': SECRET })).status).to.equal(401);
    expect((await call('sec', '', { 'x-svc-secret-token': ADMIN })).status).to.equal(401);
    expect((await f.svc.post('/admin', rpc('svc_taxonomy'), ADMIN_H)).json.result.projects.map((p: { id: string }) => p.id)).to.deep.equal([
      'main',
      'keys',
      'sec',
      'cidr',
      'local',
    ]);
    const closed = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }],
    });
    try {
      expect((await closed.post('/admin', rpc('svc_taxonomy'), ADMIN_H)).status).to.equal(401);
    } finally {
      await closed.close();
    }
  });

  it('§5 #7 — the healthcheck is open when healthCheck.auth is omitted', async () => {
    const r = await f.svc.send('GET', '/healthcheck');
    expect(r.status).to.equal(200);
  });
});
