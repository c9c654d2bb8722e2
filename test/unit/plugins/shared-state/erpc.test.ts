/**
 * eRPC's `database.sharedState` and top-level `clusterKey` at load time (plugins/shared-state/erpc.ts),
 * through the real loader with the default preset's fragments: a Redis connector (uri, or eRPC's
 * addr/username/password/db/tls fields) becomes svc's top-level `sharedState`, with each change a
 * rewrite line and no password in any line; the top-level `clusterKey` is the block's default; a
 * memory connector (eRPC's default) is dropped; other drivers and eRPC's lock/timeout tuning are
 * refused by name; a `database` left empty goes, one that still holds the cache stays.
 */
import { expect } from 'chai';
import { loadConfigObject } from '../../../../config/load.ts';
import type { SchemaFragment } from '../../../../config/schema.ts';
import { sharedStateSettingsOf } from '../../../../plugins/shared-state/index.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { problemsOf } from '../../../helpers/config-problems.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, unknown>;
const load = (raw: Doc) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const lines = (r: ReturnType<typeof load>) => r.rewrites.map((w) => `${w.path}: ${JSON.stringify(w.from)} -> ${JSON.stringify(w.to)}`);

function problems(raw: Doc): Array<{ path: string; message: string }> {
  return problemsOf(() => load(raw));
}

/** The one problem at `path` (every problem in the failure message). */
function problemAt(raw: Doc, path: string): string {
  const p = problems(raw);
  const hit = p.filter((x) => x.path === path);
  expect(hit, JSON.stringify(p)).to.have.length(1);
  return hit[0]!.message;
}

const shared = (block: Doc, extra: Doc = {}): Doc => ({ database: { sharedState: block }, ...extra });

