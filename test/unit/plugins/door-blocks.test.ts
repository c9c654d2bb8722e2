/**
 * `auth` and `cors` blocks of doors other than projects (docs/access.md, docs/plugins.md
 * "Services and slots"): the admin and healthcheck plugins declare `admin.auth`,
 * `healthCheck.auth` and `admin.cors` as blocks the auth and cors plugins check at start-up
 * (their schemas live in those plugins), with the paths and messages `svc validate` gives a
 * config key; without the auth plugin a configured strategy is refused, without the cors plugin
 * the admin endpoint sends no CORS headers. An in-house plugin guards its own route the same way.
 */
import { expect } from 'chai';
import { createLogger } from '../../../lib/logger.ts';
import type { Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { Duration, type HttpRequestInfo, resolveConfigBlock, Strict, Type } from '../../../core/plugin-api.ts';
import { ConfigError, ErrAuthUnauthorized } from '../../../core/plugin-errors.ts';
import { AuthBlockSchema, type Authenticator, doorAuthenticator } from 'svc-proxy/plugins/auth';
import { CORS_SERVICE } from 'svc-proxy/plugins/cors';
import { defaultPreset } from '../../../presets/default.ts';
import { presetWithout, startSvc } from '../../helpers/svc.ts';

const build = (config: object, plugins: Plugin[] = defaultPreset()) => createProxy({ config, plugins, logger: createLogger('silent') });

/** The problems a config fails with, as `svc validate` prints them (`path: message`). */
function problemsOf(config: object, plugins?: Plugin[]): string[] {
  try {
    build(config, plugins);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => `${p.path}: ${p.message}`);
    throw e;
  }
  return [];
}

const http = (headers: Record<string, string>): HttpRequestInfo => ({
  headers,
  query: {},
  remoteAddress: '192.0.2.1',
  clientAddress: '192.0.2.1',
  host: 'svc.example',
  path: '/acme',
});

