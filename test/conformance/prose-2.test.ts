/**
 * Conformance of the prose sentences of spec §2 (docs/interface.md, ids `§2.x ¶n`): the taxonomy
 * object, where API-key records live (real Redis and PostgreSQL), admin CORS against project CORS,
 * the directive precedence, config locations, tri-state booleans, header boolean parsing and the
 * directive-adjacent inputs, and the zero-config injection rules. One svc in front of one anvil
 * node holds a project per situation; the zero-config rules get their own small svcs (one with a
 * log capture, one `svc start ENDPOINT` process).
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { expect } from 'chai';
import pg from 'pg';
import { pino } from 'pino';
import { createClient } from 'redis';
import { createProxy } from '../../core/host/create.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import type { defaultPreset } from '../../presets/default.ts';
import { tracingPlugin } from '../../plugins/tracing/index.ts';
import { FORCE_TRACE_ATTRIBUTE } from '../../plugins/tracing/sdk.ts';
import { redactedSuffix, repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort, listenOnLoopback } from '../helpers/ports.ts';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { ADMIN, ADMIN_H, rpc } from './fixture-core.ts';

/** The error's wire name (`ErrUpstreamsExhausted`...). */
const errorName = (r: SvcResponse): string | undefined => r.json?.error?.data?.code;

/** A consensus round of two participants on eth_getCode: `X-SVC-Consensus-Slots: 2` when it runs. */
const CONSENSUS = [{ matchMethod: 'eth_getCode', consensus: { maxParticipants: 2, agreementThreshold: 2 } }, { matchMethod: '*' }];
/** A use-upstream selector that matches no upstream: a call under it fails with ErrUpstreamsExhausted. */
const NOWHERE = 'no-such-upstream';

