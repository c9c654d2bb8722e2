/**
 * eRPC's transport keys at load time, through the real loader with the default preset's fragments: `server.tls` (required files named
 * when enabled, resolved only when enabled), `proxyPools` (resolved by id; an unknown id named wherever an upstream refers to it) and
 * `jsonRpc.enableGzip` (off unless set, as in eRPC); gRPC upstreams served by the bds plugin and refused by name without it; the migration table's
 * status of each key.
 */
import { expect } from 'chai';
import { erpcKeyStatus } from '../../../config/erpc-doc.ts';
import { loadConfigObject } from '../../../config/load.ts';
import { buildConfigSchema, type SchemaFragment } from '../../../config/schema.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { problemsOf } from '../../helpers/config-problems.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const upstream = (u: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  projects: [{ id: 'main', upstreams: [{ endpoint: 'http://127.0.0.1:8545', evm: { chainId: 1 }, ...u }] }],
  ...extra,
});

describe("eRPC's transport keys at load time", () => {
  it('server.tls: enabled needs certFile and keyFile (each named); resolved only when enabled; an unknown key is refused', () => {
    const p = problemsOf(() => load({ server: { tls: { enabled: true } } })).map((x) => x.path);
    expect(p).to.include.members(['server.tls.certFile', 'server.tls.keyFile']);
    const on = load({ server: { tls: { enabled: true, certFile: 'c.pem', keyFile: 'k.pem', caFile: 'ca.pem' } } }).config.server.tls;
    expect(on).to.deep.equal({ certFile: 'c.pem', keyFile: 'k.pem', caFile: 'ca.pem' });
    expect(load({ server: { tls: { enabled: false, certFile: 'c.pem', keyFile: 'k.pem' } } }).config.server.tls).to.equal(undefined);
    expect(load({}).config.server.tls).to.equal(undefined);
    expect(problemsOf(() => load({ server: { tls: { enabled: true, certFile: 'c', keyFile: 'k', minVersion: '1.3' } } }))[0]?.path).to.equal(
      'server.tls.minVersion',
    );
  });

  it('proxyPools: resolved by id; an unknown pool named at the upstream and at upstreamDefaults; a pool needs a URL', () => {
    const pools = { proxyPools: [{ id: 'egress', urls: ['http://p1:3128', 'socks5://p2:1080'] }] };
    const { config } = load(upstream({ jsonRpc: { proxyPool: 'egress' } }, pools));
    expect([...(config.proxyPools ?? new Map())]).to.deep.equal([['egress', ['http://p1:3128', 'socks5://p2:1080']]]);
    expect((config.projects[0]?.upstreams[0]?.settings.jsonRpc as { proxyPool?: string }).proxyPool).to.equal('egress');
    const bad = problemsOf(() =>
      load({
        ...pools,
        projects: [
          { id: 'main', upstreamDefaults: { jsonRpc: { proxyPool: 'gone' } }, upstreams: [{ endpoint: 'http://x', jsonRpc: { proxyPool: 'egress2' } }] },
        ],
      }),
    );
    expect(bad.map((x) => x.path)).to.include.members(['projects[0].upstreamDefaults.jsonRpc.proxyPool', 'projects[0].upstreams[0].jsonRpc.proxyPool']);
    expect(problemsOf(() => load({ proxyPools: [{ id: 'e', urls: [] }] }))[0]?.path).to.match(/^proxyPools\[0\]\.urls/);
    expect(problemsOf(() => load({ proxyPools: [{ id: 'e', urls: ['ftp://p:21'] }] }))[0]?.path).to.equal('proxyPools[0].urls[0]');
  });

  it('jsonRpc.enableGzip is off unless set (eRPC: nil = false)', () => {
    expect((load(upstream({})).config.projects[0]?.upstreams[0]?.settings.jsonRpc as { enableGzip?: boolean } | undefined)?.enableGzip).to.not.equal(true);
    const on = load(upstream({ jsonRpc: { enableGzip: true } })).config.projects[0]?.upstreams[0]?.settings.jsonRpc as { enableGzip: boolean };
    expect(on.enableGzip).to.equal(true);
  });

  it('gRPC upstreams (grpc://, grpc+bds://, grpcs:// with a grpc block) load with the bds plugin; without it they are refused by name', () => {
    for (const endpoint of ['grpc://node.example:50051', 'grpc+bds://node.example:443', 'grpcs://node.example:9443']) {
      const u = load(upstream({ endpoint, grpc: { headers: { authorization: 'Bearer k' }, poolSize: 2 } })).config.projects[0]?.upstreams[0];
      expect(u?.endpoint).to.equal(endpoint);
      expect(u?.settings.grpc).to.deep.equal({ headers: { authorization: 'Bearer k' }, poolSize: 2, maxMessageSize: 32 * 1024 * 1024 });
    }
    const withoutBds = defaultPreset()
      .filter((p) => p.name !== 'bds')
      .flatMap((p) => (p.schema ? [p.schema] : []));
    for (const endpoint of ['grpc://node.example:50051', 'grpc+bds://node.example:443']) {
      const m = problemsOf(() => loadConfigObject(upstream({ endpoint }), { fragments: withoutBds, env: {} }))
        .filter((x) => x.path === 'projects[0].upstreams[0].endpoint')
        .map((x) => x.message)
        .join('\n');
      expect(m).to.match(/eRPC's gRPC upstreams .* served by the bds plugin, which this preset does not apply/);
    }
    // A preset with neither the bds nor the vendors plugin: the core's endpoint check names the scheme, the grpc block its feature.
    const bare = problemsOf(() => loadConfigObject(upstream({ endpoint: 'grpc://n:1', grpc: { headers: {} } }), { fragments: [], env: {} }));
    expect(bare.find((x) => x.path.endsWith('.endpoint'))?.message).to.equal(
      '"grpc://" is served by no plugin of this preset: must be an http:// or https:// URL',
    );
    expect(bare.find((x) => x.path.endsWith('.grpc'))?.message).to.match(/gRPC upstreams .*apply the bds plugin/);
    expect(problemsOf(() => load(upstream({ type: 'grpc' })))[0]?.message).to.match(/gRPC upstreams are chosen by the endpoint's scheme/);
    // Binary and reserved metadata names are refused (grpc-js cannot send them as text).
    for (const name of ['x-trace-bin', 'grpc-timeout'])
      expect(problemsOf(() => load(upstream({ endpoint: 'grpc://n:1', grpc: { headers: { [name]: 'v' } } })))[0]?.path).to.match(/grpc\.headers/);
  });

  it('the migration table: server.tls rewritten (insecureSkipVerify dropped), proxyPools, the jsonRpc keys and the grpc block the same', () => {
    const schema = buildConfigSchema(FRAGMENTS);
    expect(erpcKeyStatus(schema, 'server.tls').status).to.equal('rewritten');
    for (const k of ['proxyPools', 'projects[].upstreams[].jsonRpc.enableGzip', 'projects[].upstreams[].jsonRpc.proxyPool'])
      expect(erpcKeyStatus(schema, k).status, k).to.equal('same');
    expect(erpcKeyStatus(schema, 'database.evmJsonRpcCache.connectors[].redis.connPoolSize').status).to.equal('rewritten');
    for (const k of ['projects[].upstreams[].grpc', 'projects[].upstreams[].grpc.headers', 'projects[].upstreams[].grpc.poolSize'])
      expect(erpcKeyStatus(schema, k).status, k).to.equal('same');
  });
});
