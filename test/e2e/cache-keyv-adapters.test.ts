/**
 * The keyv cache tiers against real servers: Redis (@keyv/redis, `driver:
 * redis`), PostgreSQL (@keyv/postgres, `driver: postgresql`), and through `driver: keyv`
 * memcached (@keyv/memcache), Valkey's client (@keyv/valkey) on redis-server, @keyv/postgres
 * (an adapter built from one options object) and etcd (@keyv/etcd, one member). Each adapter passes keyv's own conformance suite (@keyv/test-suite's
 * API and value tests), then svc's connector contract on it: entries round-trip with their block
 * facts, lookups by hash go through the reverse-index pointer to the newest partition, TTLs hold,
 * keys longer than memcached's limit are stored, and a server that stalls (SIGSTOP) costs a read
 * its deadline until the breaker skips the tier at once.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { keyvApiTests, keyvValueTests } from '@keyv/test-suite';
import { expect } from 'chai';
import Keyv from 'keyv';
import pg from 'pg';
import { createAdapter } from '../../plugins/cache/connectors/adapter.ts';
import { KeyvConnector } from '../../plugins/cache/connectors/keyv.ts';
import { PostgresConnector } from '../../plugins/cache/connectors/postgres.ts';
import { waitFor } from '../helpers/svc.ts';
import { RedisConnector } from '../../plugins/cache/connectors/redis.ts';
import { TierReporter, type CacheEntry } from '../../plugins/cache/connectors/types.ts';
import { StorageUnavailableError } from '../../lib/storage-breaker.ts';
import { createLogger } from '../../lib/logger.ts';
import { mochaKeyvTest } from '../helpers/keyv-suite.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { startMemcached } from '../helpers/memcached.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startRedis } from '../helpers/redis.ts';

const logger = createLogger('silent');
const HASH = `0x${'ab'.repeat(32)}`;

/** One adapter under test: how to start its server and build the connector. */
interface Case {
  name: string;
  start(): Promise<{ uri: string; pid?: number; stop(): Promise<void> }>;
  connector(uri: string, id: string): Promise<KeyvConnector>;
}

/**
 * The read deadline of the connectors under test (ms). svc's default (50 ms) is what production
 * uses on a dedicated host; a CI machine with both cores busy can take longer than that for one
 * round trip, so the contract tests give reads a deadline a loaded machine meets. The stall test
 * still proves a stalled server costs a read exactly its deadline, then none once the breaker opens.
 */
const READ_DEADLINE_MS = 300;

const viaKeyv =
  (adapter: string, deadlines: { readTimeout?: number; writeTimeout?: number } = { readTimeout: READ_DEADLINE_MS }, options?: Record<string, unknown>) =>
  async (uri: string, id: string) =>
    new KeyvConnector(
      id,
      'keyv',
      await createAdapter({ adapter, uri, ...(options ? { options } : {}) }),
      { ...deadlines, breaker: { failureThreshold: 3, backoff: 60_000 } },
      new TierReporter(id, 'keyv', logger, uri),
      logger,
    );

const CASES: Case[] = [
  {
    name: 'Redis (driver redis, @keyv/redis)',
    start: async () => {
      const r = await startRedis();
      return { uri: r.url, pid: r.pid, stop: r.stop };
    },
    connector: async (uri, id) =>
      new RedisConnector(id, { uri, connectTimeout: 1000, readTimeout: READ_DEADLINE_MS, breaker: { failureThreshold: 3, backoff: 60_000 } }, logger),
  },
  {
    name: 'PostgreSQL (driver postgresql, @keyv/postgres)',
    start: async () => {
      const p = await startPostgres();
      return { uri: p.url, stop: p.stop };
    },
    // One connection: @keyv/test-suite does not await every clear(), and with two a late clear can
    // overtake the next test's set (its ".delete(key) resolves to true" then flakes).
    connector: async (uri, id) =>
      new PostgresConnector(id, { connectionUri: uri, table: `t_${id.replace(/\W/g, '_')}`, maxConns: 1, purgeInterval: 60_000 }, logger),
  },
  {
    name: 'memcached (driver keyv, @keyv/memcache)',
    start: async () => {
      const m = await startMemcached();
      return { uri: m.address, pid: m.pid, stop: m.stop };
    },
    connector: viaKeyv('@keyv/memcache'),
  },
  {
    name: 'Valkey client on redis-server (driver keyv, @keyv/valkey)',
    start: async () => {
      const r = await startRedis();
      return { uri: r.url, pid: r.pid, stop: r.stop };
    },
    connector: viaKeyv('@keyv/valkey'),
  },
  {
    // An adapter whose constructor takes one options object (`{...options, uri}`, as @keyv/sqlite,
    // @keyv/mysql and @keyv/mongo): @keyv/postgres through the generic keyv driver, on a real server.
    name: 'PostgreSQL through the generic keyv driver (driver keyv, @keyv/postgres)',
    start: async () => {
      const p = await startPostgres();
      return { uri: p.url, stop: p.stop };
    },
    // One connection, as for driver postgresql above: the suite does not await every clear().
    connector: viaKeyv('@keyv/postgres', { readTimeout: 500, writeTimeout: 2000 }, { max: 1, table: 'keyv_generic' }),
  },
  {
    name: 'etcd (driver keyv, @keyv/etcd)',
    start: async () => {
      const e = await startEtcd();
      return { uri: e.address, pid: e.pid, stop: e.stop };
    },
    // etcd's gRPC client: first calls open the channel; a loaded machine needs more than 50 ms.
    connector: viaKeyv('@keyv/etcd', { readTimeout: 500, writeTimeout: 2000 }),
  },
];

