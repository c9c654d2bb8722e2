/**
 * The interface's prose sentences (ids `§S ¶n`, the n-th sentence of section S) that no other
 * test pins, against one real svc in front of anvil (test/conformance/fixture-core.ts): the
 * taxonomy's shape, where API-key records live, admin CORS apart from project CORS, zero-config
 * injection, cordon scopes, JSON-RPC 2.0 everywhere, the healthcheck's eval and blockTimeMs, the
 * admin body, and the diagnostic and cost headers of singles, batches and early errors.
 */
import { expect } from 'chai';
import { createProxy } from '../../core/proxy.ts';
import { createLogger } from '../../lib/logger.ts';
import { defaultPreset } from '../../presets/default.ts';
import { waitFor } from '../helpers/svc.ts';
import { ADMIN_H, rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

describe('conformance: prose sentences of the interface', function () {
  this.timeout(30_000);
  let f: CoreFixture;
  const OPS = 'https://ops.example';
  const APP = 'https://app.example';
  before(async () => {
    f = await startCoreFixture(
      {
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: 'admin-secret-0123456789abcdef' } }] }, cors: { allowedOrigins: [OPS] } },
        server: { responseHeaders: { 'x-team': 'core' }, costHeaders: true },
        healthCheck: { mode: 'networks', defaultEval: 'all:activeUpstreams' },
      },
      { cors: { allowedOrigins: [APP] } },
    );
  });
  after(() => f?.close());
  const cordon = (upstream: string, method?: string) => f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream, ...(method ? { method } : {}) }]);
  const uncordon = (upstream: string, method?: string) => f.admin('svc_uncordonUpstream', [{ projectId: 'main', upstream, ...(method ? { method } : {}) }]);
  /** Whether upstream `a` serves a call pinned to it (a cordon makes the pin find nothing). */
  const aServes = async (method: string, params: unknown[]) => (await f.svc.post(`${f.path}?use-upstream=a`, rpc(method, params))).headers['x-svc-upstream'] === 'a';
  const preflight = (path: string, origin: string) => f.svc.send('OPTIONS', path, undefined, { origin, 'access-control-request-method': 'POST' });

  it('§2.2 ¶1 — svc_taxonomy: projects[] each with id and networks[]; each network has an id evm:<chainId> and upstreams[] each with an id', async () => {
    const t = (await f.admin('svc_taxonomy', [])).json.result as { projects: { id: string; networks: { id: string; upstreams: { id: string }[] }[] }[] };
    expect(t.projects.map((p) => p.id)).to.include.members(['main', 'keys']);
    const main = t.projects.find((p) => p.id === 'main')!;
    expect(main.networks).to.have.length(1);
    expect(main.networks[0]!.id).to.equal(`evm:${f.anvil.chainId}`);
    expect(main.networks[0]!.upstreams.map((u) => u.id).sort()).to.deep.equal(['a', 'b']);
    for (const p of t.projects) for (const n of p.networks) expect(n.id).to.match(/^evm:\d+$/);
  });

  it('§2.3 ¶1 — API-key records are addressed by the pair (projectId, connectorId): the same key under another pair is not found', async () => {
    const key = 'k_pair_0123456789abcdef0123456789';
    expect((await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: key, userId: 'pat' }])).json.result).to.deep.equal({ success: true, apiKey: key, userId: 'pat' });
    const other = await f.admin('svc_updateApiKey', [{ projectId: 'main', connectorId: 'mem', apiKey: key, updates: { enabled: false } }]);
    expect(other.json.error?.message, 'project main has no connector mem').to.match(/^failed to find the service: /);
    expect(other.json.result).to.equal(undefined);
    const page = (await f.admin('svc_listApiKeys', [{ projectId: 'keys', connectorId: 'mem', limit: 10 }])).json.result as { apiKeys: { key: string; enabled: boolean }[] };
    expect(page.apiKeys.find((k) => k.key === key)?.enabled, 'still enabled under its own pair').to.equal(true);
    await f.admin('svc_deleteApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: key }]);
  });

  it('§2.3 ¶2 — connectorId is the id of the connector an auth strategy declares: a key added under it authenticates that project\'s calls', async () => {
    const key = 'k_conn_0123456789abcdef0123456789';
    const path = `/keys/evm/${f.anvil.chainId}`;
    const call = () => f.svc.post(path, rpc('eth_blockNumber', []), { authorization: `Bearer ${key}` });
    expect((await call()).status).to.equal(401);
    await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: key, userId: 'kim' }]);
    const r = await call();
    expect(r.status, r.text).to.equal(200);
    expect(r.json.result).to.match(/^0x/);
    await f.admin('svc_deleteApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: key }]);
  });

  it('§2.5 ¶1 — admin.cors applies only to /admin, and project CORS only to the project: neither answers for the other\'s origin', async () => {
    expect((await preflight('/admin', OPS)).headers['access-control-allow-origin']).to.equal(OPS);
    expect((await preflight('/admin', APP)).headers['access-control-allow-origin']).to.equal(undefined);
    expect((await preflight(f.path, APP)).headers['access-control-allow-origin']).to.equal(APP);
    expect((await preflight(f.path, OPS)).headers['access-control-allow-origin']).to.equal(undefined);
  });

  it('§2.10 ¶2 — an explicitly empty providers list still gets zero-config providers; a project with any upstream or provider gets none', () => {
    const proxy = createProxy({
      config: {
        projects: [
          { id: 'empty', providers: [] },
          { id: 'own', upstreams: [{ id: 'u', endpoint: 'http://127.0.0.1:9/', evm: { chainId: 1 } }] },
          { id: 'prov', providers: [{ id: 'mine', vendor: 'repository' }] },
        ],
      },
      plugins: defaultPreset(),
      logger: createLogger('silent'),
    });
    const providers = (id: string) => ((proxy.config.projects.find((p) => p.id === id)!.settings.providers ?? []) as { id: string }[]).map((p) => p.id);
    expect(providers('empty')).to.include('public');
    expect(providers('own')).to.deep.equal([]);
    expect(providers('prov')).to.deep.equal(['mine']);
    expect(proxy.config.warnings.filter((w) => w.includes('zero-config')).map((w) => w.split(' ')[1])).to.deep.equal(['empty']);
  });

  it('§3.1 ¶1 — a * cordon excludes the upstream for every method and overrides a method cordon; a method cordon excludes it for that method only', async () => {
    const balance: [string, unknown[]] = ['eth_getBalance', [`0x${'00'.repeat(19)}01`, 'latest']];
    try {
      await cordon('a', 'eth_getBalance');
      expect(await aServes(...balance), 'method cordon: that method').to.equal(false);
      expect(await aServes('eth_blockNumber', []), 'method cordon: other methods').to.equal(true);
      await cordon('a');
      expect(await aServes('eth_blockNumber', []), '* cordon: every method').to.equal(false);
      await uncordon('a', 'eth_getBalance');
      expect(await aServes(...balance), 'the * cordon still holds').to.equal(false);
      await uncordon('a');
      // Uncordoned: the selection admits it again (at the latest by its next evaluation, 100 ms here).
      await waitFor(() => aServes(...balance), 5000);
    } finally {
      await uncordon('a');
      await uncordon('a', 'eth_getBalance');
    }
  });

  it('§4 ¶1 — proxy answers, proxy errors, batch elements and admin answers are JSON-RPC 2.0', async () => {
    const bodies = [
      (await f.svc.post(f.path, rpc('eth_blockNumber', []))).json,
      (await f.svc.post(f.path, rpc('no_suchMethod', []))).json,
      ...((await f.svc.post(f.path, [rpc('eth_blockNumber', [], 1), rpc('eth_chainId', [], 2)])).json as unknown[]),
      (await f.admin('svc_taxonomy', [])).json,
    ] as { jsonrpc: string }[];
    expect(bodies).to.have.length(5);
    for (const b of bodies) expect(b.jsonrpc).to.equal('2.0');
  });

  it('§4.3 ¶1 — eval=<strategy> overrides healthCheck.defaultEval', async () => {
    try {
      await cordon('a');
      expect((await f.svc.send('GET', '/healthcheck')).status, 'defaultEval all:activeUpstreams with a cordoned upstream').to.equal(503);
      const r = await f.svc.send('GET', '/healthcheck?eval=any:initializedUpstreams');
      expect(r.status).to.equal(200);
      expect(r.json.status).to.equal('OK');
    } finally {
      await uncordon('a');
    }
  });

  it('§4.3 ¶7 — top-level status is OK when healthy, in every mode', async () => {
    const r = await f.svc.send('GET', '/healthcheck?eval=any:initializedUpstreams');
    expect(r.status).to.equal(200);
    expect(r.json.status).to.equal('OK');
    const one = await f.svc.send('GET', `${f.path}/healthcheck?eval=any:initializedUpstreams`);
    expect(one.status).to.equal(200);
    expect(one.json.status).to.equal('OK');
  });

  it('§4.3 ¶6 — blockTimeMs is a number of milliseconds once estimated, null while observations accumulate', async () => {
    const network = (await f.svc.send('GET', '/healthcheck?eval=any:initializedUpstreams')).json.details.main.networks[`evm:${f.anvil.chainId}`] as { blockTimeMs: unknown };
    expect(network).to.have.property('blockTimeMs');
    // anvil mines on demand: no block time can be estimated from heads that do not move.
    expect(network.blockTimeMs).to.equal(null);
  });

  it('§4.4 ¶1 — the admin body is {jsonrpc: "2.0", id, method, params}: the answer carries the same id', async () => {
    const r = await f.svc.post('/admin', { jsonrpc: '2.0', id: 'op-7', method: 'svc_taxonomy', params: [] }, ADMIN_H);
    expect(r.status).to.equal(200);
    expect(r.json.id).to.equal('op-7');
    expect(r.json.jsonrpc).to.equal('2.0');
    expect(r.json.result.projects).to.be.an('array');
  });

  it('§4.5 ¶1 — every proxy answer (a result, an error, a batch, an early refusal) has Content-Type application/json and server.responseHeaders', async () => {
    const answers = [
      await f.svc.post(f.path, rpc('eth_blockNumber', [])),
      await f.svc.post(f.path, rpc('no_suchMethod', [])),
      await f.svc.post(f.path, [rpc('eth_blockNumber', [], 1), rpc('eth_chainId', [], 2)]),
      await f.svc.post('/nope/evm/1', rpc('eth_blockNumber', [])),
      await f.svc.post(f.path, '{not json'),
    ];
    expect(answers).to.have.length(5);
    for (const [i, r] of answers.entries()) {
      expect(r.headers['content-type'], `answer ${i}`).to.equal('application/json');
      expect(r.headers['x-team']).to.equal('core');
    }
  });

  it('§4.5 ¶2 — trace segments carry a reason and an outcome from the rule\'s lists; :won only on the attempt that answered', async () => {
    const trace = (await f.svc.post(f.path, rpc('eth_getBalance', [`0x${'00'.repeat(19)}02`, 'latest']))).headers['x-svc-upstreams'] as string;
    const segments = trace.split(';');
    expect(segments.length).to.be.at.least(1);
    for (const s of segments) expect(s).to.match(/^[a-z]+=(primary|hedge|retry|consensus_slot|sweep):(success|timeout|exec_revert|rate_limited):\d+(:won)?$/);
    expect(segments.filter((s) => s.endsWith(':won'))).to.have.length(1);
    expect(segments[0]).to.match(/=primary:success:\d+:won$/);
  });

  it('§4.5 ¶3 — a batch gets one aggregated set: counters summed, no X-SVC-Upstream, the traces of its calls in order', async () => {
    const r = await f.svc.post(f.path, [rpc('eth_getBalance', [`0x${'00'.repeat(19)}03`, 'latest'], 1), rpc('eth_getBalance', [`0x${'00'.repeat(19)}04`, 'latest'], 2)]);
    expect(r.status).to.equal(200);
    expect(r.headers['x-svc-upstream']).to.equal(undefined);
    expect(r.headers['x-svc-upstream-attempts']).to.equal('2');
    const segments = (r.headers['x-svc-upstreams'] as string).split(';');
    expect(segments).to.have.length(2);
    for (const s of segments) expect(s).to.match(/=primary:success:\d+:won$/);
  });

  it('§4.5 ¶4 — with server.costHeaders, cost headers on single calls and batches; none on an early error that routed no call', async () => {
    const single = await f.svc.post(f.path, rpc('eth_blockNumber', []));
    expect(single.headers['x-svc-calls']).to.equal('1');
    const batch = await f.svc.post(f.path, [rpc('eth_blockNumber', [], 1), rpc('eth_chainId', [], 2)]);
    expect(batch.headers['x-svc-calls']).to.equal('2');
    const early = await f.svc.post('/nope/evm/1', rpc('eth_blockNumber', []));
    expect(early.status).to.equal(404);
    expect(early.headers['x-svc-calls']).to.equal(undefined);
  });
});
