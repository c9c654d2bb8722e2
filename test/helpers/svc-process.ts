/**
 * A real `svc start` process (the CLI on the built package) for tests where replicas must be
 * separate processes: shared cache tiers, shared API keys and rate-limit budgets.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { freePort } from './ports.ts';
import { waitFor } from './svc.ts';

/** One `svc start` process. */
export interface SvcProcess {
  url: string;
  metricsUrl: string;
  /** OS process id, for tests that signal it themselves (a drain on SIGTERM, spec §3.2). */
  pid: number;
  logs: () => string;
  stop(): Promise<void>;
}

/**
 * Writes `config` to `<dir>/<name>.json` and starts `svc start` on free ports; resolves once it
 * answers. Call `ensureBuilt()` first: the CLI runs `dist/`.
 * @param dir a temporary directory the test owns
 * @param env environment variables added to the process's (e.g. NODE_EXTRA_CA_CERTS, read by Node only at start)
 */
export async function spawnSvc(dir: string, name: string, config: object, env: Readonly<Record<string, string>> = {}): Promise<SvcProcess> {
  // A free port can be taken by another test's process between `freePort` and svc's listen (the
  // suite runs files in parallel): then this svc exits with EADDRINUSE and is started again on
  // other ports, never mistaken for whatever answers on the taken one.
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnOnce(dir, name, config, env);
    } catch (e) {
      if (attempt >= 3 || !(e instanceof PortTakenError)) throw e;
    }
  }
}

/** svc could not listen: a port chosen free was taken meanwhile. */
class PortTakenError extends Error {}

async function spawnOnce(dir: string, name: string, config: object, env: Readonly<Record<string, string>>): Promise<SvcProcess> {
  const file = join(dir, `${name}.json`);
  // No drain window: these processes are stopped by the test, not by an orchestrator (spec §3.2).
  writeFileSync(file, JSON.stringify({ ...config, server: { waitBeforeShutdown: '0s', ...((config as { server?: object }).server ?? {}) } }));
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(
    process.execPath,
    [join(PACKAGE_ROOT, 'bin', 'svc.js'), 'start', '--config', file, '--port', String(port), '--metrics-port', String(metricsPort)],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  let logs = '';
  child.stdout?.on('data', (d: Buffer) => (logs += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  let gone = false;
  void exited.then(() => (gone = true));
  // Serving means this process holds the listening socket of its port (Linux /proc), not that
  // something answers there; a process that exits (a config error) fails at once, with its output.
  await waitFor(
    async () =>
      gone ||
      (ownsListeningPort(child.pid as number, port) &&
        (await fetch(`${url}/`).then(
          () => true,
          () => false,
        ))),
    20_000,
  ).catch((e: Error) => {
    child.kill('SIGKILL');
    throw new Error(`svc start (${name}) is not listening on port ${port}: ${e.message}\n${logs.slice(-4000)}`);
  });
  if (gone) {
    if (logs.includes('EADDRINUSE')) throw new PortTakenError(`svc start (${name}): port ${port} or ${metricsPort} was taken`);
    throw new Error(`svc start (${name}) exited before serving:\n${logs.slice(-4000)}`);
  }
  return {
    url,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    pid: child.pid as number,
    logs: () => logs,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** pids of the processes that logged `svc listening` (pino puts `pid` on every line). */
export function listeningPids(logs: string): number[] {
  const pids: number[] = [];
  for (const line of logs.split('\n')) {
    if (!line.includes('"svc listening"')) continue;
    try {
      pids.push((JSON.parse(line) as { pid: number }).pid);
    } catch {
      // not a JSON line
    }
  }
  return pids;
}

/**
 * How many times each replica logged losing and regaining the shared-state Redis since a mark
 * (an offset into its logs): `[unreachable, reachable again]` per replica.
 */
export function outageLines(replicas: readonly SvcProcess[], marks: readonly number[]): Array<[number, number]> {
  return replicas.map((r, i) => {
    const lines = r.logs().slice(marks[i]).split('\n');
    return [
      lines.filter((l) => l.includes('shared state: Redis unreachable')).length,
      lines.filter((l) => l.includes('shared state: Redis reachable again')).length,
    ];
  });
}

/** Inodes of the TCP sockets listening on `port` (any address), from /proc/net/tcp and tcp6. */
function listeningInodes(port: number): Set<string> {
  const out = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st ... inode: state 0A is LISTEN.
      if (f.length < 10 || f[3] !== '0A') continue;
      if (Number.parseInt((f[1] ?? '').split(':')[1] ?? '', 16) === port) out.add(f[9] as string);
    }
  }
  return out;
}

/** Whether process `pid` holds a socket listening on `port` (its file descriptors, Linux). */
function ownsListeningPort(pid: number, port: number): boolean {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return false;
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m && inodes.has(m[1] as string)) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}
