/**
 * The compiled built-in plugins import `svc-proxy/plugin` by its package name (docs/plugins.md "The
 * built-in plugins are written the same way"). In dist/ that specifier resolves by
 * self-reference through dist/package.json to dist/core/plugin-api.js, the very module instance
 * core's own relative imports load, so there is one copy of every class: an error a built-in
 * plugin throws is `instanceof` the class core checks (plain class identity, no brand). A second
 * instance would still run, but core would no longer recognise the plugin's errors: the CLI
 * would print a config problem as a raw message instead of its path.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { ensureBuilt } from '../helpers/build.ts';

const exec = promisify(execFile);
const DIST = join(PACKAGE_ROOT, 'dist');

type PluginErrors = typeof import('../../core/plugin-errors.ts');
type RateLimitSchema = typeof import('../../plugins/rate-limit/schema.ts');

describe('e2e: compiled plugins and core share one svc-proxy/plugin instance', function () {
  this.timeout(60_000);
  before(() => ensureBuilt());

  it('every compiled plugin resolves svc-proxy/plugin to dist/core/plugin-api.js', () => {
    const plugins = readdirSync(join(DIST, 'plugins'));
    expect(plugins.length, 'compiled plugins').to.be.greaterThan(20);
    for (const name of plugins) {
      // Resolved from the plugin's own folder, as its `import 'svc-proxy/plugin'` is.
      const resolved = createRequire(join(DIST, 'plugins', name, 'index.js')).resolve('svc-proxy/plugin');
      expect(resolved, name).to.equal(join(DIST, 'core', 'plugin-api.js'));
    }
  });

  it('an error a compiled plugin throws is instanceof the class core exports (class identity)', async () => {
    const api = (await import(pathToFileURL(join(DIST, 'core', 'plugin-errors.js')).href)) as PluginErrors;
    const rl = (await import(pathToFileURL(join(DIST, 'plugins', 'rate-limit', 'schema.js')).href)) as RateLimitSchema;
    const config = { settings: {}, projects: [{ settings: { rateLimitBudget: 'nope' }, networks: [], upstreams: [] }] } as unknown as Parameters<
      RateLimitSchema['rateLimitersOf']
    >[0];
    let thrown: unknown;
    try {
      rl.rateLimitersOf(config);
    } catch (e) {
      thrown = e;
    }
    // The default instanceof (ConfigError has no cross-copy brand): the same class object.
    expect(Function.prototype[Symbol.hasInstance].call(api.ConfigError, thrown), String(thrown)).to.equal(true);
  });

  it('svc validate (compiled) prints a plugin-raised config problem by its path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-plugin-entry-'));
    try {
      writeFileSync(
        join(dir, 'bad.yaml'),
        [
          'projects:',
          '  - id: main',
          '    rateLimitBudget: nope',
          '    upstreams:',
          '      - { endpoint: "http://127.0.0.1:9", evm: { chainId: 1 } }',
          '',
        ].join('\n'),
      );
      const out = await exec(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'validate', '--config', 'bad.yaml'], { cwd: dir }).then(
        () => 'exit 0',
        (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
      );
      // Recognised as a ConfigError by the CLI: one line per problem, not the error's raw message.
      expect(out).to.equal('projects[0].rateLimitBudget: budget "nope" is not declared in rateLimiters.budgets\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