describe("shared-state: eRPC's database.sharedState at load time", () => {
  it("a Redis connector with uri becomes svc's sharedState (clusterKey kept); database left empty is removed; every change is a rewrite line", () => {
    const r = load(shared({ clusterKey: 'prod-main', connector: { id: 'shared-redis', driver: 'redis', redis: { uri: 'redis://redis.internal:6379' } } }));
    expect(r.document.sharedState).to.deep.equal({ redis: { uri: 'redis://redis.internal:6379' }, clusterKey: 'prod-main' });
    expect(r.document).to.not.have.property('database');
    expect(lines(r)).to.deep.equal([
      'database.sharedState.connector.id: "shared-redis" -> undefined',
      'database.sharedState: "database.sharedState" -> "sharedState"',
      'database: {} -> undefined',
    ]);
    expect(sharedStateSettingsOf(r.config.settings)).to.deep.include({ redis: { uri: 'redis://redis.internal:6379' }, clusterKey: 'prod-main' });
  });

  it("eRPC's quick-taste form: password in the URI kept, go-redis ?pool_size dropped (node-redis ignores URL options)", () => {
    const r = load(shared({ clusterKey: 'prod-main', connector: { driver: 'redis', redis: { uri: 'redis://:secret@redis.internal:6379/?pool_size=10' } } }));
    expect((r.document.sharedState as Doc).redis).to.deep.equal({ uri: 'redis://:secret@redis.internal:6379' });
    expect(lines(r)).to.include(
      'database.sharedState.connector.redis.uri: "options ?pool_size=10" -> "(removed: go-redis options; svc keeps its own connections)"',
    );
  });

  it('addr/username/password/db/tls become one rediss:// URI with the password in its user part, never in a rewrite line', () => {
    const r = load(
      shared({
        connector: { driver: 'redis', redis: { addr: 'redis://cache.internal:6380', username: 'svc', password: 'p@ss:w/rd', db: 2, tls: { enabled: true } } },
      }),
    );
    const uri = ((r.document.sharedState as Doc).redis as Doc).uri as string;
    expect(uri).to.equal('rediss://svc:p%40ss%3Aw%2Frd@cache.internal:6380/2');
    const u = new URL(uri);
    expect(decodeURIComponent(u.password)).to.equal('p@ss:w/rd');
    expect(lines(r).join('\n')).to.not.include('p@ss').and.to.not.include('p%40ss');
    expect(lines(r)).to.include('database.sharedState.connector.redis.password: "password" -> "the password in uri"');
  });

  it('the driver follows the connector block as in eRPC (a redis block without driver is Redis)', () => {
    const r = load(shared({ connector: { redis: { uri: 'redis://h:6379' } } }));
    expect(r.document.sharedState).to.deep.equal({ redis: { uri: 'redis://h:6379' } });
  });

  it('the top-level clusterKey is the default of the block: used when the block has none, dropped when it has one', () => {
    const a = load(shared({ connector: { driver: 'redis', redis: { uri: 'redis://h:6379' } } }, { clusterKey: 'fleet-a' }));
    expect((a.document.sharedState as Doc).clusterKey).to.equal('fleet-a');
    expect(a.document).to.not.have.property('clusterKey');
    expect(lines(a)).to.include('clusterKey: "fleet-a" -> "sharedState.clusterKey"');
    const b = load(shared({ clusterKey: 'own', connector: { driver: 'redis', redis: { uri: 'redis://h:6379' } } }, { clusterKey: 'fleet-a' }));
    expect((b.document.sharedState as Doc).clusterKey).to.equal('own');
    expect(lines(b)).to.include('clusterKey: "fleet-a" -> undefined');
  });

  it("a top-level clusterKey alone is dropped (eRPC reads it for shared state only); with svc's own sharedState it fills its clusterKey", () => {
    const a = load({ clusterKey: 'erpc-default' });
    expect(a.document).to.not.have.property('clusterKey');
    expect(a.document).to.not.have.property('sharedState');
    expect(lines(a)).to.deep.equal(['clusterKey: "erpc-default" -> undefined']);
    const b = load({ clusterKey: 'k', sharedState: { redis: { uri: 'redis://h:6379' } } });
    expect(sharedStateSettingsOf(b.config.settings)?.clusterKey).to.equal('k');
  });

  it("a memory connector (eRPC's default without one) shares nothing between instances: the block is dropped, with eRPC's lock tuning", () => {
    const a = load(shared({ connector: { driver: 'memory', memory: { maxItems: 1000 } }, lockTtl: '4s' }, { clusterKey: 'x' }));
    expect(a.document).to.not.have.property('sharedState');
    expect(a.document).to.not.have.property('database');
    expect(a.document).to.not.have.property('clusterKey');
    expect(sharedStateSettingsOf(a.config.settings)).to.equal(undefined);
    const b = load(shared({ clusterKey: 'x' }));
    expect(b.document).to.not.have.property('sharedState');
    expect(lines(b)[0]).to.equal('database.sharedState: {"clusterKey":"x"} -> undefined');
  });

  it("database keeps the cache block (the cache plugin's own rewrite still applies)", () => {
    const r = load({
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'c', driver: 'redis', redis: { addr: 'h:6379' } }],
          policies: [{ connector: 'c', network: '*', method: '*', finality: 'FINALIZED' }],
        },
        sharedState: { connector: { driver: 'redis', redis: { addr: 'h:6379' } } },
      },
    });
    const db = r.document.database as { evmJsonRpcCache: { connectors: Array<{ redis: Doc }>; policies: Doc[] }; sharedState?: unknown };
    expect(db).to.not.have.property('sharedState');
    expect(db.evmJsonRpcCache.connectors[0]!.redis.uri).to.equal('redis://h:6379');
    expect(db.evmJsonRpcCache.policies[0]!.finality).to.equal('finalized');
    expect(r.document.sharedState).to.deep.equal({ redis: { uri: 'redis://h:6379' } });
  });
});

