/**
 * Operator changes shared across replicas (docs/operations.md "Fleet: shared state"): three
 * `svc start` processes on one real redis-server, one project with two upstreams (two anvil
 * nodes, `a` and `b`) and `/admin` behind a secret. A cordon of `a` through replica 1's `/admin`
 * stops replicas 2 and 3 sending it traffic within 1 s (the `X-SVC-Upstream` response header
 * names who answered), the uncordon gives it back; an API key added through replica 1 (memory
 * driver) authenticates at replica 3; a replica started after the cordon replays the operator
 * log and follows it; Redis frozen (SIGSTOP) under load loses no call, the gauge
 * `svc_shared_state_connected` goes 0 then 1, and a cordon made meanwhile reaches the others
 * once Redis runs again. A replica with two workers (`server.workers`) follows the others' changes
 * on both workers, its own reach the others, and a worker that replaces a dead one replays them.
 * Conflicting changes made on two replicas while Redis is frozen end, on every replica, as the
 * log's last entry says. A replica that starts while Redis is down says
 * so (one warn line, gauge 0) and connects when it comes up. The propagation times are printed (median of five).
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';
import { request } from 'undici';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { freePort } from '../helpers/ports.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { spawnSvc, type SvcProcess, listeningPids, outageLines } from '../helpers/svc-process.ts';
import { NO_CACHE, waitFor } from '../helpers/svc.ts';

const ADMIN = 'admin-secret-fleet-0123456789abcdef';
const KEY = 'k_fleet_0123456789abcdef0123456789';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;

/** A gauge's value from a replica's /metrics (the first series matching `labels`), or undefined. */
async function gauge(svc: SvcProcess, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await request(svc.metricsUrl)).body.text();
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || !line.includes(labels)) continue;
    if (line[name.length] !== '{' && line[name.length] !== ' ') continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** One call (on its own connection, so a replica's workers take turns); status, error and the upstream that answered. */
async function call(svc: SvcProcess, project = 'main', key?: string): Promise<{ status: number; error: unknown; upstream: string | undefined }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', connection: 'close' };
  if (key) headers.authorization = `Bearer ${key}`;
  const r = await request(`${svc.url}/${project}/evm/31337`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
  });
  const body = (await r.body.json()) as { error?: unknown };
  return { status: r.statusCode, error: body.error, upstream: r.headers['x-svc-upstream'] as string | undefined };
}

