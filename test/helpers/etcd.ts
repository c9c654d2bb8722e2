/**
 * Starts a real, throwaway etcd (a single member) for tests of the keyv cache tier on etcd
 * (@keyv/etcd).
 *
 * The member listens on 127.0.0.1 only, client and peer ports free ones, its data in a fresh
 * temporary directory removed on stop. `etcd` must be on PATH (`npm test`'s set-up step,
 * scripts/provision.mjs, installs Debian's `etcd-server` when it is missing). It answers in well
 * under a second. A server that cannot start is an Error, never a skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.ts';
import { childStopper, onProcessEnd, watchChild } from './cleanup.ts';

/** The server binary, looked up on PATH. */
export const ETCD_BIN = 'etcd';

/** A running etcd. */
export interface EtcdHandle {
  /** `127.0.0.1:<client port>` (the address @keyv/etcd takes). */
  address: string;
  /** The server's process id. */
  pid: number;
  /** Stops the server (SIGTERM, SIGKILL after 3 s), waits for it to exit and removes its data. Idempotent. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let hooked = false;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether `/health` answers `"health":"true"`. */
async function healthy(port: number): Promise<boolean> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
    return r.ok && (await r.text()).includes('"true"');
  } catch {
    return false;
  }
}

/**
 * Spawns etcd and waits (polling `/health` every 50 ms, up to 10 s) until it answers.
 * @throws Error when etcd is not installed, exits early or does not answer in time
 */
export async function startEtcd(): Promise<EtcdHandle> {
  const [client, peer] = [await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'svc-etcd-'));
  const clientUrl = `http://127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  const child = spawn(
    ETCD_BIN,
    [
      '--name',
      'svc-test',
      '--data-dir',
      join(dir, 'data'),
      '--listen-client-urls',
      clientUrl,
      '--advertise-client-urls',
      clientUrl,
      '--listen-peer-urls',
      peerUrl,
      '--initial-advertise-peer-urls',
      peerUrl,
      '--initial-cluster',
      `svc-test=${peerUrl}`,
      '--log-level',
      'error',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  live.add(child);
  if (!hooked) {
    hooked = true;
    onProcessEnd(() => {
      for (const p of live) p.kill('SIGKILL');
      live.clear();
    });
  }
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
          ? ' (not on PATH: run `node scripts/provision.mjs`, or `apt-get install -y --no-install-recommends etcd-server` as root)'
          : '';
      throw new Error(`etcd failed to start: ${watch.spawnError.message}${hint}`);
    }
    if (watch.exited) {
      await stop();
      throw new Error(`etcd exited before answering on port ${client}: ${watch.output.trim()}`);
    }
    if (await healthy(client)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`etcd did not answer on 127.0.0.1:${client} within 10 s: ${watch.output.trim()}`);
    }
    await sleep(50);
  }
  return { address: `127.0.0.1:${client}`, pid: child.pid as number, stop };
}
