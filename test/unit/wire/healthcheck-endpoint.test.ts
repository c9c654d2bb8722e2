/**
 * The healthcheck endpoint as answered (spec §4.1, §4.3): the methods it takes, the exact bodies
 * of a refused credential (401), a draining server and an unknown strategy (503), an unknown
 * project or network (404), client text bounded in those answers, a providers-only project
 * before its first network, the scope a path names, and the per-network details of the
 * `verbose` mode. Driven through the plugin's route against a scripted host, not a running svc.
 */
import { expect } from 'chai';
import type { Context } from 'koa';
import type { Network, PluginHost, Project, Upstream } from '../../../core/plugin-api.ts';
import { AUTH_SERVICE } from 'svc-proxy/plugins/auth';
import { CHAIN_STATE_SERVICE, NO_CHAIN_STATE } from 'svc-proxy/plugins/evm-state';
import { healthcheckPlugin } from '../../../plugins/healthcheck/index.ts';

type Handler = (k: Context) => Promise<void>;

interface Setup {
  mode?: 'simple' | 'verbose' | 'networks';
  auth?: { rejects: boolean };
  lifecycle?: string;
  projects?: Project[];
  resolved?: Network;
}

function upstream(id: string, state = 'ready'): Upstream {
  return { id, state, config: { settings: {} } } as unknown as Upstream;
}

function project(
  id: string,
  opts: {
    upstreams?: Upstream[];
    providers?: unknown[];
    alias?: string;
    snapshots?: Record<string, { requests: number; errorRate: number; cordoned: boolean }>;
  } = {},
): Project {
  const ups = opts.upstreams ?? [upstream(`${id}-a`)];
  const network = { id: 'evm:1', alias: opts.alias, upstreams: ups } as unknown as Network;
  return {
    id,
    config: { upstreams: ups.map((u) => ({ id: u.id })), settings: opts.providers ? { providers: opts.providers } : {} },
    networks: new Map(ups.length ? [['evm:1', network]] : []),
    aliases: new Map(opts.alias ? [[opts.alias, network]] : []),
    upstreams: new Map(ups.map((u) => [u.id, u])),
    health: { snapshot: (uid: string) => opts.snapshots?.[uid] ?? { requests: 0, errorRate: 0.25, cordoned: false }, isCordoned: () => false },
  } as unknown as Project;
}

/** The plugin applied to a scripted host: its route, what it registered, and what it asked. */
function setUp(s: Setup = {}) {
  let handler: Handler | undefined;
  let methods: string[] = [];
  let configured: ((c: unknown) => void) | undefined;
  const compiled: Array<[unknown, unknown]> = [];
  const resolveDeadlines: number[] = [];
  const host = {
    projects: new Map((s.projects ?? [project('main')]).map((p) => [p.id, p])),
    get lifecycle() {
      return s.lifecycle ?? 'serving';
    },
    config: { server: { maxTimeoutMs: 30_000 } },
    requestInfo: () => ({ headers: {}, query: {} }),
    services: {
      get: (k: unknown) => {
        if (k === AUTH_SERVICE && s.auth) {
          return {
            compile: (block: unknown, scope: unknown) => {
              compiled.push([block, scope]);
              return { authenticate: () => (s.auth!.rejects ? Promise.reject(new Error('no')) : Promise.resolve({ userId: 'x' })) };
            },
          };
        }
        if (k === CHAIN_STATE_SERVICE) return { of: () => ({ ...NO_CHAIN_STATE, blockTimeMs: 2000 }) };
        return undefined;
      },
    },
    hooks: {
      configured: { tap: (_n: unknown, f: (c: unknown) => void) => (configured = f) },
      routes: { tap: (_o: unknown, f: (r: unknown) => void) => f({ register: (_paths: unknown, m: string[], h: Handler) => ((methods = m), (handler = h)) }) },
      resolveNetwork: {
        promise: (_p: unknown, _id: string, deadline: number) => {
          resolveDeadlines.push(deadline);
          return Promise.resolve(s.resolved);
        },
      },
      select: { call: (c: Upstream[]) => c },
    },
    internalContext: () => ({ ctx: {}, done: () => undefined }),
  } as unknown as PluginHost;
  healthcheckPlugin().apply(host);
  configured!({ settings: { healthCheck: { mode: s.mode ?? 'simple', ...(s.auth ? { auth: { strategies: [{ type: 'secret' }] } } : {}) } } });
  const get = async (path: string, query: Record<string, string> = {}) => {
    const k = { path, query, status: 0, body: '' } as unknown as Context & { body: string };
    await handler!(k);
    return { status: k.status, body: JSON.parse(k.body) as Record<string, unknown> };
  };
  return { get, methods: () => methods, compiled, resolveDeadlines };
}

