/**
 * End-to-end local and special methods (#9; spec §2.8 #4, §7): `eth_chainId` from
 * config with no upstream call, filter methods served by svc (filters plugin) or, with
 * `filters.enabled: false`, pinned to one upstream with
 * `use-upstream`, and idempotent `eth_sendRawTransaction` against real anvil answers
 * ("transaction already imported" for a pooled duplicate, "nonce too low" for a mined one).
 */
import { expect } from 'chai';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { JsonRpcProvider } from 'ethers';
import type { AnvilHandle } from '../helpers/anvil.ts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { defaultPreset } from '../../presets/default.ts';
import { evmRetriesPlugin } from '../../plugins/evm-retries/index.ts';
import { evmMethodsPlugin } from '../../plugins/evm-methods/index.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
/** anvil dev accounts #2 and #3 (funded; #2 for pooled duplicates, #3 for nonce-too-low). */
const PK2 = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const PK3 = '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6';
const TO = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

function plugins() {
  return [...defaultPreset().filter((p) => !['evm-retries', 'evm-methods'].includes(p.name)), evmRetriesPlugin(), evmMethodsPlugin()];
}

function signTransfer(pk: Hex, nonce: number, value = 1n): Promise<Hex> {
  return privateKeyToAccount(pk).signTransaction({
    chainId: CHAIN,
    type: 'eip1559',
    to: TO,
    value,
    nonce,
    gas: 21000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
  });
}

describe('e2e: eth_chainId is answered locally', function () {
  this.timeout(30_000);
  let fake: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    fake = await startFaultServer({ chainId: CHAIN });
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'fake', endpoint: fake.url, evm: { chainId: CHAIN } }],
          },
        ],
      },
      { plugins: plugins() },
    );
    // Let the proxy's own chain-id probe land before counting.
    await waitFor(() => svc.proxy.projects.get('main')!.upstreams.get('fake')!.state === 'ready');
  });

  after(async () => {
    await svc?.close();
    await fake?.close();
  });

  it('eth_chainId causes no upstream call: single, batch and through ethers', async () => {
    const seen = fake.calls.length;
    const one = await svc.post(`/main/evm/${CHAIN}`, rpcBody('eth_chainId', []));
    expect(one.json.result).to.equal('0x7a69');
    expect(one.headers['x-svc-upstream-attempts']).to.equal('0');
    expect(one.headers).to.not.have.property('x-svc-upstreams');
    const batch = await svc.post(`/main/evm/${CHAIN}`, [rpcBody('eth_chainId', undefined, 1), rpcBody('eth_chainId', [], 2)]);
    expect(batch.json.map((r: { result: string }) => r.result)).to.deep.equal(['0x7a69', '0x7a69']);
    const provider = new JsonRpcProvider(`${svc.url}/main/evm/${CHAIN}`, undefined, { staticNetwork: false, cacheTimeout: -1 });
    try {
      expect((await provider.getNetwork()).chainId).to.equal(BigInt(CHAIN));
    } finally {
      provider.destroy();
    }
    expect(fake.calls.slice(seen)).to.deep.equal([]);
  });

  it('other methods still reach the upstream', async () => {
    const seen = fake.calls.length;
    const res = await svc.post(`/main/evm/${CHAIN}`, rpcBody('eth_blockNumber', []));
    expect(res.json.result).to.match(/^0x/);
    expect(fake.calls.slice(seen).map((c) => c.method)).to.deep.equal(['eth_blockNumber']);
  });
});

