/**
 * Presets published as packages, through the `svc` command (`node bin/svc.js`, the compiled
 * CLI): `--preset @acme/svc-preset` resolves an installed package from the working directory
 * (honouring its `exports`), `preset:` in a config file resolves from the config file's folder;
 * `svc validate --preset` checks the preset's plugin-owned keys and the usage text lists it; a
 * name that resolves nowhere is one error naming what was tried; `svc start` logs one line
 * naming the preset, where it came from, and every plugin with its version and config keys.
 *
 * The preset package is plain JavaScript using `definePlugin`, `definePreset`, `settingsOf` and
 * the cost service from `svc-proxy/plugin` / `svc-proxy/presets` (svc installed as `node_modules/svc`, a
 * link to this package), and prices eth_gasPrice with a versioned price table.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { PACKAGE_ROOT, VERSION } from '../../core/wire/version.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort } from '../helpers/ports.ts';
import { httpRequest, waitFor } from '../helpers/svc.ts';

const BIN = join(PACKAGE_ROOT, 'bin', 'svc.js');

interface Run {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

function run(args: string[], cwd: string): Run {
  const child = spawn(process.execPath, [BIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SVC_COMMIT: 'cli-presets-test' } });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exit };
}

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

/** The in-house preset package: the default preset plus a pricing plugin, in plain JavaScript. */
const PRESET_JS = `import { defaultPreset, COST_SERVICE } from 'svc-proxy/presets';
import { definePlugin, definePreset, settingsOf, Type } from 'svc-proxy/plugin';

const schema = { server: { acmePricing: Type.Optional(Type.Object({ header: Type.String(), unitPrice: Type.Number({ minimum: 0 }) })) } };

export const pricingPlugin = () => {
  let pricing;
  return definePlugin({
    name: 'acme-pricing',
    version: '1.2.3',
    dependsOn: ['cost'],
    schema,
    apply(host) {
      const table = Object.assign((method) => (method === 'eth_gasPrice' ? 7 : undefined), { version: 'acme-2025-06' });
      host.services.require(COST_SERVICE).registerPriceTable('acme', table);
      host.hooks.configured.tap('acme-pricing', (config) => {
        pricing = settingsOf(config.server, schema.server).acmePricing;
      });
      host.hooks.responseHeaders.tap('acme-pricing', (sink, records) => {
        if (pricing) sink.set(pricing.header, String(records.filter((r) => r.routed).length * pricing.unitPrice));
      });
    },
  });
};

export default definePreset(() => [...defaultPreset(), pricingPlugin()]);
`;

/** Installs the preset package (scoped, exports with an import-only condition) under `root/node_modules`. */
function installPreset(root: string): void {
  const pkg = join(root, 'node_modules', '@acme', 'svc-preset');
  write(
    join(pkg, 'package.json'),
    JSON.stringify({
      name: '@acme/svc-preset',
      version: '1.2.3',
      type: 'module',
      exports: { '.': { import: './dist/index.js' } },
      peerDependencies: { 'svc-proxy': '*' },
    }),
  );
  write(join(pkg, 'dist', 'index.js'), PRESET_JS);
  mkdirSync(join(root, 'node_modules'), { recursive: true });
  symlinkSync(PACKAGE_ROOT, join(root, 'node_modules', 'svc-proxy'), 'dir');
}

