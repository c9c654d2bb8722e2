/**
 * eRPC's cache `compression` through the real server against anvil and a real Redis, from an
 * eRPC-shaped YAML file (Redis by `addr`, `finality: FINALIZED`, the compression block): an answer
 * above `threshold` is stored zstd-compressed in Redis and served back from it as a HIT; one
 * below it is stored as it is; a hostile value planted in the shared Redis (a frame declaring far
 * more than `maxDecompressedSize`) is a miss answered by the upstream, never inflated.
 * `svc validate --print` shows the Redis rewrite and the printed config validates again.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createClient } from 'redis';
import { parse as parseYaml } from 'yaml';
import { COMPRESSED_PREFIX } from '../../plugins/cache/compression.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

const ERPC_YAML = `
logLevel: error
database:
  evmJsonRpcCache:
    connectors:
      - id: shared
        driver: redis
        redis: { addr: "__REDIS__", db: 0 }
    policies:
      - { network: "*", method: "*", finality: FINALIZED, connector: shared, ttl: 0 }
    compression:
      enabled: true
      algorithm: zstd
      zstdLevel: fastest
      threshold: 1024
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
    upstreams:
      - { id: anvil, type: evm, endpoint: __ANVIL__, evm: { chainId: ${CHAIN}, statePollerInterval: 200ms } }
`;

describe("e2e: eRPC's cache compression on a real Redis", function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let redis: RedisHandle;
  let svc: SvcHandle;
  let client: ReturnType<typeof createClient>;
  let yaml: string;

  /** Every stored cache value in Redis, by key (keyv's JSON wrapper unwrapped). */
  async function stored(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const k of await client.keys('svc:cache:*')) {
      const raw = await client.get(k);
      if (raw === null) continue;
      const v = (JSON.parse(raw) as { value?: unknown }).value;
      if (typeof v === 'string') out.set(k, v);
    }
    return out;
  }

  before(async () => {
    [anvil, redis] = await Promise.all([startAnvil({ chainId: CHAIN }), startRedis()]);
    // anvil finalizes latest - 64: blocks up to 6 are finalized.
    await anvil.rpc('anvil_mine', ['0x46']);
    client = createClient({ url: redis.url });
    await client.connect();
    yaml = ERPC_YAML.replaceAll('__ANVIL__', anvil.url).replaceAll('__REDIS__', redis.url.replace(/^redis:\/\//, ''));
    svc = await startSvc(parseYaml(yaml) as object);
    const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => net.upstreams.every((u) => u.state === 'ready') && networkChainState(svc.proxy, net).highestFinalized >= 6);
  });

  after(async () => {
    await svc?.close();
    await client?.quit();
    await Promise.all([anvil?.stop(), redis?.stop()]);
  });

  it('a block above the threshold is stored compressed and served back from Redis as a HIT', async () => {
    const call = rpcBody('eth_getBlockByNumber', ['0x2', true]);
    const first = await svc.post(PATH, call);
    expect(first.status).to.equal(200);
    expect(first.text.length).to.be.greaterThan(1024);
    let compressed: string | undefined;
    await waitFor(async () => {
      compressed = [...(await stored()).values()].find((v) => v.startsWith(COMPRESSED_PREFIX));
      return compressed !== undefined;
    });
    expect(compressed!.length).to.be.lessThan(first.text.length);
    const again = await svc.post(PATH, call);
    expect(again.headers['x-svc-cache']).to.equal('HIT');
    expect(again.json.result).to.deep.equal(first.json.result);
  });

  it('an answer below the threshold is stored as it is', async () => {
    // anvil's first dev account: a non-empty balance (empty answers are not cached by default).
    const call = rpcBody('eth_getBalance', ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', '0x3']);
    const first = await svc.post(PATH, call);
    await waitFor(async () => [...(await stored()).values()].some((v) => v.startsWith('{') && v.endsWith(`\n"${first.json.result}"`)));
    expect((await svc.post(PATH, call)).headers['x-svc-cache']).to.equal('HIT');
  });

  it('a planted frame declaring more than maxDecompressedSize is a miss: the upstream answers, svc stays up', async () => {
    const call = rpcBody('eth_getBlockByNumber', ['0x4', true]);
    await svc.post(PATH, call);
    const compressedKeys = async () => [...(await stored()).entries()].filter(([, v]) => v.startsWith(COMPRESSED_PREFIX)).map(([k]) => k);
    await waitFor(async () => (await compressedKeys()).length >= 2);
    const keys = await compressedKeys();
    // Every compressed entry now declares 4 GiB (an 8-byte Frame_Content_Size), with junk after it.
    const bomb = COMPRESSED_PREFIX + Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 2, 3, 4]).toString('base64');
    for (const k of keys) {
      const raw = JSON.parse((await client.get(k)) as string) as Record<string, unknown>;
      await client.set(k, JSON.stringify({ ...raw, value: bomb }));
    }
    const r = await svc.post(PATH, call);
    expect(r.status).to.equal(200);
    expect(r.headers['x-svc-cache']).to.not.equal('HIT');
    expect(r.json.result.number).to.equal('0x4');
  });

  it('svc validate --print rewrites the Redis addr and keeps the compression block; the printed config validates again', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-erpc-compression-'));
    try {
      const run = (args: string[]) => runSvcCli(args, dir);
      writeFileSync(join(dir, 'erpc.yaml'), yaml);
      const r = await run(['validate', '--config', 'erpc.yaml', '--print']);
      expect(r.code, r.err).to.equal(0);
      expect(r.out).to.include('database.evmJsonRpcCache.connectors[0].redis.addr');
      const printed = parseYaml(r.out) as { database: { evmJsonRpcCache: { compression: Record<string, unknown> } } };
      expect(printed.database.evmJsonRpcCache.compression).to.deep.equal({ enabled: true, algorithm: 'zstd', zstdLevel: 'fastest', threshold: 1024 });
      writeFileSync(join(dir, 'printed.yaml'), r.out);
      const again = await run(['validate', '--config', 'printed.yaml', '--print']);
      expect(again.code, again.err).to.equal(0);
      expect(again.out).to.include("# no rewrite: the config is in svc's shape");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
