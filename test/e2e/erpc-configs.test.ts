/**
 * eRPC-style config files carry over (docs/migrating-from-erpc.md): realistic configs written the
 * way eRPC's documentation writes them (modelled on its examples, not copied) each validate,
 * start against anvil and serve a call, with their eRPC shapes normalised at load time. Then the
 * CLI: `svc validate --print` shows the rewrites and the svc shape; `svc validate --from-erpc`
 * takes an eRPC file as it is (X-ERPC-* header names, erpc_ prefixes) and prints the svc config,
 * which validates on its own. eRPC's `database.sharedState` on Redis starts svc with shared state
 * connected.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createClient } from 'redis';
import { parse as parseYaml } from 'yaml';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { startSvc, waitFor } from '../helpers/svc.ts';
import { VENDOR_TEST_BASE_URL_ENV } from '../../plugins/vendors/index.ts';

/** A single-chain eRPC file in the shape of eRPC's "complete config" example: most of its legacy forms at once. */
const DIST_STYLE = `
logLevel: WARN
server:
  listenV4: true
  httpHostV4: 127.0.0.1
  httpPortV4: 4000
  maxTimeout: 30s
metrics:
  enabled: false
database:
  evmJsonRpcCache:
    connectors:
      - id: memory-cache
        driver: memory
        memory: { maxItems: 10000 }
    policies:
      - { network: "*", method: "*", finality: FINALIZED, connector: memory-cache, ttl: 0 }
      - { network: "*", method: "*", finality: unfinalized, connector: memory-cache, ttl: 5s }
rateLimiters:
  budgets:
    - id: project-budget
      rules:
        - { method: "*", maxCount: 1000, period: 1s }
    - id: upstream-budget
      rules:
        - { method: "eth_getLogs", maxCount: 100, period: 1m }
projects:
  - id: main
    rateLimitBudget: project-budget
    networks:
      - evm: { chainId: 31337 }
        failsafe:
          timeout: { duration: 30s }
          retry: { maxAttempts: 3, delay: 0ms, backoffMaxDelay: 10s, backoffFactor: 0.3, jitter: 0ms }
          hedge: { delay: 3000ms, maxCount: 2 }
    upstreams:
      - id: anvil-main
        type: evm
        endpoint: __ANVIL__
        rateLimitBudget: upstream-budget
        evm: { chainId: 31337 }
        failsafe:
          timeout: { duration: 15s }
          retry: { maxAttempts: 2, delay: 1000ms, backoffMaxDelay: 10s, backoffFactor: 0.3, jitter: 500ms }
          circuitBreaker:
            halfOpenAfter: 2m
            failureThresholdCount: 10
            failureThresholdCapacity: 80
            successThresholdCount: 8
            successThresholdCapacity: 10
`;

/** Defaults for every network and upstream, eRPC's current adaptive forms, a legacy fallback group, multiplexing as an object. */
const DEFAULTS_STYLE = `
logLevel: info
metrics: { enabled: false }
projects:
  - id: main
    networkDefaults:
      multiplexing: { enabled: true }
      failsafe:
        - matchMethod: "eth_getLogs"
          timeout: { duration: { base: 20s, quantile: 0.99, max: 60s } }
        - matchMethod: "*"
          matchFinality: realtime
          hedge: { delay: { base: 50ms, quantile: 0.9, min: 100ms, max: 2s }, maxCount: 1 }
          retry: { maxAttempts: 3, blockUnavailableDelay: 500ms }
    upstreamDefaults:
      type: evm
      failsafe:
        timeout: { duration: 10s }
    networks:
      - architecture: EVM
        evm: { chainId: 31337 }
        alias: local
    upstreams:
      - id: primary
        endpoint: __ANVIL__
        evm: { chainId: 31337 }
      - id: backup
        endpoint: __ANVIL__
        group: fallback
        evm: { chainId: 31337 }
`;

