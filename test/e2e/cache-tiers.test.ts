/**
 * The shared cache tiers against real servers: Redis and PostgreSQL started
 * by the test helpers, anvil as the upstream. Two svc processes share one Redis; killing Redis
 * mid-run leaves calls succeeding from upstreams; PostgreSQL creates its table, serves a second
 * svc, ignores and purges expired rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { PostgresConnector } from '../../plugins/cache/connectors/postgres.ts';
import { createLogger } from '../../lib/logger.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const DEV0 = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const DEV1 = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
const hex = (n: number) => `0x${n.toString(16)}`;
const body = (method: string, params: unknown[]) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });

/** A config whose only cache tier is `connector`, finalized forever and unfinalized for 10 s. */
function tierConfig(anvilUrl: string, connector: object, logLevel = 'error'): object {
  const id = (connector as { id: string }).id;
  return {
    logLevel,
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
        upstreams: [{ id: 'anvil', endpoint: anvilUrl, evm: { chainId: CHAIN, statePollerInterval: '100ms' } }],
      },
    ],
    database: {
      evmJsonRpcCache: {
        connectors: [connector],
        policies: [
          { connector: id, finality: 'finalized' },
          { connector: id, finality: 'unfinalized', ttl: '10s' },
        ],
      },
    },
  };
}

const post = (url: string, method: string, params: unknown[]): Promise<SvcResponse> => httpRequest('POST', `${url}${PATH}`, body(method, params));

/** Calls until the answer is a cache hit (the write after an answer is asynchronous). */
async function untilHit(url: string, method: string, params: unknown[]): Promise<SvcResponse> {
  let last: SvcResponse | undefined;
  await waitFor(async () => {
    last = await post(url, method, params);
    return last.headers['x-svc-cache'] === 'HIT';
  }, 5000);
  return last as SvcResponse;
}

