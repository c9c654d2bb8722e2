/**
 * Starts a real, throwaway memcached for tests of the keyv cache tier on memcached
 * (@keyv/memcache).
 *
 * The server listens on 127.0.0.1 only, on a free port, with 16 MiB of memory and no UDP.
 * `memcached` must be on PATH (`npm test`'s set-up step, scripts/provision.mjs, installs Debian's
 * `memcached` when it is missing). A server that cannot start is an Error, never a skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { freePort } from './ports.ts';
import { childStopper, onProcessEnd, watchChild } from './cleanup.ts';

/** The server binary, looked up on PATH. */
export const MEMCACHED_BIN = 'memcached';

/** A running memcached. */
export interface MemcachedHandle {
  /** `127.0.0.1:<port>` (the address form memjs and @keyv/memcache take). */
  address: string;
  port: number;
  /** The server's process id (tests stall it with SIGSTOP). */
  pid: number;
  /** Stops the server (SIGTERM, SIGKILL after 3 s) and waits for it to exit. Idempotent. */
  stop(): Promise<void>;
}

/** Servers still running: killed when the test process exits. */
const live = new Set<ChildProcess>();
let hooked = false;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Asks `version` over the text protocol; the server's version, or undefined when nothing answers. */
function probe(port: number, timeoutMs = 1000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (v: string | undefined) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    sock.once('error', () => done(undefined));
    sock.once('close', () => done(undefined));
    sock.once('connect', () => sock.write('version\r\n'));
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const m = /^VERSION (\S+)\r\n/.exec(buf);
      if (m) done(m[1]);
    });
  });
}

/**
 * Spawns memcached on a free 127.0.0.1 port and waits (polling `version` every 50 ms, up to
 * 10 s) until it answers.
 * @throws Error when memcached is not installed, exits early or does not answer in time
 */
export async function startMemcached(): Promise<MemcachedHandle> {
  const port = await freePort();
  const child = spawn(MEMCACHED_BIN, ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-m', '16', ...(process.getuid?.() === 0 ? ['-u', 'nobody'] : [])], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  if (!hooked) {
    hooked = true;
    onProcessEnd(() => {
      for (const p of live) p.kill('SIGKILL');
      live.clear();
    });
  }
  const watch = watchChild(child);
  const stop = childStopper(child, watch, () => live.delete(child));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (watch.spawnError) {
      await stop();
      const hint =
        (watch.spawnError as NodeJS.ErrnoException).code === 'ENOENT'
          ? ' (not on PATH: run `node scripts/provision.mjs`, or `apt-get install -y --no-install-recommends memcached` as root)'
          : '';
      throw new Error(`memcached failed to start: ${watch.spawnError.message}${hint}`);
    }
    if (watch.exited) {
      await stop();
      throw new Error(`memcached exited before answering on port ${port}: ${watch.output.trim()}`);
    }
    if ((await probe(port)) !== undefined) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`memcached did not answer on 127.0.0.1:${port} within 10 s: ${watch.output.trim()}`);
    }
    await sleep(50);
  }
  return { address: `127.0.0.1:${port}`, port, pid: child.pid as number, stop };
}
