/**
 * svc as a published package: `npm pack` the repo, then, in a temp dir,
 * build an in-house plugin package from the "Writing a plugin" files of docs/plugins.md (every
 * ```ts block whose first line is `// file: src/...`), which import only the public entries
 * (`svc-proxy/plugin`, `svc-proxy/plugin/contracts`, `svc-proxy/presets`...), compile it with `tsc` (nodenext, strict, no skipLibCheck) against the installed
 * svc's `.d.ts` files, and run the installed `svc` command with the compiled preset in front of
 * two fake upstreams: the one tagged `tier:preferred` (listed second) answers, and the pricing
 * plugin's header carries unitPrice × routed calls from its own config key.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { expect } from 'chai';
import { marked, type Tokens } from 'marked';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { packSvc, sh as userSh, USER_ENV } from '../helpers/packed.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort } from '../helpers/ports.ts';
import { httpRequest, waitFor, type SvcResponse } from '../helpers/svc.ts';

/** A user's shell environment (test/helpers/packed.ts), with the commit svc reports. */
const ENV: NodeJS.ProcessEnv = { ...USER_ENV, SVC_COMMIT: 'package-test' };

/** Runs a command as a user would; on failure the error carries its output. */
const sh = (cmd: string, args: string[], cwd: string): Promise<string> => userSh(cmd, args, cwd, ENV);

function* files(dir: string): Generator<string> {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* files(p);
    else yield p;
  }
}

/**
 * The plugin-package files of docs/plugins.md ("Writing a plugin"): ```ts blocks whose first
 * line is `// file: <path> ...`, keyed by path, the text after that line (code blocks read with
 * the marked lexer).
 */
function docsPluginFiles(): Map<string, string> {
  const page = readFileSync(join(PACKAGE_ROOT, 'docs', 'plugins.md'), 'utf8');
  const out = new Map<string, string>();
  marked.walkTokens(marked.lexer(page), (t) => {
    if (t.type !== 'code' || (t as Tokens.Code).lang !== 'ts') return;
    const text = (t as Tokens.Code).text;
    const nl = text.indexOf('\n');
    const first = nl < 0 ? text : text.slice(0, nl);
    if (!first.startsWith('// file: ')) return;
    const path = first.slice('// file: '.length).split(' ')[0]!;
    out.set(path, `${text.slice(nl + 1)}\n`);
  });
  return out;
}

const PRICE_HEADER = 'X-Acme-Price';
const UNIT_PRICE = 3;