describe('e2e: shared cache tiers on real Redis and PostgreSQL', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let dir: string;

  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-tiers-'));
    anvil = await startAnvil();
    await anvil.rpc('anvil_mine', [hex(120)]);
  });
  after(async () => {
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe('Redis', () => {
    let redis: RedisHandle;
    let a: SvcProcess;
    let b: SvcProcess;
    before(async () => {
      redis = await startRedis();
      const connector = { id: 'shared', driver: 'redis', redis: { uri: redis.url } };
      [a, b] = await Promise.all([spawnSvc(dir, 'a', tierConfig(anvil.url, connector, 'warn')), spawnSvc(dir, 'b', tierConfig(anvil.url, connector))]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await redis?.stop();
    });

    it('two svc processes share one Redis: a finalized block fetched through the first is a HIT on the second', async () => {
      const params = [hex(30), false];
      const first = await post(a.url, 'eth_getBlockByNumber', params);
      expect(first.headers['x-svc-cache']).to.equal('MISS');
      const onB = await untilHit(b.url, 'eth_getBlockByNumber', params);
      expect(onB.headers['x-svc-upstream-attempts']).to.equal('0');
      expect(onB.json.result).to.deep.equal(first.json.result);
    });

    it('a receipt by hash through the reverse index, written by one replica, read by the other', async () => {
      const hash = (await anvil.rpc('eth_sendTransaction', [{ from: DEV0, to: DEV1, value: '0x2' }])) as string;
      await anvil.rpc('anvil_mine', [hex(70)]);
      // Replica a learns the new finalized block from its poller, then writes the receipt as finalized.
      await untilHit(a.url, 'eth_getTransactionReceipt', [hash]);
      const onB = await untilHit(b.url, 'eth_getTransactionReceipt', [hash]);
      expect((onB.json.result as { transactionHash: string }).transactionHash).to.equal(hash);
    });

    it('killing Redis mid-run: calls keep succeeding from the upstream; read errors are counted; the URI never reaches logs or labels', async () => {
      await redis.stop();
      for (let n = 40; n < 45; n++) {
        const r = await post(a.url, 'eth_getBlockByNumber', [hex(n), false]);
        expect(r.status).to.equal(200);
        expect((r.json.result as { number: string }).number).to.equal(hex(n));
        expect(r.headers['x-svc-cache']).to.equal('MISS');
      }
      const metrics = await (await fetch(a.metricsUrl)).text();
      expect(metrics).to.match(
        /svc_cache_get_error_total\{project="main",network="evm:31337",category="eth_getBlockByNumber",connector="shared",policy="0"\} [1-9]/,
      );
      expect(metrics).to.not.include(String(redis.port));
      await waitFor(() => a.logs().includes('cache connector shared'), 5000);
      expect(a.logs()).to.not.include(redis.url);
      expect(a.logs()).to.not.include(`:${redis.port}`);
    });
  });

  describe('a Redis that stalls with its socket up (SIGSTOP)', () => {
    let redis: RedisHandle;
    let svc: SvcHandle | undefined;
    before(async () => {
      redis = await startRedis();
      svc = await startSvc(tierConfig(anvil.url, { id: 'stall', driver: 'redis', redis: { uri: redis.url } }));
    });
    after(async () => {
      try {
        process.kill(redis.pid, 'SIGCONT');
      } catch {
        /* already gone */
      }
      await svc?.close();
      await redis?.stop();
    });

    it('calls are answered from the upstream once the 1 s read timeout passes; a write-back to the stalled tier delays no answer; the tier holds no call; shutdown does not hang', async () => {
      await untilHit(svc!.url, 'eth_getBlockByNumber', [hex(34), false]);
      process.kill(redis.pid, 'SIGSTOP');
      const answers = await Promise.all([35, 36, 37].map((n) => post(svc!.url, 'eth_getBlockByNumber', [hex(n), false])));
      for (const [i, r] of answers.entries()) {
        expect(r.status).to.equal(200);
        expect((r.json.result as { number: string }).number).to.equal(hex(35 + i));
        expect(r.headers['x-svc-cache']).to.equal('MISS');
      }
      // The write-back is off the response path: with reads skipped, a miss whose write to the
      // stalled tier can never finish is answered as soon as the upstream answers, far inside the
      // 1 s tier timeout it would otherwise wait for.
      for (const n of [38, 39, 40]) {
        const t0 = performance.now();
        const r = await httpRequest('POST', `${svc!.url}${PATH}`, body('eth_getBlockByNumber', [hex(n), false]), { 'X-SVC-Skip-Cache-Read': 'true' });
        const ms = performance.now() - t0;
        expect(r.status).to.equal(200);
        expect((r.json.result as { number: string }).number).to.equal(hex(n));
        expect(ms, 'a miss waits for no cache write').to.be.below(500);
      }
      // Shutdown with the server still stalled: QUIT is never answered, the connection is dropped.
      await svc!.close();
      svc = undefined;
    });
  });

  describe('PostgreSQL', () => {
    let postgres: PostgresHandle;
    let one: SvcHandle;
    let two: SvcHandle;
    const table = 'svc_cache_test';
    before(async () => {
      postgres = await startPostgres();
      const connector = { id: 'pg', driver: 'postgresql', postgresql: { connectionUri: postgres.url, table } };
      one = await startSvc(tierConfig(anvil.url, connector));
      two = await startSvc(tierConfig(anvil.url, connector));
    });
    after(async () => {
      await one?.close();
      await two?.close();
      await postgres?.stop();
    });

    it('the table is created if missing; an entry written through one svc is a HIT on another', async () => {
      const params = [hex(31), false];
      const first = await post(one.url, 'eth_getBlockByNumber', params);
      expect(first.headers['x-svc-cache']).to.equal('MISS');
      const hit = await untilHit(two.url, 'eth_getBlockByNumber', params);
      expect(hit.json.result).to.deep.equal(first.json.result);
      const c = new pg.Client({ connectionString: postgres.url });
      await c.connect();
      try {
        // keyv's table layout (@keyv/postgres): one row per key, the expiry inside the value.
        const rows = await c.query(`SELECT key, value FROM ${table} WHERE key LIKE $1`, [`svc:cache:main/evm:${CHAIN}:31#%`]);
        expect(rows.rowCount).to.equal(1);
        expect(rows.rows[0].key).to.match(/#eth_getBlockByNumber:/);
        expect(JSON.parse(rows.rows[0].value).expires, 'finalized: forever').to.equal(undefined);
      } finally {
        await c.end();
      }
    });

    it('a lookup by hash reads through the reverse-index row', async () => {
      const hash = (await anvil.rpc('eth_sendTransaction', [{ from: DEV0, to: DEV1, value: '0x3' }])) as string;
      await anvil.rpc('anvil_mine', [hex(70)]);
      await untilHit(one.url, 'eth_getTransactionReceipt', [hash]);
      await untilHit(two.url, 'eth_getTransactionReceipt', [hash]);
    });

    it('expired rows are ignored on read and purged on the purge interval', async () => {
      const conn = new PostgresConnector(
        'pg-direct',
        { connectionUri: postgres.url, table: 'svc_cache_purge', maxConns: 2, purgeInterval: 200 },
        createLogger('silent'),
      );
      await conn.open();
      try {
        // A TTL (ms) long enough that the first read comes before it on a busy machine (parallel test workers).
        const ttl = 400;
        const written = Date.now();
        await conn.set('evm:1:5', 'eth_call:x', { wire: '"0x1"', finality: 'unfinalized', writtenAt: written }, ttl);
        await conn.set('evm:1:5', 'eth_call:y', { wire: '"0x2"', finality: 'finalized', writtenAt: Date.now() }, 0);
        expect((await conn.get('evm:1:5', 'eth_call:x'))?.wire).to.equal('"0x1"');
        await new Promise((r) => setTimeout(r, Math.max(0, written + ttl + 30 - Date.now())));
        expect(await conn.get('evm:1:5', 'eth_call:x'), 'expired: ignored on read').to.equal(undefined);
        const c = new pg.Client({ connectionString: postgres.url });
        await c.connect();
        try {
          await waitFor(async () => (await c.query('SELECT count(*)::int AS n FROM svc_cache_purge')).rows[0].n === 1, 3000);
        } finally {
          await c.end();
        }
        expect((await conn.get('evm:1:5', 'eth_call:y'))?.wire, 'a forever row stays').to.equal('"0x2"');
      } finally {
        await conn.close();
      }
    });

    it('PostgreSQL going away: calls keep succeeding from the upstream', async () => {
      await postgres.stop();
      const r = await post(one.url, 'eth_getBlockByNumber', [hex(50), false]);
      expect(r.status).to.equal(200);
      expect((r.json.result as { number: string }).number).to.equal(hex(50));
    });
  });
});