describe('e2e: stateful filters and idempotent broadcasts over two anvil nodes', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let a: AnvilHandle;
  let svc: SvcHandle;
  const path = `/main/evm/${CHAIN}`;

  before(async () => {
    cluster = await startAnvilCluster({ chainId: CHAIN, ids: ['a', 'b'] });
    a = cluster.node('a');
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
            upstreams: cluster.upstreams(),
          },
          {
            // Filters served by the nodes, as before the filters plugin: they need one upstream.
            id: 'off',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' }, filters: { enabled: false } }],
            upstreams: cluster.upstreams(),
          },
        ],
      },
      { plugins: plugins() },
    );
    for (const p of ['main', 'off']) {
      const net = svc.proxy.projects.get(p)!.networks.get(`evm:${CHAIN}`)!;
      await waitFor(() => net.upstreams.length === 2 && net.upstreams.every((u) => u.state === 'ready'));
    }
  });

  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });

  describe('stateful filter methods (spec §2.8 #4)', () => {
    it('with two candidate upstreams a block filter is served by svc: its own 16-byte id, then the new block hashes', async () => {
      const created = await svc.post(path, rpcBody('eth_newBlockFilter', []));
      const id = created.json.result as string;
      expect(id).to.match(/^0x[0-9a-f]{32}$/);
      // Reads go to a, first in config order (the selection is not re-evaluated in this suite).
      await a.rpc('evm_mine', []);
      const head = (await a.rpc('eth_getBlockByNumber', ['latest', false])) as { hash: string };
      const changes = await svc.post(path, rpcBody('eth_getFilterChanges', [id]));
      expect(changes.json.result).to.deep.equal([head.hash]);
      expect((await svc.post(path, rpcBody('eth_uninstallFilter', [id]))).json.result).to.equal(true);
      expect((await svc.post(path, rpcBody('eth_getFilterChanges', [id]))).json.error).to.include({ code: -32000, message: 'filter not found' });
    });

    it('§7 ErrNotImplemented — with filters.enabled false and two candidate upstreams a filter method fails with ErrNotImplemented and reaches no node', async () => {
      const res = await svc.post(`/off/evm/${CHAIN}`, rpcBody('eth_newBlockFilter', []));
      expect(res.status).to.equal(200);
      expect(res.json.error.code).to.equal(-32601);
      expect(res.json.error.message).to.contain('use-upstream');
      expect(res.json.error.data).to.include({ code: 'ErrNotImplemented' });
      expect(res.headers['x-svc-upstream-attempts']).to.equal('0');
    });

    it('pinned with X-SVC-Use-Upstream, a block filter works end to end on that node', async () => {
      const pin = { 'x-svc-use-upstream': 'a' };
      const created = await svc.post(path, rpcBody('eth_newBlockFilter', []), pin);
      const id = created.json.result as string;
      expect(id).to.match(/^0x[0-9a-f]+$/);
      expect(created.headers['x-svc-upstream']).to.equal('a');
      await a.rpc('evm_mine', []);
      const changes = await svc.post(path, rpcBody('eth_getFilterChanges', [id]), pin);
      expect(changes.json.result).to.be.an('array').with.length(1);
      expect(changes.json.result[0]).to.match(/^0x[0-9a-f]{64}$/);
      const removed = await svc.post(`${path}?use-upstream=a`, rpcBody('eth_uninstallFilter', [id]));
      expect(removed.json.result).to.equal(true);
    });

    it('a selector matching both upstreams is still ambiguous', async () => {
      const res = await svc.post(path, rpcBody('eth_newFilter', [{}]), { 'x-svc-use-upstream': '*' });
      expect(res.json.error.code).to.equal(-32601);
    });
  });

  describe('eth_sendRawTransaction idempotency', () => {
    it('a transaction the first node already mined ("nonce too low") is found by hash: success with its hash', async () => {
      const raw = await signTransfer(PK3, 0);
      const hash = keccak256(raw);
      expect(await a.rpc('eth_sendRawTransaction', [raw])).to.equal(hash);
      await waitFor(async () => (await a.rpc('eth_getTransactionReceipt', [hash])) !== null);
      const res = await svc.post(path, rpcBody('eth_sendRawTransaction', [raw]));
      expect(res.json).to.not.have.property('error');
      expect(res.json.result).to.equal(hash);
      // the refused broadcast, then the lookup that found it
      expect(res.headers['x-svc-upstreams']).to.match(/^a=primary:exec_revert:\d+;a=primary:success:\d+:won$/);
    });

    it('"nonce too low" for a different transaction with that nonce stays an error (-32003)', async () => {
      const raw = await signTransfer(PK3, 0, 2n);
      const res = await svc.post(path, rpcBody('eth_sendRawTransaction', [raw]));
      expect(res.json.error.code).to.equal(-32003);
      expect(res.json.error.message).to.equal('nonce too low');
    });

    it('a duplicate of a pooled transaction ("transaction already imported") is success with its hash', async () => {
      await cluster.setAutomine('a', false);
      try {
        const raw = await signTransfer(PK2, 0);
        const hash = keccak256(raw);
        expect(await a.rpc('eth_sendRawTransaction', [raw])).to.equal(hash);
        const direct = await a.rpc('eth_sendRawTransaction', [raw]).catch((e: Error) => e);
        expect((direct as Error).message).to.equal('transaction already imported');
        const res = await svc.post(path, rpcBody('eth_sendRawTransaction', [raw]));
        expect(res.json).to.not.have.property('error');
        expect(res.json.result).to.equal(hash);
        // sent twice through svc: the same answer
        const again = await svc.post(path, rpcBody('eth_sendRawTransaction', [raw]));
        expect(again.json.result).to.equal(hash);
      } finally {
        await cluster.setAutomine('a', true);
      }
    });

    it('a fresh transaction is broadcast normally and its hash returned', async () => {
      const nonce = Number.parseInt((await a.rpc('eth_getTransactionCount', [privateKeyToAccount(PK2).address, 'pending'])) as string, 16);
      const raw = await signTransfer(PK2, nonce, 3n);
      const res = await svc.post(path, rpcBody('eth_sendRawTransaction', [raw]));
      expect(res.json.result).to.equal(keccak256(raw));
      expect(res.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won$/);
    });
  });
});
