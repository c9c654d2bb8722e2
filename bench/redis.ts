/**
 * A throwaway redis-server for the Redis cache-tier scenario of `npm run bench`, and a
 * {@link Target} view of any process by pid (CPU and peak RSS from `/proc`), so the benchmark
 * accounts redis-server's CPU like the fake upstream's instead of counting it as foreign work.
 *
 * The minimal logic of test/helpers/redis.ts, copied (bench/ does not import the test helpers):
 * `redis-server` on PATH, 127.0.0.1 only, a free port, no persistence, its working directory
 * in a fresh temp dir; ready when a `PING` answers `+PONG`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Target, TargetUsage } from './lib.ts';

/** A running redis-server. */
export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  uri: string;
  /** The server's pid. */
  pid: number;
  /** Its TCP port on 127.0.0.1. */
  port: number;
  /** SIGTERM (SIGKILL after 3 s), wait for the exit, remove the temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** A TCP port that was free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** True when `PING` on the port answers `+PONG` within 500 ms. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), 500);
    sock.once('error', () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.once('data', (d: Buffer) => done(d.toString('latin1').startsWith('+PONG')));
  });
}

/**
 * Starts `redis-server` on a free loopback port and waits until it answers (10 s at most).
 * @returns the running server
 * @throws Error when redis-server is missing, exits early or stays silent
 */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-redis-'));
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
  const child = spawn('redis-server', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  let spawnError: Error | undefined;
  child.once('error', (e) => (spawnError = e));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null && !spawnError) {
        child.kill('SIGTERM');
        const t = setTimeout(kill, 3000);
        await exited;
        clearTimeout(t);
      }
      process.off('exit', kill);
      rmSync(dir, { recursive: true, force: true });
    })());
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (spawnError || child.exitCode !== null) {
      await stop();
      throw new Error(`redis-server did not start: ${spawnError?.message ?? `exit ${child.exitCode}`} ${output.trim()}`);
    }
    if (await ping(port)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer on 127.0.0.1:${port} within 10 s: ${output.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { uri: `redis://127.0.0.1:${port}`, pid: child.pid as number, port, stop };
}

/**
 * Commands a redis-server has run so far, by command (`INFO commandstats`, e.g. `{get: 12, set: 1}`).
 * @param port the server's port on 127.0.0.1
 * @throws Error when the server does not answer within 2 s
 */
export function redisCommandCounts(port: number): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const sock = connect({ host: '127.0.0.1', port });
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('redis INFO commandstats: no answer within 2 s'));
    }, 2000);
    sock.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.once('connect', () => sock.write('INFO commandstats\r\n'));
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const head = buf.indexOf('\r\n');
      if (head < 0 || !buf.startsWith('$')) return;
      const len = Number(buf.slice(1, head));
      if (Buffer.byteLength(buf, 'latin1') < head + 2 + len) return;
      clearTimeout(timer);
      sock.destroy();
      const out: Record<string, number> = {};
      for (const m of buf.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
      resolve(out);
    });
  });
}

/** User + system CPU of a process so far, µs (Linux `/proc/<pid>/stat`, 10 ms ticks); throws once the process is gone. */
export function procCpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000;
}

/** Peak RSS of a process, KiB (Linux VmHWM). */
function procPeakRssKb(pid: number): number {
  const m = /^VmHWM:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : Number.NaN;
}

/**
 * A {@link Target} view of a process that does not speak the target protocol (e.g.
 * redis-server): reset/report measure its CPU from `/proc`, and its requests with `count`.
 * @param pid the process id
 * @param label name in logs
 * @param stop stops the process
 * @param count reads the process's request counter so far (e.g. Redis GETs); none = 0
 */
export function procTarget(pid: number, label: string, stop: () => Promise<void>, count: () => Promise<number> = () => Promise.resolve(0)): Target {
  let base = procCpuMicros(pid);
  let baseCount = 0;
  return {
    label,
    pid,
    port: 0,
    origin: '',
    logLines: 0,
    reset: async () => {
      baseCount = await count();
      base = procCpuMicros(pid);
    },
    report: async () => {
      const cpuMicros = procCpuMicros(pid) - base;
      const requests = (await count()) - baseCount;
      const usage: TargetUsage = {
        cpuMicros,
        maxRssKb: procPeakRssKb(pid),
        requests,
        calls: requests,
        rssKb: Number.NaN,
        heapUsedKb: Number.NaN,
        gcMicros: Number.NaN,
        allocBytes: Number.NaN,
        heldBytes: 0,
      };
      return usage;
    },
    stop: async () => {
      await stop();
      return undefined;
    },
  };
}
