/**
 * The admin methods (spec §4.4, §7, §8): the exact §7 texts for wrong params, results of the
 * cordon and API-key methods, the `svc_listApiKeys` page default and bounds, store refusals as
 * InvalidRequest, and which changes are replayed on other processes. Driven against a scripted
 * host (projects, a key store, a cordon table), not a running svc.
 */
import { expect } from 'chai';
import type { PluginHost } from '../../../core/plugin-api.ts';
import { AUTH_SERVICE, type ApiKeyManager } from 'svc-proxy/plugins/auth';
import { SELECTION_API_SERVICE } from 'svc-proxy/plugins/selection';
import { ConfigError, ErrEndpointUnsupported, ErrProjectNotFound } from '../../../core/plugin-errors.ts';
import { adminMethods, DEFAULT_CORDON_REASON, DEFAULT_PAGE, ErrServiceNotFound, replayNeeded, unsupported } from '../../../plugins/admin/methods.ts';

interface Cordon {
  upstream: string;
  method: string;
  reason: string;
}

function setUp(opts: { shared?: boolean; storeError?: unknown; reload?: () => Promise<unknown> } = {}) {
  const cordons: Cordon[] = [];
  const calls: unknown[][] = [];
  const health = {
    cordon: (upstream: string, method: string, reason: string) => {
      const c = cordons.find((x) => x.upstream === upstream && x.method === method);
      if (c) c.reason = reason;
      else cordons.push({ upstream, method, reason });
      return true;
    },
    uncordon: (upstream: string, method: string) => {
      const i = cordons.findIndex((x) => x.upstream === upstream && x.method === method);
      if (i >= 0) cordons.splice(i, 1);
    },
    listCordoned: () => cordons.map((c) => ({ ...c })),
    snapshot: (id: string) => ({
      requests: id === 'a' ? 10 : 0,
      errorRate: 0.1,
      throttleRate: 0,
      p50: 0.0012345,
      p90: 0.5,
      p99: 2,
      blockHeadLag: 1,
      finalizationLag: 2,
      cordoned: false,
      cordonReason: undefined,
    }),
  };
  const upstreams = [{ id: 'a' }, { id: 'b' }];
  const network = { id: 'evm:1', upstreams };
  const project = {
    id: 'main',
    config: { id: 'main', upstreams: [{ id: 'a', endpoint: 'https://x.example/v3/0123456789abcdef0123456789abcdef' }] },
    networks: new Map([['evm:1', network]]),
    upstreams: new Map(upstreams.map((u) => [u.id, u])),
    health,
  };
  const fail = async () => {
    throw opts.storeError;
  };
  const store: ApiKeyManager = {
    shared: opts.shared ?? false,
    add: opts.storeError ? fail : async (i) => (calls.push(['add', i]), { key: i.apiKey, userId: i.userId, enabled: i.enabled ?? true } as never),
    list: opts.storeError
      ? fail
      : async (limit, token) => (calls.push(['list', limit, token]), { apiKeys: [], nextToken: '', hasMore: false, totalReturned: 0 }),
    update: opts.storeError ? fail : async (k, u) => (calls.push(['update', k, u]), { key: k } as never),
    delete: opts.storeError ? fail : async (k) => (calls.push(['delete', k]), { key: k, userId: 'u1' } as never),
  };
  const host = {
    projects: new Map([['main', project]]),
    config: { server: { port: 4000 }, admin: { auth: { strategies: [{ type: 'secret', secret: { value: 'hunter2' } }] } } },
    services: {
      get: (key: unknown) => (key === AUTH_SERVICE ? { apiKeys: (p: string, c: string) => (p === 'main' && c === 'mem' ? store : undefined) } : undefined),
    },
    logger: { debug: () => undefined },
    reloadConfig: opts.reload ?? (async () => ({ reloaded: true })),
  } as unknown as PluginHost;
  const m = adminMethods(host);
  // Some methods throw before returning a promise: both ways end as a rejection here.
  const call = async (name: string, params?: unknown) => (m.get(name) as (p: unknown) => Promise<unknown>)(params);
  return { host, call, cordons, calls };
}