describe('e2e: the packed package with an in-house plugin package', function () {
  this.timeout(180_000);
  let tmp: string;
  let app: string;
  let plain: FaultServer;
  let preferred: FaultServer;
  let svc: ChildProcess | undefined;
  let log = '';
  let url: string;

  before(async () => {
    await ensureBuilt();
    tmp = mkdtempSync(join(tmpdir(), 'svc-package-'));
    // svc packed once per test process from the dist/ ensureBuilt left (test/helpers/packed.ts).
    const tarball = await packSvc();

    app = join(tmp, 'app');
    const pkg = join(app, 'packages', 'acme-svc-plugins');
    const sources = docsPluginFiles();
    expect([...sources.keys()], 'plugin files of docs/plugins.md').to.include('src/preset.ts');
    for (const [path, text] of sources) {
      mkdirSync(dirname(join(pkg, path)), { recursive: true });
      writeFileSync(join(pkg, path), text);
    }
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'acme-app', private: true, type: 'module' }, null, 2));
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify(
        {
          name: 'acme-svc-plugins',
          version: '1.0.0',
          type: 'module',
          exports: { './preset': './dist/preset.js' },
          peerDependencies: { 'svc-proxy': '>=0.1.0 <1' },
        },
        null,
        2,
      ),
    );
    // A consumer's own settings: no skipLibCheck, so svc's .d.ts files are checked too.
    writeFileSync(
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
    // The app installs svc's tarball and the plugin package (a Node project has @types/node).
    await sh(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball, './packages/acme-svc-plugins', '@types/node@20'],
      app,
    );
    await sh(process.execPath, [join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', pkg], pkg);

    plain = await startFaultServer({ chainId: 31337, handler: (r) => (r.method === 'eth_gasPrice' ? '0xb' : undefined) });
    preferred = await startFaultServer({ chainId: 31337, handler: (r) => (r.method === 'eth_gasPrice' ? '0xa' : undefined) });
    writeFileSync(
      join(app, 'svc.yaml'),
      [
        'server:',
        '  waitBeforeShutdown: 0s',
        `  acmePricing: { header: ${PRICE_HEADER}, unitPrice: ${UNIT_PRICE} }`,
        'projects:',
        '  - id: main',
        '    upstreams:',
        `      - { id: plain, endpoint: "${plain.url}", evm: { chainId: 31337 } }`,
        `      - { id: preferred, endpoint: "${preferred.url}", evm: { chainId: 31337 }, tags: ["tier:preferred"] }`,
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
    await plain?.close();
    await preferred?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('installs compiled JavaScript and declarations only, with the seven entries, the plugin contracts pattern and no tsx', () => {
    const root = join(app, 'node_modules', 'svc-proxy');
    const sources = [...files(root)].map((f) => relative(root, f)).filter((f) => /\.[mc]?ts$/.test(f) && !/\.d\.[mc]?ts$/.test(f));
    expect(sources).to.deep.equal([]);
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    expect(Object.keys(manifest.exports)).to.have.members([
      './plugin',
      './plugin/errors',
      './plugin/contracts',
      './util',
      './plugins/*',
      './presets',
      './config',
      './package.json',
    ]);
    // One contract entry per plugin that offers one: svc-proxy/plugins/<name> is dist/plugins/<name>/api.js.
    expect(existsSync(join(root, 'dist', 'plugins', 'selection', 'api.js')), 'svc-proxy/plugins/selection built').to.equal(true);
    expect(manifest.exports).to.not.have.property('./*');
    for (const d of [...files(root)].filter((f) => f.endsWith('.d.ts'))) {
      expect(readFileSync(d, 'utf8'), relative(root, d)).to.not.match(/(?:from|import)\s*\(?\s*['"]\.{1,2}\/[^'"]*\.[mc]?ts['"]/);
    }
    expect(existsSync(join(app, 'node_modules', 'tsx')), 'tsx installed with svc').to.equal(false);
    expect(existsSync(join(app, 'packages', 'acme-svc-plugins', 'dist', 'preset.js'))).to.equal(true);
  });

  it('svc validate checks the plugin-owned config key; a .ts preset without tsx is refused with a clear message', async () => {
    const bin = join(app, 'node_modules', '.bin', 'svc');
    const preset = './node_modules/acme-svc-plugins/dist/preset.js';
    expect((await sh(bin, ['validate', '--config', 'svc.yaml', '--preset', preset], app)).trim()).to.equal('ok');
    writeFileSync(join(app, 'bad.yaml'), 'server:\n  acmePricing: { header: X-Acme-Price, unitPrice: cheap }\n');
    const err = await sh(bin, ['validate', '--config', 'bad.yaml', '--preset', preset], app).then(
      () => '',
      (e: Error) => e.message,
    );
    expect(err).to.include('server.acmePricing.unitPrice');
    // A built-in plugin's ConfigError (the installed dist/plugins import svc-proxy/plugin by
    // self-reference) is the class the CLI checks: printed as `path: message`, not as a raw error.
    writeFileSync(
      join(app, 'budget.yaml'),
      'projects:\n  - id: main\n    rateLimitBudget: nope\n    upstreams:\n      - { endpoint: "http://127.0.0.1:9", evm: { chainId: 1 } }\n',
    );
    const budget = await sh(bin, ['validate', '--config', 'budget.yaml'], app).then(
      () => '',
      (e: Error) => e.message,
    );
    expect(budget).to.include('\nprojects[0].rateLimitBudget: budget "nope" is not declared in rateLimiters.budgets\n');
    expect(budget).to.not.include('invalid config');
    // A TypeScript preset is the user's own TypeScript: without tsx installed, a clear message.
    writeFileSync(join(app, 'preset.ts'), 'export default (): never[] => [];\n');
    const ts = await sh(bin, ['validate', '--config', 'svc.yaml', '--preset', './preset.ts'], app).then(
      () => '',
      (e: Error) => e.message,
    );
    expect(ts).to.include('preset.ts is TypeScript: install tsx');
  });

  it('the installed svc command runs the compiled preset: the tagged upstream answers, priced per routed call', async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}/main/evm/31337`;
    svc = spawn(
      join(app, 'node_modules', '.bin', 'svc'),
      ['start', '--config', 'svc.yaml', '--preset', './node_modules/acme-svc-plugins/dist/preset.js', '--port', String(port), '--metrics-port', '0'],
      {
        cwd: app,
        env: ENV,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    svc.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    svc.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    const post = (body: unknown): Promise<SvcResponse> => httpRequest('POST', url, JSON.stringify(body));
    try {
      await waitFor(async () => {
        if (svc!.exitCode !== null) throw new Error(`svc exited with code ${svc!.exitCode}`);
        return (await post({ jsonrpc: '2.0', id: 0, method: 'eth_chainId' }).catch(() => undefined))?.json?.result === '0x7a69';
      }, 30_000);
    } catch (e) {
      throw new Error(`svc did not serve: ${(e as Error).message}\n${log}`);
    }

    const before = {
      plain: plain.calls.filter((c) => c.method === 'eth_gasPrice').length,
      preferred: preferred.calls.filter((c) => c.method === 'eth_gasPrice').length,
    };
    const one = await post({ jsonrpc: '2.0', id: 7, method: 'eth_gasPrice' });
    expect(one.status, one.text).to.equal(200);
    expect(one.json).to.deep.include({ id: 7, result: '0xa' });
    expect(one.headers['x-svc-upstream']).to.equal('preferred');
    expect(one.headers[PRICE_HEADER.toLowerCase()]).to.equal(String(UNIT_PRICE));

    const batch = await post([
      { jsonrpc: '2.0', id: 1, method: 'eth_gasPrice' },
      { jsonrpc: '2.0', id: 2, method: 'eth_gasPrice' },
    ]);
    expect(batch.status, batch.text).to.equal(200);
    expect(batch.json.map((r: { result: string }) => r.result)).to.deep.equal(['0xa', '0xa']);
    expect(batch.headers[PRICE_HEADER.toLowerCase()]).to.equal(String(2 * UNIT_PRICE));

    expect(plain.calls.filter((c) => c.method === 'eth_gasPrice').length - before.plain).to.equal(0);
    expect(preferred.calls.filter((c) => c.method === 'eth_gasPrice').length - before.preferred).to.be.at.least(1);
  });
});

describe('e2e: the packed tarball installed globally (npm install -g), as README says', function () {
  this.timeout(180_000);
  let tmp: string;
  let upstream: FaultServer;
  let svc: ChildProcess | undefined;

  after(async () => {
    if (svc && svc.exitCode === null) {
      const exited = new Promise((r) => svc!.once('exit', r));
      svc.kill('SIGTERM');
      await exited;
    }
    await upstream?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('the package is svc-proxy (svc on npm is another package); its global install puts the svc command on PATH, which starts and serves', async () => {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { name: string; version: string; bin: Record<string, string> };
    expect(pkg.name).to.equal('svc-proxy');
    expect(Object.keys(pkg.bin)).to.deep.equal(['svc']);
    const tarball = await packSvc();
    tmp = mkdtempSync(join(tmpdir(), 'svc-global-'));
    // A global install into its own prefix (what `npm install -g` does, without touching the machine's).
    const prefix = join(tmp, 'global');
    await sh('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball], tmp);
    const bin = join(prefix, 'bin', 'svc');
    expect(existsSync(bin), 'svc on the global bin path').to.equal(true);
    expect((await sh(bin, ['--version'], tmp)).trim()).to.include(pkg.version);

    upstream = await startFaultServer({ chainId: 31337 });
    const port = await freePort();
    let log = '';
    svc = spawn(bin, ['start', upstream.url, '--port', String(port), '--metrics-port', '0'], { cwd: tmp, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    svc.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    svc.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    const url = `http://127.0.0.1:${port}/evm/31337`;
    try {
      await waitFor(async () => {
        if (svc!.exitCode !== null) throw new Error(`svc exited with code ${svc!.exitCode}`);
        return (
          (await httpRequest('POST', url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId' })).catch(() => undefined))?.json?.result === '0x7a69'
        );
      }, 30_000);
    } catch (e) {
      throw new Error(`the globally installed svc did not serve: ${(e as Error).message}\n${log}`);
    }
    expect(log).to.include('network evm:31337 is served');
    await waitFor(async () => (await httpRequest('GET', `http://127.0.0.1:${port}/healthcheck`)).status === 200, 20_000);
  });
});
