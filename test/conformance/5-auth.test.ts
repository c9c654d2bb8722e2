/**
 * Conformance, spec §5 (authentication): project, admin and healthcheck auth on a real svc in
 * front of real anvil.
 */
import { expect } from 'chai';
import { NO_CACHE, startSvc, waitFor } from '../helpers/svc.ts';
import { ADMIN, ADMIN_H, rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

const SECRET = 'project-secret-0123456789abcdef';


/** Status and error name of a refused call (what the spec names), for exact assertions. */
async function refusal(r: Promise<{ status: number; json: { error?: { data?: { code?: string } } } }> | { status: number; json: { error?: { data?: { code?: string } } } }): Promise<{ status: number; code: string | undefined }> {
  const a = await r;
  return { status: a.status, code: a.json.error?.data?.code };
}

describe('conformance: §5 authentication', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture({ rateLimiters: { budgets: [{ id: 'one', rules: [{ method: '*', maxCount: 1, period: 'minute' }] }] } }, {}, (anvil) => {
      const p = (id: string, strategies: unknown[]) => ({ id, networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }], upstreams: [{ id: 'u', endpoint: anvil.url, evm: { chainId: anvil.chainId } }], auth: { strategies } });
      return [
        p('sec', [{ type: 'secret', secret: { value: SECRET, id: 'ops' } }]),
        p('cidr', [{ type: 'network', network: { allowedCIDRs: ['10.1.0.0/16'] } }]),
        p('local', [{ type: 'network', network: { allowLocalhost: true } }]),
      ];
    });
  });
  after(() => f?.close());
  const call = (project: string, query = '', headers: Record<string, string> = {}) => f.svc.post(`/${project}/evm/${f.anvil.chainId}${query}`, rpc('eth_blockNumber', []), headers);

  it('§5 #1 — one strategy schema for project auth, admin.auth and healthCheck.auth (secret, network, jwt, siwe types)', async () => {
    const s = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      healthCheck: { auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
      projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }], auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } }],
    });
    try {
      expect((await s.send('GET', '/healthcheck')).status).to.equal(401);
      // 200 once the upstream is initialised (its chain id confirmed and its first poll in).
      await waitFor(async () => (await s.send('GET', `/healthcheck?secret=${SECRET}`)).status === 200, 10_000);
      expect((await s.post('/admin', rpc('svc_taxonomy'))).status).to.equal(401);
      expect((await s.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': SECRET })).json.result.projects).to.be.an('array').that.is.not.empty;
      expect((await s.post(`/p/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []))).status).to.equal(401);
      expect((await s.post(`/p/evm/${f.anvil.chainId}?secret=${SECRET}`, rpc('eth_blockNumber', []))).json.result).to.match(/^0x/);
    } finally {
      await s.close();
    }
    let err: unknown;
    await startSvc({ logLevel: 'error', projects: [{ id: 'p', auth: { strategies: [{ type: 'password' }] } }] }).then((s2) => s2.close(), (e) => (err = e));
    expect(err, 'an unknown strategy type is a config error').to.be.an('error');
    expect(String((err as Error).message)).to.match(/strategies\[0\]\.type/);
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
expect(await refusal(keys(key))).to.deep.equal({ status: 401, code: 'ErrAuthUnauthorized' });
    await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: key, userId: 'bob', rateLimitBudget: 'one' }]);
    expect((await keys(key)).json.result).to.match(/^0x/);
    expect(await refusal(keys(key)), 'budget of one request').to.deep.equal({ status: 429, code: 'ErrAuthRateLimitRuleExceeded' });
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
    expect((await f.svc.post('/admin', rpc('svc_taxonomy'), ADMIN_H)).json.result.projects).to.be.an('array').that.is.not.empty;
    const closed = await startSvc({ ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }] });
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