/** Redis everywhere in eRPC's connector fields, with auth strategies carrying their own budgets. */
const REDIS_STYLE = `
metrics: { enabled: false }
database:
  evmJsonRpcCache:
    connectors:
      - id: redis-cache
        driver: redis
        redis: { addr: "__REDIS__", db: 0, getTimeout: 200ms, setTimeout: 1s, connPoolSize: 8 }
    policies:
      - { network: "evm:*", method: "*", finality: 0, connector: redis-cache, ttl: 0 }
rateLimiters:
  store:
    driver: redis
    redis: { addr: "__REDIS__" }
    cacheKeyPrefix: "erpc_rl_"
  budgets:
    - id: free-tier
      rules:
        - { method: "*", maxCount: 50, period: 1s, perIP: true }
projects:
  - id: main
    auth:
      strategies:
        - type: secret
          secret: { id: partner, value: "s3cret-value", rateLimitBudget: free-tier }
        - type: network
          network: { allowLocalhost: true, rateLimitBudget: free-tier }
    networks:
      - evm: { chainId: 31337 }
    upstreams:
      - endpoint: __ANVIL__
        type: evm
        evm: { chainId: 31337 }
`;

/** eRPC's shared state on Redis, with the cluster key at the top level (eRPC's default for the block) and eRPC's go-redis pool option. */
const SHARED_STATE_STYLE = `
logLevel: warn
clusterKey: erpc-e2e-fleet
metrics: { enabled: true }
database:
  sharedState:
    connector:
      id: shared-redis
      driver: redis
      redis: { uri: "redis://__REDIS__/?pool_size=10" }
projects:
  - id: main
    networks:
      - evm: { chainId: 31337 }
    upstreams:
      - endpoint: __ANVIL__
        type: evm
        evm: { chainId: 31337, statePollerInterval: 100ms }
`;

/**
 * The carry-over gaps of files written after eRPC's docs: a provider given as an endpoint shortcut
 * (with a budget in its overrides), the legacy routing keys, keys eRPC documents as inert,
 * `waitTime: 0`, and the `database` auth strategy in eRPC's shape beside a network strategy.
 */
const CARRYOVER_STYLE = `
logLevel: warn
metrics: { enabled: false, hostV6: "[::]" }
rateLimiters:
  store: { driver: memory, nearLimitRatio: 0.8 }
  budgets:
    - id: global
      rules: [{ method: "*", maxCount: 1000, period: 1s, waitTime: 0 }]
projects:
  - id: main
    routingStrategy: score-based
    scoreMetricsMode: compact
    scoreGranularity: upstream
    auth:
      strategies:
        - type: network
          network: { allowLocalhost: true, trustedProxies: ["10.0.0.1"] }
        - type: database
          database:
            connector: { id: keys, driver: memory }
            cache: { ttl: 1m }
            failOpen: { enabled: false }
    providers:
      - endpoint: drpc://\${DRPC_KEY}
        overrides:
          "*": { rateLimitBudget: global }
    networks:
      - evm: { chainId: 1, maxFutureBlockRetryDistance: 128 }
`;

