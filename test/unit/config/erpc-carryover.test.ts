/**
 * The carry-over gaps a team migrating with eRPC's own files met, through the real loader with
 * the default preset (docs/migrating-from-erpc.md): eRPC's provider shortcut written on a
 * provider, its legacy routing keys, keys eRPC documents as inert, `waitTime: 0`, the
 * `database` auth strategy, problems inside a failsafe list, and ids or budgets hidden inside
 * vendor shortcuts.
 */
import { expect } from 'chai';
import { createProxy } from '../../../core/host/create.ts';
import { loadConfigObject, type NormalizeRewrite } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { createLogger } from '../../../lib/logger.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { problemsOf } from '../../helpers/config-problems.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, unknown>;
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const problems = (raw: unknown) => problemsOf(() => load(raw));
const lines = (raw: unknown) => problems(raw).map((p) => `${p.path}: ${p.message}`);
/** Boots the default preset on a raw config (the policy's trial run included): throws what `svc validate` would report. */
async function boots(raw: unknown): Promise<void> {
  await createProxy({ config: raw as object, plugins: defaultPreset(), logger: createLogger('silent') }).close();
}
const rewriteAt = (rewrites: readonly NormalizeRewrite[], path: string) => rewrites.find((r) => r.path === path);

function project(extra: Doc = {}, network: Doc = {}, upstream: Doc = {}): Doc {
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
const first = (doc: Doc) => (doc.projects as Doc[])[0] as Doc;

describe("config: eRPC's provider shortcut written on a provider (providers[].endpoint)", () => {
  it('becomes the provider the shortcut names, with an id like an upstream shortcut and a rewrite line', () => {
    const { document, rewrites } = load({
      projects: [
        {
          id: 'main',
          providers: [
            { endpoint: 'alchemy://KEY', onlyNetworks: ['evm:1'] },
            { id: 'mine', endpoint: 'drpc://KEY2' },
          ],
        },
      ],
    });
    expect(first(document).providers).to.deep.equal([
      { id: 'alchemy-1', vendor: 'alchemy', settings: { apiKey: 'KEY' }, onlyNetworks: ['evm:1'] },
      { id: 'mine', vendor: 'drpc', settings: { apiKey: 'KEY2' } },
    ]);
    expect(rewriteAt(rewrites, 'projects[0].providers[0].endpoint')?.to).to.deep.include({ vendor: 'alchemy' });
  });

  it('a vendor svc does not know, a plain URL, or vendor and endpoint together are refused by name', () => {
    const at = (pr: Doc) => lines({ projects: [{ id: 'main', providers: [pr] }] }).filter((l) => l.startsWith('projects[0].providers[0].endpoint'));
    expect(at({ endpoint: 'nosuch://KEY' })[0]).to.match(/"nosuch:\/\/" names no vendor svc knows \(vendor shortcuts: alchemy, .*\).*upstreams\[\]/);
    expect(at({ endpoint: 'https://eth.example/KEY' })[0]).to.match(/must be a vendor shortcut.*list it under `upstreams\[\]`/);
    expect(at({ endpoint: 'alchemy://KEY', vendor: 'alchemy' })[0]).to.match(/not both/);
    expect(load({ projects: [{ id: 'main', providers: [{ endpoint: 'alchemy://KEY' }] }] }).rewrites).to.have.length(1);
  });
});

describe("config: eRPC's legacy routing keys and keys eRPC documents as inert", () => {
  it('scoreMetricsMode, scoreGranularity, scoreRefreshInterval, scorePenaltyDecayRate (inert in eRPC 0.1) are dropped, each line saying why', () => {
    const { document, rewrites } = load(
      project({ scoreMetricsMode: 'compact', scoreGranularity: 'upstream', scoreRefreshInterval: '30s', scorePenaltyDecayRate: 0.95 }),
    );
    for (const k of ['scoreMetricsMode', 'scoreGranularity', 'scoreRefreshInterval', 'scorePenaltyDecayRate']) {
      expect(first(document)).to.not.have.property(k);
      expect(String(rewriteAt(rewrites, `projects[0].${k}`)?.to)).to.match(/^\(removed: inert: eRPC 0\.1 ignores it/);
    }
  });

  it('routingStrategy score-based is dropped (svc orders by health score); another value than the two eRPC knew is refused by name', () => {
    const { rewrites } = load(project({ routingStrategy: 'score-based' }));
    expect(String(rewriteAt(rewrites, 'projects[0].routingStrategy')?.to)).to.match(/orders upstreams by health score/);
    expect(lines(project({ routingStrategy: 'random' }))[0]).to.match(/takes "score-based" or "round-robin"/);
  });

  it("routingStrategy round-robin becomes eRPC's own translation: every network rotates its order one place per evaluation, each second", async () => {
    const { document, rewrites } = load(project({ routingStrategy: 'round-robin', scoreSwitchHysteresis: 0.2 }));
    const policy = { evalInterval: '1s', evalFunc: '(upstreams, ctx) => upstreams.rotateBy(ctx.tickCount)' };
    expect(first(document).networkDefaults).to.deep.equal({ selectionPolicy: policy });
    expect(first(document)).to.not.have.property('routingStrategy');
    expect(rewriteAt(rewrites, 'projects[0].routingStrategy')?.to).to.deep.equal({ networkDefaults: { selectionPolicy: policy } });
    // Round-robin keeps no primary: the sticky keys are dropped saying so.
    expect(String(rewriteAt(rewrites, 'projects[0].scoreSwitchHysteresis')?.to)).to.match(/round-robin keeps no primary/);
    await boots(project({ routingStrategy: 'round-robin' }));
    // Beside a policy of the project's own, one of the two would be lost: refused.
    expect(lines(project({ routingStrategy: 'round-robin' }, { selectionPolicy: { evalInterval: '5s' } }))[0]).to.match(
      /^projects\[0\]\.routingStrategy: eRPC's legacy routingStrategy round-robin beside a selectionPolicy of the project's own: keep one/,
    );
  });

  it("scoreSwitchHysteresis and scoreMinSwitchInterval become eRPC's own translation: a score order with a sticky primary", async () => {
    const { document, rewrites } = load(project({ scoreSwitchHysteresis: 0.25, scoreMinSwitchInterval: '1m' }));
    const evalFunc = '(upstreams, ctx) => upstreams.sortByScore(PREFER_FASTEST).stickyPrimary({ hysteresis: 0.25, minSwitchInterval: "1m" })';
    expect(first(document).networkDefaults).to.deep.equal({ selectionPolicy: { evalFunc } });
    expect(rewriteAt(rewrites, 'projects[0].scoreSwitchHysteresis')?.to).to.deep.equal({ networkDefaults: { selectionPolicy: { evalFunc } } });
    await boots(project({ scoreSwitchHysteresis: 0.25, scoreMinSwitchInterval: '1m' }));
    // eRPC's defaults fill the one not given.
    expect((load(project({ scoreMinSwitchInterval: '10s' })).document.projects as Doc[])[0]?.networkDefaults).to.deep.equal({
      selectionPolicy: { evalFunc: '(upstreams, ctx) => upstreams.sortByScore(PREFER_FASTEST).stickyPrimary({ hysteresis: 0.1, minSwitchInterval: "10s" })' },
    });
    expect(lines(project({ scoreSwitchHysteresis: 'lots' }))[0]).to.match(/scoreSwitchHysteresis is a fraction such as 0\.1/);
    expect(lines(project({ scoreMinSwitchInterval: 'soon' }))[0]).to.match(/scoreMinSwitchInterval is a duration such as "30s"/);
  });

  it('scoreMinSwitchInterval is taken exactly as the policy reads it: a number of ms and Go durations boot, a string without a unit is refused at its key', async () => {
    const interval = (v: unknown) =>
      String(((first(load(project({ scoreMinSwitchInterval: v })).document).networkDefaults as Doc).selectionPolicy as Doc).evalFunc);
    expect(interval(45_000)).to.contain('minSwitchInterval: 45000 ');
    expect(interval('1m30s')).to.contain('minSwitchInterval: "1m30s"');
    await boots(project({ scoreMinSwitchInterval: 45_000 }));
    await boots(project({ scoreMinSwitchInterval: '1m30s' }));
    // Go's ParseDuration (eRPC) refuses a bare number in a string, and so does the policy: refused here, not at a key the user never wrote.
    for (const v of ['30', '30 s'])
      expect(lines(project({ scoreMinSwitchInterval: v })), v).to.deep.equal([
        `projects[0].scoreMinSwitchInterval: eRPC's scoreMinSwitchInterval is a duration such as "30s", not ${JSON.stringify(v)}`,
      ]);
  });

  it("routingStrategy with no value (YAML null) is eRPC's default, score-based: dropped like an empty string", () => {
    const { document, rewrites } = load(project({ routingStrategy: null }));
    expect(first(document)).to.not.have.property('routingStrategy');
    expect(String(rewriteAt(rewrites, 'projects[0].routingStrategy')?.to)).to.match(/orders upstreams by health score/);
    expect(lines(project({ routingStrategy: 42 }))[0]).to.match(/takes "score-based" or "round-robin", not 42/);
  });

  it('a network-level upstream list and a top-level networks list are refused naming where the entries go', () => {
    expect(lines(project({}, { upstreams: ['a'] }))).to.deep.equal([
      'projects[0].networks[0].upstreams: a network has no upstream list in eRPC or svc: list upstreams once under the project (`projects[].upstreams`); each serves the network of the chain it reports (set its `evm.chainId`), and `use-upstream` or tags pin calls to some of them',
    ]);
    expect(lines({ networks: [{ evm: { chainId: 1 } }], ...project() })[0]).to.match(/^networks: networks belong to a project/);
  });

  it('other no-ops in eRPC are dropped: network trustedProxies, maxFutureBlockRetryDistance, upstream getLogs limits, nearLimitRatio, metrics hostV6', () => {
    const { document, rewrites } = load({
      metrics: { hostV6: '[::]', listenV6: false },
      rateLimiters: { store: { driver: 'memory', nearLimitRatio: 0.8 }, budgets: [] },
      ...project(
        { auth: { strategies: [{ type: 'network', network: { allowLocalhost: true, trustedProxies: ['10.0.0.0/8'] } }] } },
        { evm: { chainId: 1, maxFutureBlockRetryDistance: 128, dynamicBlockTimeDebounceMultiplier: 0 } },
        { evm: { chainId: 1, getLogsMaxAllowedRange: 1000, getLogsSplitOnError: true } },
      ),
    });
    for (const path of [
      'metrics.hostV6',
      'metrics.listenV6',
      'rateLimiters.store.nearLimitRatio',
      'projects[0].auth.strategies[0].network.trustedProxies',
      'projects[0].networks[0].evm.maxFutureBlockRetryDistance',
      'projects[0].networks[0].evm.dynamicBlockTimeDebounceMultiplier',
      'projects[0].upstreams[0].evm.getLogsMaxAllowedRange',
      'projects[0].upstreams[0].evm.getLogsSplitOnError',
    ])
      expect(String(rewriteAt(rewrites, path)?.to), path).to.match(/^\(removed: /);
    expect(((first(document).upstreams as Doc[])[0] as Doc).evm).to.deep.equal({ chainId: 1 });
    expect(lines(project({}, { evm: { chainId: 1, dynamicBlockTimeDebounceMultiplier: 0.5 } }))[0]).to.match(/block-time-based poll debounce/);
  });
});

describe('config: rate-limit waitTime', () => {
  it("0 (eRPC's default, svc's behaviour) is dropped with a line saying so; any other value is refused by name", () => {
    const rl = (waitTime: unknown) => ({ rateLimiters: { budgets: [{ id: 'b', rules: [{ method: '*', maxCount: 1, period: 'second', waitTime }] }] } });
    for (const zero of [0, '0', '0s', '0ms']) {
      const { rewrites } = load(rl(zero));
      expect(String(rewriteAt(rewrites, 'rateLimiters.budgets[0].rules[0].waitTime')?.to)).to.match(/refused at once/);
    }
    expect(lines(rl('1s'))).to.satisfy((l: string[]) => l.length === 1 && /waitTime.*waiting for a rate-limit permit.*drop the key/.test(l[0] ?? ''));
  });
});

describe("config: eRPC's database auth strategy", () => {
  const strategy = (s: Doc) => project({ auth: { strategies: [s] } });
  const strategyOf = (doc: Doc) => ((first(doc).auth as Doc).strategies as Doc[])[0] as Doc;

  it("becomes svc's API-key strategy: connector moved (eRPC's default id), Redis addr → uri, getTimeout → lookupTimeout, eRPC's 1h cache TTL written out", () => {
    const { document } = load(
      strategy({
        type: 'database',
        database: { connector: { driver: 'redis', redis: { addr: '127.0.0.1:6379', getTimeout: '300ms' } }, failOpen: { enabled: false } },
      }),
    );
    expect(strategyOf(document)).to.deep.equal({
      type: 'database',
      connector: { id: 'auth-redis', driver: 'redis', redis: { uri: 'redis://127.0.0.1:6379', lookupTimeout: '300ms' } },
      cache: { ttl: '1h' },
    });
  });

  it('keeps a cache ttl and maps maxWait to lookupTimeout (the smaller bound wins); memory lookups drop it', () => {
    const pg = load(
      strategy({
        type: 'database',
        database: {
          connector: { id: 'keys', driver: 'postgresql', postgresql: { connectionUri: 'postgres://u:p@h/db', getTimeout: '200ms' } },
          cache: { ttl: '1m', maxSize: 10000 },
          maxWait: '1s',
        },
      }),
    ).document;
    expect(strategyOf(pg)).to.deep.include({ cache: { ttl: '1m' } });
    expect((strategyOf(pg).connector as Doc).postgresql).to.deep.equal({ connectionUri: 'postgres://u:p@h/db', lookupTimeout: '200ms' });
    const mem = load(strategy({ type: 'database', database: { connector: { id: 'm', driver: 'memory' }, maxWait: '1s' } })).document;
    expect(strategyOf(mem)).to.deep.equal({ type: 'database', connector: { id: 'm', driver: 'memory' }, cache: { ttl: '1h' } });
  });

  it('retries, stores svc lacks and cache sizes are refused by name, with nothing else reported; an enabled fail-open is taken', () => {
    const l = lines(
      strategy({
        type: 'database',
        database: {
          connector: { id: 'd', driver: 'dynamodb' },
          failOpen: { enabled: true, userId: 'e' },
          retry: { maxAttempts: 3 },
          cache: { ttl: '1m', maxCost: 1 },
        },
      }),
    );
    expect(l.map((x) => x.slice(0, x.indexOf(':')))).to.have.members([
      'projects[0].auth.strategies[0].connector.driver',
      'projects[0].auth.strategies[0].database.cache.maxCost',
      'projects[0].auth.strategies[0].database.retry',
    ]);
    expect(l.join('\n'))
      .to.match(/one lookup per key/)
      .and.to.not.match(/apiKeys/);
  });
});

describe('config: problems inside a failsafe list are reported alone', () => {
  it("a refused key in a failsafe entry is not followed by the single-object form's 'failsafe: must be object'", () => {
    const l = lines(
      project(
        {},
        {
          failsafe: [
            { matchMethod: '*', consensus: { maxParticipants: 3, maxWaitOnResult: '200ms' } },
            { matchMethod: 'eth_call', matchRequestKind: 'internal' },
          ],
        },
        { failsafe: { timeout: { duration: '5s' }, matchRequestKind: 'external' } },
      ),
    );
    expect(l).to.have.length(3);
    expect(l.filter((x) => /must be (object|array)/.test(x))).to.deep.equal([]);
    expect(lines(project({}, { failsafe: 'fast' }))).to.deep.equal(['projects[0].networks[0].failsafe: must be array or object']);
  });
});

describe('config: duplicate ids and undeclared budgets are found whatever form the upstream took', () => {
  it('two upstreams of one id are refused when one is a vendor shortcut, and two providers of one id', () => {
    const l = lines({
      projects: [
        {
          id: 'main',
          upstreams: [
            { id: 'x', endpoint: 'alchemy://A' },
            { id: 'x', endpoint: 'alchemy://B' },
          ],
          providers: [
            { id: 'p', vendor: 'drpc', settings: { apiKey: 'k' } },
            { id: 'p', vendor: 'infura', settings: { apiKey: 'k' } },
          ],
        },
      ],
    });
    expect(l).to.include('projects[0].upstreams[1].id: duplicate upstream id "x" (also projects[0].upstreams[0])');
    expect(l).to.include('projects[0].providers[1].id: duplicate provider id "p"');
  });

  it("a shortcut's upstream keys are checked as upstream settings, eRPC's refused keys named", () => {
    const l = lines({ projects: [{ id: 'main', upstreams: [{ endpoint: 'alchemy://A', rateLimitCountMode: 'credits', bogus: 1 }] }] });
    expect(l).to.have.length(2);
    expect(l.find((x) => x.includes('rateLimitCountMode'))).to.match(
      /^projects\[0\]\.providers\[0\]\.overrides\["\*"\]\.rateLimitCountMode: eRPC's `projects\[\]\.upstreams\[\]\.rateLimitCountMode`/,
    );
    expect(l).to.include('projects[0].providers[0].overrides["*"].bogus: unknown key "bogus"');
  });

  it("an undeclared rateLimitBudget on a shortcut (in the provider's overrides) fails validation", () => {
    const raw = {
      rateLimiters: { budgets: [{ id: 'declared', rules: [{ method: '*', maxCount: 10, period: 'second' }] }] },
      projects: [
        {
          id: 'main',
          upstreams: [
            { endpoint: 'alchemy://A', rateLimitBudget: 'global' },
            { endpoint: 'drpc://B', rateLimitBudget: 'declared' },
          ],
        },
      ],
    };
    const found = problemsOf(() => createProxy({ config: raw, plugins: defaultPreset(), logger: createLogger('silent') }));
    expect(found).to.deep.equal([
      { path: 'projects[0].providers[0].overrides["*"].rateLimitBudget', message: 'budget "global" is not declared in rateLimiters.budgets' },
    ]);
  });
});
