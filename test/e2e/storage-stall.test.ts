/**
 * Storage tiers that stall do not stall calls: a real Redis (cache tier, rate-limit store, API
 * keys of project `alt`) and a real PostgreSQL (cache tier, API keys of project `main`) are
 * stopped with SIGSTOP (sockets up, nothing answered) under load and resumed with SIGCONT.
 * - (a) calls that need no storage (cache misses answered by anvil, checked by a Redis-backed
 *   rate-limit budget, with an API key cached in memory) keep their p99 within 2x the healthy p99
 *   measured in the same test;
 * - (b) an unknown API key is refused (HTTP 401) within ~600 ms, at once once the breaker is open;
 * - (c) `svc_addApiKey` answers an error within its write deadline;
 * - (d) after SIGCONT every breaker closes after its back-off and the tiers serve again (hits);
 * - (e) `svc_storage_breaker_*` metrics and one log line per edge.
 */
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import type { Proxy } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { metricsAddress } from '../../plugins/metrics/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { postgresPids, postmasterPid } from '../helpers/postgres-processes.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, waitFor, type SvcResponse } from '../helpers/svc.ts';

const ADMIN = 'admin-secret-0123456789abcdef';
const KEY = 'k_main_0123456789abcdef0123456789abcdef';
const ALT_KEY = 'k_alt_0123456789abcdef0123456789abcdef';
/** Fast breakers, so the test sees every edge in seconds. */
const BREAKER = { backoff: '500ms', maxBackoff: '1s' };
const hex = (n: number) => `0x${n.toString(16)}`;

