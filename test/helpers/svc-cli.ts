/** Runs the built CLI (`bin/svc.js`, which loads dist/: call `ensureBuilt()` first) in a folder and collects its output. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

/** What a CLI run printed, and its exit code. */
export interface CliRun {
  code: number | null;
  out: string;
  err: string;
}

/**
 * Runs `svc <args>` with `cwd` as working directory.
 * @param args e.g. `['validate', '--config', 'a.yaml', '--print']`
 * @param cwd the folder config paths are relative to
 */
export function runSvcCli(args: string[], cwd: string): Promise<CliRun> {
  const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out, err })));
}
