/**
 * The admin endpoint (spec §2.5, §3.1, §3.3, §4.4, §6, §7) on a real server
 * in front of anvil: closed without strategies, 415 without JSON, every method with its params
 * and §7 errors, API keys managed at run time (memory connector) including pagination over 120
 * keys, the cordon state machine read from /metrics, and admin CORS.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { loadConfigObject } from '../../config/load.ts';
import { defaultPreset } from '../../presets/default.ts';

const ADMIN = 'admin-secret-0123456789abcdef';
const H = { 'x-svc-secret-token': ADMIN };
const rpc = (method: string, params?: unknown, id: unknown = 1) => ({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

describe('e2e: admin endpoint (spec §4.4)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const admin = (method: string, params?: unknown, headers: Record<string, string> = H): Promise<SvcResponse> =>
    svc.post('/admin', rpc(method, params), headers);
  const metric = async (name: string, labels: Record<string, string>): Promise<number | undefined> => {
    const text = await (await fetch(svc.metricsUrl as string)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`)) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return undefined;
  };

  before(async () => {
    anvil = await startAnvil();
    svc = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: true, port: 0 },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
          auth: { strategies: [{ type: 'database', connector: { id: 'keys', driver: 'memory' } }] },
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });
  const path = () => `/main/evm/${anvil.chainId}`;
  const proxyCall = (key: string) => svc.post(path(), rpc('eth_blockNumber', []), { authorization: `Bearer ${key}` });

  describe('doors', () => {
    it('is closed (401) when admin.auth has no strategy', async () => {
      const closed = await startSvc({
        ...NO_CACHE,
        metrics: { enabled: false },
        projects: [{ id: 'p', upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: anvil.chainId } }] }],
      });
      try {
        const r = await closed.post('/admin', rpc('svc_taxonomy'), H);
        expect(r.status).to.equal(401);
        expect(r.json.error.code).to.equal(-32016);
      } finally {
        await closed.close();
      }
    });

    it('needs Content-Type: application/json (415, nothing runs) and a credential a strategy accepts (401)', async () => {
      const form = await svc.post('/admin', JSON.stringify(rpc('svc_cordonUpstream', [{ projectId: 'main', upstream: 'anvil' }])), {
        ...H,
        'content-type': 'text/plain',
      });
      expect(form.status).to.equal(415);
      expect((await admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.cordoned).to.deep.equal([]);
      expect((await admin('svc_taxonomy', undefined, { 'x-svc-secret-token': 'nope' })).status).to.equal(401);
    });

    it('allows no CORS origin by default: a page on another origin gets no CORS headers, preflight or call', async () => {
      const r = await svc.send('OPTIONS', '/admin', undefined, { origin: 'https://ops.example', 'access-control-request-method': 'POST' });
      expect(r.headers['access-control-allow-origin']).to.equal(undefined);
      expect(r.headers['access-control-allow-methods']).to.equal(undefined);
      const call = await admin('svc_taxonomy', undefined, { ...H, origin: 'https://evil.example' });
      expect(call.headers['access-control-allow-origin']).to.equal(undefined);
    });

    it('answers a CORS preflight from a listed origin before auth with the §2.5 defaults', async () => {
      const listed = await startSvc({
        logLevel: 'error',
        metrics: { enabled: false },
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] }, cors: { allowedOrigins: ['https://ops.example'] } },
        projects: [],
      });
      try {
        const r = await listed.send('OPTIONS', '/admin', undefined, { origin: 'https://ops.example', 'access-control-request-method': 'POST' });
        expect(r.status).to.equal(204);
        expect(r.headers['access-control-allow-origin']).to.equal('https://ops.example');
        expect(r.headers['access-control-allow-methods']).to.equal('GET,POST,OPTIONS');
        expect(r.headers['access-control-allow-headers']).to.equal('content-type,authorization,x-svc-secret-token');
        expect(r.headers['access-control-max-age']).to.equal('3600');
        const other = await listed.send('OPTIONS', '/admin', undefined, { origin: 'https://evil.example', 'access-control-request-method': 'POST' });
        expect(other.headers['access-control-allow-origin']).to.equal(undefined);
      } finally {
        await listed.close();
      }
    });

    it('`svc validate` rules: allowCredentials with a * origin, and projects named admin or healthcheck, are config errors', () => {
      const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
      expect(() => loadConfigObject({ projects: [{ id: 'admin', upstreams: [] }] }, { fragments })).to.throw(/reserved/);
      const proxyLike = { admin: { cors: { allowedOrigins: ['*'], allowCredentials: true } }, projects: [] };
      // The CORS rule is checked when the admin plugin reads its config: start-up fails.
      return startSvc(proxyLike).then(
        (s) => s.close().then(() => expect.fail('svc started')),
        (e: Error) => expect(e.message).to.match(/allowCredentials/),
      );
    });
  });

  describe('methods and §7 errors', () => {
    it('svc_taxonomy lists projects, networks and upstreams', async () => {
      const r = await admin('svc_taxonomy');
      expect(r.json.result).to.deep.equal({ projects: [{ id: 'main', networks: [{ id: `evm:${anvil.chainId}`, upstreams: [{ id: 'anvil' }] }] }] });
    });

    it('§4.4 ¶2 — method names are case-sensitive: EndpointUnsupported: admin method <name> is not supported', async () => {
      const r = await admin('svc_Taxonomy');
      expect(r.json.error.message).to.equal('EndpointUnsupported: admin method svc_Taxonomy is not supported');
    });

    it('InvalidRequest: requires params / first parameter must be an object; failed to find the service', async () => {
      expect((await admin('svc_project', [])).json.error.message).to.equal('InvalidRequest: requires params: [projectId]');
      expect((await admin('svc_cordonUpstream', [{ projectId: 'main', upstream: 'anvil' }, 'extra'])).json.error.message).to.match(
        /^InvalidRequest: requires params: \[\{projectId, upstream, method\?, reason\?\}\]/,
      );
      expect((await admin('svc_cordonUpstream', ['main'])).json.error.message).to.equal('InvalidRequest: first parameter must be an object');
      expect((await admin('svc_addApiKey', [{ projectId: 'main', connectorId: 'nope', apiKey: 'k'.repeat(40), userId: 'u' }])).json.error.message).to.match(
        /^failed to find the service: /,
      );
    });

    it('positional params to every API-key and cordon method: InvalidRequest: first parameter must be an object (spec §7)', async () => {
      const positional: Array<[string, unknown[]]> = [
        ['svc_cordonUpstream', ['main', 'anvil']],
        ['svc_uncordonUpstream', ['main', 'anvil', 'eth_call']],
        ['svc_listCordoned', ['main']],
        ['svc_addApiKey', ['main', 'keys', 'k'.repeat(40), 'alice']],
        ['svc_listApiKeys', ['main', 'keys']],
        ['svc_updateApiKey', ['main', 'keys', 'k'.repeat(40), { enabled: false }]],
        ['svc_deleteApiKey', ['main', 'keys', 'k'.repeat(40)]],
      ];
      for (const [method, params] of positional) {
        const r = await admin(method, params);
        expect(r.status, method).to.equal(400);
        expect(r.json.error.code, method).to.equal(-32600);
        expect(r.json.error.message, method).to.equal('InvalidRequest: first parameter must be an object');
      }
    });

    it('svc_project returns the redacted project config and live upstream state', async () => {
      const r = await admin('svc_project', ['main']);
      const net = r.json.result.networks[0];
      expect(net.id).to.equal(`evm:${anvil.chainId}`);
      expect(net.primaryUpstream).to.equal('anvil');
      expect(net.selection.scores).to.be.an('object');
      expect(net.recentDecisions).to.be.an('array');
      expect(net.upstreams[0]).to.include.keys('errorRate', 'latencyMs', 'blockHeadLag', 'cordoned');
      expect(r.json.result.config.id).to.equal('main');
    });
  });

  describe('API keys (memory connector)', () => {
    const key = 'k_0123456789abcdef0123456789abcdef';
    const scope = { projectId: 'main', connectorId: 'keys' };

    it('add → the key works; disable → refused at once; enable; delete → refused', async () => {
      expect((await proxyCall(key)).status).to.equal(401);
      expect((await admin('svc_addApiKey', [{ ...scope, apiKey: key, userId: 'alice' }])).json.result).to.deep.equal({
        success: true,
        apiKey: key,
        userId: 'alice',
      });
      expect((await proxyCall(key)).status).to.equal(200);
      const upd = await admin('svc_updateApiKey', [{ ...scope, apiKey: key, updates: { enabled: false } }]);
      expect(upd.json.result).to.deep.equal({ success: true, apiKey: key, updated: { enabled: false } });
      expect((await proxyCall(key)).status).to.equal(401);
      await admin('svc_updateApiKey', [{ ...scope, apiKey: key, updates: { enabled: true } }]);
      expect((await proxyCall(key)).status).to.equal(200);
      expect((await admin('svc_deleteApiKey', [{ ...scope, apiKey: key }])).json.result).to.deep.equal({ success: true, apiKey: key, userId: 'alice' });
      expect((await proxyCall(key)).status).to.equal(401);
      expect((await admin('svc_deleteApiKey', [{ ...scope, apiKey: key }])).json.error.message).to.equal('api key not found');
    });

    it('adding a key twice fails; updates merge, null deletes a field, unknown budgets are refused', async () => {
      const k = 'k_dup_0123456789abcdef0123456789';
      await admin('svc_addApiKey', [{ ...scope, apiKey: k, userId: 'bob', enabled: false }]);
      expect((await admin('svc_addApiKey', [{ ...scope, apiKey: k, userId: 'bob' }])).json.error.message).to.equal('api key already exists');
      expect((await admin('svc_updateApiKey', [{ ...scope, apiKey: k, updates: { rateLimitBudget: 'nope' } }])).json.error.message).to.match(/not declared/);
      const page = await admin('svc_listApiKeys', [{ ...scope }]);
      const rec = page.json.result.apiKeys.find((x: { key: string }) => x.key === k);
      expect(rec).to.include({ userId: 'bob', enabled: false });
      expect(rec.createdAt).to.match(/^\d{4}-\d\d-\d\dT/);
      await admin('svc_deleteApiKey', [{ ...scope, apiKey: k }]);
    });

    it('svc_listApiKeys pages 120 keys 50 at a time until hasMore is false', async () => {
      const keys = Array.from({ length: 120 }, (_, i) => `k_page_${String(i).padStart(3, '0')}_0123456789abcdef`);
      for (const k of keys) await admin('svc_addApiKey', [{ ...scope, apiKey: k, userId: `u${k.slice(7, 10)}` }]);
      const seen: string[] = [];
      let token = '';
      const sizes: number[] = [];
      for (;;) {
        const r = (await admin('svc_listApiKeys', [{ ...scope, paginationToken: token }])).json.result;
        sizes.push(r.totalReturned);
        seen.push(...r.apiKeys.map((x: { key: string }) => x.key));
        if (!r.hasMore) break;
        token = r.nextToken;
      }
      expect(sizes).to.deep.equal([50, 50, 20]);
      expect(seen).to.deep.equal(keys);
      for (const k of keys) await admin('svc_deleteApiKey', [{ ...scope, apiKey: k }]);
    });
  });

  describe('cordons (spec §3.1, §6)', () => {
    const target = { projectId: 'main', upstream: 'anvil' };
    const gauge = (reason: string, method = '*') => metric('svc_upstream_cordoned', { project: 'main', upstream: 'anvil', method, reason });
    const events = (action: string) => metric('svc_upstream_cordon_event_total', { project: 'main', upstream: 'anvil', action });
    const KEY = 'k_cordon_0123456789abcdef0123456789';
    const call = (method: string, params: unknown[]) => svc.post(path(), rpc(method, params), { authorization: `Bearer ${KEY}` });
    before(() => admin('svc_addApiKey', [{ projectId: 'main', connectorId: 'keys', apiKey: KEY, userId: 'ops' }]));

    it('cordon *: honoured at once, gauge 1, one event; a reason overwrite moves the gauge without an event', async () => {
      const r = await admin('svc_cordonUpstream', [target]);
      expect(r.json.result).to.deep.equal({ projectId: 'main', upstream: 'anvil', method: '*', cordoned: true, reason: 'admin: manual cordon' });
      const refused = await call('eth_blockNumber', []);
      expect(JSON.stringify(refused.json.error)).to.match(/UpstreamsExhausted/);
      expect(await gauge('admin: manual cordon')).to.equal(1);
      expect(await events('cordon')).to.equal(1);
      await admin('svc_cordonUpstream', [{ ...target, reason: 'flaky' }]);
      expect(await events('cordon')).to.equal(1);
      expect(await gauge('admin: manual cordon')).to.equal(undefined);
      expect(await gauge('flaky')).to.equal(1);
      expect((await admin('svc_listCordoned', [{ projectId: 'main' }])).json.result).to.deep.equal({
        projectId: 'main',
        cordoned: [{ upstream: 'anvil', reason: 'flaky' }],
      });
    });

    it('uncordon: gauge 0, one uncordon event, duration observed; a second uncordon is a no-op', async () => {
      const r = await admin('svc_uncordonUpstream', [target]);
      expect(r.json.result).to.include({ cordoned: false, method: '*' });
      expect(await gauge('flaky')).to.equal(0);
      expect(await events('uncordon')).to.equal(1);
      expect(await metric('svc_upstream_cordon_duration_seconds_count', { project: 'main', upstream: 'anvil' })).to.equal(1);
      await admin('svc_uncordonUpstream', [target]);
      expect(await events('uncordon')).to.equal(1);
      expect((await call('eth_blockNumber', [])).json.result).to.match(/^0x/);
    });

    it('a method cordon excludes only that method (globs too); uncordoning * leaves it; listCordoned shows * only', async () => {
      await admin('svc_cordonUpstream', [{ ...target, method: 'eth_getBal*' }]);
      await admin('svc_cordonUpstream', [{ ...target, method: '*' }]);
      await admin('svc_uncordonUpstream', [{ ...target, method: '*' }]);
      const balance = await call('eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
      expect(balance.json.error).to.exist;
      expect((await call('eth_blockNumber', [])).json.result).to.match(/^0x/);
      expect((await admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.cordoned).to.deep.equal([]);
      expect(await gauge('admin: manual cordon', 'eth_getBal*')).to.equal(1);
      await admin('svc_uncordonUpstream', [{ ...target, method: 'eth_getBal*' }]);
      expect((await call('eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest'])).json.result).to.match(/^0x/);
    });
  });
});