describe('conformance: prose of §2 (resources)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;
  let db: PostgresHandle;
  let svc: SvcHandle;
  const exporter = new InMemorySpanExporter();
  const chain = () => anvil.chainId;
  const admin = (method: string, params?: unknown) => svc.post('/admin', rpc(method, params), ADMIN_H);
  let n = 0x1000;
  /** A fresh address: an uncached, unmultiplexed call. */
  const fresh = () => `0x${(++n).toString(16).padStart(40, '0')}`;

  before(async () => {
    [anvil, redis, db] = await Promise.all([startAnvil(), startRedis(), startPostgres()]);
    const CHAIN = anvil.chainId;
    const up = (id: string) => ({ id, endpoint: anvil.url, evm: { chainId: CHAIN } });
    const abc = [up('a'), up('b'), up('c')];
    const net = (extra: Record<string, unknown> = {}) => ({ architecture: 'evm', evm: { chainId: CHAIN }, ...extra });
    const redisConnector = { id: 'rk', driver: 'redis', redis: { uri: redis.url } };
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: true, port: 0 },
        tracing: { enabled: true, sampleRate: 0 },
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] }, cors: { allowedOrigins: ['https://ops.example'] } },
        projects: [
          { id: 'main', networks: [net()], upstreams: [up('a'), up('b')] },
          // §2.8 precedence and locations: a default that selects nothing shows that it applied.
          { id: 'prec', networks: [net({ directiveDefaults: { useUpstream: NOWHERE } })], upstreams: abc },
          { id: 'nd', networkDefaults: { directiveDefaults: { useUpstream: NOWHERE } }, networks: [net()], upstreams: abc },
          {
            id: 'fs',
            networks: [net({ failsafe: [{ matchMethod: 'eth_getBalance', directiveDefaults: { useUpstream: NOWHERE } }, { matchMethod: '*' }] })],
            upstreams: abc,
          },
          // §2.8 tri-state booleans and header parsing, read through skip-consensus.
          { id: 'cons', networks: [net({ failsafe: CONSENSUS })], upstreams: [up('a'), up('b')] },
          {
            id: 'tri-unset',
            networkDefaults: { directiveDefaults: { skipConsensus: true } },
            networks: [net({ failsafe: CONSENSUS })],
            upstreams: [up('a'), up('b')],
          },
          {
            id: 'tri-false',
            networkDefaults: { directiveDefaults: { skipConsensus: true } },
            networks: [net({ failsafe: CONSENSUS, directiveDefaults: { skipConsensus: false } })],
            upstreams: [up('a'), up('b')],
          },
          { id: 'tri-true', networks: [net({ failsafe: CONSENSUS, directiveDefaults: { skipConsensus: true } })], upstreams: [up('a'), up('b')] },
          // §2.3: API keys in Redis (connector rk, in two projects) and PostgreSQL (connector pk).
          {
            id: 'keys',
            networks: [net()],
            upstreams: [up('k')],
            auth: {
              strategies: [
                { type: 'database', connector: redisConnector },
                { type: 'database', connector: { id: 'pk', driver: 'postgresql', postgresql: { connectionUri: db.url } } },
              ],
            },
          },
          { id: 'keys2', networks: [net()], upstreams: [up('k')], auth: { strategies: [{ type: 'database', connector: redisConnector }] } },
          // §2.5: project-level CORS of its own.
          { id: 'web', networks: [net()], upstreams: [up('w')], cors: { allowedOrigins: ['https://app.example'] } },
        ],
      },
      { plugins: [...presetWithout('tracing'), tracingPlugin({ exporter })] },
    );
  });
  after(async () => {
    await svc?.close();
    await Promise.all([anvil?.stop(), redis?.stop(), db?.stop()]);
  });

  describe('§2.2 taxonomy', () => {
    it('§2.2 ¶1 — svc_taxonomy: projects[] with a string id and networks[]; each network an id evm:<chainId> and upstreams[]; each upstream an id', async () => {
      const r = await admin('svc_taxonomy');
      const projects = r.json.result.projects as Array<Record<string, unknown>>;
      expect(projects.map((p) => p.id)).to.deep.equal(['main', 'prec', 'nd', 'fs', 'cons', 'tri-unset', 'tri-false', 'tri-true', 'keys', 'keys2', 'web']);
      for (const p of projects) {
        expect(p).to.have.all.keys('id', 'networks');
        expect(p.id).to.be.a('string');
        for (const net of p.networks as Array<Record<string, unknown>>) {
          expect(net).to.have.all.keys('id', 'upstreams');
          expect(net.id).to.equal(`evm:${chain()}`);
          for (const u of net.upstreams as Array<Record<string, unknown>>) {
            expect(u).to.have.all.keys('id');
            expect(u.id).to.be.a('string');
          }
        }
      }
      expect(projects[0]).to.deep.equal({ id: 'main', networks: [{ id: `evm:${chain()}`, upstreams: [{ id: 'a' }, { id: 'b' }] }] });
    });
  });

  describe('§2.3 where API-key records live', () => {
    const keyCall = (project: string, key: string) => svc.post(`/${project}/evm/${chain()}`, rpc('eth_blockNumber', []), { authorization: `Bearer ${key}` });
    const listed = async (projectId: string, connectorId: string) =>
      ((await admin('svc_listApiKeys', [{ projectId, connectorId }])).json.result.apiKeys as Array<{ key: string }>).map((k) => k.key);
    const withRedis = async <T>(fn: (c: ReturnType<typeof createClient>) => Promise<T>): Promise<T> => {
      const c = createClient({ url: redis.url });
      await c.connect();
      try {
        return await fn(c);
      } finally {
        await c.quit();
      }
    };
    const withPg = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        return await fn(c);
      } finally {
        await c.end();
      }
    };

    it('§2.3 ¶1 — records live in the database of a database-backed auth strategy, addressed by the pair (projectId, connectorId)', async () => {
      const K = 'k_pair_redis_0123456789abcdef0123456789';
      const P = 'k_pair_pg_0123456789abcdef0123456789ab';
      expect((await admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'rk', apiKey: K, userId: 'ann' }])).json.result).to.deep.equal({
        success: true,
        apiKey: K,
        userId: 'ann',
      });
      expect((await admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'pk', apiKey: P, userId: 'bob' }])).json.result).to.deep.equal({
        success: true,
        apiKey: P,
        userId: 'bob',
      });
      // In the databases, under the pair.
      expect(JSON.parse((await withRedis((c) => c.get(`svc_auth:keys:rk:k:${K}`))) as string)).to.include({ key: K, userId: 'ann' });
      const rows = await withPg(async (c) => (await c.query('SELECT project_id, connector_id, user_id FROM svc_api_keys WHERE api_key = $1', [P])).rows);
      expect(rows).to.deep.equal([{ project_id: 'keys', connector_id: 'pk', user_id: 'bob' }]);
      // The pair addresses the records: the same connector id in another project, or another connector of the same project, holds other ones.
      expect(await listed('keys', 'rk'))
        .to.include(K)
        .and.not.include(P);
      expect(await listed('keys', 'pk'))
        .to.include(P)
        .and.not.include(K);
      expect(await listed('keys2', 'rk')).to.not.include(K);
      expect((await keyCall('keys', K)).status).to.equal(200);
      expect((await keyCall('keys', P)).status).to.equal(200);
      expect((await keyCall('keys2', K)).status).to.equal(401);
    });

    it('§2.3 ¶2 — connectorId is the id of the connector an auth strategy declares (auth.strategies[].connector.id); another id finds no service', async () => {
      const K = 'k_connector_id_0123456789abcdef01234567';
      expect((await admin('svc_addApiKey', [{ projectId: 'keys2', connectorId: 'rk', apiKey: K, userId: 'cid' }])).json.result.success).to.equal(true);
      expect(await listed('keys2', 'rk')).to.include(K);
      for (const [projectId, connectorId] of [
        ['keys2', 'redis'], // the driver, not the id
        ['keys2', 'RK'],
        ['keys2', 'pk'], // declared by another project only
        ['main', 'rk'], // a project without that strategy
      ]) {
        const r = await admin('svc_listApiKeys', [{ projectId, connectorId }]);
        expect(r.json.error?.message, `${projectId}/${connectorId}`).to.match(/^failed to find the service: /);
      }
    });

    it('§2.3 ¶3 — each key has a main index row and reverse index entries, removed on delete', async () => {
      const K = 'k_reverse_redis_0123456789abcdef01234567';
      const P = 'k_reverse_pg_0123456789abcdef0123456789';
      await admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'rk', apiKey: K, userId: 'rev-user' }]);
      await admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'pk', apiKey: P, userId: 'rev-user' }]);
      // Redis: the main row k:<key>, the reverse index u:<userId>.
      await withRedis(async (c) => {
        expect(JSON.parse((await c.get(`svc_auth:keys:rk:k:${K}`)) as string)).to.include({ key: K, userId: 'rev-user', enabled: true });
        expect(await c.sMembers('svc_auth:keys:rk:u:rev-user')).to.deep.equal([K]);
      });
      // PostgreSQL: the main row keyed by (project_id, connector_id, api_key), the reverse index by user.
      await withPg(async (c) => {
        const idx = (await c.query("SELECT indexdef FROM pg_indexes WHERE tablename = 'svc_api_keys'")).rows.map((r: { indexdef: string }) => r.indexdef);
        expect(idx.some((d) => /\(project_id, connector_id, api_key\)/.test(d))).to.equal(true);
        expect(idx.some((d) => /\(project_id, connector_id, user_id\)/.test(d))).to.equal(true);
        expect(
          (await c.query("SELECT api_key FROM svc_api_keys WHERE project_id = 'keys' AND connector_id = 'pk' AND user_id = 'rev-user'")).rows,
        ).to.deep.equal([{ api_key: P }]);
      });
      expect((await admin('svc_deleteApiKey', [{ projectId: 'keys', connectorId: 'rk', apiKey: K }])).json.result).to.deep.equal({
        success: true,
        apiKey: K,
        userId: 'rev-user',
      });
      expect((await admin('svc_deleteApiKey', [{ projectId: 'keys', connectorId: 'pk', apiKey: P }])).json.result).to.deep.equal({
        success: true,
        apiKey: P,
        userId: 'rev-user',
      });
      await withRedis(async (c) => {
        expect(await c.get(`svc_auth:keys:rk:k:${K}`)).to.equal(null);
        expect(await c.sMembers('svc_auth:keys:rk:u:rev-user')).to.deep.equal([]);
      });
      await withPg(async (c) => {
        expect(
          (await c.query("SELECT api_key FROM svc_api_keys WHERE project_id = 'keys' AND connector_id = 'pk' AND user_id = 'rev-user'")).rows,
        ).to.deep.equal([]);
      });
    });
  });

  describe('§2.5 admin CORS', () => {
    const preflight = (path: string, origin: string) =>
      svc.send('OPTIONS', path, undefined, { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' });
    it('§2.5 ¶1 — admin.cors is independent of project-level CORS and applies only to /admin', async () => {
      // /admin: its own origin list, not the project's.
      expect((await preflight('/admin', 'https://ops.example')).headers['access-control-allow-origin']).to.equal('https://ops.example');
      expect((await preflight('/admin', 'https://app.example')).headers['access-control-allow-origin']).to.equal(undefined);
      const post = await svc.post('/admin', rpc('svc_taxonomy'), { ...ADMIN_H, origin: 'https://ops.example' });
      expect(post.headers['access-control-allow-origin']).to.equal('https://ops.example');
      // A project with CORS: its list, not admin's.
      const web = `/web/evm/${chain()}`;
      expect((await preflight(web, 'https://app.example')).headers['access-control-allow-origin']).to.equal('https://app.example');
      expect((await preflight(web, 'https://ops.example')).headers['access-control-allow-origin']).to.equal(undefined);
      // Neither a project without CORS nor the healthcheck gets admin's.
      const plain = await svc.post(`/main/evm/${chain()}`, rpc('eth_chainId', []), { origin: 'https://ops.example' });
      expect(plain.json.result).to.equal(`0x${chain().toString(16)}`);
      expect(plain.headers['access-control-allow-origin']).to.equal(undefined);
      expect((await preflight(`/main/evm/${chain()}`, 'https://ops.example')).headers['access-control-allow-origin']).to.equal(undefined);
      expect((await svc.send('GET', '/healthcheck', undefined, { origin: 'https://ops.example' })).headers['access-control-allow-origin']).to.equal(undefined);
    });
  });

  describe('§2.8 directives', () => {
    const pathOf = (project: string, query = '') => `/${project}/evm/${chain()}${query}`;
    const upstreamOf = async (project: string, headers: Record<string, string> = {}, query = '') => {
      const r = await svc.post(pathOf(project, query), rpc('eth_getBalance', [fresh(), 'latest']), headers);
      return r.json.error ? errorName(r) : r.headers['x-svc-upstream'];
    };
    const slots = async (project: string, headers: Record<string, string> = {}) => {
      const r = await svc.post(pathOf(project), rpc('eth_getCode', [fresh(), 'latest']), headers);
      expect(r.json.result, JSON.stringify(r.json)).to.equal('0x');
      return r.headers['x-svc-consensus-slots'];
    };

    it('§2.8 ¶1 — precedence, lowest to highest: directiveDefaults, then the HTTP header, then the URL query parameter', async () => {
      // Config alone (useUpstream selects nothing).
      expect(await upstreamOf('prec')).to.equal('ErrUpstreamsExhausted');
      // The header over config.
      expect(await upstreamOf('prec', { 'x-svc-use-upstream': 'b' })).to.equal('b');
      // The query over the header, and over config.
      expect(await upstreamOf('prec', { 'x-svc-use-upstream': 'b' }, '?use-upstream=c')).to.equal('c');
      expect(await upstreamOf('prec', { 'x-svc-use-upstream': NOWHERE }, '?use-upstream=a')).to.equal('a');
      expect(await upstreamOf('prec', { 'x-svc-use-upstream': 'b' }, `?use-upstream=${NOWHERE}`)).to.equal('ErrUpstreamsExhausted');
      expect(await upstreamOf('prec', {}, '?use-upstream=c')).to.equal('c');
    });

    it('§2.8 ¶2 — directiveDefaults is read at projects[].networks[].directiveDefaults, networkDefaults.directiveDefaults and a failsafe entry', async () => {
      // projects[].networks[].directiveDefaults
      expect(await upstreamOf('prec')).to.equal('ErrUpstreamsExhausted');
      // networkDefaults.directiveDefaults (the network sets none)
      expect(await upstreamOf('nd')).to.equal('ErrUpstreamsExhausted');
      expect(await upstreamOf('nd', { 'x-svc-use-upstream': 'a' })).to.equal('a');
      // failsafe[].directiveDefaults: only for the calls its entry matches
      expect(await upstreamOf('fs')).to.equal('ErrUpstreamsExhausted');
      expect(await upstreamOf('fs', { 'x-svc-use-upstream': 'b' })).to.equal('b');
      const other = await svc.post(pathOf('fs'), rpc('eth_blockNumber', []));
      expect(other.json.result).to.match(/^0x/);
    });

    it('§2.8 ¶3 — boolean config fields are tri-state: unset is skipped (a lower level applies), explicit false and explicit true each win', async () => {
      // No default anywhere: the fallback (skip-consensus false), consensus runs.
      expect(await slots('cons')).to.equal('2');
      // networkDefaults true, the network unset: skipped, so true applies.
      expect(await slots('tri-unset')).to.equal(undefined);
      // networkDefaults true, the network explicit false: false.
      expect(await slots('tri-false')).to.equal('2');
      // The network explicit true.
      expect(await slots('tri-true')).to.equal(undefined);
    });

    it('§2.8 ¶4 — directive header booleans: only the string true (any case, whitespace stripped) is truthy; 1 and yes are false', async () => {
      for (const v of ['true', 'TRUE', 'True', ' tRuE ', 'true\t'])
        expect(await slots('cons', { 'x-svc-skip-consensus': v }), JSON.stringify(v)).to.equal(undefined);
      for (const v of ['1', 'yes', 'on', 'false', 'y', 't']) expect(await slots('cons', { 'x-svc-skip-consensus': v }), JSON.stringify(v)).to.equal('2');
    });

    it('§2.8 ¶5 — force-trace (X-SVC-Force-Trace / ?force-trace, truthy true, 1, yes) bypasses trace sampling', async () => {
      exporter.reset();
      const requests = () => exporter.getFinishedSpans().filter((s: ReadableSpan) => s.name === 'svc.request');
      // Sampled out (sampleRate 0) unless forced; falsy values first, so their spans would precede the forced ones.
      await svc.post(pathOf('main'), rpc('eth_getBalance', [fresh(), 'latest']));
      for (const v of ['no', 'false', '0', 'on']) await svc.post(pathOf('main'), rpc('eth_getBalance', [fresh(), 'latest']), { 'x-svc-force-trace': v });
      await svc.post(pathOf('main', '?force-trace=no'), rpc('eth_getBalance', [fresh(), 'latest']));
      for (const v of ['true', '1', 'yes', 'YES']) await svc.post(pathOf('main'), rpc('eth_getBalance', [fresh(), 'latest']), { 'x-svc-force-trace': v });
      for (const v of ['true', '1', 'yes']) await svc.post(pathOf('main', `?force-trace=${v}`), rpc('eth_getBalance', [fresh(), 'latest']));
      await waitFor(() => requests().length >= 7);
      expect(requests()).to.have.length(7);
      for (const s of requests()) expect(s.attributes[FORCE_TRACE_ATTRIBUTE]).to.equal(true);
    });

    it('§2.8 ¶5 — the query parameter user-agent overrides the User-Agent header for agent-name metrics', async () => {
      const received = async (agent: string) => {
        const text = await (await fetch(svc.metricsUrl as string)).text();
        let sum = 0;
        for (const line of text.split('\n'))
          if (line.startsWith('svc_network_request_received_total{') && line.includes('project="main"') && line.includes(`agent_name="${agent}"`))
            sum += Number(line.slice(line.lastIndexOf(' ') + 1));
        return sum;
      };
      const [q0, h0] = [await received('proseagentq'), await received('proseagenth')];
      const r = await svc.post(pathOf('main', '?user-agent=ProseAgentQ/2.1'), rpc('eth_blockNumber', []), { 'user-agent': 'ProseAgentH/6.13' });
      expect(r.json.result).to.match(/^0x/);
      await waitFor(async () => (await received('proseagentq')) === q0 + 1);
      expect(await received('proseagenth')).to.equal(h0);
      // Without the query parameter the header names the agent.
      await svc.post(pathOf('main'), rpc('eth_blockNumber', []), { 'user-agent': 'ProseAgentH/6.13' });
      await waitFor(async () => (await received('proseagenth')) === h0 + 1);
    });

    it('§2.8 ¶5 — the JSON body field networkId (evm:<chainId>) selects the network when the URL path has no architecture and chain', async () => {
      const r = await svc.post('/main', { ...rpc('eth_chainId', [], 5), networkId: `evm:${chain()}` });
      expect(r.status).to.equal(200);
      expect(r.json).to.deep.equal({ jsonrpc: '2.0', id: 5, result: `0x${chain().toString(16)}` });
      const other = await svc.post('/main', { ...rpc('eth_chainId', [], 6), networkId: 'evm:999999' });
      expect(other.status).to.equal(404);
      expect(errorName(other)).to.equal('ErrNetworkNotSupported');
    });
  });
});

