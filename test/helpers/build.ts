/**
 * The compiled package (issue #9 item 2) for tests that run it: `bin/svc.js` imports
 * `dist/bin/svc.js`, and the package tests pack or copy `dist/`. `npm test` builds first (the
 * `pretest` script); {@link ensureBuilt} covers a direct `mocha test/e2e/x.test.ts` run.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../core/version.ts';

const run = promisify(execFile);

/** Folders (and files) compiled by tsconfig.build.json. */
const SOURCES = ['core', 'lib', 'plugins', 'presets', join('bin', 'svc.ts')];

function* tsFiles(path: string): Generator<string> {
  const st = statSync(path);
  if (st.isFile()) {
    if (path.endsWith('.ts')) yield path;
    return;
  }
  for (const e of readdirSync(path)) yield* tsFiles(join(path, e));
}

/** True when some compiled source has no output in dist/ or is newer than it. */
export function distIsStale(): boolean {
  if (!existsSync(join(PACKAGE_ROOT, 'dist', 'package.json'))) return true;
  for (const s of SOURCES) {
    for (const file of tsFiles(join(PACKAGE_ROOT, s))) {
      const out = join(PACKAGE_ROOT, 'dist', relative(PACKAGE_ROOT, file)).replace(/\.ts$/, '.js');
      if (!existsSync(out) || statSync(out).mtimeMs < statSync(file).mtimeMs) return true;
    }
  }
  return false;
}

/** Runs `npm run build` (scripts/build.mjs) unless dist/ is up to date with the sources. */
export async function ensureBuilt(): Promise<void> {
  if (!distIsStale()) return;
  try {
    await run(process.execPath, [join(PACKAGE_ROOT, 'scripts', 'build.mjs')], { cwd: PACKAGE_ROOT, maxBuffer: 16 * 1024 * 1024 });
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`npm run build failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}
