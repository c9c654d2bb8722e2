/**
 * Reorg-aware caching in every tier (spec §2.8 #3): once svc's state poller has seen a reorg
 * (one poll interval), no answer from the abandoned chain is served from the memory, Redis or
 * PostgreSQL tier — blocks by number, state at a number, receipts by hash, logs in a range, the
 * `latest` block — including entries another replica wrote, and on a replica that started after
 * the reorg and so never saw the old chain. Real anvil (`anvil_reorg`), real Redis and PostgreSQL.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { chainStateOf, type NetworkChainState } from '../../plugins/evm-state/chain.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const DEV0 = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const DEV1 = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
/** Runtime code that emits one empty LOG0 and stops. */
const LOGGER = '0x00000000000000000000000000000000000010c0';
const hex = (n: number) => `0x${n.toString(16)}`;

function config(anvilUrl: string, connector: Record<string, unknown> | undefined): object {
  const id = connector?.id as string | undefined;
  return {
    logLevel: 'error',
    metrics: { enabled: false },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
        upstreams: [{ id: 'anvil', endpoint: anvilUrl, evm: { chainId: CHAIN, statePollerInterval: '100ms' } }],
      },
    ],
    ...(connector && id
      ? {
          database: {
            evmJsonRpcCache: {
              connectors: [connector],
              policies: [
                { connector: id, finality: 'finalized' },
                { connector: id, finality: 'unfinalized', ttl: '60s' },
                { connector: id, finality: 'realtime', ttl: '60s' },
              ],
            },
          },
        }
      : {}),
  };
}

const stateOf = (svc: SvcHandle): NetworkChainState => chainStateOf(svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!);

/** The reads whose cached answers must not outlive the reorg, by method class. */
function reads(n: number, tx: string): Array<[string, string, unknown[]]> {
  return [
    ['block by number', 'eth_getBlockByNumber', [hex(n), false]],
    ['state at a number', 'eth_getBalance', [LOGGER, hex(n + 1)]],
    ['receipt by hash', 'eth_getTransactionReceipt', [tx]],
    ['logs in a range', 'eth_getLogs', [{ fromBlock: hex(n), toBlock: hex(n + 1), address: LOGGER }]],
    ['latest block', 'eth_getBlockByNumber', ['latest', false]],
  ];
}

let id = 0;
const call = (svc: SvcHandle, method: string, params: unknown[]) => svc.post(PATH, { jsonrpc: '2.0', id: ++id, method, params });

/** Reads until it is a cache hit (writes follow answers asynchronously). */
async function cached(svc: SvcHandle, method: string, params: unknown[]): Promise<unknown> {
  let result: unknown;
  await waitFor(async () => {
    const r = await call(svc, method, params);
    result = r.json.result;
    return r.headers['x-svc-cache'] === 'HIT';
  }, 5000);
  return result;
}

for (const tier of ['memory', 'redis', 'postgresql'] as const) {
  describe(`e2e: no answer from an abandoned chain after a reorg, ${tier} tier`, function () {
    this.timeout(60_000);
    let anvil: AnvilHandle;
    let redis: RedisHandle | undefined;
    let pg: PostgresHandle | undefined;
    let writer: SvcHandle;
    let late: SvcHandle | undefined;
    let connector: Record<string, unknown> | undefined;

    before(async () => {
      anvil = await startAnvil({ chainId: CHAIN });
      if (tier === 'redis') {
        redis = await startRedis();
        connector = { id: 'shared', driver: 'redis', redis: { uri: redis.url } };
      } else if (tier === 'postgresql') {
        pg = await startPostgres();
        connector = { id: 'shared', driver: 'postgresql', postgresql: { connectionUri: pg.url, table: 'reorg_cache' } };
      }
      writer = await startSvc(config(anvil.url, connector));
    });
    after(async () => {
      await late?.close();
      await writer?.close();
      await anvil?.stop();
      await redis?.stop();
      await pg?.stop();
    });

    it('blocks, state, receipts, logs and the latest block all follow the new chain after one poll', async () => {
      // anvil keeps `finalized` 64 blocks behind latest: everything read below is unfinalized.
      await anvil.rpc('anvil_mine', [hex(120)]);
      await anvil.rpc('anvil_setCode', [LOGGER, '0x5f5fa000']);
      const tx = (await anvil.rpc('eth_sendTransaction', [{ from: DEV0, to: LOGGER, value: '0x7' }])) as string;
      let mined: { blockNumber: string } | null = null;
      await waitFor(async () => (mined = (await anvil.rpc('eth_getTransactionReceipt', [tx])) as { blockNumber: string } | null) !== null, 5000);
      const n = Number.parseInt(mined!.blockNumber, 16);
      await anvil.rpc('anvil_mine', ['0x2']);
      const head = n + 2;
      const st = stateOf(writer);
      await waitFor(() => st.highestLatest >= head && st.highestFinalized > 0, 10_000);

      const before = new Map<string, unknown>();
      for (const [what, method, params] of reads(n, tx)) before.set(what, await cached(writer, method, params));
      expect((before.get('receipt by hash') as { blockNumber: string }).blockNumber).to.equal(hex(n));
      expect(before.get('logs in a range')).to.have.length(1);

      // Replace the top four blocks (n-1 .. n+2) at the same height; the new chain sends 9 wei, not 7.
      const reorgsBefore = st.lastReorg?.at ?? 0;
      await anvil.rpc('anvil_reorg', [4, [[{ from: DEV1, to: LOGGER, value: '0x9' }, 0]]]);
      await waitFor(() => (st.lastReorg?.at ?? 0) > reorgsBefore, 5000);

      const replicas: Array<[string, SvcHandle]> = [['the writer', writer]];
      if (connector) {
        // A replica that starts after the reorg never saw the old chain: the shared tier's
        // entries, written before it watched, must not be vouched for.
        late = await startSvc(config(anvil.url, connector));
        const lst = stateOf(late);
        await waitFor(() => lst.highestLatest >= head && lst.highestFinalized > 0, 10_000);
        replicas.push(['a replica started after the reorg', late]);
      }
      const stale: string[] = [];
      for (const [who, svc] of replicas) {
        for (const [what, method, params] of reads(n, tx)) {
          const direct = await anvil.rpc(method, params);
          expect(direct, `anvil: ${what} changed`).to.not.deep.equal(before.get(what));
          const got = await call(svc, method, params);
          if (JSON.stringify(got.json.result) !== JSON.stringify(direct)) stale.push(`${who}: ${what} (X-SVC-Cache ${got.headers['x-svc-cache']})`);
        }
      }
      expect(stale, 'answers from the abandoned chain').to.deep.equal([]);
    });
  });
}
