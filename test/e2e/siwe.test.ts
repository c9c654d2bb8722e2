/**
 * SIWE messages accepted once, in their window, on their domain and on the chain of the URL
 *, on a real server in front of anvil (chain 31337). Messages are built with
 * viem's `createSiweMessage` and signed by a viem local account. Used messages are recorded in
 * memory, in a real Redis (the store of the project's API keys: the same tier) and in a real
 * PostgreSQL (`siwe.nonces`); a message used on one svc is refused by a second svc process that
 * shares the Redis.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createSiweMessage } from 'viem/siwe';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import pg from 'pg';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, NO_CACHE, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { nonceId } from '../../plugins/auth/siwe-nonces.ts';

const DOMAIN = 'dapp.test';
const call = (id: number | string = 1) => ({ jsonrpc: '2.0', id, method: 'eth_blockNumber', params: [] });

describe('e2e: SIWE accepted once, in its window, on its domain and chain', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;
  let postgres: PostgresHandle;
  let svc: SvcHandle;
  let second: SvcProcess | undefined;
  let dir: string;
  const account = privateKeyToAccount(generatePrivateKey());
  let seq = 0;

  const siwe = (extra: object = {}) => ({ type: 'siwe', siwe: { allowedDomains: [DOMAIN], ...extra } });
  const projects = () => [
    {
      id: 'mem',
      networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
      upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
      auth: { strategies: [siwe()] },
    },
    {
      id: 'red',
      networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
      upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
      // No siwe.nonces: used messages go to the API keys' store (the same tier).
      auth: { strategies: [siwe(), { type: 'database', connector: { id: 'keys', driver: 'redis', redis: { uri: redis.url, keyPrefix: 'siwe_e2e:' } } }] },
    },
    {
      id: 'pg',
      networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
      upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
      auth: { strategies: [siwe({ nonces: { id: 'pgnonces', driver: 'postgresql', postgresql: { connectionUri: postgres.url } } })] },
    },
  ];
  const message = (over: Partial<Parameters<typeof createSiweMessage>[0]> = {}) =>
    createSiweMessage({
      address: account.address,
      chainId: anvil.chainId,
      domain: DOMAIN,
      nonce: `e2e${Date.now()}n${++seq}`,
      uri: `https://${DOMAIN}/login`,
      version: '1',
      issuedAt: new Date(),
      ...over,
    });
  const headers = async (m: string) => ({
    'content-type': 'application/json',
    'x-siwe-message': Buffer.from(m).toString('base64'),
    'x-siwe-signature': await account.signMessage({ message: m }),
  });
  const send = async (base: string, project: string, m: string, body: unknown = call()): Promise<SvcResponse> =>
    httpRequest('POST', `${base}/${project}/evm/${anvil.chainId}`, JSON.stringify(body), await headers(m));
  const refused = (r: SvcResponse, why: string | RegExp) => {
    expect(r.status, r.text).to.equal(401);
    expect(r.json.error.code).to.equal(-32016);
    if (typeof why === 'string') expect(r.json.error.message).to.equal(`unauthorized: ${why}`);
    else expect(r.json.error.message).to.match(why);
  };

  before(async () => {
    [anvil, redis, postgres] = await Promise.all([startAnvil(), startRedis(), startPostgres(), ensureBuilt()]);
    svc = await startSvc({ ...NO_CACHE, metrics: { enabled: false }, projects: projects() });
    dir = mkdtempSync(join(tmpdir(), 'svc-siwe-'));
  });
  after(async () => {
    await second?.stop();
    await svc?.close();
    await Promise.all([anvil?.stop(), redis?.stop(), postgres?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const project of ['mem', 'red', 'pg']) {
    it(`${project}: the first use passes, a replay of the same message is refused`, async () => {
      const m = message();
      const first = await send(svc.url, project, m);
      expect(first.status, first.text).to.equal(200);
      expect(first.json.result).to.match(/^0x/);
      refused(await send(svc.url, project, m), 'SIWE message already used');
    });
  }

  it('one message authenticates every call of one HTTP request (a batch), and no other request', async () => {
    const m = message();
    const batch = await send(svc.url, 'mem', m, [call(1), call(2), call(3)]);
    expect(batch.status).to.equal(200);
    expect(batch.json.map((a: { result: string }) => a.result))
      .to.have.length(3)
      .and.satisfy((rs: string[]) => rs.every((x) => /^0x/.test(x)));
    refused(await send(svc.url, 'mem', m), 'SIWE message already used');
  });

  it('a message for chain 1 is refused on /evm/31337', async () => {
    refused(await send(svc.url, 'mem', message({ chainId: 1 })), `SIWE message is for chain 1, this network is ${anvil.chainId}`);
  });

  it('an expired message, one whose notBefore is in the future, one for another domain are refused', async () => {
    refused(
      await send(svc.url, 'mem', message({ issuedAt: new Date(Date.now() - 3_600_000), expirationTime: new Date(Date.now() - 600_000) })),
      'SIWE message expired',
    );
    refused(await send(svc.url, 'mem', message({ notBefore: new Date(Date.now() + 3_600_000) })), 'SIWE message is not valid yet (notBefore is in the future)');
    refused(await send(svc.url, 'mem', message({ domain: 'evil.test' })), 'SIWE message domain "evil.test" is not allowed');
  });

  it('PostgreSQL: the first use is a row of svc_siwe_nonces with its expiry', async () => {
    const nonce = `pgrow${Date.now()}`;
    const expiry = Date.now() + 300_000;
    expect((await send(svc.url, 'pg', message({ nonce, expirationTime: new Date(expiry) }))).status).to.equal(200);
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      const r = await client.query<{ expires_at: string }>('SELECT expires_at FROM svc_siwe_nonces WHERE id = $1', [nonceId(DOMAIN, account.address, nonce)]);
      expect(r.rows).to.have.length(1);
      // Recorded until expirationTime plus the default 1 min clock tolerance (the store's clock
      // reads a few ms after the check's).
      expect(Number(r.rows[0]?.expires_at)).to.be.within(expiry + 60_000, expiry + 60_000 + 2000);
    } finally {
      await client.end();
    }
  });

  it('Redis: a message used on one svc is refused by a second svc process sharing the Redis (both ways)', async () => {
    second = await spawnSvc(dir, 'second', { ...NO_CACHE, metrics: { enabled: false }, projects: projects() });
    const m1 = message();
    expect((await send(svc.url, 'red', m1)).status).to.equal(200);
    refused(await send(second.url, 'red', m1), 'SIWE message already used');
    const m2 = message();
    expect((await send(second.url, 'red', m2)).status).to.equal(200);
    refused(await send(svc.url, 'red', m2), 'SIWE message already used');
    // Per process only: the memory store lets the other replica accept it once (documented).
    const m3 = message();
    expect((await send(svc.url, 'mem', m3)).status).to.equal(200);
    expect((await send(second.url, 'mem', m3)).status).to.equal(200);
  });

  it('a nonce store that cannot be reached refuses at once (fail closed, within the 500 ms deadline)', async () => {
    const down = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: false },
      projects: [
        {
          id: 'down',
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
          auth: { strategies: [siwe({ nonces: { id: 'gone', driver: 'redis', redis: { uri: 'redis://127.0.0.1:1' } } })] },
        },
      ],
    });
    try {
      const started = Date.now();
      refused(await send(down.url, 'down', message()), 'SIWE nonce store unavailable: message refused');
      expect(Date.now() - started).to.be.below(1500);
    } finally {
      await down.close();
    }
  });
});
