/**
 * Presets as packages: `--preset NAME` / `preset:` resolve a built-in name first, then an
 * installed package with Node's ESM resolution from the given folder (scoped or not, with a
 * subpath, honouring the package's `exports`, including an `import`-only condition that
 * `require.resolve` would refuse), then a module path; a name that resolves nowhere is one error
 * naming everything tried.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { loadPreset, minimalPreset, presetNames, resolvePreset } from '../../../presets/index.ts';
import { VERSION } from '../../../core/wire/version.ts';

/** A preset module returning one plugin with the given name. */
const presetModule = (plugin: string, exportName: 'default' | 'preset' = 'default') =>
  exportName === 'default'
    ? `export default () => [{ name: '${plugin}', version: '1.2.3', apply() {} }];\n`
    : `export const preset = () => [{ name: '${plugin}', apply() {} }];\n`;

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

describe('presets: resolving --preset NAME (packages, paths, built-ins)', () => {
  let dir: string;
  let app: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-presets-'));
    app = join(dir, 'app');
    write(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    // A scoped package whose exports map `.` (import-only condition) and `./preset` to dist files.
    const scoped = join(app, 'node_modules', '@acme', 'svc-preset');
    write(
      join(scoped, 'package.json'),
      JSON.stringify({
        name: '@acme/svc-preset',
        version: '1.2.3',
        type: 'module',
        exports: { '.': { import: './dist/index.js' }, './preset': './dist/staging.js' },
      }),
    );
    write(join(scoped, 'dist', 'index.js'), presetModule('acme-main'));
    write(join(scoped, 'dist', 'staging.js'), presetModule('acme-staging', 'preset'));
    // Not exported: a deep import must be refused, as Node refuses it.
    write(join(scoped, 'dist', 'internal.js'), presetModule('acme-internal'));
    // An unscoped package with only `main`.
    const plain = join(app, 'node_modules', 'svc-preset-plain');
    write(join(plain, 'package.json'), JSON.stringify({ name: 'svc-preset-plain', version: '0.0.1', type: 'module', main: 'main.js' }));
    write(join(plain, 'main.js'), presetModule('plain'));
    // A package that exports no preset function.
    const empty = join(app, 'node_modules', 'not-a-preset');
    write(join(empty, 'package.json'), JSON.stringify({ name: 'not-a-preset', type: 'module', exports: './index.js' }));
    write(join(empty, 'index.js'), 'export const answer = 42;\n');
    // Paths.
    write(join(app, 'presets', 'local.js'), presetModule('local'));
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("built-in names come first; built-in plugins carry svc's version", async () => {
    const r = await resolvePreset('minimal', { from: app });
    expect(r).to.include({ name: 'minimal', source: 'built-in' });
    expect(r.file).to.equal(undefined);
    expect(r.preset).to.equal(minimalPreset);
    expect(r.preset().map((p) => [p.name, p.version])).to.deep.equal([
      ['select', VERSION],
      ['forward', VERSION],
      ['evm-errors', VERSION],
      ['outbound', VERSION],
      ['compression', VERSION],
      ['tls', VERSION],
    ]);
    expect(presetNames()).to.include.members(['default', 'minimal']);
  });

  it('a scoped package name resolves through its exports (an import-only condition) from the given folder', async () => {
    const r = await resolvePreset('@acme/svc-preset', { from: app });
    expect(r).to.include({ name: '@acme/svc-preset', source: 'package', file: join(app, 'node_modules', '@acme', 'svc-preset', 'dist', 'index.js') });
    expect(r.preset().map((p) => p.name)).to.deep.equal(['acme-main']);
  });

  it('a package subpath resolves through its exports; a named `preset` export works too', async () => {
    const r = await resolvePreset('@acme/svc-preset/preset', { from: app });
    expect(r).to.include({ source: 'package', file: join(app, 'node_modules', '@acme', 'svc-preset', 'dist', 'staging.js') });
    expect(r.preset().map((p) => p.name)).to.deep.equal(['acme-staging']);
  });

  it('an unscoped package resolves through its main; it is found from a subfolder too (node_modules up the tree)', async () => {
    const sub = join(app, 'deploy', 'staging');
    mkdirSync(sub, { recursive: true });
    const r = await resolvePreset('svc-preset-plain', { from: sub });
    expect(r).to.include({ source: 'package', file: join(app, 'node_modules', 'svc-preset-plain', 'main.js') });
    expect((await loadPreset('svc-preset-plain', { from: sub }))().map((p) => p.name)).to.deep.equal(['plain']);
  });

  it("packages are tried from each folder in order (the config file's folder, then the working directory)", async () => {
    const elsewhere = join(dir, 'etc-svc');
    mkdirSync(elsewhere, { recursive: true });
    const r = await resolvePreset('@acme/svc-preset', { from: [elsewhere, app] });
    expect(r).to.include({ source: 'package', file: join(app, 'node_modules', '@acme', 'svc-preset', 'dist', 'index.js') });
  });

  it('paths: ./x.js relative to the first folder, an absolute path, and a bare file name that is no package', async () => {
    expect(await resolvePreset('./presets/local.js', { from: app })).to.include({ source: 'file', file: join(app, 'presets', 'local.js') });
    const abs = join(app, 'presets', 'local.js');
    expect(await resolvePreset(abs, { from: dir })).to.include({ source: 'file', file: abs });
    expect(await resolvePreset('presets/local.js', { from: app })).to.include({ source: 'file', file: abs });
    expect(await resolvePreset('../presets/local.js', { from: join(app, 'deploy') })).to.include({ source: 'file', file: abs });
  });

  it('a name that resolves nowhere: one error naming the built-ins, the package lookup from each folder and the file tried', async () => {
    const err = await resolvePreset('@acme/nope', { from: app }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).to.be.instanceOf(Error);
    const m = err!.message;
    expect(m).to.match(/^preset "@acme\/nope" not found; tried:/);
    expect(m).to.include('a built-in or registered preset: default, minimal');
    expect(m).to.include(`the package "@acme/nope" from ${app}: Cannot find package '@acme/nope'`);
    expect(m).to.include(`the file ${join(app, '@acme', 'nope')}: no such file`);
  });

  it('a package path its exports do not export is refused as Node refuses it, and named in the error', async () => {
    const err = await resolvePreset('@acme/svc-preset/dist/internal.js', { from: app }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.include('not found; tried:');
    expect(err?.message).to.include('the package "@acme/svc-preset/dist/internal.js"').and.to.include('not defined by "exports"');
  });

  it('a module that exports no preset function: an error naming the file', async () => {
    const err = await resolvePreset('not-a-preset', { from: app }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.equal(`preset "not-a-preset" (${join(app, 'node_modules', 'not-a-preset', 'index.js')}) exports no default or preset function`);
  });

  it('without a folder, the working directory', async () => {
    const cwd = process.cwd();
    process.chdir(app);
    try {
      expect(await resolvePreset('@acme/svc-preset')).to.include({ source: 'package' });
    } finally {
      process.chdir(cwd);
    }
  });
});