const entry = (wire: string, blockNumber = 5): CacheEntry => ({ wire, finality: 'unfinalized', blockNumber, blockHash: HASH, writtenAt: Date.now() });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const c of CASES) {
  describe(`e2e: keyv cache tier on ${c.name}`, function () {
    this.timeout(30_000);
    let server: Awaited<ReturnType<Case['start']>>;
    let conn: KeyvConnector;
    before(async () => {
      server = await c.start();
      conn = await c.connector(server.uri, `kv-${c.name.split(' ')[0]!.toLowerCase()}`);
      await conn.open();
    });
    after(async () => {
      await conn?.close();
      await server?.stop();
    });

    // Run after the connector tests (mocha runs nested suites last): the suite clears the store.
    // It runs on the connector's own adapter (svc's node-redis client, svc's PostgreSQL pool).
    describe('@keyv/test-suite (API and values) on the connector adapter', () => {
      const store = () => {
        // The suite builds a Keyv per test on one adapter, each adding an error listener.
        (conn.store as unknown as { setMaxListeners?: (n: number) => void }).setMaxListeners?.(1000);
        return conn.store;
      };
      keyvApiTests(mochaKeyvTest() as never, Keyv, store);
      keyvValueTests(mochaKeyvTest() as never, Keyv, store);
    });

    it('an entry round-trips with its finality, block number and hash; delete drops it', async () => {
      // The first operation may still be connecting: allow one retry of a read that timed out.
      await conn.set('main/evm:1:5', 'eth_getBalance:aa', entry('"0x10"'), 0).catch(async () => {
        await sleep(300);
        await conn.set('main/evm:1:5', 'eth_getBalance:aa', entry('"0x10"'), 0);
      });
      const got = await conn.get('main/evm:1:5', 'eth_getBalance:aa');
      expect(got).to.include({ wire: '"0x10"', finality: 'unfinalized', blockNumber: 5, blockHash: HASH });
      await conn.delete('main/evm:1:5', 'eth_getBalance:aa');
      expect(await conn.get('main/evm:1:5', 'eth_getBalance:aa')).to.equal(undefined);
    });

    it('a lookup by hash reads the newest partition through the reverse-index pointer', async () => {
      await conn.set('main/evm:1:7', 'eth_getTransactionReceipt:bb', entry('{"blockNumber":"0x7"}', 7), 0, 'main/evm:1');
      expect((await conn.getReverse('main/evm:1', 'eth_getTransactionReceipt:bb'))?.wire).to.equal('{"blockNumber":"0x7"}');
      // Re-mined in a later block: the pointer moves to the latest partition.
      await conn.set('main/evm:1:9', 'eth_getTransactionReceipt:bb', entry('{"blockNumber":"0x9"}', 9), 0, 'main/evm:1');
      expect((await conn.getReverse('main/evm:1', 'eth_getTransactionReceipt:bb'))?.blockNumber).to.equal(9);
      expect(await conn.getReverse('main/evm:2', 'eth_getTransactionReceipt:bb'), 'another network').to.equal(undefined);
    });

    it('a TTL holds (even below the store’s own 1 s granularity) and a long key is stored', async () => {
      await conn.set('main/evm:1:5', 'eth_call:short', entry('"0x1"'), 150);
      expect((await conn.get('main/evm:1:5', 'eth_call:short'))?.wire).to.equal('"0x1"');
      const longPartition = `main/evm:1:${'0x'.padEnd(66, 'f')}-${'0x'.padEnd(66, 'e')}`;
      await conn.set(longPartition, `eth_getLogs:${'c'.repeat(64)}`, entry('[]'), 0);
      expect((await conn.get(longPartition, `eth_getLogs:${'c'.repeat(64)}`))?.wire).to.equal('[]');
      await sleep(200);
      expect(await conn.get('main/evm:1:5', 'eth_call:short'), 'expired').to.equal(undefined);
    });

    if (c.name.startsWith('PostgreSQL')) {
      it("a table in svc's layout before keyv is renamed to <table>_pre_keyv (its entries are misses) and created anew", async () => {
        const client = new pg.Client({ connectionString: server.uri });
        await client.connect();
        try {
          await client.query(
            'CREATE TABLE old_cache (partition_key TEXT, range_key TEXT, value BYTEA, expires_at BIGINT, PRIMARY KEY (partition_key, range_key))',
          );
          await client.query("INSERT INTO old_cache VALUES ('main/evm:1:5', 'eth_call:old', 'x', NULL)");
          const upgraded = new PostgresConnector(
            'kv-upgrade',
            { connectionUri: server.uri, table: 'old_cache', maxConns: 1, purgeInterval: 60_000, readTimeout: 1000, writeTimeout: 2000 },
            logger,
          );
          try {
            expect(await upgraded.get('main/evm:1:5', 'eth_call:old'), 'old entry').to.equal(undefined);
            await upgraded.set('main/evm:1:5', 'eth_call:new', entry('"0x2"'), 0);
            expect((await upgraded.get('main/evm:1:5', 'eth_call:new'))?.wire).to.equal('"0x2"');
          } finally {
            await upgraded.close();
          }
          const kept = await client.query('SELECT count(*)::int AS n FROM old_cache_pre_keyv');
          expect(kept.rows[0].n).to.equal(1);
        } finally {
          await client.end();
        }
      });
    }

    if (c.name.startsWith('memcached')) {
      it('a miss is one memcached round trip: no delete follows it (the adapter’s `{value: undefined, expires: 0}` is a plain miss)', async () => {
        const client = (conn.store as unknown as { client: { delete: (...a: unknown[]) => unknown } }).client;
        const original = client.delete;
        let deletes = 0;
        client.delete = (...a: unknown[]) => {
          deletes++;
          return original.apply(client, a);
        };
        try {
          expect(await conn.get('main/evm:1:5', 'eth_call:never-written')).to.equal(undefined);
          expect(deletes).to.equal(0);
        } finally {
          client.delete = original;
        }
      });
    }

    if (c.name.startsWith('memcached')) {
      it('a memcached that refuses connections: the read fails, and nothing reaches the console (memjs would log `MemJS: Server <host:port> failed`)', async () => {
        const { freePort } = await import('../helpers/ports.ts');
        const uri = `127.0.0.1:${await freePort()}`;
        const dead = await viaKeyv('@keyv/memcache', { readTimeout: 1000 })(uri, 'kv-dead');
        const printed: unknown[] = [];
        const log = console.log;
        console.log = (...a: unknown[]) => void printed.push(a);
        try {
          const err = await dead.get('main/evm:1:5', 'eth_call:x').then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(err).to.be.instanceOf(Error);
          expect(printed, 'console output').to.deep.equal([]);
        } finally {
          console.log = log;
          await dead.close();
        }
      });
    }

    if (c.name.startsWith('Valkey')) {
      it('the Valkey client runs without the namespace set and without an offline queue', () => {
        const store = conn.store as unknown as { opts: { useRedisSets: boolean }; redis: { options: { enableOfflineQueue: boolean } } };
        expect(store.opts.useRedisSets).to.equal(false);
        expect(store.redis.options.enableOfflineQueue).to.equal(false);
      });
    }

    if (c.name.startsWith('memcached') || c.name.startsWith('Valkey') || c.name.startsWith('Redis')) {
      it('a server that stalls (SIGSTOP): a read misses at its deadline; after 3 the breaker skips the tier at once', async () => {
        process.kill(server.pid as number, 'SIGSTOP');
        // A signal stops its target asynchronously: on a busy machine the server could still
        // answer the first read. Wait until the kernel reports it stopped (state T).
        await waitFor(() => stoppedState(server.pid as number), 2000);
        try {
          for (let i = 0; i < 3; i++) {
            const t0 = Date.now();
            const err = await conn.get('main/evm:1:5', `eth_call:stall${i}`).then(
              () => undefined,
              (e: unknown) => e,
            );
            expect(err, 'a stalled read fails').to.be.instanceOf(Error);
            // Not before its deadline (it waited for the stalled server), and not much after it:
            // the deadline is what ends the read, not a socket timeout seconds later.
            expect(Date.now() - t0).to.be.within(READ_DEADLINE_MS - 5, READ_DEADLINE_MS + 1500);
          }
          expect(conn.breaker.state).to.equal('open');
          expect(() => conn.get('main/evm:1:5', 'eth_call:x')).to.throw(StorageUnavailableError);
          expect(() => conn.set('main/evm:1:5', 'eth_call:x', entry('"0x"'), 0)).to.throw(StorageUnavailableError);
        } finally {
          process.kill(server.pid as number, 'SIGCONT');
        }
      });
    }
  });
}

/** Whether a process is stopped (state `T` in /proc/<pid>/stat, after SIGSTOP took effect). */
function stoppedState(pid: number): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'T';
}