describe('wire: the healthcheck endpoint (spec §4.1, §4.3)', () => {
  it('answers GET, HEAD, PUT, PATCH and DELETE (every method but POST and OPTIONS)', () => {
    expect(setUp().methods()).to.deep.equal(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE']);
  });

  it('healthCheck.auth is compiled by the auth plugin under its own path; a refused credential is 401 with the exact body', async () => {
    const w = setUp({ auth: { rejects: true } });
    expect(w.compiled).to.deep.equal([[{ strategies: [{ type: 'secret' }] }, { path: 'healthCheck.auth' }]]);
    expect(await w.get('/')).to.deep.equal({
      status: 401,
      body: {
        status: 'ERROR',
        code: 'ErrAuthUnauthorized',
        message: 'healthcheck requires a credential one of healthCheck.auth.strategies accepts (a secret, JWT or SIWE message) or an allowed address',
      },
    });
    expect((await setUp({ auth: { rejects: false } }).get('/')).status).to.equal(200);
  });

  it('a server that is not serving answers 503 naming its lifecycle', async () => {
    expect(await setUp({ lifecycle: 'draining' }).get('/')).to.deep.equal({
      status: 503,
      body: { status: 'ERROR', code: 'HealthcheckUnhealthy', message: 'shutting down', details: { lifecycle: 'draining' } },
    });
  });

  it('an unknown strategy is 503 naming its first 64 characters', async () => {
    expect(await setUp().get('/', { eval: `x${'y'.repeat(100)}` })).to.deep.equal({
      status: 503,
      body: { status: 'ERROR', code: 'HealthcheckUnhealthy', message: `unknown evaluation strategy: x${'y'.repeat(63)}`, details: {} },
    });
  });

  it('404 bodies: bad percent-encoding, an unknown project (64 characters of it), a path naming no network (128 characters of it)', async () => {
    const w = setUp();
    expect(await w.get('/%E0%A4%A')).to.deep.equal({
      status: 404,
      body: { status: 'ERROR', code: 'ErrProjectNotFound', message: 'invalid percent-encoding in path' },
    });
    expect(await w.get(`/${'p'.repeat(100)}`)).to.deep.equal({
      status: 404,
      body: { status: 'ERROR', code: 'ErrProjectNotFound', message: `project "${'p'.repeat(64)}" not found` },
    });
    const path = `/main/${'n'.repeat(200)}`;
    expect(await w.get(path)).to.deep.equal({
      status: 404,
      body: { status: 'ERROR', code: 'ErrNetworkNotSupported', message: `path ${path.slice(0, 128)} names no network of project main` },
    });
  });

  it('a network the project does not have yet is asked of the resolveNetwork hook with a deadline server.maxTimeout ahead', async () => {
    const w = setUp();
    const before = Date.now();
    expect((await w.get('/main/evm/5')).status).to.equal(404);
    expect(w.resolveDeadlines).to.have.length(1);
    expect(w.resolveDeadlines[0]).to.be.within(before + 30_000, Date.now() + 30_000);
  });

  it('scopes: /<project>/healthcheck, an alias and /<project>/evm/<chainId> answer for that project or network', async () => {
    const w = setUp({ projects: [project('main', { alias: 'eth' })] });
    for (const p of ['/main/healthcheck', '/main/eth', '/main/evm/1', '/main/evm/1/healthcheck']) {
      expect(await w.get(p), p).to.deep.equal({ status: 200, body: { status: 'OK', message: '1 / 1 upstreams initialized' } });
    }
    expect(await w.get('/')).to.deep.equal({ status: 200, body: { status: 'OK', message: 'main: 1 / 1 upstreams initialized' } });
  });

  it('a providers-only project with no network yet is healthy; one with upstreams configured or no providers is not', async () => {
    const zero = setUp({ projects: [project('z', { upstreams: [], providers: [{ vendor: 'x' }] })] });
    expect(await zero.get('/z')).to.deep.equal({ status: 200, body: { status: 'OK', message: 'no networks initialized yet' } });
    const none = setUp({ projects: [project('z', { upstreams: [], providers: [] })] });
    expect((await none.get('/z')).body).to.deep.include({ status: 'ERROR', message: 'no upstreams configured' });
    const unset = setUp({ projects: [project('z', { upstreams: [] })] });
    expect((await unset.get('/z')).body).to.deep.include({ message: 'no upstreams configured' });
  });

  it('a path of more than two segments names a network only as /<project>/evm/<chainId>', async () => {
    const w = setUp({ projects: [project('main', { alias: 'eth' })] });
    expect((await w.get('/main/eth/extra')).status).to.equal(404);
    expect((await w.get('/main/eth')).status).to.equal(200);
  });

  it('verbose mode: an upstream is healthy only when ready, not cordoned and below a 100% error rate', async () => {
    const ups = [upstream('ok'), upstream('probing', 'probing'), upstream('cordoned'), upstream('failing')];
    const snapshots = {
      ok: { requests: 5, errorRate: 0.99, cordoned: false },
      probing: { requests: 0, errorRate: 0, cordoned: false },
      cordoned: { requests: 5, errorRate: 0, cordoned: true },
      failing: { requests: 5, errorRate: 1, cordoned: false },
    };
    const r = await setUp({ mode: 'verbose', projects: [project('main', { upstreams: ups, snapshots })] }).get('/main/evm/1');
    const net = (r.body.details as Record<string, { networks: Record<string, { upstreams: Record<string, { healthy: boolean }> }> }>).main!.networks['evm:1']!;
    expect(Object.fromEntries(Object.entries(net.upstreams).map(([id, u]) => [id, u.healthy]))).to.deep.equal({
      ok: true,
      probing: false,
      cordoned: false,
      failing: false,
    });
  });

  it('no project at all is unhealthy', async () => {
    expect(await setUp({ projects: [] }).get('/')).to.deep.equal({
      status: 503,
      body: { status: 'ERROR', code: 'HealthcheckUnhealthy', message: 'no projects configured', details: {} },
    });
  });

  it('verbose mode: per network its id, alias, block time, verdict and each upstream (healthy when ready, not cordoned, error rate below 100%)', async () => {
    const w = setUp({ mode: 'verbose', projects: [project('main', { alias: 'eth' })] });
    const r = await w.get('/main');
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({
      status: 'OK',
      message: '1 / 1 upstreams initialized',
      details: {
        main: {
          status: 'OK',
          networks: {
            'evm:1': {
              networkId: 'evm:1',
              alias: 'eth',
              blockTimeMs: 2000,
              healthy: true,
              status: 'OK',
              message: '1 / 1 upstreams initialized',
              upstreams: { 'main-a': { healthy: true, errorRate: 0.25 } },
            },
          },
          message: '1 / 1 upstreams initialized',
          config: { networks: 1, upstreams: 1, providers: 0 },
        },
      },
    });
    const noAlias = await setUp({ mode: 'verbose' }).get('/main/evm/1');
    expect((noAlias.body.details as Record<string, { networks: Record<string, { alias: unknown }> }>).main!.networks['evm:1']!.alias).to.equal(null);
  });
});