async function refusal(p: Promise<unknown>): Promise<[string, string]> {
  try {
    await p;
  } catch (e) {
    return [(e as Error).name, (e as Error).message];
  }
  throw new Error('resolved');
}

const CORDON = '{projectId, upstream, method?, reason?}';
const ADD = '{projectId, connectorId, apiKey, userId, rateLimitBudget?, enabled?}';
const LIST = '{projectId, connectorId, limit?, paginationToken?}';

describe('wire: admin methods (spec §4.4, §7)', () => {
  it('the method table: the ten of §4.4 and svc_reloadConfig, case-sensitive', () => {
    const { host } = setUp();
    expect([...adminMethods(host).keys()].sort()).to.deep.equal(
      [
        'svc_taxonomy',
        'svc_config',
        'svc_reloadConfig',
        'svc_project',
        'svc_addApiKey',
        'svc_listApiKeys',
        'svc_updateApiKey',
        'svc_deleteApiKey',
        'svc_cordonUpstream',
        'svc_uncordonUpstream',
        'svc_listCordoned',
      ].sort(),
    );
    const e = unsupported('SVC_TAXONOMY');
    expect(e).to.be.instanceOf(ErrEndpointUnsupported);
    expect(e.message).to.equal('EndpointUnsupported: admin method SVC_TAXONOMY is not supported');
    expect(unsupported('x'.repeat(100)).message).to.equal(`EndpointUnsupported: admin method ${'x'.repeat(64)} is not supported`);
  });

  describe('params (§7 texts)', () => {
    it('methods without params take absent, null, [] or {}; anything else: requires params: none', async () => {
      const { call } = setUp();
      for (const p of [undefined, null, [], {}])
        expect(await call('svc_taxonomy', p)).to.deep.equal({ projects: [{ id: 'main', networks: [{ id: 'evm:1', upstreams: [{ id: 'a' }, { id: 'b' }] }] }] });
      for (const p of [['main'], { projectId: 'main' }, 'main', 0]) {
        expect(await refusal(call('svc_taxonomy', p))).to.deep.equal(['ErrInvalidRequest', 'InvalidRequest: requires params: none']);
        expect(await refusal(call('svc_config', p))).to.deep.equal(['ErrInvalidRequest', 'InvalidRequest: requires params: none']);
      }
    });

    it('object-param methods: positional args are "first parameter must be an object"; none or extra are "requires params: [<shape>]"', async () => {
      const { call } = setUp();
      for (const p of [['main', 'a'], ['main'], [null], [['main']], [7]])
        expect(await refusal(call('svc_cordonUpstream', p))).to.deep.equal(['ErrInvalidRequest', 'InvalidRequest: first parameter must be an object']);
      for (const p of [undefined, [], { projectId: 'main' }, [{ projectId: 'main', upstream: 'a' }, {}]])
        expect(await refusal(call('svc_cordonUpstream', p))).to.deep.equal(['ErrInvalidRequest', `InvalidRequest: requires params: [${CORDON}]`]);
    });

    it('required strings: missing, empty or over 1024 characters name the field', async () => {
      const { call } = setUp();
      for (const projectId of [undefined, '', 7, 'p'.repeat(1025)]) {
        expect(await refusal(call('svc_listCordoned', [{ projectId }]))).to.deep.equal([
          'ErrInvalidRequest',
          'InvalidRequest: requires params: [{projectId}] (projectId must be a non-empty string)',
        ]);
      }
      expect(await refusal(call('svc_listCordoned', [{ projectId: 'p'.repeat(1024) }]))).to.deep.equal([
        'ErrProjectNotFound',
        `project ${JSON.stringify('p'.repeat(64))} is not configured`,
      ]);
    });

    it('svc_project takes [projectId] only', async () => {
      const { call } = setUp();
      for (const p of [undefined, [], ['main', 'x'], [7], 'main'])
        expect(await refusal(call('svc_project', p))).to.deep.equal(['ErrInvalidRequest', 'InvalidRequest: requires params: [projectId]']);
      expect(await refusal(call('svc_project', ['nope']))).to.deep.equal(['ErrProjectNotFound', 'project "nope" is not configured']);
    });
  });

  describe('cordons (§4.4, §2.1)', () => {
    it('cordon: the default method * and reason "admin: manual cordon"; the result echoes them', async () => {
      const { call, cordons } = setUp();
      expect(DEFAULT_CORDON_REASON).to.equal('admin: manual cordon');
      expect(await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a' }])).to.deep.equal({
        projectId: 'main',
        upstream: 'a',
        method: '*',
        cordoned: true,
        reason: 'admin: manual cordon',
      });
      expect(await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call', reason: 'slow' }])).to.deep.equal({
        projectId: 'main',
        upstream: 'b',
        method: 'eth_call',
        cordoned: true,
        reason: 'slow',
      });
      expect(cordons).to.deep.equal([
        { upstream: 'a', method: '*', reason: 'admin: manual cordon' },
        { upstream: 'b', method: 'eth_call', reason: 'slow' },
      ]);
    });

    it('svc_listCordoned lists wildcard cordons only', async () => {
      const { call } = setUp();
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', reason: 'r1' }]);
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call' }]);
      expect(await call('svc_listCordoned', [{ projectId: 'main' }])).to.deep.equal({ projectId: 'main', cordoned: [{ upstream: 'a', reason: 'r1' }] });
    });

    it("uncordon: cordoned false with the given reason, else the cordon's own, else empty", async () => {
      const { call, cordons } = setUp();
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', reason: 'was slow' }]);
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call', reason: 'r' }]);
      expect(await call('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).to.deep.equal({
        projectId: 'main',
        upstream: 'a',
        method: '*',
        cordoned: false,
        reason: 'was slow',
      });
      expect(await call('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call', reason: 'fixed' }])).to.deep.equal({
        projectId: 'main',
        upstream: 'b',
        method: 'eth_call',
        cordoned: false,
        reason: 'fixed',
      });
      expect(await call('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).to.deep.equal({
        projectId: 'main',
        upstream: 'a',
        method: '*',
        cordoned: false,
        reason: '',
      });
      expect(cordons).to.deep.equal([]);
    });

    it('an unknown upstream, a bad method or a bad reason is refused with its own text', async () => {
      const { call } = setUp();
      expect(await refusal(call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'zz' }]))).to.deep.equal([
        'ErrInvalidRequest',
        'InvalidRequest: upstream "zz" is not in project main',
      ]);
      expect(await refusal(call('svc_cordonUpstream', [{ projectId: 'other', upstream: 'a' }]))).to.deep.equal([
        'ErrProjectNotFound',
        'project "other" is not configured',
      ]);
      for (const method of ['', 7, 'm'.repeat(257)]) {
        expect(await refusal(call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', method }]))).to.deep.equal([
          'ErrInvalidRequest',
          `InvalidRequest: requires params: [${CORDON}] (method must be a method name or glob)`,
        ]);
      }
      for (const reason of [7, null, 'r'.repeat(257)]) {
        expect(await refusal(call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', reason }]))).to.deep.equal([
          'ErrInvalidRequest',
          `InvalidRequest: requires params: [${CORDON}] (reason must be a string of at most 256 characters)`,
        ]);
      }
      expect(await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', method: 'm'.repeat(256), reason: '' }])).to.deep.include({
        method: 'm'.repeat(256),
        reason: '',
      });
      expect(await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', reason: 'r'.repeat(256) }])).to.deep.include({ reason: 'r'.repeat(256) });
    });
  });

  describe('API keys (§4.4 rules 1-5)', () => {
    it('add: { success, apiKey, userId }; enabled and rateLimitBudget passed on, typed', async () => {
      const { call, calls } = setUp();
      expect(
        await call('svc_addApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k1', userId: 'u1', enabled: false, rateLimitBudget: 'b' }]),
      ).to.deep.equal({ success: true, apiKey: 'k1', userId: 'u1' });
      expect(calls).to.deep.equal([['add', { apiKey: 'k1', userId: 'u1', rateLimitBudget: 'b', enabled: false }]]);
      expect(await refusal(call('svc_addApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k1', userId: 'u1', enabled: 'yes' }]))).to.deep.equal([
        'ErrInvalidRequest',
        `InvalidRequest: requires params: [${ADD}] (enabled must be a boolean)`,
      ]);
      expect(await refusal(call('svc_addApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k1', userId: 'u1', rateLimitBudget: 5 }]))).to.deep.equal([
        'ErrInvalidRequest',
        `InvalidRequest: requires params: [${ADD}] (rateLimitBudget must be a string)`,
      ]);
      expect(await refusal(call('svc_addApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k1' }]))).to.deep.equal([
        'ErrInvalidRequest',
        `InvalidRequest: requires params: [${ADD}] (userId must be a non-empty string)`,
      ]);
    });

    it('a (projectId, connectorId) without a key store: "failed to find the service: ..."', async () => {
      const { call } = setUp();
      const [name, message] = await refusal(call('svc_deleteApiKey', [{ projectId: 'main', connectorId: 'pg', apiKey: 'k' }]));
      expect(name).to.equal('ErrServiceNotFound');
      expect(message).to.equal('failed to find the service: project "main" has no database auth strategy with connector "pg"');
      const e = new ErrServiceNotFound('x');
      expect([e.code, e.httpStatus]).to.deep.equal([-32602, 404]);
    });

    it(`list: limit ${DEFAULT_PAGE} by default, 1 to 1000 accepted, the token passed on`, async () => {
      const { call, calls } = setUp();
      expect(DEFAULT_PAGE).to.equal(50);
      expect(await call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem' }])).to.deep.equal({
        apiKeys: [],
        nextToken: '',
        hasMore: false,
        totalReturned: 0,
      });
      await call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem', limit: 1, paginationToken: 't' }]);
      await call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem', limit: '1000' }]);
      expect(calls).to.deep.equal([
        ['list', 50, undefined],
        ['list', 1, 't'],
        ['list', 1000, undefined],
      ]);
      for (const limit of [0, 1001, 1.5, 'x']) {
        expect(await refusal(call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem', limit }]))).to.deep.equal([
          'ErrInvalidRequest',
          `InvalidRequest: requires params: [${LIST}] (limit must be an integer from 1 to 1000)`,
        ]);
      }
      expect(await refusal(call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem', paginationToken: 3 }]))).to.deep.equal([
        'ErrInvalidRequest',
        `InvalidRequest: requires params: [${LIST}] (paginationToken must be a string)`,
      ]);
    });

    it('update echoes the sent map as updated; updates must be an object', async () => {
      const { call } = setUp();
      expect(
        await call('svc_updateApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k', updates: { enabled: false, rateLimitBudget: null } }]),
      ).to.deep.equal({ success: true, apiKey: 'k', updated: { enabled: false, rateLimitBudget: null } });
      for (const updates of [undefined, null, [], 'x']) {
        expect(await refusal(call('svc_updateApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k', updates }]))).to.deep.equal([
          'ErrInvalidRequest',
          'InvalidRequest: requires params: [{projectId, connectorId, apiKey, updates}] (updates must be an object)',
        ]);
      }
    });

    it('delete: { success, apiKey, userId }', async () => {
      const { call } = setUp();
      expect(await call('svc_deleteApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k' }])).to.deep.equal({
        success: true,
        apiKey: 'k',
        userId: 'u1',
      });
    });

    it("the store's refusals are InvalidRequest with its message (the corrupt-record error included); a driver failure is not", async () => {
      for (const msg of [
        'api key not found',
        'paginationToken is not valid',
        'updates.enabled must be a boolean',
        'rateLimitBudget x is unknown',
        'missing or invalid userId in current data',
      ]) {
        const { call } = setUp({ storeError: new Error(msg) });
        expect(await refusal(call('svc_deleteApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k' }]))).to.deep.equal(['ErrInvalidRequest', msg]);
      }
      const driver = setUp({ storeError: new Error('ECONNREFUSED api key store') });
      expect(await refusal(driver.call('svc_deleteApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k' }]))).to.deep.equal([
        'Error',
        'ECONNREFUSED api key store',
      ]);
      const named = setUp({ storeError: new ErrProjectNotFound('gone') });
      expect(await refusal(named.call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem' }]))).to.deep.equal(['ErrProjectNotFound', 'gone']);
      const text = setUp({ storeError: 'api key not found' });
      expect(await refusal(text.call('svc_updateApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: 'k', updates: {} }]))).to.deep.equal([
        'ErrInvalidRequest',
        'api key not found',
      ]);
    });
  });

  describe('introspection', () => {
    it('svc_config is the config redacted (secret values replaced)', async () => {
      const { call } = setUp();
      const c = (await call('svc_config')) as { admin: { auth: { strategies: { secret: { value: string } }[] } }; server: unknown };
      expect(c.server).to.deep.equal({ port: 4000 });
      expect(c.admin.auth.strategies[0]!.secret.value).to.match(/^#redacted=[0-9a-f]+$/);
    });

    it('svc_project: redacted config, the first upstream as primary without selection, latencies in milliseconds', async () => {
      const { call } = setUp();
      const p = (await call('svc_project', ['main'])) as {
        config: { upstreams: { endpoint: string }[] };
        networks: Array<Record<string, unknown> & { upstreams: Array<Record<string, unknown>> }>;
      };
      expect(p.config.upstreams[0]!.endpoint).to.not.contain('0123456789abcdef0123456789abcdef');
      const n = p.networks[0]!;
      expect([n.id, n.primaryUpstream, n.selection, n.recentDecisions]).to.deep.equal(['evm:1', 'a', null, []]);
      expect(n.upstreams[0]).to.deep.equal({
        id: 'a',
        requests: 10,
        errorRate: 0.1,
        throttleRate: 0,
        latencyMs: { p50: 1.235, p90: 500, p99: 2000 },
        blockHeadLag: 1,
        finalizationLag: 2,
        cordoned: false,
        cordonReason: undefined,
      });
    });

    it('svc_reloadConfig: the reload result; a refused config lists its problems, redacted, in one InvalidRequest', async () => {
      expect(await setUp().call('svc_reloadConfig')).to.deep.equal({ reloaded: true });
      const refused = setUp({
        reload: async () =>
          Promise.reject(
            new ConfigError([
              { path: 'server.port', message: 'must be a number' },
              { path: '', message: 'password=hunter2 rejected' },
            ] as never),
          ),
      });
      const [name, message] = await refusal(refused.call('svc_reloadConfig'));
      expect(name).to.equal('ErrInvalidRequest');
      expect(message).to.match(
        /^config refused, the running config keeps serving: server\.port: must be a number; \(root\): password=#redacted=[0-9a-f]{8} rejected$/,
      );
      const broken = setUp({ reload: async () => Promise.reject(new Error('disk gone')) });
      expect(await refusal(broken.call('svc_reloadConfig'))).to.deep.equal(['Error', 'disk gone']);
    });
  });

  describe('replay on other processes', () => {
    it('cordons always; API-key changes only for a store each process holds itself', () => {
      const mem = setUp({ shared: false }).host;
      const shared = setUp({ shared: true }).host;
      expect(replayNeeded(mem, 'svc_cordonUpstream', [{ projectId: 'main', upstream: 'a' }])).to.equal(true);
      expect(replayNeeded(mem, 'svc_addApiKey', [{ projectId: 'main', connectorId: 'mem' }])).to.equal(true);
      expect(replayNeeded(shared, 'svc_addApiKey', [{ projectId: 'main', connectorId: 'mem' }])).to.equal(false);
      expect(replayNeeded(mem, 'svc_deleteApiKey', [{ projectId: 'main', connectorId: 'pg' }])).to.equal(false);
      expect(replayNeeded(mem, 'svc_updateApiKey', [{ projectId: 'main' }])).to.equal(false);
      expect(replayNeeded(mem, 'svc_updateApiKey', { projectId: 'main', connectorId: 'mem' })).to.equal(false);
    });
  });

  describe('client text in answers is bounded', () => {
    const long = (c: string) => c.repeat(100);
    it('an unknown store names the project and connector by their first 64 characters', async () => {
      const { call } = setUp();
      const [name, message] = await refusal(call('svc_listApiKeys', [{ projectId: long('p'), connectorId: long('c') }]));
      expect(name).to.equal('ErrServiceNotFound');
      expect(message).to.equal(`failed to find the service: project "${'p'.repeat(64)}" has no database auth strategy with connector "${'c'.repeat(64)}"`);
    });

    it('an unknown upstream is named by its first 64 characters', async () => {
      const { call } = setUp();
      const [, message] = await refusal(call('svc_cordonUpstream', [{ projectId: 'main', upstream: long('u') }]));
      expect(message).to.equal(`InvalidRequest: upstream "${'u'.repeat(64)}" is not in project main`);
    });

    it('a refused reload lists its problems in at most 4000 characters', async () => {
      const problems = Array.from({ length: 200 }, (_, i) => ({ path: `projects[${i}].upstreams`, message: 'x'.repeat(40) }));
      const { call } = setUp({ reload: async () => Promise.reject(new ConfigError(problems)) });
      const [name, message] = await refusal(call('svc_reloadConfig'));
      expect(name).to.equal('ErrInvalidRequest');
      const prefix = 'config refused, the running config keeps serving: ';
      expect(message.startsWith(prefix)).to.equal(true);
      expect(message.length).to.equal(prefix.length + 4000);
    });
  });

  describe('answers built from state', () => {
    it('uncordon reports the reason of the cordon of that upstream and method, not another one', async () => {
      const { call } = setUp();
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', method: 'eth_call', reason: 'a-call' }]);
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_getLogs', reason: 'b-logs' }]);
      await call('svc_cordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call', reason: 'b-call' }]);
      const r = (await call('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'b', method: 'eth_call' }])) as { reason: string };
      expect(r.reason).to.equal('b-call');
    });

    it('svc_project: the selection order first upstream as primary, the last 20 decisions', async () => {
      const decisions = Array.from({ length: 30 }, (_, i) => ({ n: i }));
      const { host, call } = setUp();
      (host as unknown as { services: { get: (k: unknown) => unknown } }).services.get = (key: unknown) =>
        key === SELECTION_API_SERVICE ? { state: () => ({ order: ['b', 'a'] }), decisions: () => decisions } : undefined;
      const r = (await call('svc_project', ['main'])) as { networks: Array<{ primaryUpstream: string; recentDecisions: unknown[] }> };
      expect(r.networks).to.have.length(1);
      expect(r.networks[0]!.primaryUpstream).to.equal('b');
      expect(r.networks[0]!.recentDecisions).to.deep.equal(decisions.slice(-20));
    });

    it('an SvcError from a store keeps its own name (it is not turned into InvalidRequest)', async () => {
      const { call } = setUp({ storeError: new ErrProjectNotFound('api key store moved') });
      const [name, message] = await refusal(call('svc_listApiKeys', [{ projectId: 'main', connectorId: 'mem' }]));
      expect([name, message]).to.deep.equal(['ErrProjectNotFound', 'api key store moved']);
    });
  });

  it('every object-param method names its own shape when its params are wrong', async () => {
    const { call } = setUp();
    expect(await refusal(call('svc_deleteApiKey', []))).to.deep.equal([
      'ErrInvalidRequest',
      'InvalidRequest: requires params: [{projectId, connectorId, apiKey}]',
    ]);
    expect(await refusal(call('svc_listCordoned', []))).to.deep.equal(['ErrInvalidRequest', 'InvalidRequest: requires params: [{projectId}]']);
  });

  it('svc_project: a network with no upstream has no primary (and no selection plugin is needed)', async () => {
    const { host, call } = setUp();
    (host.projects.get('main') as unknown as { networks: Map<string, unknown> }).networks.set('evm:2', { id: 'evm:2', upstreams: [] });
    const r = (await call('svc_project', ['main'])) as { networks: Array<{ id: string; primaryUpstream?: string }> };
    expect(r.networks.map((n) => [n.id, n.primaryUpstream])).to.deep.equal([
      ['evm:1', 'a'],
      ['evm:2', undefined],
    ]);
  });
});
