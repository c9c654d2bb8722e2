/**
 * Shared state across replicas (docs/operations.md "Fleet: shared state"): three `svc start`
 * processes on one real redis-server in front of one anvil. Only the first replica polls
 * (the others poll once at start, then every hour), so the others can learn a new head only
 * through Redis: it reaches them within 1 s (the median of five is printed). Redis stalled
 * (SIGSTOP: the sockets stay open, a PING without answer gives it away) and resumed, then killed
 * and restarted on its port, during a stream of calls: no call fails; the gauge
 * `svc_shared_state_connected` (0, then 1) and one warn/info log line each time say so, and a
 * head mined while Redis was gone reaches the others after it is back. Operator changes:
 * shared-state-ops.test.ts.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { spawnSvc, type SvcProcess, outageLines } from '../helpers/svc-process.ts';
import { waitFor } from '../helpers/svc.ts';

/** A gauge's value from a replica's /metrics (the first series matching `labels`), or undefined. */
async function gauge(svc: SvcProcess, name: string, labels = ''): Promise<number | undefined> {
  const r = await request(svc.metricsUrl);
  const text = await r.body.text();
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !line.includes(labels)) continue;
    if (line[name.length] !== '{' && line[name.length] !== ' ') continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('e2e: shared state across replicas (Redis)', function () {
  this.timeout(90_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;
  let dir: string;
  const replicas: SvcProcess[] = [];

  async function call(svc: SvcProcess): Promise<{ status: number; body: { result?: unknown; error?: unknown } }> {
    const r = await request(`${svc.url}/main/evm/31337`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    });
    return { status: r.statusCode, body: (await r.body.json()) as { result?: unknown; error?: unknown } };
  }

  /** Calls every replica in a loop; the returned function stops the loops and resolves with the failures and the count. */
  function load(): () => Promise<{ failures: unknown[]; calls: number }> {
    let stop = false;
    const failures: unknown[] = [];
    let calls = 0;
    const loop = async (svc: SvcProcess) => {
      while (!stop) {
        const r = await call(svc).catch((e: unknown) => ({ status: 0, body: { error: String(e) } }));
        calls++;
        if (r.status !== 200 || r.body.error !== undefined) failures.push(r.body.error);
      }
    };
    const loops = replicas.map((r) => loop(r));
    return async () => {
      stop = true;
      await Promise.all(loops);
      return { failures, calls };
    };
  }

  /** Waits until every replica's gauge has `value`. */
  async function allAt(name: string, value: number, labels = '', ms = 10_000): Promise<void> {
    await waitFor(async () => {
      for (const r of replicas) if ((await gauge(r, name, labels)) !== value) return false;
      return true;
    }, ms);
  }

  before(async () => {
    await ensureBuilt();
    [anvil, redis] = await Promise.all([startAnvil(), startRedis()]);
    dir = mkdtempSync(join(tmpdir(), 'svc-shared-state-'));
    const config = (interval: string) => ({
      logLevel: 'info',
      metrics: { enabled: true },
      sharedState: { redis: { uri: redis.url }, clusterKey: 'e2e', snapshotInterval: '500ms' },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: 31337, statePollerInterval: interval } }],
        },
      ],
    });
    replicas.push(await spawnSvc(dir, 'r1', config('100ms')));
    replicas.push(...(await Promise.all([spawnSvc(dir, 'r2', config('1h')), spawnSvc(dir, 'r3', config('1h'))])));
    await allAt('svc_shared_state_connected', 1);
  });

  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await Promise.all([anvil?.stop(), redis?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a head seen by one replica is used by the others within 1 s (median of five printed)', async () => {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const start = Number(BigInt(await anvil.rpc('eth_blockNumber')));
      await anvil.rpc('anvil_mine', ['0x14']);
      const target = start + 20;
      // The polling replica sees it first.
      await waitFor(async () => (await gauge(replicas[0]!, 'svc_upstream_latest_block', 'upstream="a"')) === target, 5000);
      const seen = Date.now();
      await waitFor(async () => {
        for (const r of replicas.slice(1)) if ((await gauge(r, 'svc_upstream_latest_block', 'upstream="a"')) !== target) return false;
        return true;
      }, 3000);
      times.push(Date.now() - seen);
    }
    const median = [...times].sort((x, y) => x - y)[2] as number;
    // Measured from when replica 1's /metrics shows the head (its poll, 100 ms, comes before).
    console.log(`      head seen by replica 1 -> used by replicas 2 and 3: median ${median} ms (${times.join(', ')} ms)`);
    expect(Math.max(...times)).to.be.below(1000);
  });

  it('Redis stalled (SIGSTOP) and resumed under load: no call fails; the gauge goes 0 then 1, logged once each', async () => {
    const marks = replicas.map((r) => r.logs().length);
    const done = load();
    await sleep(200);
    process.kill(redis.pid, 'SIGSTOP');
    try {
      await anvil.rpc('anvil_mine', ['0x2']);
      // The PING (every second, answered within a second) notices the stall.
      await allAt('svc_shared_state_connected', 0, '', 5000);
      await sleep(500);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    await allAt('svc_shared_state_connected', 1);
    await sleep(300);
    const { failures, calls } = await done();
    expect(failures).to.deep.equal([]);
    expect(calls).to.be.above(30);
    // One warn line when Redis went, one info line when it came back, at every replica.
    expect(outageLines(replicas, marks)).to.deep.equal(replicas.map(() => [1, 1]));
  });

  it('Redis killed and restarted on its port under load: no call fails; loss and recovery logged once; heads catch up', async () => {
    const port = redis.port;
    const marks = replicas.map((r) => r.logs().length);
    const done = load();
    await redis.stop();
    await allAt('svc_shared_state_connected', 0, '', 5000);
    const start = Number(BigInt(await anvil.rpc('eth_blockNumber')));
    await anvil.rpc('anvil_mine', ['0x5']);
    await sleep(500);
    redis = await startRedis({ port });
    await allAt('svc_shared_state_connected', 1);
    const { failures, calls } = await done();
    expect(failures).to.deep.equal([]);
    expect(calls).to.be.above(30);
    // One warn line when Redis went, one info line when it came back, at every replica. A line reaches the test through the
    // child's stdout pipe, after the gauge it follows: wait for it, then count.
    await waitFor(() => outageLines(replicas, marks).every(([, back]) => back >= 1), 5000).catch(() => undefined);
    expect(outageLines(replicas, marks)).to.deep.equal(replicas.map(() => [1, 1]));
    // The fresh Redis holds nothing: the polling replica's snapshot brings the head back to the others.
    await allAt('svc_upstream_latest_block', start + 5, 'upstream="a"', 5000);
  });
});