describe('auth and cors blocks of other doors', () => {
  it('a bad admin.auth or healthCheck.auth fails with the problems the same block gets as projects[].auth, under its own path', () => {
    const blocks = [
      { strategies: [{ type: 'secret', secret: {} }] },
      { strategies: [{ type: 'password' }] },
      { strategies: [{ type: 'jwt', jwt: { allowedAlgorithms: ['RS256'], clockTolerance: 'soon' } }] },
      { strategies: [{ type: 'network', network: { allowedCIDRs: ['not-a-cidr'] } }] },
      {},
    ];
    for (const auth of blocks) {
      const asProject = problemsOf({ projects: [{ id: 'p', auth }] }).map((p) => p.replace('projects[0].auth', '<auth>'));
      expect(asProject, JSON.stringify(auth)).to.not.be.empty;
      expect(
        problemsOf({ admin: { auth } }).map((p) => p.replace('admin.auth', '<auth>')),
        `admin ${JSON.stringify(auth)}`,
      ).to.deep.equal(asProject);
      expect(
        problemsOf({ healthCheck: { auth } }).map((p) => p.replace('healthCheck.auth', '<auth>')),
        `healthCheck ${JSON.stringify(auth)}`,
      ).to.deep.equal(asProject);
    }
    expect(problemsOf({ admin: { auth: 5 } })).to.deep.equal(['admin.auth: must be object']);
    expect(problemsOf({ admin: { auth: { strategies: [{ type: 'database', connector: { id: 'k', driver: 'memory' } }] } } })).to.deep.equal([
      'admin.auth.strategies[0]: a database (API key) strategy is only for project auth',
    ]);
  });

  it('a bad admin.cors fails with the problems the same block gets as projects[].cors', () => {
    for (const cors of [{ allowedOrigins: 'x' }, { bogus: 1 }, { maxAge: -1 }, { allowedOrigins: ['*'], allowCredentials: true }]) {
      const asProject = problemsOf({ projects: [{ id: 'p', cors }] }).map((p) => p.replace('projects[0].cors', '<cors>'));
      expect(asProject, JSON.stringify(cors)).to.not.be.empty;
      expect(
        problemsOf({ admin: { cors } }).map((p) => p.replace('admin.cors', '<cors>')),
        JSON.stringify(cors),
      ).to.deep.equal(asProject);
    }
    expect(problemsOf({ admin: { cors: { allowedOrigins: ['*'], allowCredentials: true } } })).to.deep.equal([
      'admin.cors.allowCredentials: must be false when allowedOrigins contains "*"',
    ]);
    // The admin allows no origin by default, so credentials alone are no problem there.
    expect(problemsOf({ admin: { cors: { allowCredentials: true } } })).to.deep.equal([]);
  });

  it('the cors service fills the spec §2.5 admin defaults, with no origin allowed unless listed', () => {
    const proxy = build({});
    const policy = proxy.services.require(CORS_SERVICE).door(undefined, 'admin.cors');
    expect(policy.settings).to.deep.equal({
      allowedOrigins: [],
      allowedMethods: ['GET', 'POST', 'OPTIONS'],
      allowedHeaders: ['content-type', 'authorization', 'x-svc-secret-token'],
      exposedHeaders: [],
      allowCredentials: false,
      maxAge: 3600,
    });
    expect(proxy.services.require(CORS_SERVICE).door({ allowedOrigins: ['https://*.example.com'] }, 'x.cors').settings.allowedOrigins).to.deep.equal([
      'https://*.example.com',
    ]);
  });

  it('without the auth plugin: a configured strategy names what is missing; no strategy leaves admin closed and the healthcheck open', () => {
    const noAuth = presetWithout('auth', 'x402');
    expect(problemsOf({ admin: { auth: { strategies: [{ type: 'secret', secret: { value: 's'.repeat(32) } }] } } }, noAuth)).to.deep.equal([
      'admin.auth: needs the auth plugin (it is in the default preset)',
    ]);
    expect(problemsOf({ healthCheck: { auth: { strategies: [{ type: 'secret', secret: { value: 's'.repeat(32) } }] } } }, noAuth)).to.deep.equal([
      'healthCheck.auth: needs the auth plugin (it is in the default preset)',
    ]);
    expect(problemsOf({ admin: { auth: { strategies: [] } }, healthCheck: { auth: { strategies: [] } } }, noAuth)).to.deep.equal([]);
  });

  it('without the cors plugin: admin.cors names what is missing, and /admin answers a preflight without CORS headers', async () => {
    const noCors = presetWithout('cors');
    expect(problemsOf({ admin: { cors: { allowedOrigins: ['https://ops.example'] } } }, noCors)).to.deep.equal([
      'admin.cors: needs the cors plugin (it is in the default preset)',
    ]);
    const svc = await startSvc({ logLevel: 'error', metrics: { enabled: false }, projects: [] }, { plugins: noCors });
    try {
      const r = await svc.send('OPTIONS', '/admin', undefined, { origin: 'https://ops.example', 'access-control-request-method': 'POST' });
      expect(r.status).to.equal(204);
      expect(r.headers['access-control-allow-origin']).to.equal(undefined);
    } finally {
      await svc.close();
    }
  });

  it('an in-house plugin guards its own door through the auth service: its block checked under its path', async () => {
    const secret = 'acme-door-secret-0123456789abcdef';
    let guard: Authenticator | undefined;
    const acme: Plugin = {
      name: 'acme-door',
      schema: { root: { acmeDoor: Strict({ auth: Type.Optional(AuthBlockSchema()) }) } },
      apply(h) {
        h.hooks.configured.tap('acme-door', (c) => {
          guard = doorAuthenticator(h.services, (c.settings.acmeDoor as { auth?: unknown } | undefined)?.auth, 'acmeDoor.auth');
        });
      },
    };
    build({ acmeDoor: { auth: { strategies: [{ type: 'secret', secret: { value: secret } }] } } }, [...defaultPreset(), acme]);
    expect((await guard!.authenticate(http({ 'x-svc-secret-token': secret }))).strategy).to.equal('secret');
    let refused: unknown;
    await guard!.authenticate(http({ 'x-svc-secret-token': 'wrong-0123456789abcdef0123456789' })).catch((e: unknown) => (refused = e));
    expect(refused).to.be.instanceOf(ErrAuthUnauthorized);
    expect(problemsOf({ acmeDoor: { auth: { strategies: [{ type: 'secret' }] } } }, [...defaultPreset(), acme])).to.include(
      'acmeDoor.auth.strategies[0].secret: is required',
    );
  });

  it('resolveConfigBlock fills defaults and converts durations, reporting problems under the block path', () => {
    const schema = Strict({ wait: Type.Optional(Duration({ default: '2s' })), list: Type.Array(Type.Object({ n: Type.Integer() })) });
    expect(resolveConfigBlock(schema, { list: [{ n: '3' }] }, 'acme.block')).to.deep.equal({ wait: 2000, list: [{ n: 3 }] });
    const raw = { wait: '1m', list: [] };
    expect(resolveConfigBlock(schema, raw, 'acme.block').wait).to.equal(60_000);
    expect(raw.wait, 'the raw block is not mutated').to.equal('1m');
    expect(() => resolveConfigBlock(schema, { list: [{ n: 'x' }], more: 1 }, 'acme.block')).to.throw(
      ConfigError,
      /acme\.block\.list\[0\]\.n: must be integer[\s\S]*acme\.block\.more: unknown key "more"|acme\.block\.more: unknown key "more"[\s\S]*acme\.block\.list\[0\]\.n: must be integer/,
    );
  });
});
