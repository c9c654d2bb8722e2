/**
 * Config loading (config/load.ts), per "`${ENV_VAR}` expanded in strings
 * (an unset variable becomes empty with a warning; numbers are coerced after expansion);
 * durations as strings (`50ms`, `15s`, `1h`). Unknown keys are an error that names the key's
 * path. Defaults are applied after `networkDefaults`/`upstreamDefaults` are merged, and
 * tri-state booleans (unset / false / true) stay unset when not given."
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Type } from '@sinclair/typebox';
import { ConfigError, defineConfig, loadConfigObject, parseDuration, parseSize, readConfigFile, validateConfig } from '../../../config/load.ts';
import { Duration, Size, buildConfigSchema, type SchemaFragment } from '../../../config/schema.ts';
import type { SvcConfigInput } from '../../../config/types.ts';
import { SKIP_CACHE_READ } from '../../../plugins/cache/index.ts';
import { defaultPreset } from '../../../presets/default.ts';

const LOAD_TS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../config/load.ts');

/** Runs `fn` and returns the ConfigError it throws. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return e as ConfigError;
  }
  expect.fail('expected a ConfigError');
}

async function configErrorAsync(fn: () => Promise<unknown>): Promise<ConfigError> {
  try {
    await fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return e as ConfigError;
  }
  expect.fail('expected a ConfigError');
}

const load = (raw: unknown, env: NodeJS.ProcessEnv = {}, fragments: SchemaFragment[] = []) => loadConfigObject(raw, { env, fragments }).config;

const net = (chainId: number, extra: Record<string, unknown> = {}) => ({ architecture: 'evm' as const, evm: { chainId }, ...extra });

/** The default preset's fragments: the `directiveDefaults` keys are the declaring plugins' (the core names no directive). */
const PRESET = defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
const loadWithPlugins = (raw: unknown) => load(raw, {}, PRESET);

