/**
 * The plugin boundary: every built-in plugin imports only the public entry `svc/plugin` (by its
 * package name, as a third party does), files of its own folder, npm packages and node builtins.
 * The rules are dependency-cruiser's (`.dependency-cruiser.cjs`); this test runs them over
 * plugins/ and fails naming each violation, so a plugin reaching into core or into another plugin
 * fails CI. Zero exceptions.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { PACKAGE_ROOT } from '../../core/version.ts';

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
  const out = await run(DEPCRUISE, [...paths, '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], { cwd: PACKAGE_ROOT, maxBuffer: 64 * 1024 * 1024 }).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  const report = JSON.parse(out.stdout) as { summary: { violations: Violation[]; totalCruised: number } };
  return { violations: report.summary.violations, modules: report.summary.totalCruised };
}

describe('plugin boundary (dependency-cruiser)', function () {
  this.timeout(60_000);

  it('every built-in plugin imports only svc/plugin, its own folder, npm packages and node builtins', async () => {
    const { violations, modules } = await cruise(['plugins']);
    expect(modules, 'modules cruised').to.be.greaterThan(100);
    expect(violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).to.deep.equal([]);
  });

  it('the rules catch a core import by path, an internal core file and another plugin', async () => {
    // A throwaway plugin folder inside plugins/ (the rules match paths), removed afterwards.
    const dir = mkdtempSync(join(PACKAGE_ROOT, 'plugins', '.boundary-probe-'));
    const rel = dir.slice(PACKAGE_ROOT.length + 1);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, 'index.ts'),
        [
          "import type { Plugin } from '../../core/plugin-api.ts';",
          "import { createSweep } from '../../core/sweep.ts';",
          "import { cachePlugin } from '../cache/index.ts';",
          "import { definePlugin } from 'svc/plugin';",
          'export const p: Plugin = definePlugin({ name: String(createSweep) + String(cachePlugin), apply() {} });',
        ].join('\n'),
      );
      const { violations } = await cruise([rel]);
      const seen = violations.map((v) => `${v.rule.name}: ${v.to}`);
      expect(seen).to.include.members([
        'plugin-imports-core-internals: core/plugin-api.ts',
        'plugin-imports-core-internals: core/sweep.ts',
        'plugin-imports-core-beyond-the-entry: core/sweep.ts',
        'plugin-imports-another-plugin: plugins/cache/index.ts',
      ]);
      expect(seen.filter((s) => s.includes('svc/plugin'))).to.deep.equal([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
