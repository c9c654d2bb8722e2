/**
 * A platform team's packaged preset, end to end, written from docs/plugins.md alone ("Writing a
 * plugin", "Presets as packages", "Selection plugins", "Pricing plugins"): svc is packed and
 * installed into a fresh project; the team's package `@acme/svc-preset` holds an in-house
 * selection plugin in TypeScript (compiled by the project's own `tsc` against the installed svc's
 * declarations), a pricing plugin in plain JavaScript (`definePlugin`, no `.d.ts`) and the preset
 * (the default preset without tracing, plus both), is packed and installed into the project's
 * node_modules, and the installed `svc` command runs it in front of two anvil nodes.
 *
 * Checked from the outside only: `svc validate --preset` (tracing's key refused), the start-up
 * line (the preset and both plugins with their versions), `X-SVC-Upstream` (the in-house order),
 * `X-SVC-Credits` / `X-SVC-Credits-Version` (the in-house price table and its version),
 * `svc_selection_score` and the admin `svc_project` view (the in-house order).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { packSvc, sh, USER_ENV } from '../helpers/packed.ts';
import { freePort } from '../helpers/ports.ts';
import { httpRequest, waitFor, type SvcResponse } from '../helpers/svc.ts';

const ADMIN = 'acme-admin-secret-0123456789abcdef';
const SELECTION_VERSION = '2.1.0';
const PRICING_VERSION = '1.4.0';
const PRICES_VERSION = 'acme-prices-2025.11';

/** The in-house selection plugin (TypeScript): own nodes first, then the configured policy's order. */
const SELECTION_TS = `import { definePlugin } from 'svc-proxy/plugin';
import { selectionHooks, type EvalFunc, type PolicyUpstream } from 'svc-proxy/plugins/selection';

const OWN = 'tier:own';
const own = (u: PolicyUpstream): boolean => u.tags.includes(OWN);

export function acmeSelectionPlugin() {
  return definePlugin({
    name: 'acme-selection',
    version: '${SELECTION_VERSION}',
    svc: '>=0.1.0 <1',
    dependsOn: ['selection'],
    apply(host) {
      selectionHooks(host).policy.tap('acme-selection', (configured: EvalFunc): EvalFunc => async (upstreams, ctx) => {
        // The configured policy (the default: cordons, health exclusions, by score) decides who may serve.
        const order = ctx.view(await configured(upstreams, ctx));
        return [...order.filter(own).note('acme-selection', '*', OWN + ' first'), ...order.filter((u) => !own(u))];
      });
    },
  });
}
`;

/** The in-house pricing plugin (plain JavaScript): a versioned price table for vendor acme. */
const PRICING_JS = `import { definePlugin } from 'svc-proxy/plugin';
import { COST_SERVICE } from 'svc-proxy/presets';

const UNITS = new Map([['eth_getBalance', 12], ['eth_call', 26]]);

export function acmePricingPlugin() {
  return definePlugin({
    name: 'acme-pricing',
    version: '${PRICING_VERSION}',
    dependsOn: ['cost'],
    apply(host) {
      const table = Object.assign((method) => UNITS.get(method), { version: '${PRICES_VERSION}' });
      host.services.require(COST_SERVICE).registerPriceTable('acme', table);
    },
  });
}
`;

/** The preset: the default one without tracing, plus both in-house plugins. */
const PRESET_JS = `import { definePreset } from 'svc-proxy/plugin';
import { defaultPreset } from 'svc-proxy/presets';
import { acmeSelectionPlugin } from './dist/selection.js';
import { acmePricingPlugin } from './pricing.js';

export default definePreset(() => [...defaultPreset().filter((p) => p.name !== 'tracing'), acmeSelectionPlugin(), acmePricingPlugin()]);
`;

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

const NPM_INSTALL = ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

