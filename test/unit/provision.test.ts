/**
 * `npm test`'s set-up step (scripts/provision.mjs): on a machine without redis-server or
 * PostgreSQL it installs Debian's packages when it may (root, apt-get), otherwise it fails with
 * one line naming the exact command. Machines without the servers are simulated with a PATH and
 * a PostgreSQL root (temp dirs) that hide the real binaries; apt-get is a fake script. Nothing
 * is installed or removed on this machine.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { detect, hasPostgres, installCommand, plan, provision, which } from '../../scripts/provision.mjs';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'scripts', 'provision.mjs');
const REAL_PATH = process.env.PATH;

/** An executable file at `file` with `body` (a /bin/sh script). */
function exe(file: string, body = 'exit 0'): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
}

/** Links the real `name` (from this machine's PATH) into `dir`. */
function link(dir: string, name: string): void {
  const real = which(name, REAL_PATH);
  if (!real) throw new Error(`${name} is not on this machine's PATH`);
  symlinkSync(real, join(dir, name));
}

describe('test set-up step (scripts/provision.mjs)', () => {
  let tmp: string;
  let bin: string;
  let emptyPgRoot: string;
  beforeEach(() => {
    tmp = mkdtempSync(join(tmpdir(), 'svc-provision-'));
    bin = join(tmp, 'bin');
    mkdirSync(bin);
    emptyPgRoot = join(tmp, 'no-postgresql');
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  it('finds nothing missing on this machine (redis-server, PostgreSQL, openssl, Prometheus, memcached, etcd and Chromium are installed)', () => {
    expect(detect({ path: REAL_PATH }).missing).to.deep.equal([]);
    expect(plan({ missing: [], canInstall: false })).to.deep.equal({ action: 'none' });
  });

  it('reports redis-server, postgresql, openssl, prometheus, memcached, etcd-server and chromium missing on a PATH that hides them', () => {
    link(bin, 'node');
    expect(detect({ path: bin, pgRoot: emptyPgRoot, uid: 1000 })).to.deep.equal({
      missing: ['redis-server', 'postgresql', 'openssl', 'prometheus', 'memcached', 'etcd-server', 'chromium'],
      canInstall: false,
    });
    for (const name of ['openssl', 'prometheus', 'memcached', 'etcd', 'chromium']) link(bin, name);
    expect(detect({ path: bin, pgRoot: emptyPgRoot, uid: 1000 }).missing, 'promtool missing').to.deep.equal(['redis-server', 'postgresql', 'prometheus']);
    link(bin, 'promtool');
    expect(detect({ path: bin, pgRoot: emptyPgRoot, uid: 1000 }).missing).to.deep.equal(['redis-server', 'postgresql']);
  });

  it("finds PostgreSQL in Debian's layout (<root>/<version>/bin/postgres, executable) or on PATH", () => {
    const pgRoot = join(tmp, 'postgresql');
    mkdirSync(join(pgRoot, '15', 'bin'), { recursive: true });
    writeFileSync(join(pgRoot, '15', 'bin', 'postgres'), ''); // not executable: not a server
    expect(hasPostgres(bin, pgRoot)).to.equal(false);
    chmodSync(join(pgRoot, '15', 'bin', 'postgres'), 0o755);
    expect(hasPostgres(bin, pgRoot)).to.equal(true);

    exe(join(bin, 'postgres'));
    expect(hasPostgres(bin, emptyPgRoot), 'postgres without initdb').to.equal(false);
    exe(join(bin, 'initdb'));
    expect(hasPostgres(bin, emptyPgRoot)).to.equal(true);
  });

  it('may install only as root with apt-get on PATH and SVC_TEST_NO_INSTALL unset', () => {
    const opts = { path: bin, pgRoot: emptyPgRoot };
    expect(detect({ ...opts, uid: 0, noInstall: false }).canInstall, 'no apt-get').to.equal(false);
    exe(join(bin, 'apt-get'));
    expect(detect({ ...opts, uid: 0, noInstall: false }).canInstall).to.equal(true);
    expect(detect({ ...opts, uid: 1000, noInstall: false }).canInstall, 'not root').to.equal(false);
    expect(detect({ ...opts, uid: 0, noInstall: true }).canInstall, 'SVC_TEST_NO_INSTALL').to.equal(false);
  });

  it('plans the exact apt-get command when it may install', () => {
    expect(plan({ missing: ['redis-server', 'postgresql'], canInstall: true }, 0)).to.deep.equal({
      action: 'install',
      packages: ['redis-server', 'postgresql'],
      command: 'apt-get update && apt-get install -y --no-install-recommends redis-server postgresql',
    });
  });

  it('otherwise fails (never skips) with one line naming the exact command, with sudo when not root', () => {
    const p = plan({ missing: ['redis-server'], canInstall: false }, 1000);
    expect(p.action).to.equal('fail');
    if (p.action !== 'fail') return;
    expect(p.message).to.not.include('\n');
    expect(p.message).to.include('`sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server`');
    expect(installCommand(['redis-server'], false)).to.equal('apt-get update && apt-get install -y --no-install-recommends redis-server');
  });

  it('as root, runs apt-get update then install for what is missing, and checks again', () => {
    // A fake apt-get that logs its arguments and "installs" redis-server into the same dir.
    const log = join(tmp, 'apt.log');
    for (const name of ['sh', 'chmod', 'openssl', 'prometheus', 'promtool', 'memcached', 'etcd', 'chromium']) link(bin, name);
    exe(
      join(bin, 'apt-get'),
      `echo "$DEBIAN_FRONTEND $*" >> ${log}\n` +
        `if [ "$1" = install ]; then printf '#!/bin/sh\\n' > ${join(bin, 'redis-server')}; chmod 755 ${join(bin, 'redis-server')}; fi`,
    );
    const pgRoot = join(tmp, 'postgresql');
    exe(join(pgRoot, '16', 'bin', 'postgres'));
    const errors: unknown[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => void errors.push(a.join(' '));
    let code: number;
    try {
      code = provision({ path: bin, pgRoot, uid: 0, noInstall: false });
    } finally {
      console.error = orig;
    }
    expect(code, String(errors)).to.equal(0);
    expect(readFileSync(log, 'utf8')).to.equal('noninteractive update\nnoninteractive install -y --no-install-recommends redis-server\n');
    expect(detect({ path: bin, pgRoot }).missing).to.deep.equal([]);
  });

  it('as root, fails with the command to run by hand when apt-get does not install it', () => {
    for (const name of ['sh', 'openssl', 'prometheus', 'promtool', 'memcached', 'etcd', 'chromium']) link(bin, name);
    exe(join(bin, 'apt-get'), 'exit 100');
    const errors: string[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => void errors.push(a.join(' '));
    let code: number;
    try {
      code = provision({ path: bin, pgRoot: emptyPgRoot, uid: 0, noInstall: false });
    } finally {
      console.error = orig;
    }
    expect(code).to.equal(1);
    expect(errors.at(-1)).to.include('apt-get install -y --no-install-recommends redis-server postgresql');
  });

  it('the script itself, run with a PATH that hides redis-server, exits 1 with one line naming the command', () => {
    for (const name of ['openssl', 'prometheus', 'promtool', 'memcached', 'etcd', 'chromium']) link(bin, name);
    const r = spawnSync(process.execPath, [SCRIPT], {
      env: { PATH: bin, SVC_TEST_NO_INSTALL: '1' },
      encoding: 'utf8',
      timeout: 10_000,
    });
    expect(r.status).to.equal(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).to.have.length(1);
    expect(lines[0]).to.match(/apt-get update && (sudo )?apt-get install -y --no-install-recommends redis-server/);
    expect(r.stdout).to.equal('');
  });
});