/** The value of one sample of the exposition, or undefined. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inside = line.slice(name.length + 1, line.indexOf('}'));
    if (want.every((w) => inside.split(',').includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.99) - 1] as number;

describe('e2e: storage tiers that stall (SIGSTOP) do not stall calls', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;
  let postgres: PostgresHandle;
  let postmaster = 0;
  /** The processes stopped, to resume the same ones. */
  let stopped: number[] = [];
  let proxy: Proxy;
  let url: string;
  let metricsUrl: string;
  const logs: Array<{ level: number; msg: string; connector?: string; kind?: string }> = [];

  const signal = (sig: 'SIGSTOP' | 'SIGCONT') => {
    // A stopped postmaster forks no new backend: the list taken at SIGSTOP is complete.
    if (sig === 'SIGSTOP') stopped = [...postgresPids(postmaster), redis.pid];
    for (const pid of stopped) {
      try {
        process.kill(pid, sig);
      } catch {
        /* gone */
      }
    }
  };

  before(async () => {
    [anvil, redis, postgres] = await Promise.all([startAnvil(), startRedis(), startPostgres()]);
    await anvil.rpc('anvil_mine', [hex(120)]);
    postmaster = await postmasterPid(postgres.url);
    const network = { architecture: 'evm', evm: { chainId: anvil.chainId } };
    const upstream = { id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId, statePollerInterval: '100ms' } };
    const config = {
      logLevel: 'info',
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      rateLimiters: {
        store: { driver: 'redis', redis: { uri: redis.url, breaker: BREAKER } },
        budgets: [{ id: 'roomy', rules: [{ maxCount: 1_000_000, period: 'second' }] }],
      },
      database: {
        evmJsonRpcCache: {
          connectors: [
            { id: 'redis-cache', driver: 'redis', redis: { uri: redis.url, breaker: BREAKER } },
            { id: 'pg-cache', driver: 'postgresql', postgresql: { connectionUri: postgres.url, breaker: BREAKER } },
          ],
          policies: [
            { connector: 'redis-cache', finality: 'finalized' },
            { connector: 'pg-cache', finality: 'finalized' },
          ],
        },
      },
      projects: [
        {
          id: 'main',
          rateLimitBudget: 'roomy',
          networks: [network],
          upstreams: [upstream],
          auth: {
            strategies: [
              { type: 'database', connector: { id: 'pg-keys', driver: 'postgresql', postgresql: { connectionUri: postgres.url, breaker: BREAKER } } },
            ],
          },
        },
        {
          id: 'alt',
          networks: [network],
          upstreams: [upstream],
          auth: { strategies: [{ type: 'database', connector: { id: 'redis-keys', driver: 'redis', redis: { uri: redis.url, breaker: BREAKER } } }] },
        },
      ],
    };
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as (typeof logs)[number]);
        done();
      },
    });
    proxy = createProxy({
      config,
      plugins: defaultPreset(),
      logger: pino({ level: 'info' }, sink),
      port: 0,
      host: '127.0.0.1',
      metricsPort: 0,
      probeBackoffMs: 50,
    });
    const addr = await proxy.start();
    url = `http://127.0.0.1:${addr.port}`;
    metricsUrl = `http://127.0.0.1:${metricsAddress(proxy)!.port}/metrics`;
  });

  after(async () => {
    if (redis) signal('SIGCONT');
    await proxy?.close();
    await Promise.all([anvil?.stop(), redis?.stop(), postgres?.stop()]);
  });

  const rpc = (project: string, key: string, method: string, params: unknown[]) =>
    httpRequest('POST', `${url}/${project}/evm/${anvil.chainId}`, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), {
      authorization: `Bearer ${key}`,
    });
  const admin = (method: string, params: unknown) =>
    httpRequest('POST', `${url}/admin`, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), { 'x-svc-secret-token': ADMIN });
  const addKey = (project: string, connectorId: string, apiKey: string) => admin('svc_addApiKey', [{ projectId: project, connectorId, apiKey, userId: 'u' }]);
  const metrics = async () => (await httpRequest('GET', metricsUrl)).text;
  const timed = async (f: () => Promise<SvcResponse>): Promise<{ r: SvcResponse; ms: number }> => {
    const t0 = performance.now();
    const r = await f();
    return { r, ms: performance.now() - t0 };
  };

  /** Cache misses (a new address each), answered by anvil: latencies, ms. */
  let next = 0;
  async function load(calls: number, concurrency = 4): Promise<number[]> {
    const out: number[] = [];
    let left = calls;
    const worker = async () => {
      while (left-- > 0) {
        const addr = `0x${(++next).toString(16).padStart(40, '0')}`;
        const { r, ms } = await timed(() => rpc('main', KEY, 'eth_getBalance', [addr, hex(34)]));
        expect(r.status, r.text).to.equal(200);
        expect(r.json.result).to.equal('0x0');
        expect(r.headers['x-svc-cache']).to.equal('MISS');
        out.push(ms);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return out;
  }

  const BREAKERS = [
    { connector: 'redis-cache', kind: 'cache' },
    { connector: 'pg-cache', kind: 'cache' },
    { connector: 'rate-limit-store', kind: 'rate-limit' },
    { connector: 'pg-keys', kind: 'api-keys' },
    { connector: 'redis-keys', kind: 'api-keys' },
  ];

  it('p99 of calls needing no storage stays within 2x healthy; unknown keys and admin writes fail fast; tiers serve again after SIGCONT', async () => {
    // Healthy: keys added and cached, a finalized block written to both tiers.
    expect((await addKey('main', 'pg-keys', KEY)).json.result.success).to.equal(true);
    expect((await addKey('alt', 'redis-keys', ALT_KEY)).json.result.success).to.equal(true);
    expect((await rpc('main', KEY, 'eth_chainId', [])).status).to.equal(200);
    expect((await rpc('alt', ALT_KEY, 'eth_chainId', [])).status).to.equal(200);
    await waitFor(async () => (await rpc('main', KEY, 'eth_getBlockByNumber', [hex(34), false])).headers['x-svc-cache'] === 'HIT', 5000);
    await load(300);
    const healthy = await load(1500);
    const before = await metrics();
    for (const b of BREAKERS) expect(sample(before, 'svc_storage_breaker_state', b), JSON.stringify(b)).to.equal(0);

    // Stall both servers, under load.
    signal('SIGSTOP');
    const stalledAt = performance.now();
    // Three unknown keys per key store at once (with the admin write, enough failures to open its
    // breaker), then four more one after the other: refused at once while the breaker is open, but
    // for a half-open probe, which waits at most one lookup deadline.
    const unknown = async (project: string) => {
      const first = await Promise.all([1, 2, 3].map((n) => timed(() => rpc(project, `k_unknown_${project}_${n}_0123456789abcdef`, 'eth_chainId', []))));
      const again: Array<{ r: SvcResponse; ms: number }> = [];
      for (let n = 4; n <= 7; n++) again.push(await timed(() => rpc(project, `k_unknown_${project}_${n}_0123456789abcdef`, 'eth_chainId', [])));
      return { first, again };
    };
    const [stalled, unknownMain, unknownAlt, addMain, addAlt] = await Promise.all([
      load(2000),
      unknown('main'),
      unknown('alt'),
      timed(() => addKey('main', 'pg-keys', 'k_new_main_0123456789abcdef')),
      timed(() => addKey('alt', 'redis-keys', 'k_new_alt_0123456789abcdef')),
    ]);
    const stallMs = performance.now() - stalledAt;

    // (a) the calls that need no storage.
    const [h99, s99] = [p99(healthy), p99(stalled)];
    const q = (xs: number[], f: number) => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * f) - 1]!.toFixed(1);
    const summary = `healthy p50/p90/p99/max ${q(healthy, 0.5)}/${q(healthy, 0.9)}/${q(healthy, 0.99)}/${q(healthy, 1)} ms; stalled ${q(stalled, 0.5)}/${q(stalled, 0.9)}/${q(stalled, 0.99)}/${q(stalled, 1)} ms (${stalled.length} calls in ${stallMs.toFixed(0)} ms)`;
    expect(s99, summary).to.be.at.most(2 * h99);

    // (b) unknown keys: the spec's auth error, within one lookup deadline.
    for (const u of [unknownMain, unknownAlt]) {
      for (const { r, ms } of [...u.first, ...u.again]) {
        expect(r.status).to.equal(401);
        expect(r.json.error.code).to.equal(-32016);
        expect(ms).to.be.below(600);
      }
      expect(u.again.filter((x) => x.ms >= 100).length, u.again.map((x) => x.ms.toFixed(0)).join(' ')).to.be.at.most(1);
    }

    // (c) admin writes: a JSON-RPC error within the 2 s write deadline, never a hang.
    for (const { r, ms } of [addMain, addAlt]) {
      expect(ms).to.be.below(2500);
      expect(r.json.error.code).to.equal(-32603);
      expect(r.json.error.message).to.match(/api-keys connector (pg|redis)-keys (did not answer within 2000 ms|is unavailable)/);
    }

    // (e) every breaker opened, with its metric and one warn line.
    const during = await metrics();
    for (const b of BREAKERS) {
      expect(sample(during, 'svc_storage_breaker_transitions_total', { ...b, to: 'open' }), JSON.stringify(b)).to.be.at.least(1);
      expect(
        logs.some((l) => l.level === 40 && l.connector === b.connector && l.kind === b.kind && /circuit breaker open/.test(l.msg)),
        `open log of ${b.connector}`,
      ).to.equal(true);
    }
    expect(sample(during, 'svc_storage_breaker_skipped_total', { connector: 'redis-cache', kind: 'cache' })).to.be.above(100);
    expect(sample(during, 'svc_storage_breaker_skipped_total', { connector: 'rate-limit-store', kind: 'rate-limit' })).to.be.above(100);

    // (d) resumed: each breaker probes after its back-off and closes; the tiers serve again.
    signal('SIGCONT');
    await waitFor(async () => {
      await Promise.all([
        load(4),
        rpc('main', 'k_probe_main_0123456789abcdef', 'eth_chainId', []),
        rpc('alt', 'k_probe_alt_0123456789abcdef', 'eth_chainId', []),
      ]);
      const text = await metrics();
      return BREAKERS.every((b) => sample(text, 'svc_storage_breaker_state', b) === 0);
    }, 10_000);
    const hit = await rpc('main', KEY, 'eth_getBlockByNumber', [hex(34), false]);
    expect(hit.headers['x-svc-cache']).to.equal('HIT');
    const fresh = 'k_after_0123456789abcdef0123456789';
    expect((await addKey('main', 'pg-keys', fresh)).json.result.success).to.equal(true);
    expect((await addKey('alt', 'redis-keys', fresh)).json.result.success).to.equal(true);
    expect((await rpc('main', fresh, 'eth_chainId', [])).status).to.equal(200);
    expect((await rpc('alt', fresh, 'eth_chainId', [])).status).to.equal(200);
    const after = await metrics();
    for (const b of BREAKERS) {
      for (const to of ['half-open', 'closed'])
        expect(sample(after, 'svc_storage_breaker_transitions_total', { ...b, to }), `${b.connector} ${to}`).to.be.at.least(1);
      expect(
        logs.some((l) => l.connector === b.connector && /half-open, probing/.test(l.msg)),
        `probe log of ${b.connector}`,
      ).to.equal(true);
      expect(
        logs.some((l) => l.connector === b.connector && /probe succeeded; circuit breaker closed/.test(l.msg)),
        `close log of ${b.connector}`,
      ).to.equal(true);
    }
  });
});