describe("e2e: a platform team's packaged preset (@acme/svc-preset, svc installed from its tarball)", function () {
  this.timeout(90_000);
  let tmp: string;
  let app: string;
  let publicNode: AnvilHandle;
  let ownNode: AnvilHandle;
  let svc: ChildProcess | undefined;
  let out = '';
  let err = '';

  before(async () => {
    let tarball: string;
    [tarball, publicNode, ownNode] = await Promise.all([packSvc(), startAnvil(), startAnvil()]);
    tmp = mkdtempSync(join(tmpdir(), 'svc-acme-'));
    app = join(tmp, 'app');
    write(join(app, 'package.json'), JSON.stringify({ name: 'acme-rpc', private: true, type: 'module' }, null, 2));
    // The project's own tsc and Node types, beside svc from its tarball.
    await sh('npm', [...NPM_INSTALL, tarball, 'typescript@5.9', '@types/node@20'], app);

    // The platform team's package, in the project's repository, built with the project's tsc.
    const pkg = join(app, 'packages', 'svc-preset');
    write(join(pkg, 'src', 'selection.ts'), SELECTION_TS);
    write(join(pkg, 'pricing.js'), PRICING_JS);
    write(join(pkg, 'index.js'), PRESET_JS);
    write(
      join(pkg, 'package.json'),
      JSON.stringify(
        {
          name: '@acme/svc-preset',
          version: '3.0.0',
          type: 'module',
          exports: { '.': './index.js' },
          files: ['index.js', 'pricing.js', 'dist/'],
          peerDependencies: { 'svc-proxy': '>=0.1.0 <1' },
        },
        null,
        2,
      ),
    );
    // A consumer's own settings: strict, no skipLibCheck, so svc's .d.ts files are checked too.
    write(
      join(pkg, 'tsconfig.json'),
      JSON.stringify(
        {
          compilerOptions: {
            target: 'ES2022',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            strict: true,
            rootDir: 'src',
            outDir: 'dist',
            declaration: true,
          },
          include: ['src'],
        },
        null,
        2,
      ),
    );
    const tsc = join(app, 'node_modules', '.bin', 'tsc');
    await sh(tsc, ['-p', pkg], pkg);
    // The JavaScript files are typed by definePlugin/definePreset alone: tsc --checkJs (as an
    // editor checks plain JavaScript, without noImplicitAny) finds no error.
    await sh(
      tsc,
      [
        '--noEmit',
        '--allowJs',
        '--checkJs',
        '--strictNullChecks',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'ES2022',
        'index.js',
        'pricing.js',
      ],
      pkg,
    );
    // Published: packed and installed into the project's node_modules like any package.
    await sh('npm', ['pack', '--silent', '--pack-destination', tmp], pkg);
    const presetTarball = readdirSync(tmp).find((f) => /^acme-svc-preset-.*\.tgz$/.test(f));
    expect(presetTarball, 'npm pack wrote no acme-svc-preset-*.tgz').to.be.a('string');
    await sh('npm', [...NPM_INSTALL, join(tmp, presetTarball!)], app);

    write(
      join(app, 'svc.yaml'),
      [
        'server:',
        '  waitBeforeShutdown: 0s',
        '  costHeaders: true',
        'admin:',
        `  auth: { strategies: [{ type: secret, secret: { value: "${ADMIN}" } }] }`,
        'database:',
        '  evmJsonRpcCache: { connectors: [], policies: [] }',
        'projects:',
        '  - id: main',
        '    upstreams:',
        `      - { id: public, endpoint: "${publicNode.url}", vendorName: acme, evm: { chainId: ${publicNode.chainId} } }`,
        `      - { id: own, endpoint: "${ownNode.url}", vendorName: acme, evm: { chainId: ${ownNode.chainId} }, tags: ["tier:own"] }`,
        '',
      ].join('\n'),
    );
  });

  after(async () => {
    if (svc && svc.exitCode === null) {
      const exited = new Promise((r) => svc!.once('exit', r));
      svc.kill('SIGTERM');
      await exited;
    }
    await Promise.all([publicNode?.stop(), ownNode?.stop()]);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('installs the preset as a package: compiled selection plugin with its declarations, the JavaScript plugin as written', () => {
    const installed = join(app, 'node_modules', '@acme', 'svc-preset');
    for (const f of ['package.json', 'index.js', 'pricing.js', 'dist/selection.js', 'dist/selection.d.ts'])
      expect(existsSync(join(installed, f)), f).to.equal(true);
    expect(existsSync(join(installed, 'pricing.d.ts')), 'no hand-written .d.ts').to.equal(false);
  });

  it("svc validate --preset @acme/svc-preset accepts the config and refuses tracing's key, which the default preset accepts", async () => {
    const bin = join(app, 'node_modules', '.bin', 'svc');
    expect((await sh(bin, ['validate', '--config', 'svc.yaml', '--preset', '@acme/svc-preset'], app)).trim()).to.equal('ok');
    write(join(app, 'tracing.yaml'), 'tracing:\n  enabled: false\n');
    expect((await sh(bin, ['validate', '--config', 'tracing.yaml'], app)).trim()).to.equal('ok');
    const refused = await sh(bin, ['validate', '--config', 'tracing.yaml', '--preset', '@acme/svc-preset'], app).then(
      () => '',
      (e: Error) => e.message,
    );
    expect(refused).to.match(/tracing/);
    expect(refused).to.match(/unknown key/i);
  });

  it('svc start --preset @acme/svc-preset: the start-up line names the preset and both plugins; calls follow the in-house order and price table', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    svc = spawn(
      join(app, 'node_modules', '.bin', 'svc'),
      ['start', '--preset', '@acme/svc-preset', '--config', 'svc.yaml', '--port', String(port), '--metrics-port', String(metricsPort)],
      {
        cwd: app,
        env: USER_ENV,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    svc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    svc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    const base = `http://127.0.0.1:${port}`;
    const post = (path: string, body: unknown, headers: Record<string, string> = {}): Promise<SvcResponse> =>
      httpRequest('POST', `${base}${path}`, JSON.stringify(body), headers);
    try {
      await waitFor(async () => {
        if (svc!.exitCode !== null) throw new Error(`svc exited with code ${svc!.exitCode}`);
        return (await post('/main/evm/31337', { jsonrpc: '2.0', id: 0, method: 'eth_chainId' }).catch(() => undefined))?.json?.result === '0x7a69';
      }, 30_000);
    } catch (e) {
      throw new Error(`svc did not serve: ${(e as Error).message}\n${out}\n${err}`);
    }

    // The start-up line: the preset, where it was found, both in-house plugins with their versions, no tracing.
    const lines = out.split('\n').filter((l) => l.includes('"preset"'));
    expect(lines, out).to.have.length(1);
    const line = JSON.parse(lines[0]!) as {
      msg: string;
      preset: { name: string; source: string; file: string };
      plugins: { name: string; version: string | null }[];
    };
    expect(line.preset).to.deep.equal({ name: '@acme/svc-preset', source: 'package', file: join(app, 'node_modules', '@acme', 'svc-preset', 'index.js') });
    const versions = new Map(line.plugins.map((p) => [p.name, p.version]));
    expect(versions.get('acme-selection')).to.equal(SELECTION_VERSION);
    expect(versions.get('acme-pricing')).to.equal(PRICING_VERSION);
    expect(versions.has('tracing'), 'tracing is left out').to.equal(false);
    expect(versions.has('selection') && versions.has('cost')).to.equal(true);
    expect(line.msg).to.include(`acme-selection@${SELECTION_VERSION}`).and.to.include(`acme-pricing@${PRICING_VERSION}`);

    // The in-house order serves: own (listed second) answers, priced by the in-house table.
    const call = { jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params: ['0x00000000000000000000000000000000000000aa', 'latest'] };
    for (let i = 0; i < 3; i++) {
      const r = await post('/main/evm/31337', call);
      expect(r.status, r.text).to.equal(200);
      expect(r.json).to.deep.include({ id: 7, result: '0x0' });
      expect(r.headers['x-svc-upstream']).to.equal('own');
      expect(r.headers).to.include({ 'x-svc-credits': 'acme:eth_getBalance=12', 'x-svc-credits-version': PRICES_VERSION });
    }

    // svc's own views show the in-house order: the score gauge (lowest first) and the admin view.
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const score = (id: string) => Number(new RegExp(`^svc_selection_score\\{[^}]*upstream="${id}"[^}]*\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(score('own'), metrics).to.be.lessThan(score('public'));
    const admin = await post('/admin', { jsonrpc: '2.0', id: 1, method: 'svc_project', params: ['main'] }, { 'x-svc-secret-token': ADMIN });
    expect(admin.status, admin.text).to.equal(200);
    const net = (
      admin.json.result.networks as Array<{
        id: string;
        primaryUpstream: string;
        selection: { order: string[]; custom: boolean };
        recentDecisions: { step: string }[];
      }>
    ).find((n) => n.id === 'evm:31337')!;
    expect(net.primaryUpstream).to.equal('own');
    expect(net.selection).to.deep.include({ order: ['own', 'public'], custom: true });
    expect(net.recentDecisions.map((d) => d.step)).to.include('acme-selection');
  });
});