/** A svc whose log lines (warn and above) are kept, for the zero-config warning. */
interface LoggedSvc {
  svc: SvcHandle;
  /** Parsed pino lines. */
  lines: Array<{ level: number; msg: string }>;
}

async function startLoggedSvc(config: object, plugins: ReturnType<typeof defaultPreset>): Promise<LoggedSvc> {
  const lines: LoggedSvc['lines'] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as { level: number; msg: string });
      cb();
    },
  });
  const proxy = createProxy({ config, plugins, logger: pino({ level: 'warn' }, sink), port: 0, host: '127.0.0.1', metricsPort: 0, probeBackoffMs: 50 });
  const addr = await proxy.start().catch(async (e: unknown) => {
    await proxy.close().catch(() => undefined);
    throw e;
  });
  const url = `http://127.0.0.1:${addr.port}`;
  const send = (method: string, path: string, body?: string, headers?: Record<string, string>) => httpRequest(method, `${url}${path}`, body, headers);
  return {
    lines,
    svc: {
      url,
      proxy,
      send,
      post: (path, body, headers) => send('POST', path, typeof body === 'string' ? body : JSON.stringify(body), headers),
      close: () => proxy.close(),
    },
  };
}

/** A catalog server (the repository vendor's) answering a fixed document; counts its requests. */
async function catalogServer(doc: unknown): Promise<{ url: string; hits: () => number; close: () => void }> {
  let hits = 0;
  const server: Server = createServer((_q, res) => {
    hits++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(doc));
  });
  const port = await listenOnLoopback(server, 'catalog');
  return { url: `http://127.0.0.1:${port}/`, hits: () => hits, close: () => server.close() };
}

