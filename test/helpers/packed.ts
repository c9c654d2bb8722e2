/**
 * svc as a user installs it, for the package e2e tests: {@link packSvc} packs the built package
 * once per test process (`npm pack`, from dist/ as {@link ensureBuilt} left it), {@link sh} runs a
 * command with {@link USER_ENV}, the environment of a user's shell rather than of `npm test`.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { ensureBuilt } from './build.ts';

const exec = promisify(execFile);

/**
 * The environment of a user's shell: none of the `npm_*` variables `npm test` sets (so a nested
 * npm runs on its own project, never on this repo's), no node_modules/.bin of this repo on PATH,
 * and node's own folder first so `#!/usr/bin/env node` runs this very node.
 */
export const USER_ENV: NodeJS.ProcessEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))),
  PATH: [dirname(process.execPath), ...(process.env.PATH ?? '').split(delimiter).filter((p) => p && !p.startsWith(join(PACKAGE_ROOT, 'node_modules')))].join(
    delimiter,
  ),
};

/**
 * Runs a command in `cwd` with {@link USER_ENV} (plus `env`).
 * @returns its stdout
 * @throws Error naming the command, with its stdout and stderr, when it exits non-zero
 */
export async function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  try {
    const r = await exec(cmd, args, { cwd, env: { ...USER_ENV, ...env }, maxBuffer: 64 * 1024 * 1024 });
    return r.stdout;
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}

let packed: Promise<string> | undefined;

/**
 * The svc tarball (`npm pack` of this repository after {@link ensureBuilt}; `prepare` is not run
 * again, dist/ is already what the sources say), packed once per test process into a temp
 * folder removed when the process exits.
 * @returns the absolute path of `svc-<version>.tgz`
 */
export function packSvc(): Promise<string> {
  packed ??= (async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-pack-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    await sh('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dir], PACKAGE_ROOT);
    const tarball = readdirSync(dir).find((f) => /^svc-.*\.tgz$/.test(f));
    if (!tarball) throw new Error(`npm pack wrote no svc-*.tgz in ${dir}`);
    return join(dir, tarball);
  })();
  return packed;
}
