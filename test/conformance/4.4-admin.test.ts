/**
 * Conformance of the admin endpoint (docs/interface.md §4.4) on a real server in front of anvil:
 * every method of the table with its params and result shape, and the numbered rules (one key per
 * add, pagination, merge updates, delete, the database connector and object params, no runtime
 * config change). API keys live in the memory connector.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';

const CHAIN = 31337;
const ADMIN = 'admin-secret-0123456789abcdef';
const PROJECT_SECRET = 'project-secret-0123456789abcdef';
const URL_KEY = 'urlkey0123456789abcdef0123456789';
const MARK = /^#redacted=[0-9a-f]+$/;
const scope = { projectId: 'main', connectorId: 'keys' };

describe('conformance §4.4: admin endpoint', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const admin = (method: string, params?: unknown): Promise<SvcResponse> =>
    svc.post('/admin', { jsonrpc: '2.0', id: 1, method, ...(params === undefined ? {} : { params }) }, { 'x-svc-secret-token': ADMIN });
  const result = async (method: string, params?: unknown) => {
    const r = await admin(method, params);
    expect(r.json.error, `${method}: ${JSON.stringify(r.json.error)}`).to.equal(undefined);
    return r.json.result;
  };
  const key = (n: number | string) => `k_conf_${String(n).padStart(3, '0')}_0123456789abcdef0123`;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      rateLimiters: { budgets: [{ id: 'gold', rules: [{ method: '*', maxCount: 1000, period: 'minute' }] }] },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [
            { id: 'a', endpoint: anvil.url, evm: { chainId: CHAIN } },
            { id: 'b', endpoint: anvil.url, evm: { chainId: CHAIN } },
          ],
          auth: { strategies: [{ type: 'database', connector: { id: 'keys', driver: 'memory' } }] },
        },
        {
          id: 'plain',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [{ id: 'keyed', endpoint: `http://127.0.0.1:1/v2/${URL_KEY}`, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
          auth: { strategies: [{ type: 'secret', secret: { value: PROJECT_SECRET } }] },
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('§4.4 svc_taxonomy — no params; {projects: [{id, networks: [{id, upstreams: [{id}]}]}]}', async () => {
    const r = await result('svc_taxonomy');
    expect(r.projects.map((p: { id: string }) => p.id)).to.deep.equal(['main', 'plain']);
    expect(r.projects[0]).to.deep.equal({ id: 'main', networks: [{ id: `evm:${CHAIN}`, upstreams: [{ id: 'a' }, { id: 'b' }] }] });
  });

  it('§4.4 svc_config — the resolved config, with secret.value and endpoint URLs holding keys replaced by #redacted=<short_hash>', async () => {
    const r = await result('svc_config');
    const text = JSON.stringify(r);
    expect(text).not.to.include(ADMIN);
    expect(text).not.to.include(PROJECT_SECRET);
    expect(text).not.to.include(URL_KEY);
    // Plugin-owned sections (auth, admin) sit under `settings`.
    expect(r.settings.admin.auth.strategies[0].secret.value).to.match(MARK);
    const plain = r.projects.find((p: { id: string }) => p.id === 'plain');
    expect(plain.settings.auth.strategies[0].secret.value).to.match(MARK);
    expect(plain.upstreams[0].endpoint).to.include('#redacted=');
    expect(r.projects.map((p: { id: string }) => p.id)).to.deep.equal(['main', 'plain']);
  });

  it('§4.4 svc_project — [<projectId>]: the redacted project config plus live state (scores, error rates, lag, primary, recent decisions)', async () => {
    await svc.post(`/main/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
    const r = await result('svc_project', ['main']);
    expect(r.config.id).to.equal('main');
    const net = r.networks[0];
    expect(net.id).to.equal(`evm:${CHAIN}`);
    expect(net.primaryUpstream).to.be.oneOf(['a', 'b']);
    expect(net.selection).to.have.property('scores');
    expect(net.recentDecisions).to.be.an('array');
    expect(net.upstreams.map((u: { id: string }) => u.id)).to.have.members(['a', 'b']);
    for (const u of net.upstreams) expect(u).to.include.keys('id', 'errorRate', 'blockHeadLag');
    const plain = await result('svc_project', ['plain']);
    expect(JSON.stringify(plain)).not.to.include(URL_KEY);
  });

  it('§4.4 svc_addApiKey — [{projectId, connectorId, apiKey, userId, rateLimitBudget?, enabled?}] returns {success: true, apiKey, userId}', async () => {
    expect(await result('svc_addApiKey', [{ ...scope, apiKey: key('add'), userId: 'alice' }])).to.deep.equal({
      success: true,
      apiKey: key('add'),
      userId: 'alice',
    });
    const ok = await svc.post(`/main/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, { authorization: `Bearer ${key('add')}` });
    expect(ok.json.result).to.equal('0x7a69');
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('add') }]);
  });

  it('§4.4 svc_listApiKeys — [{projectId, connectorId, limit?, paginationToken?}] returns {apiKeys, nextToken, hasMore, totalReturned}', async () => {
    for (const i of [1, 2, 3]) await result('svc_addApiKey', [{ ...scope, apiKey: key(`l${i}`), userId: `u${i}` }]);
    const page = await result('svc_listApiKeys', [{ ...scope, limit: 2 }]);
    expect(page).to.have.keys('apiKeys', 'nextToken', 'hasMore', 'totalReturned');
    expect(page.totalReturned).to.equal(2);
    expect(page.hasMore).to.equal(true);
    expect(page.nextToken).to.be.a('string').and.not.equal('');
    expect(page.apiKeys[0]).to.include.keys('key', 'userId', 'enabled', 'createdAt', 'updatedAt');
    for (const i of [1, 2, 3]) await result('svc_deleteApiKey', [{ ...scope, apiKey: key(`l${i}`) }]);
  });

  it('§4.4 svc_updateApiKey — [{projectId, connectorId, apiKey, updates}] returns {success: true, apiKey, updated} echoing the sent map', async () => {
    await result('svc_addApiKey', [{ ...scope, apiKey: key('upd'), userId: 'bob' }]);
    expect(await result('svc_updateApiKey', [{ ...scope, apiKey: key('upd'), updates: { enabled: false } }])).to.deep.equal({
      success: true,
      apiKey: key('upd'),
      updated: { enabled: false },
    });
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('upd') }]);
  });

  it('§4.4 svc_deleteApiKey — [{projectId, connectorId, apiKey}] returns {success: true, apiKey, userId}', async () => {
    await result('svc_addApiKey', [{ ...scope, apiKey: key('del'), userId: 'carol' }]);
    expect(await result('svc_deleteApiKey', [{ ...scope, apiKey: key('del') }])).to.deep.equal({ success: true, apiKey: key('del'), userId: 'carol' });
  });

  it('§4.4 svc_cordonUpstream — [{projectId, upstream, method?, reason?}] returns {projectId, upstream, method, cordoned: true, reason}; projectId and upstream are required', async () => {
    const r = await result('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_getBalance', reason: 'maintenance' }]);
    expect(r).to.deep.equal({ projectId: 'main', upstream: 'b', method: 'eth_getBalance', cordoned: true, reason: 'maintenance' });
    const dflt = await result('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b' }]);
    expect(dflt).to.include({ projectId: 'main', upstream: 'b', method: '*', cordoned: true });
    expect(dflt.reason).to.equal('admin: manual cordon');
    // §7 InvalidRequest: requires params, naming the missing field.
    expect((await admin('svc_cordonUpstream', [{ projectId: 'main' }])).json.error).to.deep.equal({
      code: -32600,
      message: 'InvalidRequest: requires params: [{projectId, upstream, method?, reason?}] (upstream must be a non-empty string)',
    });
    expect((await admin('svc_cordonUpstream', [{ upstream: 'b' }])).json.error).to.deep.equal({
      code: -32600,
      message: 'InvalidRequest: requires params: [{projectId, upstream, method?, reason?}] (projectId must be a non-empty string)',
    });
    await result('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b' }]);
    await result('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_getBalance' }]);
  });

  it('§4.4 svc_uncordonUpstream — the same shape; returns {projectId, upstream, method, cordoned: false, reason}', async () => {
    await result('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', reason: 'r' }]);
    const r = await result('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b', reason: 'back' }]);
    expect(r).to.include({ projectId: 'main', upstream: 'b', method: '*', cordoned: false });
    expect(r).to.have.keys('projectId', 'upstream', 'method', 'cordoned', 'reason');
  });

  it('§4.4 svc_listCordoned — [{projectId}] returns {projectId, cordoned: [{upstream, reason}]} listing * cordons only', async () => {
    await result('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', reason: 'all methods' }]);
    await result('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call', reason: 'one method' }]);
    expect(await result('svc_listCordoned', [{ projectId: 'main' }])).to.deep.equal({
      projectId: 'main',
      cordoned: [{ upstream: 'a', reason: 'all methods' }],
    });
    await result('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
    await result('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call' }]);
    expect(await result('svc_listCordoned', [{ projectId: 'main' }])).to.deep.equal({ projectId: 'main', cordoned: [] });
  });

  it('§4.4 #1 — svc_addApiKey takes one key per call (no batch insert); enabled defaults to true', async () => {
    const two = await admin('svc_addApiKey', [
      { ...scope, apiKey: key('b1'), userId: 'x' },
      { ...scope, apiKey: key('b2'), userId: 'y' },
    ]);
    expect(two.json.error.message).to.match(/^InvalidRequest: requires params/);
    const listed = await result('svc_listApiKeys', [{ ...scope }]);
    expect(listed.apiKeys.map((k: { key: string }) => k.key)).not.to.include.members([key('b1')]);
    await result('svc_addApiKey', [{ ...scope, apiKey: key('def'), userId: 'd' }]);
    const rec = (await result('svc_listApiKeys', [{ ...scope }])).apiKeys.find((k: { key: string }) => k.key === key('def'));
    expect(rec.enabled).to.equal(true);
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('def') }]);
  });

  it('§4.4 #2 — svc_listApiKeys: limit defaults to 50; an empty or blank token is the first page, then the previous nextToken until hasMore is false', async () => {
    const keys = Array.from({ length: 60 }, (_, i) => key(i));
    for (const k of keys) await result('svc_addApiKey', [{ ...scope, apiKey: k, userId: 'pager' }]);
    const first = await result('svc_listApiKeys', [{ ...scope, paginationToken: '' }]);
    const blank = await result('svc_listApiKeys', [{ ...scope, paginationToken: '   ' }]);
    expect(first.totalReturned).to.equal(50);
    expect(blank.apiKeys).to.deep.equal(first.apiKeys);
    const second = await result('svc_listApiKeys', [{ ...scope, paginationToken: first.nextToken }]);
    expect(second.totalReturned).to.equal(10);
    expect(second.hasMore).to.equal(false);
    expect([...first.apiKeys, ...second.apiKeys].map((k: { key: string }) => k.key)).to.deep.equal(keys);
    for (const k of keys) await result('svc_deleteApiKey', [{ ...scope, apiKey: k }]);
  });

  it('§4.4 #3 — svc_updateApiKey merges updates into the stored record: values overwrite, null deletes the field', async () => {
    const stored = async () => (await result('svc_listApiKeys', [{ ...scope }])).apiKeys.find((k: { key: string }) => k.key === key('m'));
    await result('svc_addApiKey', [{ ...scope, apiKey: key('m'), userId: 'merge', enabled: false }]);
    expect(await stored()).not.to.have.property('rateLimitBudget');
    // Values overwrite (enabled) and a field not stored yet is added (rateLimitBudget).
    await result('svc_updateApiKey', [{ ...scope, apiKey: key('m'), updates: { enabled: true, rateLimitBudget: 'gold' } }]);
    expect(await stored()).to.include({ userId: 'merge', enabled: true, rateLimitBudget: 'gold' });
    // null deletes the field that is there; the others stay.
    await result('svc_updateApiKey', [{ ...scope, apiKey: key('m'), updates: { rateLimitBudget: null } }]);
    const rec = await stored();
    expect(rec).not.to.have.property('rateLimitBudget');
    expect(rec).to.include({ key: key('m'), userId: 'merge', enabled: true });
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('m') }]);
  });

  it('§4.4 #4 — svc_deleteApiKey removes the key (and its reverse index: the key no longer authenticates)', async () => {
    await result('svc_addApiKey', [{ ...scope, apiKey: key('rm'), userId: 'gone' }]);
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('rm') }]);
    const call = await svc.post(`/main/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, { authorization: `Bearer ${key('rm')}` });
    expect(call.status).to.equal(401);
    expect((await result('svc_listApiKeys', [{ ...scope }])).apiKeys.map((k: { key: string }) => k.key)).not.to.include(key('rm'));
    // Adding it again works: nothing of the old key is left.
    await result('svc_addApiKey', [{ ...scope, apiKey: key('rm'), userId: 'again' }]);
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('rm') }]);
  });

  it('§4.4 #5 — API-key methods need a database-backed connector and one object as the only param', async () => {
    expect((await admin('svc_addApiKey', [{ projectId: 'plain', connectorId: 'keys', apiKey: key('x'), userId: 'x' }])).json.error.message).to.match(
      /^failed to find the service: /,
    );
    expect((await admin('svc_listApiKeys', ['main', 'keys'])).json.error.message).to.equal('InvalidRequest: first parameter must be an object');
    expect((await admin('svc_listApiKeys', [{ ...scope }, 'extra'])).json.error.message).to.match(/^InvalidRequest: requires params/);
    expect((await admin('svc_listApiKeys', [])).json.error.message).to.match(/^InvalidRequest: requires params/);
  });

  it('§4.4 #6 — no admin method changes the config at run time', async () => {
    const before = await result('svc_config');
    await result('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
    await result('svc_addApiKey', [{ ...scope, apiKey: key('cfg'), userId: 'cfg' }]);
    expect(await result('svc_config')).to.deep.equal(before);
    await result('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
    await result('svc_deleteApiKey', [{ ...scope, apiKey: key('cfg') }]);
    expect(await result('svc_config')).to.deep.equal(before);
  });
});
