/**
 * Load-time normalisation of eRPC's config shapes (config/normalize.ts, config/erpc.ts and the
 * plugins' erpc.ts files), through the real loader with the default preset's fragments: each
 * eRPC form validates, becomes svc's shape, and is recorded as a rewrite line; a shape svc cannot
 * honour is refused with a message naming the eRPC feature and svc's alternative.
 */
import { expect } from 'chai';
import { loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { problemsOf } from '../../helpers/config-problems.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

type Doc = Record<string, unknown>;
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });

/** One project around a network and an upstream (eRPC's usual layout). */
function project(network: Doc = {}, upstream: Doc = {}, extra: Doc = {}): Doc {
  return {
    projects: [
      {
        id: 'main',
        networks: [{ evm: { chainId: 1 }, ...network }],
        upstreams: [{ endpoint: 'http://127.0.0.1:8545', evm: { chainId: 1 }, ...upstream }],
        ...extra,
      },
    ],
  };
}
const net = (doc: Doc) => ((doc.projects as Doc[])[0]?.networks as Doc[])[0] as Doc;
const up = (doc: Doc) => ((doc.projects as Doc[])[0]?.upstreams as Doc[])[0] as Doc;

function problems(raw: unknown): Array<{ path: string; message: string }> {
  return problemsOf(() => load(raw));
}

