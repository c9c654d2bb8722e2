/**
 * Conformance, spec §2.1-§2.5: the cordon entry, the API key record, the `healthCheck` and
 * `admin` config, against one real svc in front of real anvil (plus tiny extra servers for the
 * config defaults that need their own start-up).
 */
import { expect } from 'chai';
import { healthcheckSchema } from '../../plugins/healthcheck/schema.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';
import { configProblems, expectBudgetExceeded, expectUnauthorized, rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

const KEY = 'k_conf_0123456789abcdef0123456789abcdef';

describe('conformance: §2.1-§2.5 resources', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture({ rateLimiters: { budgets: [{ id: 'one', rules: [{ method: '*', maxCount: 1, period: 'minute' }] }] } });
  });
  after(() => f?.close());
  const keyCall = (key: string) => f.svc.post(`/keys/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []), { authorization: `Bearer ${key}` });
  const listKeys = async () =>
    (await f.admin('svc_listApiKeys', [{ projectId: 'keys', connectorId: 'mem' }])).json.result.apiKeys as Array<Record<string, unknown>>;

  describe('§2.1 cordon entry', () => {
    const cordon = (params: Record<string, unknown>) => f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', ...params }]);
    const uncordon = (params: Record<string, unknown>) => f.admin('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a', ...params }]);
    afterEach(async () => {
      await uncordon({});
      await uncordon({ method: 'eth_call' });
    });

    it('§2.1 projectId — the entry names the project the upstream belongs to', async () => {
      expect((await cordon({})).json.result.projectId).to.equal('main');
      expect((await f.admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.projectId).to.equal('main');
    });
    it('§2.1 upstream — the entry names the upstream by its configured id', async () => {
      expect((await cordon({})).json.result.upstream).to.equal('a');
      expect((await f.admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.cordoned.map((c: { upstream: string }) => c.upstream)).to.deep.equal([
        'a',
      ]);
    });
    it('§2.1 method — a method scope; * (the default) means every method', async () => {
      expect((await cordon({})).json.result.method).to.equal('*');
      expect((await cordon({ method: 'eth_call' })).json.result.method).to.equal('eth_call');
      expect(await f.metric('svc_upstream_cordoned', { upstream: 'a', method: 'eth_call' })).to.equal(1);
    });
    it('§2.1 cordoned — true after cordon, false after uncordon', async () => {
      expect((await cordon({})).json.result.cordoned).to.equal(true);
      expect((await uncordon({})).json.result.cordoned).to.equal(false);
    });
    it('§2.1 reason — free text, admin: manual cordon by default', async () => {
      expect((await cordon({})).json.result.reason).to.equal('admin: manual cordon');
      expect((await cordon({ reason: 'maintenance window' })).json.result.reason).to.equal('maintenance window');
      expect((await f.admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.cordoned).to.deep.equal([
        { upstream: 'a', reason: 'maintenance window' },
      ]);
    });
  });

  describe('§2.3 API key record', () => {
    before(async () => {
      const r = await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: KEY, userId: 'alice', rateLimitBudget: 'one' }]);
      expect(r.json.result).to.deep.equal({ success: true, apiKey: KEY, userId: 'alice' });
    });

    it('§2.3 key — the secret string clients present authenticates them', async () => {
      expect((await listKeys()).map((k) => k.key)).to.include(KEY);
      const free = 'k_free_0123456789abcdef0123456789abcdef';
      await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: free, userId: 'bob' }]);
      expect((await keyCall(free)).json.result, 'a stored key authenticates').to.match(/^0x/);
      expectUnauthorized(await keyCall('k_unknown_0123456789abcdef0123456789ab'), 'a key not stored');
    });
    it('§2.3 userId — required on the stored record', async () => {
      const r = await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: 'k_nouser_0123456789abcdef0123456789' }]);
      expect(r.json.error, 'a key without userId is refused').to.deep.equal({
        code: -32600,
        message: 'InvalidRequest: requires params: [{projectId, connectorId, apiKey, userId, rateLimitBudget?, enabled?}] (userId must be a non-empty string)',
      });
      expect((await listKeys()).map((k) => k.key)).not.to.include('k_nouser_0123456789abcdef0123456789');
      expect((await listKeys()).find((k) => k.key === KEY)?.userId).to.equal('alice');
    });
    it('§2.3 enabled — true by default', async () => {
      expect((await listKeys()).find((k) => k.key === KEY)?.enabled).to.equal(true);
    });
    it('§2.3 rateLimitBudget — a budget id from rateLimiters.budgets[] counts the key requests', async () => {
      expect((await listKeys()).find((k) => k.key === KEY)?.rateLimitBudget).to.equal('one');
      expect((await keyCall(KEY)).json.result).to.match(/^0x/);
      expectBudgetExceeded(await keyCall(KEY), 'second call of a 1/minute budget');
    });
    it('§2.3 createdAt — an ISO 8601 timestamp', async () => {
      const c = (await listKeys()).find((k) => k.key === KEY)?.createdAt as string;
      expect(new Date(c).toISOString()).to.equal(c);
    });
    it('§2.3 updatedAt — an ISO 8601 timestamp, moved by an update', async () => {
      const before = (await listKeys()).find((k) => k.key === KEY)?.updatedAt as string;
      expect(new Date(before).toISOString()).to.equal(before);
      await new Promise((r) => setTimeout(r, 5));
      await f.admin('svc_updateApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: KEY, updates: { enabled: true } }]);
      const after = (await listKeys()).find((k) => k.key === KEY)?.updatedAt as string;
      expect(new Date(after).toISOString()).to.equal(after);
      expect(after > before).to.equal(true);
    });
  });

  describe('§2.4 healthCheck config', () => {
    const props = (healthcheckSchema.root.healthCheck as unknown as { properties: Record<string, { default?: unknown }> }).properties;
    it('§2.4 mode — simple by default: a plain HTTP 200 when healthy', async () => {
      expect(props.mode?.default).to.equal('simple');
      const r = await f.svc.send('GET', '/healthcheck');
      expect(r.status).to.equal(200);
      expect(r.json?.details).to.equal(undefined);
    });
    it('§2.4 defaultEval — any:initializedUpstreams by default; an arbitrary expression is refused', async () => {
      expect(props.defaultEval?.default).to.equal('any:initializedUpstreams');
      const problems = await configProblems({ logLevel: 'error', healthCheck: { defaultEval: 'any:upstreams > 1' }, projects: [] });
      expect(problems.map((p) => p.path)).to.deep.equal(['healthCheck.defaultEval']);
      expect(problems[0]!.message).to.match(/^unknown evaluation strategy "any:upstreams > 1"/);
    });
    it('§2.4 auth — none by default: the healthcheck is open', async () => {
      expect(props.auth?.default).to.equal(undefined);
      expect((await f.svc.send('GET', '/healthcheck')).status).to.equal(200);
    });
  });

  describe('§2.5 admin config', () => {
    // The default allows no origin (a deliberate deviation, exceptions.ts): the other defaults are
    // read from a svc that lists the origin and nothing else.
    let listed: SvcHandle;
    before(async () => {
      listed = await startSvc({
        logLevel: 'error',
        metrics: { enabled: false },
        admin: {
          auth: { strategies: [{ type: 'secret', secret: { value: 'admin-secret-0123456789abcdef' } }] },
          cors: { allowedOrigins: ['https://ops.example'] },
        },
        projects: [],
      });
    });
    after(async () => {
      await listed?.close();
    });
    const preflight = (svc: SvcHandle = listed) =>
      svc.send('OPTIONS', '/admin', undefined, { origin: 'https://ops.example', 'access-control-request-method': 'POST' });
    it('§2.5 admin.auth.strategies — with no strategy the endpoint is closed; secret strategies open it', async () => {
      const closed = await startSvc({
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [{ id: 'p', upstreams: [{ id: 'a', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }],
      });
      try {
        expect((await closed.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': 'anything-at-all-0123456789' })).status).to.equal(401);
      } finally {
        await closed.close();
      }
      expect((await f.admin('svc_taxonomy')).json.result.projects.map((p: { id: string }) => p.id)).to.deep.equal(['main', 'keys']);
    });
    it('§2.5 admin.cors.allowedOrigins — no origin by default (no cors section): a page on another origin gets no CORS headers; a listed origin is allowed', async () => {
      const r = await preflight(f.svc);
      expect(r.headers['access-control-allow-origin']).to.equal(undefined);
      expect(r.headers['access-control-allow-methods']).to.equal(undefined);
      const post = await f.svc.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': 'admin-secret-0123456789abcdef', origin: 'https://ops.example' });
      expect(post.headers['access-control-allow-origin']).to.equal(undefined);
      expect((await preflight()).headers['access-control-allow-origin']).to.equal('https://ops.example');
    });
    it('§2.5 admin.cors.allowedMethods — GET, POST, OPTIONS by default', async () => {
      expect((await preflight()).headers['access-control-allow-methods']).to.equal('GET,POST,OPTIONS');
    });
    it('§2.5 admin.cors.allowedHeaders — content-type, authorization, x-svc-secret-token by default', async () => {
      expect((await preflight()).headers['access-control-allow-headers']).to.equal('content-type,authorization,x-svc-secret-token');
    });
    it('§2.5 admin.cors.exposedHeaders — none by default', async () => {
      const r = await listed.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': 'admin-secret-0123456789abcdef', origin: 'https://ops.example' });
      expect(r.headers['access-control-allow-origin']).to.equal('https://ops.example');
      expect(r.headers['access-control-expose-headers']).to.equal(undefined);
    });
    it('§2.5 admin.cors.allowCredentials — false by default; true with a * origin is refused', async () => {
      expect((await preflight()).headers['access-control-allow-credentials']).to.equal(undefined);
      const problems = await configProblems({ logLevel: 'error', admin: { cors: { allowedOrigins: ['*'], allowCredentials: true } }, projects: [] });
      expect(problems).to.deep.equal([{ path: 'admin.cors.allowCredentials', message: 'must be false when allowedOrigins contains "*"' }]);
    });
    it('§2.5 admin.cors.maxAge — 3600 seconds by default', async () => {
      expect((await preflight()).headers['access-control-max-age']).to.equal('3600');
    });
  });
});