async function admin(svc: SvcProcess, method: string, params: unknown[]): Promise<{ result?: unknown; error?: unknown }> {
  const r = await request(`${svc.url}/admin`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-svc-secret-token': ADMIN },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await r.body.json()) as { result?: unknown; error?: unknown };
}

/** Calls each replica in a tight loop until `done(upstream)` holds at every one; ms from `t0`. */
async function untilAll(svcs: SvcProcess[], done: (upstream: string | undefined) => boolean, t0: number, timeoutMs = 5000): Promise<number> {
  const at = await Promise.all(
    svcs.map(async (s) => {
      for (;;) {
        const r = await call(s);
        if (r.status === 200 && done(r.upstream)) return Date.now() - t0;
        if (Date.now() - t0 > timeoutMs) throw new Error(`not within ${timeoutMs} ms (last answer from ${String(r.upstream)}, status ${r.status})`);
      }
    }),
  );
  return Math.max(...at);
}

describe('e2e: operator changes shared across replicas (Redis)', function () {
  this.timeout(120_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let redis: RedisHandle;
  let dir: string;
  const replicas: SvcProcess[] = [];
  const cordon = { projectId: 'main', upstream: 'a', reason: 'fleet test' };
  const scope = { projectId: 'keyed', connectorId: 'keys' };

  const config = (redisUrl: string) => {
    const upstreams = [
      { id: 'a', endpoint: a.url, evm: { chainId: 31337 } },
      { id: 'b', endpoint: b.url, evm: { chainId: 31337 } },
    ];
    // Config order whatever the latencies (no score weight): which upstream serves then says only
    // whether `a` is cordoned, even on a machine loaded by a parallel test run.
    const network = [
      { architecture: 'evm', evm: { chainId: 31337 }, selectionPolicy: { scoreWeights: { errorRate: 0, respLatency: 0, throttledRate: 0, blockHeadLag: 0 } } },
    ];
    return {
      ...NO_CACHE,
      logLevel: 'info',
      metrics: { enabled: true },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      sharedState: { redis: { uri: redisUrl }, clusterKey: 'e2e-ops', snapshotInterval: '500ms' },
      projects: [
        { id: 'main', networks: network, upstreams },
        { id: 'keyed', networks: network, upstreams, auth: { strategies: [{ type: 'database', connector: { id: 'keys', driver: 'memory' } }] } },
      ],
    };
  };

  before(async () => {
    await ensureBuilt();
    [a, b, redis] = await Promise.all([startAnvil(), startAnvil(), startRedis()]);
    dir = mkdtempSync(join(tmpdir(), 'svc-shared-ops-'));
    replicas.push(...(await Promise.all(['r1', 'r2', 'r3'].map((n) => spawnSvc(dir, n, config(redis.url))))));
    await waitFor(async () => {
      for (const r of replicas) if ((await gauge(r, 'svc_shared_state_connected')) !== 1) return false;
      return true;
    }, 10_000);
  });

  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await Promise.all([a?.stop(), b?.stop(), redis?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every replica prefers upstream a while nothing is cordoned', async () => {
    await untilAll(replicas, (u) => u === 'a', Date.now(), 10_000);
  });

  it('a cordon through replica 1 stops traffic to a at replicas 2 and 3 within 1 s; the uncordon gives it back (median of five)', async () => {
    const cordonMs: number[] = [];
    const uncordonMs: number[] = [];
    const others = replicas.slice(1);
    for (let i = 0; i < 5; i++) {
      let t0 = Date.now();
      expect((await admin(replicas[0]!, 'svc_cordonUpstream', [cordon])).error).to.equal(undefined);
      cordonMs.push(await untilAll(others, (u) => u === 'b', t0));
      // Held, not a blip: a dozen calls in a row go to b.
      for (let n = 0; n < 12; n++) expect((await call(others[n % 2]!)).upstream).to.equal('b');
      t0 = Date.now();
      expect((await admin(replicas[0]!, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).error).to.equal(undefined);
      uncordonMs.push(await untilAll(others, (u) => u === 'a', t0));
    }
    console.log(`      cordon at replica 1 -> no call to a at replicas 2 and 3: median ${median(cordonMs)} ms (${cordonMs.join(', ')} ms)`);
    console.log(`      uncordon at replica 1 -> a serves again at replicas 2 and 3: median ${median(uncordonMs)} ms (${uncordonMs.join(', ')} ms)`);
    expect(median(cordonMs)).to.be.below(1000);
    expect(Math.max(...cordonMs)).to.be.below(1000);
  });

  it('an API key added through replica 1 (memory driver) authenticates at replica 3; deleted, it is refused there', async () => {
    expect((await call(replicas[2]!, 'keyed', KEY)).status).to.equal(401);
    const t0 = Date.now();
    expect((await admin(replicas[0]!, 'svc_addApiKey', [{ ...scope, apiKey: KEY, userId: 'alice' }])).error).to.equal(undefined);
    await waitFor(async () => (await call(replicas[2]!, 'keyed', KEY)).status === 200, 3000);
    console.log(`      API key added at replica 1 -> accepted at replica 3: ${Date.now() - t0} ms`);
    expect((await call(replicas[1]!, 'keyed', KEY)).status).to.equal(200);
    // A second key, then its deletion: both travel.
    const other = `${KEY}_2`;
    await admin(replicas[0]!, 'svc_addApiKey', [{ ...scope, apiKey: other, userId: 'bob' }]);
    await waitFor(async () => (await call(replicas[2]!, 'keyed', other)).status === 200, 3000);
    await admin(replicas[0]!, 'svc_deleteApiKey', [{ ...scope, apiKey: other }]);
    await waitFor(async () => (await call(replicas[2]!, 'keyed', other)).status === 401, 3000);
  });

  it('a replica started after the cordon replays the operator log: it avoids a and knows the key', async () => {
    expect((await admin(replicas[0]!, 'svc_cordonUpstream', [cordon])).error).to.equal(undefined);
    await untilAll(replicas.slice(1), (u) => u === 'b', Date.now());
    const late = await spawnSvc(dir, 'r4', config(redis.url));
    replicas.push(late);
    await waitFor(async () => (await gauge(late, 'svc_shared_state_connected')) === 1, 10_000);
    await waitFor(async () => (await call(late)).upstream === 'b', 3000);
    for (let n = 0; n < 10; n++) expect((await call(late)).upstream).to.equal('b');
    expect((await call(late, 'keyed', KEY)).status).to.equal(200);
    expect((await call(late, 'keyed', `${KEY}_2`)).status).to.equal(401);
    expect((await admin(late, 'svc_listCordoned', [{ projectId: 'main' }])).result).to.deep.equal({
      projectId: 'main',
      cordoned: [{ upstream: 'a', reason: 'fleet test' }],
    });
    // The uncordon through the late replica reaches the first three.
    expect((await admin(late, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).error).to.equal(undefined);
    await untilAll(replicas.slice(0, 3), (u) => u === 'a', Date.now());
  });

  it('Redis frozen (SIGSTOP) under load: no call fails, the gauge goes 0 then 1 with one warn and one info line, and a cordon made meanwhile reaches the others', async () => {
    const marks = replicas.map((r) => r.logs().length);
    let stop = false;
    const failures: unknown[] = [];
    let calls = 0;
    const loops = replicas.map(async (s) => {
      while (!stop) {
        const r = await call(s).catch((e: unknown) => ({ status: 0, error: String(e), upstream: undefined }));
        calls++;
        if (r.status !== 200 || r.error !== undefined) failures.push(r.error ?? r.status);
      }
    });
    await sleep(200);
    process.kill(redis.pid, 'SIGSTOP');
    let frozenAt = 0;
    try {
      const t0 = Date.now();
      await waitFor(async () => {
        for (const r of replicas) if ((await gauge(r, 'svc_shared_state_connected')) !== 0) return false;
        return true;
      }, 5000);
      frozenAt = Date.now() - t0;
      expect((await admin(replicas[0]!, 'svc_cordonUpstream', [cordon])).error).to.equal(undefined);
      await sleep(500);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    const t1 = Date.now();
    await waitFor(async () => {
      for (const r of replicas) if ((await gauge(r, 'svc_shared_state_connected')) !== 1) return false;
      return true;
    }, 5000);
    console.log(`      Redis frozen -> gauge 0 at every replica: ${frozenAt} ms; resumed -> gauge 1: ${Date.now() - t1} ms`);
    await untilAll(replicas.slice(1), (u) => u === 'b', t1);
    stop = true;
    await Promise.all(loops);
    expect(failures).to.deep.equal([]);
    expect(calls).to.be.above(30);
    // One warn line when Redis went, one info line when it came back, at every replica.
    expect(outageLines(replicas, marks)).to.deep.equal(replicas.map(() => [1, 1]));
    await admin(replicas[0]!, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
  });

  it("conflicting changes on two replicas while Redis is frozen (cordon at 1, uncordon at 2 200 ms later): once it resumes every replica agrees with the log's last entry", async () => {
    const listed = async (svc: SvcProcess): Promise<unknown> =>
      ((await admin(svc, 'svc_listCordoned', [{ projectId: 'main' }])).result as { cordoned: unknown }).cordoned;
    for (const r of replicas) expect(await listed(r)).to.deep.equal([]);
    process.kill(redis.pid, 'SIGSTOP');
    try {
      await waitFor(async () => {
        for (const r of replicas.slice(0, 2)) if ((await gauge(r, 'svc_shared_state_connected')) !== 0) return false;
        return true;
      }, 5000);
      expect((await admin(replicas[0]!, 'svc_cordonUpstream', [cordon])).error).to.equal(undefined);
      await sleep(200);
      expect((await admin(replicas[1]!, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).error).to.equal(undefined);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    // Both outboxes are flushed on resume, in whatever order; the log decides.
    const client = createClient({ url: redis.url });
    await client.connect();
    let expected: unknown;
    try {
      await waitFor(async () => {
        const last = await client.xRevRange('e2e-ops:ops', '+', '-', { COUNT: 2 });
        const methods = last.map((e) => (JSON.parse(String(e.message.payload)) as { method: string }).method).sort();
        if (methods.join() !== 'svc_cordonUpstream,svc_uncordonUpstream') return false;
        const lastMethod = (JSON.parse(String(last[0]!.message.payload)) as { method: string }).method;
        expected = lastMethod === 'svc_cordonUpstream' ? [{ upstream: 'a', reason: 'fleet test' }] : [];
        return true;
      }, 5000);
    } finally {
      await client.close();
    }
    const agree = async (): Promise<boolean> => {
      for (const r of replicas) if (JSON.stringify(await listed(r)) !== JSON.stringify(expected)) return false;
      return true;
    };
    await waitFor(agree, 3000).catch(async () => {
      throw new Error(`replicas disagree: ${JSON.stringify(await Promise.all(replicas.map(listed)))}, log's last entry gives ${JSON.stringify(expected)}`);
    });
    await sleep(500);
    expect(await agree(), 'still agreeing 500 ms later').to.equal(true);
    await admin(replicas[0]!, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }]);
    await untilAll(replicas, (u) => u === 'a', Date.now());
  });

  it("a replica with two workers: both follow a cordon made elsewhere; an uncordon through it reaches the others; a replaced worker replays its own replica's cordon", async () => {
    const workers = await spawnSvc(dir, 'r6', { ...config(redis.url), server: { workers: 2, waitBeforeShutdown: '0s', waitAfterShutdown: '0s' } });
    try {
      await waitFor(() => listeningPids(workers.logs()).length >= 2, 20_000);
      // The primary's /metrics sums the workers: 2 once both are connected.
      await waitFor(async () => (await gauge(workers, 'svc_shared_state_connected')) === 2, 10_000);
      await untilAll([workers], (u) => u === 'a', Date.now());
      const t0 = Date.now();
      expect((await admin(replicas[1]!, 'svc_cordonUpstream', [cordon])).error).to.equal(undefined);
      // Every call on a new connection: the workers take turns; soon none sends to a.
      /** Waits for six calls in a row answered by `u`, checks twelve more; ms from t0 to the first of the six. */
      const both = async (u: string, since: number): Promise<number> => {
        let run = 0;
        let runStart = 0;
        await waitFor(async () => {
          const t = Date.now();
          if ((await call(workers)).upstream !== u) run = 0;
          else if (run++ === 0) runStart = t;
          return run >= 6;
        }, 3000);
        for (let n = 0; n < 12; n++) expect((await call(workers)).upstream).to.equal(u);
        return runStart - since;
      };
      console.log(`      cordon at replica 2 -> no call to a at either worker of a two-worker replica: ${await both('b', t0)} ms`);
      expect((await admin(workers, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).error).to.equal(undefined);
      // Up to 15 s: on a machine loaded by the parallel run this step once took over 5 s (the 1 s
      // propagation bound is the cordon test's above); past 15 s it prints what the log holds.
      await untilAll(replicas.slice(0, 3), (u) => u === 'a', Date.now(), 15_000).catch(async (e: Error) => {
        const tail = (l: string) =>
          l
            .split('\n')
            .filter((x) => x.includes('shared state') || x.includes('uncordon') || x.includes('warn'))
            .slice(-8)
            .join('\n');
        const c = createClient({ url: redis.url });
        await c.connect();
        const last = await c.xRevRange('e2e-ops:ops', '+', '-', { COUNT: 4 });
        await c.close();
        const log = JSON.stringify(last.map((x) => [x.id, x.message.replica, String(x.message.payload).slice(0, 80)]));
        throw new Error(
          `${e.message}\nops log tail: ${log}\nworkers: ${tail(workers.logs())}\n${replicas
            .slice(0, 3)
            .map((r, i) => `r${i + 1}: ${tail(r.logs())}`)
            .join('\n')}`,
        );
      });
      // Its other worker got the uncordon from the primary (and again from the stream entry).
      await both('a', Date.now());
      // A cordon through this replica, then one worker dies: its replacement (same replica id)
      // replays the log, its own replica's entries included, and follows the cordon too. (The
      // entry before it is an uncordon, so only its own entry cordons.)
      expect((await admin(replicas[0]!, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).error).to.equal(undefined);
      expect((await admin(workers, 'svc_cordonUpstream', [cordon])).error).to.equal(undefined);
      await both('b', Date.now());
      const [victim] = listeningPids(workers.logs());
      process.kill(victim as number, 'SIGKILL');
      await waitFor(() => workers.logs().includes('worker died: starting a replacement') && listeningPids(workers.logs()).length >= 3, 20_000);
      await both('b', Date.now());
      await untilAll(replicas.slice(0, 3), (u) => u === 'b', Date.now());
      expect((await admin(replicas[0]!, 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).error).to.equal(undefined);
      await both('a', Date.now());
      expect(workers.logs()).to.not.include('shared state: Redis unreachable');
    } finally {
      await workers.stop();
    }
  });

  it('a replica that starts while Redis is down logs one warn line, reads 0, serves, and connects once Redis is up', async () => {
    const port = await freePort();
    const lonely = await spawnSvc(dir, 'r5', config(`redis://127.0.0.1:${port}`));
    let late: RedisHandle | undefined;
    try {
      await waitFor(() => lonely.logs().includes('shared state: Redis unreachable at start'), 5000);
      expect(await gauge(lonely, 'svc_shared_state_connected')).to.equal(0);
      expect((await call(lonely)).status).to.equal(200);
      await sleep(1500);
      expect(
        lonely
          .logs()
          .split('\n')
          .filter((l) => l.includes('shared state: Redis unreachable')).length,
      ).to.equal(1);
      late = await startRedis({ port });
      await waitFor(async () => (await gauge(lonely, 'svc_shared_state_connected')) === 1, 10_000);
      expect(lonely.logs()).to.include('shared state: Redis reachable again');
    } finally {
      await lonely.stop();
      await late?.stop();
    }
  });
});