describe('config: eRPC shapes are normalised at load time', () => {
  it('networks without architecture get evm; upstreams[].type evm is dropped; logLevel DEBUG is debug', () => {
    const { document, rewrites } = load({ logLevel: 'DEBUG', ...project({}, { type: 'evm' }) });
    expect(document.logLevel).to.equal('debug');
    expect(net(document).architecture).to.equal('evm');
    expect(up(document)).to.not.have.property('type');
    const paths = rewrites.map((r) => r.path);
    expect(paths).to.include.members(['logLevel', 'projects[0].networks[0].architecture', 'projects[0].upstreams[0].type']);
    expect(rewrites.find((r) => r.path === 'logLevel')).to.deep.include({ from: 'DEBUG', to: 'debug' });
  });

  it('failsafe as one object (network and upstream) becomes a one-entry list; matchFinality as one string a list', () => {
    const { document, config } = load(
      project({ failsafe: { matchMethod: '*', matchFinality: 'Finalized', retry: { maxAttempts: 3 } } }, { failsafe: { timeout: { duration: '5s' } } }),
    );
    expect(net(document).failsafe).to.deep.equal([{ matchMethod: '*', matchFinality: ['finalized'], retry: { maxAttempts: 3 } }]);
    expect(up(document).failsafe).to.deep.equal([{ timeout: { duration: '5s' } }]);
    expect((config.projects[0]?.networks[0]?.settings.failsafe as Doc[])[0]?.matchFinality).to.deep.equal(['finalized']);
  });

  it("hedge.delay and timeout.duration as eRPC's {base, quantile, min, max} become svc's flat keys", () => {
    const { document } = load(
      project({
        failsafe: [
          {
            hedge: { delay: { base: '10ms', quantile: 0.9, min: '50ms', max: '2s' }, maxCount: 2 },
            timeout: { duration: { base: '1s', quantile: 0.99, max: '10s' } },
          },
        ],
      }),
    );
    const e = (net(document).failsafe as Doc[])[0] as Doc;
    expect(e.hedge).to.deep.equal({ delay: '10ms', quantile: 0.9, minDelay: '50ms', maxDelay: '2s', maxCount: 2 });
    expect(e.timeout).to.deep.equal({ duration: '1s', quantile: 0.99, maxDuration: '10s' });
  });

  it('backoffFactor below 1 is accepted as written (eRPC: each wait is delay × factor^(n-1))', () => {
    const { config } = load(project({ failsafe: [{ retry: { maxAttempts: 4, delay: '1s', backoffFactor: 0.3 } }] }));
    expect(((config.projects[0]?.networks[0]?.settings.failsafe as Doc[])[0]?.retry as Doc).backoffFactor).to.equal(0.3);
  });

  it('retry.blockUnavailableDelay (deprecated in eRPC) becomes emptyResultDelay', () => {
    const { document } = load(project({ failsafe: [{ retry: { blockUnavailableDelay: '2s' } }] }));
    expect(((net(document).failsafe as Doc[])[0] as Doc).retry).to.deep.equal({ emptyResultDelay: '2s' });
  });

  it('multiplexing as {enabled} becomes the boolean', () => {
    expect(net(load(project({ multiplexing: { enabled: false } })).document).multiplexing).to.equal(false);
    expect(net(load(project({ multiplexing: { enabled: true } })).document).multiplexing).to.equal(true);
    expect(problems(project({ multiplexing: { enabled: true, window: '1s' } }))[0]?.message).to.match(/only on\/off/);
  });

  it("rate-limit periods in eRPC's aliases (1s, 1m, 60s, 1h, 24h, 1d, numbers) become svc's names; week/month/year are refused", () => {
    const periods = ['1s', '1m', '60s', 'Hour', '24h', '1d', 0, '3600s'];
    const raw = { rateLimiters: { budgets: [{ id: 'b', rules: periods.map((period) => ({ method: '*', maxCount: 10, period })) }] } };
    const { document } = load(raw);
    const rules = (((document.rateLimiters as Doc).budgets as Doc[])[0] as Doc).rules as Doc[];
    expect(rules.map((r) => r.period)).to.deep.equal(['second', 'minute', 'minute', 'hour', 'day', 'day', 'second', 'hour']);
    const p = problems({ rateLimiters: { budgets: [{ id: 'b', rules: [{ method: '*', maxCount: 10, period: '7d' }] }] } });
    expect(p[0]).to.deep.include({ path: 'rateLimiters.budgets[0].rules[0].period' });
    expect(p[0]?.message).to.match(/week-long.*second, minute, hour and day/);
  });

  it('redis addr/db/username become a uri (cache and rate-limit store); cacheKeyPrefix becomes redis.keyPrefix', () => {
    const raw = {
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'r', driver: 'redis', redis: { addr: 'cache.local:6379', db: 2, getTimeout: '100ms' } }],
          policies: [{ connector: 'r', finality: 'FINALIZED' }],
        },
      },
      rateLimiters: { store: { driver: 'redis', redis: { addr: 'rl.local:6379' }, cacheKeyPrefix: 'erpc_rl_' }, budgets: [] },
    };
    const { document, rewrites } = load(raw);
    const cache = (document.database as Doc).evmJsonRpcCache as Doc;
    expect(((cache.connectors as Doc[])[0] as Doc).redis).to.deep.equal({ uri: 'redis://cache.local:6379/2', readTimeout: '100ms' });
    expect(((cache.policies as Doc[])[0] as Doc).finality).to.equal('finalized');
    const store = (document.rateLimiters as Doc).store as Doc;
    expect(store).to.deep.equal({ driver: 'redis', redis: { uri: 'redis://rl.local:6379', keyPrefix: 'erpc_rl_' } });
    expect(rewrites.map((r) => r.path)).to.include.members([
      'database.evmJsonRpcCache.connectors[0].redis.addr',
      'rateLimiters.store.redis.addr',
      'rateLimiters.store.cacheKeyPrefix',
    ]);
  });

  it('a redis:// or rediss:// prefix on addr is dropped before the URI is built (cache and rate-limit store), rediss:// keeps TLS', () => {
    const raw = {
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'r', driver: 'redis', redis: { addr: 'redis://cache.local:6379', db: 2 } }],
          policies: [{ connector: 'r', finality: 'FINALIZED' }],
        },
      },
      rateLimiters: { store: { driver: 'redis', redis: { addr: 'rediss://rl.local:6380' } }, budgets: [] },
    };
    const { document } = load(raw);
    const cache = (document.database as Doc).evmJsonRpcCache as Doc;
    expect(((cache.connectors as Doc[])[0] as Doc).redis).to.deep.equal({ uri: 'redis://cache.local:6379/2' });
    expect(((document.rateLimiters as Doc).store as Doc).redis).to.deep.equal({ uri: 'rediss://rl.local:6380' });
  });

  it('rateLimitBudget inside an auth strategy block moves to the strategy; jwt verificationJwksUrl becomes jwksUrl', () => {
    const raw = {
      rateLimiters: { budgets: [{ id: 'free', rules: [{ method: '*', maxCount: 5, period: 'second' }] }] },
      ...project(
        {},
        {},
        {
          auth: {
            strategies: [
              { type: 'secret', secret: { value: 's3cret', rateLimitBudget: 'free' } },
              { type: 'jwt', jwt: { allowedAlgorithms: ['RS256'], verificationJwksUrl: 'https://issuer.example/jwks', rateLimitBudgetClaimName: 'plan' } },
            ],
          },
        },
      ),
    };
    const { document } = load(raw);
    const strategies = ((document.projects as Doc[])[0]?.auth as Doc).strategies as Doc[];
    expect(strategies[0]).to.deep.equal({ type: 'secret', secret: { value: 's3cret' }, rateLimitBudget: 'free' });
    expect((strategies[1] as Doc).jwt).to.deep.equal({ allowedAlgorithms: ['RS256'], jwksUrl: 'https://issuer.example/jwks', rateLimitBudgetClaim: 'plan' });
  });

  it('upstream group/cohort (eRPC legacy) become tags', () => {
    const { document } = load(project({}, { group: 'fallback', tags: ['vendor:x'] }));
    expect(up(document).tags).to.deep.equal(['vendor:x', 'tier:fallback']);
  });

  it('listenV4: true is dropped; listenV4: false is refused', () => {
    expect(load({ server: { listenV4: true } }).document.server).to.deep.equal({});
    expect(problems({ server: { listenV4: false } })[0]?.message).to.match(/IPv6-only.*server\.httpHost/);
  });
});