describe('config/load', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-config-test-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describe('readConfigFile', () => {
    const expectedRaw = {
      logLevel: 'debug',
      server: { httpPort: 5555, maxTimeout: '15s' },
      projects: [{ id: 'p1', upstreams: [{ id: 'u1', endpoint: 'http://127.0.0.1:8545' }] }],
    };

    it('YAML (.yaml and .yml)', async () => {
      const yaml = [
        'logLevel: debug',
        'server:',
        '  httpPort: 5555',
        '  maxTimeout: 15s',
        'projects:',
        '  - id: p1',
        '    upstreams:',
        '      - id: u1',
        '        endpoint: http://127.0.0.1:8545',
        '',
      ].join('\n');
      for (const ext of ['yaml', 'yml']) {
        const f = join(dir, `svc.${ext}`);
        writeFileSync(f, yaml);
        expect(await readConfigFile(f)).to.deep.equal(expectedRaw);
      }
    });

    it('empty YAML file is an empty config', async () => {
      const f = join(dir, 'empty.yaml');
      writeFileSync(f, '');
      expect(await readConfigFile(f)).to.deep.equal({});
      expect(load(await readConfigFile(f)).server.httpPort).to.equal(4000);
    });

    it('JSON', async () => {
      const f = join(dir, 'svc.json');
      writeFileSync(f, JSON.stringify(expectedRaw));
      expect(await readConfigFile(f)).to.deep.equal(expectedRaw);
    });

    it('TypeScript module exporting defineConfig({...})', async () => {
      const f = join(dir, 'svc.config.ts');
      writeFileSync(
        f,
        [
          `import { defineConfig } from ${JSON.stringify(LOAD_TS)};`,
          `const port: number = 5555;`,
          `export default defineConfig({ logLevel: 'debug', server: { httpPort: port, maxTimeout: '15s' }, projects: [{ id: 'p1', upstreams: [{ id: 'u1', endpoint: 'http://127.0.0.1:8545' }] }] });`,
          '',
        ].join('\n'),
      );
      const raw = await readConfigFile(f);
      expect(raw).to.deep.equal(expectedRaw);
      const cfg = load(raw);
      expect(cfg.server.httpPort).to.equal(5555);
      expect(cfg.server.maxTimeoutMs).to.equal(15000);
    });

    it('defineConfig is the identity', () => {
      const c: SvcConfigInput = { server: { httpPort: 1 } };
      expect(defineConfig(c)).to.equal(c);
    });

    it('YAML, JSON and TS forms of one config resolve identically', async () => {
      const y = join(dir, 'same.yaml');
      const j = join(dir, 'same.json');
      const t = join(dir, 'same.config.ts');
      writeFileSync(
        y,
        'server:\n  httpPort: 4100\n  maxBodySize: 1MiB\nprojects:\n  - id: p\n    networks:\n      - architecture: evm\n        evm:\n          chainId: 1\n',
      );
      writeFileSync(j, JSON.stringify({ server: { httpPort: 4100, maxBodySize: '1MiB' }, projects: [{ id: 'p', networks: [net(1)] }] }));
      writeFileSync(
        t,
        `import { defineConfig } from ${JSON.stringify(LOAD_TS)};\nexport default defineConfig({ server: { httpPort: 4100, maxBodySize: '1MiB' }, projects: [{ id: 'p', networks: [{ architecture: 'evm', evm: { chainId: 1 } }] }] });\n`,
      );
      const [a, b, c] = await Promise.all([y, j, t].map(async (f) => load(await readConfigFile(f))));
      expect(b).to.deep.equal(a);
      expect(c).to.deep.equal(a);
    });

    it('a missing file or a syntax error is a ConfigError', async () => {
      const e1 = await configErrorAsync(() => readConfigFile(join(dir, 'nope.yaml')));
      expect(e1.message).to.contain('nope.yaml');
      const bad = join(dir, 'bad.json');
      writeFileSync(bad, '{"server": ');
      await configErrorAsync(() => readConfigFile(bad));
    });
  });

  describe('${ENV} expansion', () => {
    it('expands variables inside strings', () => {
      const cfg = load(
        { server: { httpHost: '${HOST}' }, projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: 'https://${RPC_HOST}/v2/${KEY}' }] }] },
        { HOST: '127.0.0.1', RPC_HOST: 'rpc.example', KEY: 'abc' },
      );
      expect(cfg.server.httpHost).to.equal('127.0.0.1');
      expect(cfg.projects[0]!.upstreams[0]!.endpoint).to.equal('https://rpc.example/v2/abc');
      expect(cfg.warnings).to.deep.equal([]);
    });

    it('an unset variable becomes empty with a warning naming it', () => {
      const cfg = load({ server: { httpHost: 'a${UNSET_VAR_FOR_TEST}b' } }, {});
      expect(cfg.server.httpHost).to.equal('ab');
      expect(cfg.warnings).to.have.length(1);
      expect(cfg.warnings[0]).to.contain('UNSET_VAR_FOR_TEST');
    });

    it('numbers are coerced after expansion (server.httpPort from env)', () => {
      const cfg = load({ server: { httpPort: '${PORT}' } }, { PORT: '8080' });
      expect(cfg.server.httpPort).to.equal(8080);
      expect(cfg.server.httpPort).to.be.a('number');
    });

    it('numbers are coerced after expansion from a YAML file', async () => {
      const f = join(dir, 'env.yaml');
      writeFileSync(f, 'server:\n  httpPort: ${PORT}\n  maxBatchSize: ${BATCH}\nmetrics:\n  enabled: ${METRICS}\n');
      const cfg = load(await readConfigFile(f), { PORT: '8081', BATCH: '50', METRICS: 'false' });
      expect(cfg.server.httpPort).to.equal(8081);
      expect(cfg.server.maxBatchSize).to.equal(50);
      expect(cfg.metrics.enabled).to.equal(false);
    });

    it('a non-numeric value for a number field is an error naming the path', () => {
      const e = configError(() => load({ server: { httpPort: '${PORT}' } }, { PORT: 'eighty' }));
      expect(e.problems.map((p) => p.path)).to.include('server.httpPort');
    });

    it('the process environment is the default', () => {
      process.env.SVC_TEST_ENV_PORT = '4567';
      try {
        expect(loadConfigObject({ server: { httpPort: '${SVC_TEST_ENV_PORT}' } }).config.server.httpPort).to.equal(4567);
      } finally {
        delete process.env.SVC_TEST_ENV_PORT;
      }
    });
  });

  describe('durations and sizes', () => {
    for (const [text, msValue] of [
      ['50ms', 50],
      ['15s', 15000],
      ['1h', 3600000],
      ['2m', 120000],
      ['1.5s', 1500],
      ['250', 250],
    ] as const) {
      it(`server.maxTimeout "${text}" -> ${msValue} ms`, () => {
        expect(load({ server: { maxTimeout: text } }).server.maxTimeoutMs).to.equal(msValue);
      });
    }

    it('a duration given as a number is milliseconds', () => {
      expect(load({ server: { maxTimeout: 750 } }).server.maxTimeoutMs).to.equal(750);
    });

    it('an invalid duration names its path', () => {
      const e = configError(() => load({ server: { maxTimeout: 'soon' } }));
      expect(e.problems.map((p) => p.path)).to.include('server.maxTimeout');
    });

    for (const [text, n] of [
      ['10MiB', 10485760],
      ['512KiB', 524288],
      ['1GiB', 1073741824],
      ['10MB', 10485760],
    ] as const) {
      it(`server.maxBodySize "${text}" -> ${n} bytes`, () => {
        expect(load({ server: { maxBodySize: text } }).server.maxBodySize).to.equal(n);
      });
    }

    it('integer bytes stay bytes', () => {
      expect(load({ server: { maxBodySize: 2048 } }).server.maxBodySize).to.equal(2048);
    });

    it('parseDuration / parseSize', () => {
      expect(parseDuration('50ms')).to.equal(50);
      expect(parseDuration('15s')).to.equal(15000);
      expect(parseDuration('1h')).to.equal(3600000);
      expect(parseDuration(42)).to.equal(42);
      expect(() => parseDuration('later')).to.throw();
      expect(parseSize('10MiB')).to.equal(10485760);
      expect(parseSize(123)).to.equal(123);
      expect(parseSize('123')).to.equal(123);
    });

    it('plugin durations/sizes (x-svc-kind) are converted in settings', () => {
      const frag: SchemaFragment = { upstream: { timeout: Duration({ default: '30s' }), maxResponse: Size({ default: '1MiB' }) } };
      const cfg = load({ projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: 'http://a', timeout: '2s' }] }] }, {}, [frag]);
      expect(cfg.projects[0]!.upstreams[0]!.settings).to.deep.include({ timeout: 2000, maxResponse: 1048576 });
    });
  });

  describe('unknown keys', () => {
    it('an unknown upstream key names its path', () => {
      const e = configError(() => load({ projects: [{ id: 'p', upstreams: [{ endpoint: 'http://a', foo: 1 }] }] }));
      expect(e.problems).to.deep.include({ path: 'projects[0].upstreams[0].foo', message: 'unknown key "foo"' });
      expect(e.message).to.contain('projects[0].upstreams[0].foo');
    });

    it('unknown keys at the root, in server, in a network and in directiveDefaults', () => {
      const e = configError(() =>
        load({
          bogus: true,
          server: { httpPrt: 1 },
          projects: [{ id: 'p', networks: [net(1, { evmm: 1, directiveDefaults: { retryEmptyy: true } })] }],
        }),
      );
      const paths = e.problems.map((p) => p.path);
      expect(paths).to.include.members(['bogus', 'server.httpPrt', 'projects[0].networks[0].evmm', 'projects[0].networks[0].directiveDefaults.retryEmptyy']);
    });

    it('a plugin fragment opens its own keys only', () => {
      const frag: SchemaFragment = { root: { admin: Type.Object({ enabled: Type.Optional(Type.Boolean()) }, { additionalProperties: false }) } };
      expect(() => load({ admin: { enabled: true } }, {}, [frag])).to.not.throw();
      expect(configError(() => load({ admin: { enabled: true } })).problems.map((p) => p.path)).to.include('admin');
    });

    it('a missing required key names its path', () => {
      const e = configError(() => load({ projects: [{ id: 'p', upstreams: [{ id: 'u' }] }] }));
      expect(e.problems.map((p) => p.path)).to.include('projects[0].upstreams[0].endpoint');
    });
  });

  describe('defaults', () => {
    it('server, metrics and log level defaults', () => {
      const cfg = load({});
      expect(cfg.logLevel).to.equal('info');
      expect(cfg.server.httpHost).to.equal('0.0.0.0');
      expect(cfg.server.httpPort).to.equal(4000);
      expect(cfg.server.maxTimeoutMs).to.equal(150000);
      expect(cfg.server.maxBodySize).to.equal(10 * 1024 * 1024);
      expect(cfg.server.includeErrorDetails).to.equal(true);
      expect(cfg.server.executionHeaders).to.equal('all');
      expect(cfg.server.maxBatchSize).to.equal(1000);
      expect(cfg.server.responseHeaders).to.deep.equal({});
      expect(cfg.metrics).to.deep.equal({ enabled: true, host: '0.0.0.0', port: 4001, settings: { enabled: true, host: '0.0.0.0', port: 4001 } });
      expect(cfg.warnings).to.deep.equal([]);
    });

    it('explicit values win over defaults', () => {
      const cfg = load({
        logLevel: 'warn',
        server: { includeErrorDetails: false, executionHeaders: 'summary', maxBatchSize: 10 },
        metrics: { enabled: false, port: 9100 },
      });
      expect(cfg.logLevel).to.equal('warn');
      expect(cfg.server.includeErrorDetails).to.equal(false);
      expect(cfg.server.executionHeaders).to.equal('summary');
      expect(cfg.server.maxBatchSize).to.equal(10);
      expect(cfg.metrics.enabled).to.equal(false);
      expect(cfg.metrics.port).to.equal(9100);
    });

    it('httpHostV4 / httpPortV4 are aliases of httpHost / httpPort', () => {
      const cfg = load({ server: { httpHostV4: '127.0.0.1', httpPortV4: 4999 } });
      expect(cfg.server.httpHost).to.equal('127.0.0.1');
      expect(cfg.server.httpPort).to.equal(4999);
    });

    it('httpHost / httpPort win over their V4 aliases', () => {
      const cfg = load({ server: { httpHost: '::1', httpHostV4: '127.0.0.1', httpPort: 4100, httpPortV4: 4999 } });
      expect(cfg.server.httpHost).to.equal('::1');
      expect(cfg.server.httpPort).to.equal(4100);
    });

    it('metrics.hostV4 is an alias of metrics.host', () => {
      expect(load({ metrics: { hostV4: '127.0.0.2' } }).metrics.host).to.equal('127.0.0.2');
    });

    it('no projects: project "main" and the default aliasing rule "*"', () => {
      const cfg = load({});
      expect(cfg.projects.map((p) => p.id)).to.deep.equal(['main']);
      expect(cfg.projects[0]!.networks).to.deep.equal([]);
      expect(cfg.projects[0]!.upstreams).to.deep.equal([]);
      expect(cfg.server.aliasing.rules).to.deep.equal([{ matchDomain: '*', serveProject: 'main' }]);
    });

    it('with projects: no implicit aliasing rule, configured rules kept', () => {
      expect(load({ projects: [{ id: 'p' }] }).server.aliasing.rules).to.deep.equal([]);
      const rules = [{ matchDomain: 'rpc.example.com', serveProject: 'p', serveArchitecture: 'evm' as const, serveChain: '1' }];
      expect(load({ server: { aliasing: { rules } }, projects: [{ id: 'p' }] }).server.aliasing.rules).to.deep.equal(rules);
    });

    it('upstream id defaults to the endpoint host, made unique', () => {
      const cfg = load({
        projects: [
          { id: 'p', upstreams: [{ endpoint: 'http://127.0.0.1:8545' }, { endpoint: 'http://127.0.0.1:8545/x' }, { id: 'named', endpoint: 'http://h' }] },
        ],
      });
      expect(cfg.projects[0]!.upstreams.map((u) => u.id)).to.deep.equal(['127.0.0.1:8545', '127.0.0.1:8545-2', 'named']);
      expect(cfg.projects[0]!.upstreams[0]!.vendor).to.equal('unknown');
    });

    it('network id is evm:<chainId>', () => {
      const n = load({ projects: [{ id: 'p', networks: [net(137, { alias: 'polygon' })] }] }).projects[0]!.networks[0]!;
      expect(n.id).to.equal('evm:137');
      expect(n.chainId).to.equal(137);
      expect(n.alias).to.equal('polygon');
      expect(n.architecture).to.equal('evm');
    });
  });

  describe('networkDefaults / upstreamDefaults', () => {
    it('§2.8 ¶2 — objects merge recursively (jsonRpc.headers, directiveDefaults)', () => {
      const cfg = loadWithPlugins({
        projects: [
          {
            id: 'p',
            upstreamDefaults: { jsonRpc: { headers: { 'x-a': '1', 'x-shared': 'default' } } },
            upstreams: [{ id: 'u', endpoint: 'http://a', jsonRpc: { headers: { 'x-b': '2', 'x-shared': 'entry' } } }],
            networkDefaults: { directiveDefaults: { retryEmpty: true, skipCacheRead: 'memory*' } },
            networks: [net(1, { directiveDefaults: { skipConsensus: false } })],
          },
        ],
      });
      expect(cfg.projects[0]!.upstreams[0]!.headers).to.deep.equal({ 'x-a': '1', 'x-b': '2', 'x-shared': 'entry' });
      expect(cfg.projects[0]!.networks[0]!.directiveDefaults).to.deep.equal({ retryEmpty: true, skipCacheRead: 'memory*', skipConsensus: false });
    });

    it('an array on the entry replaces the default array', () => {
      const cfg = load({
        projects: [
          {
            id: 'p',
            upstreamDefaults: { ignoreMethods: ['debug_*', 'trace_*'], tags: ['tier:free'] },
            upstreams: [{ id: 'u', endpoint: 'http://a', ignoreMethods: ['eth_sendRawTransaction'] }],
          },
        ],
      });
      const u = cfg.projects[0]!.upstreams[0]!;
      expect(u.ignoreMethods).to.deep.equal(['eth_sendRawTransaction']);
      expect(u.tags).to.deep.equal(['tier:free']);
    });

    it('a scalar on the entry replaces the default (vendorName, explicit false over true)', () => {
      const cfg = loadWithPlugins({
        projects: [
          {
            id: 'p',
            upstreamDefaults: { vendorName: 'alchemy' },
            upstreams: [
              { id: 'a', endpoint: 'http://a', vendorName: 'infura' },
              { id: 'b', endpoint: 'http://b' },
            ],
            networkDefaults: { directiveDefaults: { enforceHighestBlock: true } },
            networks: [net(1, { directiveDefaults: { enforceHighestBlock: false } })],
          },
        ],
      });
      expect(cfg.projects[0]!.upstreams.map((u) => u.vendor)).to.deep.equal(['infura', 'alchemy']);
      expect(cfg.projects[0]!.networks[0]!.directiveDefaults.enforceHighestBlock).to.equal(false);
    });

    it('defaults are applied after the merge: an upstreamDefaults value beats the schema default', () => {
      const frag: SchemaFragment = {
        upstream: { weight: Type.Integer({ default: 1 }), timeout: Duration({ default: '30s' }) },
        network: { evalInterval: Duration({ default: '15s' }) },
      };
      const cfg = load(
        {
          projects: [
            {
              id: 'p',
              upstreamDefaults: { weight: 5, timeout: '2s' },
              upstreams: [
                { id: 'a', endpoint: 'http://a' },
                { id: 'b', endpoint: 'http://b', weight: 7 },
              ],
              networkDefaults: { evalInterval: '1m' },
              networks: [net(1), net(2, { evalInterval: '5s' })],
            },
            { id: 'q', upstreams: [{ id: 'c', endpoint: 'http://c' }], networks: [net(1)] },
          ],
        },
        {},
        [frag],
      );
      const [p, q] = cfg.projects;
      expect(p!.upstreams.map((u) => [u.settings.weight, u.settings.timeout])).to.deep.equal([
        [5, 2000],
        [7, 2000],
      ]);
      expect(p!.networks.map((n) => n.settings.evalInterval)).to.deep.equal([60000, 5000]);
      // No defaults block: the schema defaults apply.
      expect(q!.upstreams[0]!.settings).to.deep.include({ weight: 1, timeout: 30000 });
      expect(q!.networks[0]!.settings.evalInterval).to.equal(15000);
    });

    it('raw networkDefaults / upstreamDefaults are kept on the project', () => {
      const cfg = loadWithPlugins({
        projects: [{ id: 'p', networkDefaults: { directiveDefaults: { retryEmpty: true } }, upstreamDefaults: { vendorName: 'x' } }],
      });
      expect(cfg.projects[0]!.networkDefaults).to.deep.equal({ directiveDefaults: { retryEmpty: true } });
      expect(cfg.projects[0]!.upstreamDefaults).to.deep.equal({ vendorName: 'x' });
    });
  });

  describe("tri-state directiveDefaults (keys of the default preset's plugins)", () => {
    const BOOLS = [
      'retryEmpty',
      'retryPending',
      'skipInterpolation',
      'skipConsensus',
      'enforceHighestBlock',
      'enforceGetLogsBlockRange',
      'enforceNonNullTaggedBlocks',
    ] as const;

    it('stay unset when not given', () => {
      const cfg = loadWithPlugins({ projects: [{ id: 'p', networks: [net(1), net(2, { directiveDefaults: {} })] }] });
      for (const n of cfg.projects[0]!.networks) {
        expect(n.directiveDefaults).to.deep.equal({});
        for (const k of BOOLS) expect(n.directiveDefaults, k).to.not.have.property(k);
      }
    });

    it('explicit false and explicit true are kept', () => {
      const dd = Object.fromEntries(BOOLS.map((k, i) => [k, i % 2 === 0]));
      const n = loadWithPlugins({ projects: [{ id: 'p', networks: [net(1, { directiveDefaults: dd })] }] }).projects[0]!.networks[0]!;
      expect(n.directiveDefaults).to.deep.equal(dd);
    });

    it('YAML booleans for skipCacheRead become strings (validation coerces them), and read so through its directive', async () => {
      const f = join(dir, 'dd.yaml');
      writeFileSync(
        f,
        'projects:\n  - id: p\n    networks:\n      - architecture: evm\n        evm: { chainId: 1 }\n        directiveDefaults:\n          skipCacheRead: true\n          useUpstream: "alchemy-*"\n',
      );
      const n = loadWithPlugins(await readConfigFile(f)).projects[0]!.networks[0]!;
      expect(n.directiveDefaults).to.deep.equal({ skipCacheRead: 'true', useUpstream: 'alchemy-*' });
      expect(SKIP_CACHE_READ.get(n.directiveDefaults)).to.equal('true');
    });

    it('a non-boolean value is an error naming the path', () => {
      const e = configError(() => loadWithPlugins({ projects: [{ id: 'p', networks: [net(1, { directiveDefaults: { retryEmpty: 'sometimes' } })] }] }));
      expect(e.problems.map((p) => p.path)).to.include('projects[0].networks[0].directiveDefaults.retryEmpty');
    });
  });

  describe('allowMethods / ignoreMethods', () => {
    it('allowMethods alone implies ignoreMethods ["*"]', () => {
      const u = load({ projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: 'http://a', allowMethods: ['eth_call', 'eth_getLogs'] }] }] }).projects[0]!
        .upstreams[0]!;
      expect(u.allowMethods).to.deep.equal(['eth_call', 'eth_getLogs']);
      expect(u.ignoreMethods).to.deep.equal(['*']);
    });

    it('explicit ignoreMethods with allowMethods are kept', () => {
      const u = load({ projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: 'http://a', allowMethods: ['eth_call'], ignoreMethods: ['debug_*'] }] }] })
        .projects[0]!.upstreams[0]!;
      expect(u.ignoreMethods).to.deep.equal(['debug_*']);
    });

    it('neither: both empty', () => {
      const u = load({ projects: [{ id: 'p', upstreams: [{ id: 'u', endpoint: 'http://a' }] }] }).projects[0]!.upstreams[0]!;
      expect(u.allowMethods).to.deep.equal([]);
      expect(u.ignoreMethods).to.deep.equal([]);
    });
  });

  describe('semantic checks', () => {
    it('duplicate project ids, upstream ids, chain ids and aliases are reported with their paths', () => {
      const e = configError(() =>
        load({
          projects: [
            {
              id: 'p',
              upstreams: [
                { id: 'a', endpoint: 'http://a' },
                { id: 'a', endpoint: 'http://b' },
              ],
              networks: [net(1, { alias: 'main' }), net(1), net(2, { alias: 'main' })],
            },
            { id: 'p' },
          ],
        }),
      );
      const paths = e.problems.map((p) => p.path);
      expect(paths).to.include.members([
        'projects[0].upstreams[1].id',
        'projects[0].networks[1].evm.chainId',
        'projects[0].networks[2].alias',
        'projects[1].id',
      ]);
      expect(e.problems.find((p) => p.path === 'projects[1].id')!.message).to.contain('duplicate');
    });

    it('the same upstream id in two projects is fine', () => {
      expect(() =>
        load({
          projects: [
            { id: 'p', upstreams: [{ id: 'a', endpoint: 'http://a' }] },
            { id: 'q', upstreams: [{ id: 'a', endpoint: 'http://a' }] },
          ],
        }),
      ).to.not.throw();
    });

    it('a config that is not an object is rejected', () => {
      configError(() => load([1, 2]));
      configError(() => load('server: {}'));
    });
  });

  describe('validateConfig / buildConfigSchema', () => {
    it('returns every problem (not just the first)', () => {
      const problems = validateConfig({ server: { httpPort: 'x', nope: 1 }, metrics: { port: 70000 } }, buildConfigSchema());
      const paths = problems.map((p) => p.path);
      expect(paths).to.include.members(['server.httpPort', 'server.nope', 'metrics.port']);
    });

    it('a valid config has no problems', () => {
      expect(validateConfig({ server: { httpPort: 1 }, projects: [{ id: 'p', networks: [net(1)] }] }, buildConfigSchema())).to.deep.equal([]);
    });

    it('fragments add keys at their anchor points', () => {
      const schema = buildConfigSchema([
        { server: { costHeaders: Type.Boolean() }, project: { rateLimitBudget: Type.String() }, upstreamEvm: { nodeType: Type.String() } },
      ]);
      const doc = {
        server: { costHeaders: true },
        projects: [{ id: 'p', rateLimitBudget: 'b', upstreams: [{ endpoint: 'http://a', evm: { chainId: 1, nodeType: 'full' } }] }],
      };
      expect(validateConfig(doc, schema)).to.deep.equal([]);
      expect(validateConfig(doc, buildConfigSchema()).map((p) => p.path)).to.include.members([
        'server.costHeaders',
        'projects[0].rateLimitBudget',
        'projects[0].upstreams[0].evm.nodeType',
      ]);
    });

    it('an endpoint must be http(s)', () => {
      const problems = validateConfig({ projects: [{ id: 'p', upstreams: [{ endpoint: 'wss://a' }] }] }, buildConfigSchema());
      expect(problems.map((p) => p.path)).to.include('projects[0].upstreams[0].endpoint');
    });
  });
});
