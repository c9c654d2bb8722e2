/**
 * Starts a real, throwaway redis-server for tests that need one (shared storage tiers).
 *
 * The server listens on 127.0.0.1 only, on a free port, with no persistence (`--save ''
 * --appendonly no`) and its working directory in a fresh temp dir. `redis-server` must be on
 * PATH (`npm test`'s set-up step, scripts/provision.mjs, installs Debian's `redis-server` when
 * it is missing). A server that cannot
 * start is an Error, never a skip: a suite that needs Redis fails without it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.ts';
import { childStopper, onProcessEnd, watchChild } from './cleanup.ts';

/** The server binary, looked up on PATH. */
export const REDIS_SERVER_BIN = 'redis-server';

/** A running redis-server. */
export interface RedisHandle {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** The server's process id (tests stall it with SIGSTOP). */
  pid: number;
  /** Stops the server (SIGTERM, SIGKILL after 3 s), waits for it to exit and removes its temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** Servers still running, with their temp dirs: killed and removed when the test process exits. */
const live = new Map<ChildProcess, string>();

/** Kills every live server (SIGKILL: nothing to save) and removes its dir, synchronously. */
function killAll(): void {
  for (const [p, dir] of live) {
    try {
      p.kill('SIGKILL');
    } catch {
      /* already gone */
    }
    rmSync(dir, { recursive: true, force: true });
  }
  live.clear();
}

function installExitHook(): void {
  onProcessEnd(killAll);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Thrown when the server process exits before answering: the caller may retry on another port. */
class RedisExitedError extends Error {}

/**
 * Asks the server on `port` for `INFO server` over RESP and returns its `process_id`, or
 * undefined when nothing (or no Redis) answers within `timeoutMs`.
 */
function probe(port: number, timeoutMs = 1000): Promise<number | undefined> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    const done = (pid: number | undefined) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(pid);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    sock.once('error', () => done(undefined));
    sock.once('close', () => done(undefined));
    sock.once('connect', () => sock.write('*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n'));
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const headEnd = buf.indexOf('\r\n');
      if (headEnd < 0) return;
      const head = buf.subarray(0, headEnd).toString('latin1');
      // '-LOADING ...' or any other error reply: not ready.
      if (!head.startsWith('$')) return done(undefined);
      const len = Number(head.slice(1));
      if (!Number.isInteger(len) || len < 0) return done(undefined);
      if (buf.length < headEnd + 2 + len) return;
      const body = buf.subarray(headEnd + 2, headEnd + 2 + len).toString('utf8');
      const m = /^process_id:(\d+)\r?$/m.exec(body);
      done(m ? Number(m[1]) : undefined);
    });
  });
}

/**
 * Spawns `redis-server` on a free 127.0.0.1 port and waits (polling `INFO server` every 50 ms,
 * up to 10 s) until the process we started answers. Retries on another port (3 attempts) when
 * the port was taken between picking and binding.
 * @param opts `port`: listen there (one attempt), e.g. to restart a server clients already know
 * @throws Error when redis-server is not installed, exits early or does not answer in time
 */
export async function startRedis(opts: { port?: number } = {}): Promise<RedisHandle> {
  // A given port (a restart on the port clients already know) is tried once.
  if (opts.port !== undefined) return startOnce(opts.port);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(await freePort());
    } catch (e) {
      if (attempt >= 3 || !(e instanceof RedisExitedError) || !/address already in use/i.test(e.message)) throw e;
    }
  }
}

async function startOnce(port: number): Promise<RedisHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--logfile',
    '',
    '--loglevel',
    'warning',
  ];
  const child = spawn(REDIS_SERVER_BIN, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  installExitHook();
  live.set(child, dir);

  const watch = watchChild(child);

  const stop = childStopper(child, watch, () => {
    live.delete(child);
    rmSync(dir, { recursive: true, force: true });
  });

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (watch.spawnError) {
      await stop();
      const hint =
        (watch.spawnError as NodeJS.ErrnoException).code === 'ENOENT'
          ? ' (not on PATH: run `node scripts/provision.mjs`, or `apt-get install -y --no-install-recommends redis-server` as root)'
          : '';
      throw new Error(`redis-server failed to start: ${watch.spawnError.message}${hint}`);
    }
    if (watch.exited) {
      const code = child.exitCode ?? child.signalCode;
      await stop();
      throw new RedisExitedError(`redis-server watch.exited before answering on port ${port} (${code}): ${watch.output.trim()}`);
    }
    // Another server on a recycled port could answer too: insist on our own process id.
    const pid = await probe(port);
    if (pid !== undefined && pid === child.pid && !watch.exited) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer on 127.0.0.1:${port} within 10 s: ${watch.output.trim()}`);
    }
    await sleep(50);
  }

  return { url: `redis://127.0.0.1:${port}`, port, pid: child.pid as number, stop };
}