describe('config: eRPC keys and shapes svc does not honour are refused by name', () => {
  const cases: Array<[string, Doc, string, RegExp]> = [
    [
      'enforceBlockAvailability',
      project({ evm: { chainId: 1, enforceBlockAvailability: false } }),
      'projects[0].networks[0].evm.enforceBlockAvailability',
      /block-availability enforcement/,
    ],
    [
      'sharedState on PostgreSQL',
      { database: { sharedState: { clusterKey: 'a', connector: { driver: 'postgresql' } } } },
      'database.sharedState.connector.driver',
      /Redis only/,
    ],
    ['counterDropLabels', { metrics: { counterDropLabels: ['x'] } }, 'metrics.counterDropLabels', /dropping counter labels/],
    [
      'networkDefaults path',
      { projects: [{ id: 'p', networkDefaults: { evm: { servedTip: { trajectoryWindow: '10m' } } } }] },
      'projects[0].networkDefaults.evm.servedTip.trajectoryWindow',
      /trajectory referee/,
    ],
    ['svm architecture', project({ architecture: 'svm' }), 'projects[0].networks[0].architecture', /Solana/],
    ['grpc upstream', project({}, { type: 'grpc' }), 'projects[0].upstreams[0].type', /gRPC upstreams/],
    ['legacy evm+alchemy type', project({}, { type: 'evm+alchemy' }), 'projects[0].upstreams[0].type', /endpoint: alchemy:\/\//],
    [
      'dynamodb partitionKeyName',
      { database: { evmJsonRpcCache: { connectors: [{ id: 'd', driver: 'dynamodb', dynamodb: { partitionKeyName: 'pk' } }] } } },
      'database.evmJsonRpcCache.connectors[0].dynamodb.partitionKeyName',
      /@keyv\/dynamo/,
    ],
    ['logLevel disabled', { logLevel: 'disabled' }, 'logLevel', /no svc equivalent/],
  ];
  for (const [name, raw, path, message] of cases) {
    it(`${name}: refused at ${path}`, () => {
      const p = problems(raw);
      const hit = p.find((x) => x.path === path);
      expect(hit, JSON.stringify(p)).to.not.equal(undefined);
      expect(hit?.message).to.match(message);
    });
  }

  it("redis connPoolSize (cache connector and rate-limit store) is dropped with a line saying why: svc's client pipelines over one connection", () => {
    const { document, rewrites } = load({
      database: { evmJsonRpcCache: { connectors: [{ id: 'r', driver: 'redis', redis: { addr: 'h:1', connPoolSize: 8 } }] } },
      rateLimiters: { store: { driver: 'redis', redis: { uri: 'redis://h:2', connPoolSize: 16 } } },
    });
    const cache = ((document.database as Doc).evmJsonRpcCache as Doc).connectors as Doc[];
    expect(cache[0]?.redis).to.deep.equal({ uri: 'redis://h:1' });
    expect(((document.rateLimiters as Doc).store as Doc).redis).to.not.have.property('connPoolSize');
    for (const [path, from] of [
      ['database.evmJsonRpcCache.connectors[0].redis.connPoolSize', 8],
      ['rateLimiters.store.redis.connPoolSize', 16],
    ] as const) {
      const line = rewrites.find((r) => r.path === path);
      expect(line?.from).to.equal(from);
      expect(String(line?.to)).to.match(/^\(removed: .*pipelines every command over one connection.*changes nothing\)$/);
    }
  });

  it("an unknown key that is not eRPC's keeps the plain message", () => {
    expect(problems({ server: { nope: 1 } })[0]).to.deep.equal({ path: 'server.nope', message: 'unknown key "nope"' });
  });
});
