/**
 * The plugin boundary: every built-in plugin imports only the public entry `svc-proxy/plugin` (by its
 * package name, as a third party does), files of its own folder, npm packages and node builtins.
 * The rules are dependency-cruiser's (`.dependency-cruiser.cjs`); this test runs them over
 * plugins/ and fails naming each violation, so a plugin reaching into core or into another plugin
 * fails CI. Zero exceptions. The same rules keep lib/ (generic utilities) below the core and the
 * plugins.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

const run = promisify(execFile);
const DEPCRUISE = join(PACKAGE_ROOT, 'node_modules', '.bin', 'depcruise');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

/** Runs dependency-cruiser with the repository's rules over `paths`; returns its violations. */
async function cruise(paths: string[]): Promise<{ violations: Violation[]; modules: number }> {
  // depcruise exits non-zero when it finds violations; the JSON report is on stdout either way.
  const out = await run(DEPCRUISE, [...paths, '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], {
    cwd: PACKAGE_ROOT,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  const report = JSON.parse(out.stdout) as { summary: { violations: Violation[]; totalCruised: number } };
  return { violations: report.summary.violations, modules: report.summary.totalCruised };
}

describe('plugin boundary (dependency-cruiser)', function () {
  this.timeout(60_000);

  it('every built-in plugin imports only the public entries (svc-proxy/plugin, svc-proxy/plugin/errors, svc-proxy/plugin/contracts, svc-proxy/util, svc-proxy/plugins/<name>), its own folder, npm packages and node builtins', async () => {
    const { violations, modules } = await cruise(['plugins']);
    expect(modules, 'modules cruised').to.be.greaterThan(100);
    expect(violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).to.deep.equal([]);
  });

  it('no module of plugins/, core/, lib/ or config/ reaches itself through run-time imports (type-only imports do not count)', async () => {
    const { violations } = await cruise(['plugins', 'core', 'lib', 'config']);
    expect(violations.filter((v) => v.rule.name === 'no-runtime-cycle').map((v) => `${v.from} → ${v.to}`)).to.deep.equal([]);
  });

  it('the cycle rule catches a run-time cycle and lets a type-only one pass', async () => {
    const dir = mkdtempSync(join(PACKAGE_ROOT, 'lib', '.cycle-probe-'));
    try {
      writeFileSync(join(dir, 'a.ts'), "import { b } from './b.ts';\nexport const a = (): unknown => b;\n");
      writeFileSync(join(dir, 'b.ts'), "import { a } from './a.ts';\nexport const b = (): unknown => a;\n");
      writeFileSync(join(dir, 'c.ts'), "import type { D } from './d.ts';\nexport interface C { d?: D }\n");
      writeFileSync(join(dir, 'd.ts'), "import type { C } from './c.ts';\nexport interface D { c?: C }\n");
      const { violations } = await cruise([relative(PACKAGE_ROOT, dir)]);
      const cycles = violations.filter((v) => v.rule.name === 'no-runtime-cycle').map((v) => basename(v.from));
      // One violation per cycle, named from one of its modules; the type-only pair is none.
      expect(cycles).to.have.length(1);
      expect(['a.ts', 'b.ts']).to.include(cycles[0]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the rules catch a core import by path, an internal core file, another plugin's files, its contract by path, and a contract loading its plugin", async () => {
    // A throwaway plugin folder inside plugins/ (the rules match paths), removed afterwards.
    const dir = mkdtempSync(join(PACKAGE_ROOT, 'plugins', '.boundary-probe-'));
    const rel = dir.slice(PACKAGE_ROOT.length + 1);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, 'index.ts'),
        [
          "import type { Plugin } from '../../core/plugin-api.ts';",
          "import { createSweep } from '../../core/pipeline/sweep.ts';",
          "import { cachePlugin } from '../cache/index.ts';",
          "import { CACHE_OUTCOME } from '../cache/api.ts';",
          "import { FAILSAFE_ENTRY } from 'svc-proxy/plugins/failsafe';",
          "import { definePlugin } from 'svc-proxy/plugin';",
          'export const p: Plugin = definePlugin({ name: String(createSweep) + String(cachePlugin) + String(CACHE_OUTCOME) + String(FAILSAFE_ENTRY), apply() {} });',
        ].join('\n'),
      );
      // A contract entry that loads its plugin's implementation.
      writeFileSync(join(dir, 'api.ts'), "import { p } from './index.ts';\nexport const KEY = String(p);\n");
      const { violations } = await cruise([rel]);
      const seen = violations.map((v) => `${v.rule.name}: ${v.to}`);
      expect(seen).to.include.members([
        'plugin-imports-core-internals: core/plugin-api.ts',
        'plugin-imports-core-internals: core/pipeline/sweep.ts',
        'plugin-imports-core-beyond-the-entry: core/pipeline/sweep.ts',
        'plugin-imports-another-plugin: plugins/cache/index.ts',
        'plugin-contract-by-path: plugins/cache/api.ts',
        `plugin-contract-imports-its-plugin: ${rel}/index.ts`,
      ]);
      // Another plugin's contract by its package name is allowed.
      expect(seen.filter((s) => s.includes('svc-proxy/plugin') || s.includes('plugins/failsafe/'))).to.deep.equal([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('core is in layers (wire <- registry <- pipeline <- http <- host <- entries) with no upward import and no cycle, types included', async () => {
    const { violations, modules } = await cruise(['core', 'lib', 'config']);
    expect(modules, 'modules cruised').to.be.greaterThan(60);
    expect(violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).to.deep.equal([]);
    const layers = readdirSync(join(PACKAGE_ROOT, 'core'), { withFileTypes: true });
    expect(
      layers
        .filter((d) => d.isDirectory())
        .map((d) => d.name)
        .sort(),
    ).to.deep.equal(['host', 'http', 'pipeline', 'registry', 'wire']);
    expect(
      layers
        .filter((d) => d.isFile())
        .map((d) => d.name)
        .sort(),
      'only the public entries outside a layer',
    ).to.deep.equal(['plugin-api.ts', 'plugin-contracts.ts', 'plugin-errors.ts', 'util-api.ts']);
  });

  it('the layer rules catch an upward import (a type one too) and a type-only cycle', async () => {
    const wire = mkdtempSync(join(PACKAGE_ROOT, 'core', 'wire', '.layer-probe-'));
    const lib = mkdtempSync(join(PACKAGE_ROOT, 'lib', '.layer-probe-'));
    try {
      const up = relative(wire, join(PACKAGE_ROOT, 'core'));
      writeFileSync(
        join(wire, 'x.ts'),
        `import type { ServeHost } from '${up}/http/serve.ts';\nimport { VERSION } from '${up}/wire/version.ts';\nexport type X = ServeHost | typeof VERSION;\n`,
      );
      writeFileSync(join(lib, 'c.ts'), "import type { D } from './d.ts';\nexport interface C { d?: D }\n");
      writeFileSync(join(lib, 'd.ts'), "import type { C } from './c.ts';\nexport interface D { c?: C }\n");
      const { violations } = await cruise([relative(PACKAGE_ROOT, wire), relative(PACKAGE_ROOT, lib)]);
      const names = violations.map((v) => `${v.rule.name}: ${basename(v.from)} → ${v.to.replace(/^.*\//, '')}`);
      expect(names).to.include('core-wire-imports-up: x.ts → serve.ts');
      expect(
        names.filter((n) => n.startsWith('core-wire-imports-up')),
        'a lower layer of its own is fine',
      ).to.have.length(1);
      expect(names.filter((n) => n.startsWith('no-cycle:'))).to.have.length.greaterThan(0);
      expect(
        names.filter((n) => n.startsWith('no-runtime-cycle:')),
        'type-only: not a run-time cycle',
      ).to.deep.equal([]);
    } finally {
      rmSync(wire, { recursive: true, force: true });
      rmSync(lib, { recursive: true, force: true });
    }
  });

  it('lib/ (generic utilities) imports no plugin, preset or CLI and nothing of the core that runs; plugins reach it only through svc-proxy/plugin', async () => {
    const { violations, modules } = await cruise(['lib']);
    expect(modules, 'modules cruised').to.be.greaterThan(5);
    expect(violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).to.deep.equal([]);
  });

  it('the rules catch lib/ importing a plugin or the running core, and a plugin importing lib/ by path', async () => {
    const probe = mkdtempSync(join(PACKAGE_ROOT, 'lib', '.boundary-probe-'));
    const plugin = mkdtempSync(join(PACKAGE_ROOT, 'plugins', '.boundary-probe-'));
    try {
      writeFileSync(
        join(probe, 'x.ts'),
        [
          "import type { CallContext } from '../../core/pipeline/context.ts';",
          "import { Strict } from '../../config/schema.ts';",
          "import { createSweep } from '../../core/pipeline/sweep.ts';",
          "import { cachePlugin } from '../../plugins/cache/index.ts';",
          'export const x = [String(createSweep), String(cachePlugin), String(Strict)] as unknown as CallContext;',
        ].join('\n'),
      );
      writeFileSync(join(plugin, 'index.ts'), "import { compileGlobs } from '../../lib/glob.ts';\nexport const g = compileGlobs('a');\n");
      const { violations } = await cruise([probe.slice(PACKAGE_ROOT.length + 1), plugin.slice(PACKAGE_ROOT.length + 1)]);
      expect(violations.map((v) => `${v.rule.name}: ${v.to}`).sort()).to.deep.equal([
        'lib-imports-core-at-run-time: core/pipeline/sweep.ts',
        'lib-imports-plugins-or-entry-points: plugins/cache/index.ts',
        'plugin-imports-outside-the-package-api: lib/glob.ts',
      ]);
    } finally {
      rmSync(probe, { recursive: true, force: true });
      rmSync(plugin, { recursive: true, force: true });
    }
  });
});