describe("eRPC's carry-over shapes: a provider endpoint shortcut, legacy and inert keys, the database strategy, served from anvil", function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let forward: Server;
  let base: string;

  before(async () => {
    anvil = await startAnvil({ chainId: 1 });
    // The vendor's URL (under the test base, `<base>/lb.drpc.org/...`) reaches anvil, which serves `/` only.
    forward = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
          .then(async (r) => {
            res.writeHead(r.status, { 'content-type': 'application/json' });
            res.end(await r.text());
          })
          .catch(() => res.writeHead(502).end());
      });
    });
    await new Promise<void>((resolve) => forward.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(forward.address() as AddressInfo).port}`;
    process.env[VENDOR_TEST_BASE_URL_ENV] = base;
    process.env.DRPC_KEY = 'drpc-e2e-key';
  });
  after(async () => {
    delete process.env[VENDOR_TEST_BASE_URL_ENV];
    delete process.env.DRPC_KEY;
    await new Promise((resolve) => forward?.close(resolve));
    await anvil?.stop();
  });

  it('validates, starts and serves calls through the provider the endpoint shortcut names, with the rewrites applied', async () => {
    const svc = await startSvc(parseYaml(CARRYOVER_STYLE) as object);
    try {
      const project = svc.proxy.config.projects[0] as unknown as { settings: Record<string, unknown> };
      expect((project.settings.providers as unknown[])[0]).to.deep.include({ id: 'drpc-1', vendor: 'drpc', settings: { apiKey: 'drpc-e2e-key' } });
      expect(project.settings).to.not.have.any.keys('routingStrategy', 'scoreMetricsMode', 'scoreGranularity');
      const strategies = (project.settings.auth as { strategies: Array<Record<string, unknown>> }).strategies;
      expect(strategies[1]).to.deep.include({ type: 'database', connector: { id: 'keys', driver: 'memory' }, cache: { ttl: 60_000 } });
      const r = await svc.post('/main/evm/1', { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
      expect(r.status, r.text).to.equal(200);
      expect(r.json.result).to.equal('0x1');
      // A call the answer must come from an upstream for: the provider's.
      const n = await svc.post('/main/evm/1', {
        jsonrpc: '2.0',
        id: 2,
        method: 'eth_getBalance',
        params: ['0x0000000000000000000000000000000000000001', 'latest'],
      });
      expect(n.status, n.text).to.equal(200);
      expect(n.json.result).to.match(/^0x/);
      expect(n.headers['x-svc-upstream']).to.match(/^drpc-1-evm:1/);
    } finally {
      await svc.close();
    }
  });
});

describe('eRPC-style config files validate, start against anvil and serve', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;

  before(async () => {
    [anvil, redis] = await Promise.all([startAnvil({ chainId: 31337 }), startRedis()]);
  });
  after(async () => {
    await Promise.all([anvil?.stop(), redis?.stop()]);
  });

  const fill = (yaml: string) => yaml.replaceAll('__ANVIL__', anvil.url).replaceAll('__REDIS__', redis.url.replace(/^redis:\/\//, ''));

  async function serves(yaml: string, path: string, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
    const svc = await startSvc(parseYaml(fill(yaml)) as object);
    try {
      const r = await svc.post(path, { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, headers);
      expect(r.status, r.text).to.equal(200);
      expect(r.json.result).to.equal('0x7a69');
      return svc.proxy.config as unknown as Record<string, unknown>;
    } finally {
      await svc.close();
    }
  }

  it('the complete single-chain file (legacy failsafe objects, type evm, period 1s, backoffFactor 0.3, FINALIZED)', async () => {
    await serves(DIST_STYLE, '/main/evm/31337');
  });

  it('defaults with adaptive hedge/timeout objects, multiplexing {enabled}, architecture EVM, a legacy fallback group; served by alias', async () => {
    await serves(DEFAULTS_STYLE, '/main/local');
  });

  it('Redis cache and rate-limit store by addr, budgets inside the auth strategies; served to the secret holder', async () => {
    await serves(REDIS_STYLE, '/main/evm/31337', { 'X-SVC-Secret-Token': 's3cret-value' });
  });

  it("database.sharedState on Redis: svc starts with shared state connected (gauge 1) and publishes heads under eRPC's top-level clusterKey", async () => {
    const sub = createClient({ url: redis.url });
    await sub.connect();
    const heads: string[] = [];
    await sub.subscribe('erpc-e2e-fleet:state', (m) => heads.push(m));
    const svc = await startSvc(parseYaml(fill(SHARED_STATE_STYLE)) as object);
    try {
      expect(svc.proxy.config.settings.sharedState).to.deep.include({ redis: { uri: redis.url }, clusterKey: 'erpc-e2e-fleet' });
      const connected = async () => {
        const text = await (await fetch(svc.metricsUrl!)).text();
        return text.split('\n').find((l) => l.startsWith('svc_shared_state_connected '));
      };
      await waitFor(async () => (await connected()) === 'svc_shared_state_connected 1', 5000);
      await anvil.rpc('anvil_mine', ['0x1']); // a head above 0 to share
      await waitFor(() => heads.length > 0, 5000);
      expect(heads[0]).to.include('"upstream"');
      const r = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
      expect(r.json.result).to.equal('0x7a69');
    } finally {
      await svc.close();
      await sub.quit();
    }
  });
});

describe('svc validate --print and --from-erpc through the CLI', function () {
  this.timeout(60_000);
  let dir: string;
  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-erpc-cli-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), ...args], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ANVIL_URL: 'http://127.0.0.1:8545', DRPC_KEY: 'drpc-cli-key' },
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out, err })));
  }

  it("--print shows each rewrite and the config in svc's shape, without expanding ${ENV}", async () => {
    writeFileSync(join(dir, 'a.yaml'), DIST_STYLE.replace('__ANVIL__', '${ANVIL_URL}'));
    const r = await run(['validate', '--config', 'a.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    expect(r.out).to.include('#   logLevel: WARN -> warn');
    expect(r.out).to.include('#   projects[0].upstreams[0].type: evm -> (removed)');
    expect(r.out).to.include('#   rateLimiters.budgets[0].rules[0].period: 1s -> second');
    const printed = parseYaml(r.out) as {
      logLevel: string;
      projects: Array<{ networks: Array<{ failsafe: unknown[]; architecture: string }>; upstreams: Array<{ endpoint: string }> }>;
    };
    expect(printed.logLevel).to.equal('warn');
    expect(printed.projects[0]?.networks[0]?.architecture).to.equal('evm');
    expect(printed.projects[0]?.networks[0]?.failsafe).to.have.length(1);
    expect(printed.projects[0]?.upstreams[0]?.endpoint).to.equal('${ANVIL_URL}');
    // The printed form is itself a valid svc config, with nothing left to rewrite.
    writeFileSync(join(dir, 'printed.yaml'), r.out);
    const again = await run(['validate', '--config', 'printed.yaml', '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
  });

  it("--from-erpc takes eRPC names as they are: X-ERPC-* headers and erpc_ prefixes become svc's", async () => {
    const yaml = `${REDIS_STYLE.replaceAll('__ANVIL__', 'http://127.0.0.1:8545').replaceAll('__REDIS__', '127.0.0.1:6379')}    cors:\n      allowedOrigins: ["https://app.example"]\n      allowedHeaders: ["Content-Type", "X-ERPC-Secret-Token"]\n`;
    writeFileSync(join(dir, 'erpc.yaml'), yaml);
    const plain = await run(['validate', '--config', 'erpc.yaml']);
    expect(plain.code).to.equal(0); // X-ERPC-Secret-Token is just a header name to svc
    const r = await run(['validate', '--from-erpc', 'erpc.yaml']);
    expect(r.code, r.err).to.equal(0);
    expect(r.out).to.include('X-ERPC-Secret-Token -> X-SVC-Secret-Token');
    expect(r.out).to.include('rateLimiters.store.cacheKeyPrefix');
    // Moot in svc (one pipelined connection): dropped with the reason, not refused.
    expect(r.out).to.match(/database\.evmJsonRpcCache\.connectors\[0\]\.redis\.connPoolSize: 8 -> \(removed: .*changes nothing\)/);
    const printed = parseYaml(r.out) as {
      rateLimiters: { store: { redis: { uri: string; keyPrefix: string } } };
      projects: Array<{ cors: { allowedHeaders: string[] }; auth: { strategies: Array<Record<string, unknown>> } }>;
    };
    expect(printed.rateLimiters.store.redis).to.deep.equal({ uri: 'redis://127.0.0.1:6379', keyPrefix: 'svc_rl_' });
    expect(printed.projects[0]?.cors.allowedHeaders).to.deep.equal(['Content-Type', 'X-SVC-Secret-Token']);
    expect(printed.projects[0]?.auth.strategies[0]).to.deep.include({ rateLimitBudget: 'free-tier' });
    expect(r.out).to.include('erpc_rl_ -> svc_rl_');
    expect(
      r.out
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n'),
    ).to.not.include('erpc_');
  });

  it("--print shows eRPC's database.sharedState moved to sharedState, line by line", async () => {
    writeFileSync(join(dir, 'shared.yaml'), SHARED_STATE_STYLE.replace('__ANVIL__', '${ANVIL_URL}').replace('__REDIS__', '127.0.0.1:6379'));
    const r = await run(['validate', '--config', 'shared.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    for (const line of [
      '#   database.sharedState.connector.redis.uri: options ?pool_size=10 -> (removed: go-redis options; svc keeps its own connections)',
      '#   database.sharedState.connector.id: shared-redis -> (removed)',
      '#   database.sharedState: database.sharedState -> sharedState',
      '#   database: {} -> (removed)',
    ])
      expect(r.out).to.include(line);
    expect(r.out).to.match(/# {3}clusterKey: .* -> sharedState\.clusterKey\n/); // the value is masked: the CLI redacts `...Key: value` in rewrite lines
    const printed = parseYaml(r.out) as Record<string, unknown>;
    expect(printed.sharedState).to.deep.equal({ redis: { uri: 'redis://127.0.0.1:6379' }, clusterKey: 'erpc-e2e-fleet' });
    expect(printed).to.not.have.property('database');
    expect(printed).to.not.have.property('clusterKey');
  });

  it('--print shows the carry-over rewrites (provider endpoint, inert keys, waitTime 0, the database strategy) and the printed file validates as it is', async () => {
    writeFileSync(join(dir, 'carry.yaml'), CARRYOVER_STYLE);
    const r = await run(['validate', '--config', 'carry.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    for (const line of [
      '#   projects[0].scoreMetricsMode: compact -> (removed: inert: eRPC 0.1 ignores it (its selection metrics have fixed labels))',
      "#   projects[0].routingStrategy: score-based -> (removed: svc's default selection policy orders upstreams by health score)",
      "#   rateLimiters.budgets[0].rules[0].waitTime: 0 -> (removed: 0 is svc's behaviour, a limited call is refused at once)",
      '#   projects[0].networks[0].evm.maxFutureBlockRetryDistance: 128 -> (removed: deprecated and ignored by eRPC)',
      '#   projects[0].auth.strategies[1].database.connector: projects[0].auth.strategies[1].database.connector -> projects[0].auth.strategies[1].connector',
    ])
      expect(r.out).to.include(line);
    // The key is a secret: redacted on both sides of the line.
    expect(r.out).to.match(
      /# {3}projects\[0\]\.providers\[0\]\.endpoint: drpc:\/\/#redacted=\S+ -> \{"id":"drpc-1","vendor":"drpc","settings":\{"apiKey":"#redacted=/,
    );
    const printed = parseYaml(r.out) as {
      projects: Array<{ providers: Array<Record<string, unknown>>; auth: { strategies: Array<Record<string, unknown>> } }>;
    };
    expect(printed.projects[0]?.providers[0]).to.deep.include({ id: 'drpc-1', vendor: 'drpc', settings: { apiKey: '${DRPC_KEY}' } });
    expect(printed.projects[0]?.auth.strategies[1]).to.deep.equal({ type: 'database', connector: { id: 'keys', driver: 'memory' }, cache: { ttl: '1m' } });
    writeFileSync(join(dir, 'carry-printed.yaml'), r.out);
    const again = await run(['validate', '--config', 'carry-printed.yaml', '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
  });

  it('--from-erpc refuses a key svc does not honour, naming the eRPC feature', async () => {
    writeFileSync(
      join(dir, 'tip.yaml'),
      'projects:\n  - id: main\n    networks:\n      - evm:\n          chainId: 1\n          servedTip: { enabledFor: [latest], trajectoryWindow: 10m }\n',
    );
    const r = await run(['validate', '--from-erpc', 'tip.yaml']);
    expect(r.code).to.equal(1);
    expect(r.err).to.match(
      /projects\[0\]\.networks\[0\]\.evm\.servedTip\.trajectoryWindow: eRPC's trajectoryWindow turns on the served tip's trajectory referee, which svc does not have/,
    );
  });
});