describe("shared-state: eRPC's shared-state keys svc does not honour are refused by name", () => {
  for (const driver of ['postgresql', 'dynamodb', 'grpc'])
    it(`driver ${driver}: svc shares state through Redis only, and says what to write`, () => {
      const m = problemAt(shared({ connector: { driver, [driver]: {} } }), 'database.sharedState.connector.driver');
      expect(m)
        .to.match(/svc shares state through Redis only/)
        .and.to.match(/driver: redis/)
        .and.to.match(/sharedState: \{redis: \{uri\}\}/);
    });

  it('a block of another driver than its driver key names is refused as eRPC reads it (the block wins)', () => {
    expect(
      problemAt(shared({ connector: { driver: 'redis', postgresql: { connectionUri: 'postgres://x' } } }), 'database.sharedState.connector.driver'),
    ).to.match(/PostgreSQL/);
  });

  for (const key of ['fallbackTimeout', 'lockTtl', 'lockMaxWait', 'updateMaxWait'])
    it(`${key}: refused (svc takes no locks and never waits for shared state on the request path)`, () => {
      const m = problemAt(shared({ connector: { driver: 'redis', redis: { uri: 'redis://h:6379' } }, [key]: '3s' }), `database.sharedState.${key}`);
      expect(m).to.match(new RegExp(`eRPC's .*remove ${key}`));
    });

  for (const [key, re] of [
    ['getTimeout', /read timeout/],
    ['setTimeout', /write timeout/],
    ['initTimeout', /connect timeout/],
    ['lockRetryInterval', /no Redis locks/],
    ['iamAuth', /IAM/],
  ] as const)
    it(`connector.redis.${key}: refused`, () => {
      expect(
        problemAt(
          shared({ connector: { driver: 'redis', redis: { addr: 'h:6379', [key]: key === 'iamAuth' ? { enabled: true } : '1s' } } }),
          `database.sharedState.connector.redis.${key}`,
        ),
      ).to.match(re);
    });

  it('connector.redis.connPoolSize: dropped with a line (svc pipelines its commands over one connection, so a pool size changes nothing)', () => {
    const r = load(shared({ connector: { driver: 'redis', redis: { addr: 'h:6379', connPoolSize: 8 } } }));
    expect(r.document.sharedState).to.deep.equal({ redis: { uri: 'redis://h:6379' } });
    expect(lines(r).find((l) => l.startsWith('database.sharedState.connector.redis.connPoolSize: 8 -> '))).to.match(/changes nothing/);
  });

  it('other connector keys, unknown block keys, TLS files, a missing redis block and both shapes at once are refused', () => {
    expect(
      problemAt(shared({ connector: { driver: 'redis', redis: { uri: 'redis://h' }, failsafeForGets: [] } }), 'database.sharedState.connector.failsafeForGets'),
    ).to.match(/no meaning for svc's shared state/);
    expect(
      problemAt(shared({ connector: { driver: 'redis', redis: { uri: 'redis://h' } }, snapshotInterval: '1s' }), 'database.sharedState.snapshotInterval'),
    ).to.match(/unknown key/);
    expect(
      problemAt(
        shared({ connector: { driver: 'redis', redis: { addr: 'h:1', tls: { enabled: true, caFile: '/ca.pem' } } } }),
        'database.sharedState.connector.redis.tls',
      ),
    ).to.match(/NODE_EXTRA_CA_CERTS/);
    expect(
      problemAt(shared({ connector: { driver: 'redis', redis: { uri: 'redis://h', tls: { enabled: true } } } }), 'database.sharedState.connector.redis.tls'),
    ).to.match(/rediss:\/\//);
    expect(problemAt(shared({ connector: { driver: 'redis' } }), 'database.sharedState.connector.redis')).to.match(/needs `redis: \{uri\}`/);
    expect(
      problemAt(shared({ connector: { driver: 'redis', redis: { uri: 'redis://:a@h', password: 'b' } } }), 'database.sharedState.connector.redis.password'),
    ).to.match(/both set/);
    expect(
      problemAt(
        shared({ connector: { driver: 'redis', redis: { uri: 'redis://h' } } }, { sharedState: { redis: { uri: 'redis://h' } } }),
        'database.sharedState',
      ),
    ).to.match(/both set: keep sharedState/);
    expect(problemAt(shared({ connector: { driver: 'valkey' } }), 'database.sharedState.connector.driver')).to.match(
      /unknown shared-state connector driver "valkey"/,
    );
  });

  it('a refused block is reported once, by name, not also as an unknown key', () => {
    const p = problems(shared({ clusterKey: 'a', connector: { driver: 'postgresql', postgresql: { connectionUri: 'postgres://x' } } }, { clusterKey: 'b' }));
    expect(p.map((x) => x.path)).to.deep.equal(['database.sharedState.connector.driver']);
  });
});
