/**
 * Starts a real, throwaway PostgreSQL server for tests that need one (shared storage tiers).
 *
 * Debian keeps `initdb` and `postgres` in /usr/lib/postgresql/<version>/bin (the highest version
 * is used; PATH is the fallback elsewhere). Both refuse to run as root, so as root the cluster
 * directory is a temp dir chowned to the `postgres` user, `initdb` runs through
 * `runuser -u postgres --`, and the server is spawned with that user's uid/gid. (Not through
 * runuser: runuser forks, and on SIGTERM waits 2 s then SIGKILLs its child, which would turn
 * every stop into a 2 s kill -9 of the postmaster.) Not as root, both binaries run directly.
 *
 * The cluster trusts every local connection (`-A trust`), listens on 127.0.0.1 only, on a free
 * port, with its Unix socket in the cluster dir, and runs with `fsync=off`. A server that cannot
 * start is an Error, never a skip: a suite that needs PostgreSQL fails without it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './ports.ts';
import { onProcessEnd, watchChild } from './cleanup.ts';

/** A running PostgreSQL server. */
export interface PostgresHandle {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  port: number;
  /** Stops the server (fast shutdown; SIGKILL after 5 s), waits for it to exit and removes its dir. Idempotent. */
  stop(): Promise<void>;
}

/** Where Debian installs the server binaries, one folder per major version. */
const DEBIAN_PG_ROOT = '/usr/lib/postgresql';

/** Directory holding `initdb` and `postgres`: the highest Debian version, or '' for PATH. */
export function postgresBinDir(): string {
  let versions: string[] = [];
  try {
    versions = readdirSync(DEBIAN_PG_ROOT).filter((v) => /^\d+(\.\d+)?$/.test(v) && existsSync(join(DEBIAN_PG_ROOT, v, 'bin', 'postgres')));
  } catch {
    /* no Debian layout */
  }
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(DEBIAN_PG_ROOT, versions[0]!, 'bin') : '';
}

/** Servers still running, with their cluster dirs: stopped and removed when the test process exits. */
const live = new Map<ChildProcess, string>();

/**
 * Stops every live server and removes its dir, synchronously. SIGQUIT is PostgreSQL's immediate
 * shutdown: the postmaster stops its backends and releases shared memory, unlike SIGKILL.
 */
function killAll(): void {
  for (const [p, dir] of live) {
    try {
      p.kill('SIGQUIT');
    } catch {
      /* already gone */
    }
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      /* the server may still be removing its own files */
    }
  }
  live.clear();
}

function installExitHook(): void {
  onProcessEnd(killAll);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** uid and gid of `name` from /etc/passwd. */
function lookupUser(name: string): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  const f = line?.split(':');
  if (!f || f.length < 4) {
    throw new Error(`user '${name}' does not exist: run node scripts/provision.mjs, or as root apt-get install -y --no-install-recommends postgresql`);
  }
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

/** Runs a one-shot command; rejects with its output on failure, with `hint` appended. */
function run(file: string, args: string[], cwd: string, timeoutMs: number, hint: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve();
      const e = err as NodeJS.ErrnoException & { killed?: boolean; signal?: string | null };
      const why = e.killed
        ? `timed out after ${timeoutMs} ms`
        : typeof e.code === 'number'
          ? `exit code ${e.code}`
          : e.signal
            ? `signal ${e.signal}`
            : e.message;
      reject(new Error(`${[file, ...args].join(' ')} failed (${why})${hint}:\n${stdout}${stderr}`.trim()));
    });
  });
}

/** Thrown when the server process exits before answering: the caller may retry on another port. */
class PostgresExitedError extends Error {}

/**
 * Creates a cluster in a temp dir (`initdb`), starts `postgres` on a free 127.0.0.1 port and
 * waits (polling with `pg` every 100 ms, up to 10 s) until our server answers. Retries on
 * another port (3 attempts) when the port was taken between picking and binding.
 * @throws Error when PostgreSQL is not installed, initdb fails, or the server exits early or does not answer in time
 */
export async function startPostgres(): Promise<PostgresHandle> {
  const binDir = postgresBinDir();
  const bin = (name: string) => (binDir ? join(binDir, name) : name);
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? lookupUser('postgres') : undefined;

  // realpath: the server reports data_directory resolved, and the check below compares them.
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-pg-')));
  try {
    if (user) chownSync(dir, user.uid, user.gid);
    // --no-sync: nothing to make durable for a throwaway cluster; -E/--no-locale: same cluster
    // whatever the environment's locale is.
    const initdb = [bin('initdb'), '-D', dir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--no-sync'];
    const hint = binDir
      ? ''
      : ` (no ${DEBIAN_PG_ROOT}/*/bin/postgres, so initdb was looked up on PATH: run node scripts/provision.mjs, or as root apt-get install -y --no-install-recommends postgresql)`;
    if (user) await run('runuser', ['-u', 'postgres', '--', ...initdb], dir, 60_000, hint);
    else await run(initdb[0]!, initdb.slice(1), dir, 60_000, hint);
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }

  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(bin('postgres'), dir, await freePort(), user);
    } catch (e) {
      if (attempt >= 3 || !(e instanceof PostgresExitedError) || !/already in use/i.test(e.message)) {
        rmSync(dir, { recursive: true, force: true });
        throw e;
      }
    }
  }
}

/** Connects once and returns the server's data_directory, or undefined when it does not answer. */
async function probe(port: number): Promise<string | undefined> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    database: 'postgres',
    connectionTimeoutMillis: 1000,
  });
  client.on('error', () => {
    /* reported by connect/query */
  });
  try {
    await client.connect();
    const r = await client.query<{ d: string }>(`select current_setting('data_directory') as d`);
    return r.rows[0]?.d;
  } catch {
    return undefined; // refused, or "the database system is starting up"
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function startOnce(postgresBin: string, dir: string, port: number, user: { uid: number; gid: number } | undefined): Promise<PostgresHandle> {
  const args = ['-D', dir, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'];
  const child = spawn(postgresBin, args, {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
  });
  installExitHook();
  live.set(child, dir);

  const watch = watchChild(child);

  /** Ends the process (fast shutdown, then SIGKILL after 5 s); leaves the cluster dir. */
  const kill = async () => {
    if (!watch.exited && !watch.spawnError) {
      child.kill('SIGINT');
      const t = setTimeout(() => {
        if (!watch.exited) child.kill('SIGKILL');
      }, 5000);
      await watch.closed;
      clearTimeout(t);
    }
    live.delete(child);
  };
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    })());

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (watch.spawnError) {
      await kill();
      const hint =
        (watch.spawnError as NodeJS.ErrnoException).code === 'ENOENT'
          ? ' (not found: run node scripts/provision.mjs, or as root apt-get install -y --no-install-recommends postgresql)'
          : '';
      throw new Error(`postgres failed to start: ${watch.spawnError.message}${hint}`);
    }
    if (watch.exited) {
      const code = child.exitCode ?? child.signalCode;
      await kill();
      throw new PostgresExitedError(`postgres watch.exited before answering on port ${port} (${code}): ${watch.output.trim()}`);
    }
    // Another server on a recycled port could answer too: insist on our own cluster dir.
    const dataDir = await probe(port);
    if (dataDir === dir && !watch.exited) break;
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`postgres did not answer on 127.0.0.1:${port} within 10 s: ${watch.output.trim()}`);
    }
    await sleep(100);
  }

  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, port, stop };
}
