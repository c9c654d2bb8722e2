/**
 * The compiled package for tests that run it: `bin/svc.js` imports
 * `dist/bin/svc.js`, and the package tests pack or copy `dist/`. `npm test` builds first (the
 * `pretest` script); {@link ensureBuilt} covers a direct `mocha test/e2e/x.test.ts` run.
 *
 * Mocha runs files in parallel worker processes (.mocharc.cjs), so two files may find dist/ stale
 * at once: a lock folder in the temp dir lets one process build while the others wait for it.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

const run = promisify(execFile);

/** Folders and files compiled by tsconfig.build.json: bin/svc.ts and the bin/ modules it imports (demo and the doc generators are not built). */
const SOURCES = [
  'core',
  'config',
  'lib',
  'plugins',
  'presets',
  ...['svc', 'start', 'commands', 'cli-config', 'cluster', 'healthcheck', 'signals'].map((f) => join('bin', `${f}.ts`)),
];

function* tsFiles(path: string): Generator<string> {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return; // removed while walking (a test's throwaway folder)
  if (st.isFile()) {
    if (path.endsWith('.ts')) yield path;
    return;
  }
  // Hidden entries are no sources (tsc skips them too): a test's throwaway probe folder, such as
  // plugins/.boundary-probe-*, must not make dist/ look stale while another file runs.
  for (const e of readdirSync(path)) if (!e.startsWith('.')) yield* tsFiles(join(path, e));
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

/** The build lock of this checkout: a folder whose creation is atomic across processes. */
const LOCK = join(tmpdir(), `svc-build-${createHash('sha256').update(PACKAGE_ROOT).digest('hex').slice(0, 16)}.lock`);
/** A lock older than this is left over from a killed process (a build takes well under a minute). */
const STALE_LOCK_MS = 5 * 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Takes the build lock, waiting (polling every 200 ms) while another process holds it. */
async function lock(): Promise<void> {
  for (;;) {
    try {
      mkdirSync(LOCK);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const st = statSync(LOCK, { throwIfNoEntry: false });
      if (st && Date.now() - st.mtimeMs > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true });
      else await sleep(200);
    }
  }
}

/**
 * Runs `npm run build` (scripts/build.mjs) unless dist/ is up to date with the sources; one
 * process at a time (the others wait, then find dist/ fresh).
 * @throws Error with the build's output when it fails
 */
export async function ensureBuilt(): Promise<void> {
  if (!distIsStale()) return;
  await lock();
  try {
    if (!distIsStale()) return;
    await run(process.execPath, [join(PACKAGE_ROOT, 'scripts', 'build.mjs')], { cwd: PACKAGE_ROOT, maxBuffer: 16 * 1024 * 1024 });
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`npm run build failed:\n${stdout ?? ''}${stderr ?? ''}`);
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}