describe('e2e: presets as packages through the svc command', function () {
  this.timeout(30_000);
  let dir: string;
  let app: string;
  let upstream: FaultServer;

  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-cli-presets-'));
    app = join(dir, 'app');
    write(join(app, 'package.json'), JSON.stringify({ name: 'acme-app', private: true, type: 'module' }));
    installPreset(app);
    upstream = await startFaultServer({ chainId: 31337, handler: (r) => (r.method === 'eth_gasPrice' ? '0xa' : undefined) });
    write(
      join(app, 'svc.yaml'),
      [
        'server:',
        '  waitBeforeShutdown: 0s',
        '  costHeaders: true',
        '  acmePricing: { header: X-Acme-Price, unitPrice: 3 }',
        'projects:',
        '  - id: main',
        '    upstreams:',
        `      - { id: a, endpoint: "${upstream.url}", vendorName: acme, evm: { chainId: 31337 } }`,
        '',
      ].join('\n'),
    );
  });
  after(async () => {
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the usage text lists --preset for validate', async () => {
    const r = run(['--help'], app);
    expect(await r.exit).to.equal(0);
    expect(r.out()).to.include('svc validate --config FILE [--preset NAME]');
    expect(r.out()).to.include('@acme/svc-preset');
  });

  it("validate --preset <package name> checks the preset's plugin-owned keys; without it they are unknown", async () => {
    const ok = run(['validate', '--config', 'svc.yaml', '--preset', '@acme/svc-preset'], app);
    expect(await ok.exit, ok.err()).to.equal(0);
    expect(ok.out().trim()).to.equal('ok');

    write(join(app, 'bad.yaml'), 'server:\n  acmePricing: { header: X-Acme-Price, unitPrice: cheap }\n');
    const bad = run(['validate', '--config', 'bad.yaml', '--preset', '@acme/svc-preset'], app);
    expect(await bad.exit).to.equal(1);
    expect(bad.err()).to.include('server.acmePricing.unitPrice');

    const without = run(['validate', '--config', 'svc.yaml'], app);
    expect(await without.exit).to.equal(1);
    expect(without.err()).to.include('acmePricing');
  });

  it("preset: in a config file resolves from the config file's folder (a package, or a path relative to it)", async () => {
    const etc = join(dir, 'etc-svc');
    installPreset(etc);
    write(join(etc, 'svc.yaml'), 'preset: "@acme/svc-preset"\nserver:\n  acmePricing: { header: X-Acme-Price, unitPrice: 3 }\n');
    write(join(etc, 'local.js'), "export { default } from '@acme/svc-preset';\n");
    write(join(etc, 'by-path.yaml'), 'preset: ./local.js\nserver:\n  acmePricing: { header: X-Acme-Price, unitPrice: 3 }\n');
    // Run from a folder with no node_modules of its own.
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(elsewhere, { recursive: true });
    for (const file of ['svc.yaml', 'by-path.yaml']) {
      const r = run(['validate', '--config', join(etc, file)], elsewhere);
      expect(await r.exit, `${file}: ${r.err()}`).to.equal(0);
      expect(r.out().trim()).to.equal('ok');
    }
  });

  it('a preset name that resolves nowhere: exit 1 and one error naming what was tried', async () => {
    const r = run(['validate', '--config', 'svc.yaml', '--preset', '@acme/svc-nope'], app);
    expect(await r.exit).to.equal(1);
    expect(r.err()).to.include('preset "@acme/svc-nope" not found; tried:');
    expect(r.err()).to.include('a built-in or registered preset: default, minimal');
    expect(r.err()).to.include(`the package "@acme/svc-nope" from ${app}`);
    expect(r.err()).to.include(`the file ${join(app, '@acme', 'svc-nope')}: no such file`);
    expect(r.err()).to.not.include('Cannot find module');
  });

  it('start --preset <package name>: one log line names the preset, its file, every plugin with version and config keys; the versioned table prices the call', async () => {
    const port = await freePort();
    const r = run(['start', '--config', 'svc.yaml', '--preset', '@acme/svc-preset', '--port', String(port), '--metrics-port', '0'], app);
    const url = `http://127.0.0.1:${port}/main/evm/31337`;
    try {
      await waitFor(async () => {
        if (r.child.exitCode !== null) throw new Error(`svc exited with code ${r.child.exitCode}:\n${r.err()}`);
        return (
          (await httpRequest('POST', url, JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'eth_chainId' })).catch(() => undefined))?.json?.result === '0x7a69'
        );
      }, 20_000);

      const lines = r
        .out()
        .split('\n')
        .filter((l) => l.includes('"preset"'));
      expect(lines, r.out()).to.have.length(1);
      const line = JSON.parse(lines[0]!) as {
        level: number;
        msg: string;
        preset: { name: string; source: string; file: string };
        plugins: { name: string; version: string | null; config: string[] }[];
      };
      expect(line.level).to.equal(30); // info
      const file = join(app, 'node_modules', '@acme', 'svc-preset', 'dist', 'index.js');
      expect(line.preset).to.deep.equal({ name: '@acme/svc-preset', source: 'package', file });
      expect(line.msg).to.match(new RegExp(`^preset @acme/svc-preset \\(package ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\): \\d+ plugins: `));
      expect(line.msg).to.include(`cost@${VERSION}`).and.to.include('acme-pricing@1.2.3');
      const byName = new Map(line.plugins.map((p) => [p.name, p]));
      expect(byName.get('acme-pricing')).to.deep.equal({ name: 'acme-pricing', version: '1.2.3', config: ['server.acmePricing'] });
      expect(byName.get('cost')).to.deep.equal({ name: 'cost', version: VERSION, config: ['server.costHeaders'] });
      expect(byName.get('select')).to.deep.equal({
        name: 'select',
        version: VERSION,
        config: ['projects[].networks[].allowMethods', 'projects[].networks[].directiveDefaults.useUpstream'],
      });
      expect(
        line.plugins.every((p) => p.version !== null),
        'every built-in plugin has a version',
      ).to.equal(true);
      expect(line.plugins.at(-1)?.name).to.equal('acme-pricing');

      const res = await httpRequest('POST', url, JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_gasPrice' }));
      expect(res.json).to.deep.include({ id: 7, result: '0xa' });
      expect(res.headers).to.include({ 'x-acme-price': '3', 'x-svc-credits': 'acme:eth_gasPrice=7', 'x-svc-credits-version': 'acme-2025-06' });
    } finally {
      r.child.kill('SIGTERM');
      setTimeout(() => r.child.kill('SIGTERM'), 50);
      await r.exit;
    }
  });
});
