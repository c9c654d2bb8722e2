/**
 * Smoke test of the storage-server helpers: a real redis-server and a real PostgreSQL start,
 * answer a SET/GET and a `select 1`, and are gone after stop(). A server that cannot start
 * fails the suite (the before hook throws); it is never skipped.
 */
import { expect } from 'chai';
import { connect } from 'node:net';
import pg from 'pg';
import { createClient } from 'redis';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';

/** Resolves true when something accepts a TCP connection on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

describe('e2e: storage servers for tests (redis-server, postgres)', function () {
  this.timeout(20_000);

  let redis: RedisHandle | undefined;
  let postgres: PostgresHandle | undefined;

  before(async () => {
    // Both at once; if either fails, stop the other and fail the suite.
    const [r, p] = await Promise.allSettled([startRedis(), startPostgres()]);
    if (r.status === 'fulfilled') redis = r.value;
    if (p.status === 'fulfilled') postgres = p.value;
    const failed = [r, p].filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed.length) {
      await Promise.all([redis?.stop(), postgres?.stop()]);
      throw failed[0]!.reason;
    }
  });

  after(async () => {
    await Promise.all([redis?.stop(), postgres?.stop()]);
  });

  it('redis: SET then GET through the redis client', async () => {
    const client = createClient({ url: redis!.url });
    client.on('error', () => {
      /* surfaced by the commands */
    });
    await client.connect();
    try {
      expect(await client.set('svc:smoke', 'hello')).to.equal('OK');
      expect(await client.get('svc:smoke')).to.equal('hello');
    } finally {
      client.destroy();
    }
  });

  it('postgres: select 1 through pg', async () => {
    const client = new pg.Client({ connectionString: postgres!.url });
    await client.connect();
    try {
      const r = await client.query<{ one: number }>('select 1 as one');
      expect(r.rows).to.deep.equal([{ one: 1 }]);
    } finally {
      await client.end();
    }
  });

  it('stop() ends both servers (their ports refuse afterwards) and may be called twice', async () => {
    const ports = [redis!.port, postgres!.port];
    expect(await Promise.all(ports.map(accepts))).to.deep.equal([true, true]);
    await Promise.all([redis!.stop(), postgres!.stop()]);
    await Promise.all([redis!.stop(), postgres!.stop()]);
    expect(await Promise.all(ports.map(accepts))).to.deep.equal([false, false]);
  });
});
