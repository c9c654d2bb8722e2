/** Version and commit written on every response (spec §9): `X-SVC-Version` from package.json, `X-SVC-Commit` (env `SVC_COMMIT`, else git). */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Root folder of the svc package. */
export const PACKAGE_ROOT = packageRoot(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));

/** The package root from this file's grandparent (core/wire/): one level higher when running compiled from `dist/`. */
function packageRoot(parent: string): string {
  return basename(parent) === 'dist' ? join(parent, '..') : parent;
}

/** svc's version from package.json. */
export const VERSION: string = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

let commit: string | undefined;
/** The commit id: env `SVC_COMMIT`, else the git commit read once, else `unknown`. */
export function getCommit(): string {
  if (commit !== undefined) return commit;
  commit = process.env.SVC_COMMIT || readGitCommit() || 'unknown';
  return commit;
}

function readGitCommit(): string | undefined {
  try {
    return (
      execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: PACKAGE_ROOT, stdio: ['ignore', 'pipe', 'ignore'], timeout: 2000 })
        .toString()
        .trim() || undefined
    );
  } catch {
    return undefined;
  }
}