describe('conformance: prose of §2.10 (zero-config providers)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let one: FaultServer;
  let catalog: Awaited<ReturnType<typeof catalogServer>>;
  let logged: LoggedSvc;
  const providersOf = (s: SvcHandle, id: string) =>
    ((s.proxy.config.projects.find((p) => p.id === id)?.settings.providers ?? []) as Array<{ id: string; vendor: string }>).map((p) => `${p.id}:${p.vendor}`);
  const zeroWarnings = (projectId: string) =>
    logged.lines.filter((l) => l.level === 40 && l.msg.startsWith(`project ${projectId} has no upstreams and no providers: zero-config`));

  before(async () => {
    [anvil, one] = await Promise.all([startAnvil(), startFaultServer({ chainId: 1 })]);
    catalog = await catalogServer({ '1': { endpoints: [one.url] } });
    const plugins = [...presetWithout('vendor-repository'), repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: catalog.url } })];
    logged = await startLoggedSvc(
      {
        ...NO_CACHE,
        metrics: { enabled: false },
        projects: [
          { id: 'bare' },
          { id: 'empty', providers: [] },
          { id: 'mine', providers: [{ id: 'mine', vendor: 'repository' }] },
          { id: 'ups', upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: anvil.chainId } }] },
          { id: 'ups-empty', providers: [], upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: anvil.chainId } }] },
        ],
      },
      plugins,
    );
  });
  after(async () => {
    await logged?.svc.close();
    catalog?.close();
    await Promise.all([anvil?.stop(), one?.close()]);
  });

  it('§2.10 ¶1 — injected when a project has zero providers, zero upstreams and no endpoint flags, with a warning logged', async () => {
    expect(providersOf(logged.svc, 'bare')).to.deep.equal(['public:repository', 'hyper:hyper']);
    expect(zeroWarnings('bare')).to.have.length(1);
    const r = await logged.svc.post('/bare/evm/1', rpc('eth_chainId', []));
    expect(r.json.result).to.equal('0x1');
    expect(zeroWarnings('ups')).to.have.length(0);
  });

  it('§2.10 ¶1 — svc start with an ENDPOINT argument and no config: no providers are injected', async () => {
    const cat = await catalogServer({ '1': { endpoints: [one.url] } });
    const [port, metricsPort] = [await freePort(), await freePort()];
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--conditions=svc-source',
        join(PACKAGE_ROOT, 'bin', 'svc.ts'),
        'start',
        '--port',
        String(port),
        '--metrics-port',
        String(metricsPort),
        anvil.url,
      ],
      {
        cwd: PACKAGE_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, SVC_PUBLIC_REPOSITORY_URL: cat.url, SVC_HYPER_ROOT_DOMAIN: 'hyper.invalid' },
      },
    );
    let logs = '';
    child.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitFor(
        async () =>
          await fetch(`${base}/evm/${anvil.chainId}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(rpc('eth_chainId', [])),
          }).then(
            (x) => x.ok,
            () => false,
          ),
        20_000,
      );
      // The endpoint's chain is served; chain 1, which the injected public provider's catalog lists, is not.
      const r = await httpRequest('POST', `${base}/main/evm/1`, JSON.stringify(rpc('eth_chainId', [])));
      expect(r.status).to.equal(404);
      expect(r.json.error.data.code).to.equal('ErrNetworkNotSupported');
      expect(cat.hits()).to.equal(0);
      expect(logs).to.not.match(/zero-config/);
    } finally {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGTERM'), 50).unref();
      await exited;
      cat.close();
    }
  });

  it('§2.10 ¶2 — an explicitly empty providers list does not prevent injection; any provider or upstream does', async () => {
    expect(providersOf(logged.svc, 'empty')).to.deep.equal(['public:repository', 'hyper:hyper']);
    expect(zeroWarnings('empty')).to.have.length(1);
    expect(providersOf(logged.svc, 'mine')).to.deep.equal(['mine:repository']);
    expect(providersOf(logged.svc, 'ups')).to.deep.equal([]);
    expect(providersOf(logged.svc, 'ups-empty')).to.deep.equal([]);
    for (const p of ['mine', 'ups', 'ups-empty']) expect(zeroWarnings(p), p).to.have.length(0);
    expect((await logged.svc.post('/empty/evm/1', rpc('eth_chainId', []))).json.result).to.equal('0x1');
  });

  it('§2.10 ¶3 — provider id public is reserved: a provider reusing it generates upstream ids that collide with existing ones (logged, not added)', async () => {
    // An upstream already holds the id provider `public` generates for the catalog's endpoint.
    const two = await startFaultServer({ chainId: 1 });
    const id = `public-evm:1-${redactedSuffix(one.url)}`;
    const plugins = [...presetWithout('vendor-repository'), repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: catalog.url } })];
    const s = await startLoggedSvc(
      {
        ...NO_CACHE,
        metrics: { enabled: false },
        projects: [{ id: 'p', upstreams: [{ id, endpoint: two.url, evm: { chainId: 1 } }], providers: [{ id: 'public', vendor: 'repository' }] }],
      },
      plugins,
    );
    try {
      // The declared network bootstraps its providers at start-up.
      await waitFor(() => s.lines.some((l) => l.msg.includes(`generated upstream id "${id}"`)));
      const collision = s.lines.find((l) => l.msg.includes(`generated upstream id "${id}"`));
      expect(collision?.level).to.equal(50);
      expect(collision?.msg).to.include('already has: not added').and.include('provider id "public" is reserved');
      const ups = s.svc.proxy.projects
        .get('p')
        ?.networks.get('evm:1')
        ?.upstreams.map((u) => [u.id, u.config.endpoint]);
      expect(ups).to.deep.equal([[id, two.url]]);
    } finally {
      await s.svc.close();
      await two.close();
    }
  });
});
