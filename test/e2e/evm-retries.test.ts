/**
 * End-to-end `retry-empty` and `retry-pending` (spec §2.8 #1 #2, §6, #9) over two
 * real anvil nodes serving one network. They are independent chains with the same chain id:
 * a transaction sent to one never reaches the other, which is exactly "mined on one node and
 * not yet on another". The lacking node comes first in config order.
 */
import { expect } from 'chai';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { AnvilHandle } from '../helpers/anvil.ts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { defaultPreset } from '../../presets/default.ts';
import { evmRetriesPlugin } from '../../plugins/evm-retries/index.ts';
import { evmMethodsPlugin } from '../../plugins/evm-methods/index.ts';
import { PK0, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
/** anvil dev account #1's key: used only by the pending scenario. */
const PK1 = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const TO = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';

/** A signed EIP-1559 transfer. */
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

/** Value of one sample of `svc_upstream_request_retries_total` with the given reason (0 when absent). */
async function retriesMetric(svc: SvcHandle, reason: string, method: string): Promise<number> {
  const text = await (await fetch(svc.metricsUrl!)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('svc_upstream_request_retries_total{') && l.includes(`reason="${reason}"`) && l.includes(`category="${method}"`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

describe('e2e: retry-empty and retry-pending across two anvil nodes', function () {
  this.timeout(60_000);

  let cluster: AnvilCluster;
  let lacking: AnvilHandle;
  let having: AnvilHandle;
  let svc: SvcHandle;
  const path = `/main/evm/${CHAIN}`;

  before(async () => {
    cluster = await startAnvilCluster({ chainId: CHAIN, ids: ['lacking', 'having'] });
    lacking = cluster.node('lacking');
    having = cluster.node('having');
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            // The policy re-evaluates every hour: the order stays config order during the suite.
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
            upstreams: cluster.upstreams(),
          },
        ],
      },
      { plugins: [...defaultPreset().filter((p) => !['evm-retries', 'evm-methods'].includes(p.name)), evmRetriesPlugin(), evmMethodsPlugin()] },
    );
    const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => net.upstreams.length === 2 && net.upstreams.every((u) => u.state === 'ready'));
    expect(net.upstreams.map((u) => u.id)).to.deep.equal(['lacking', 'having']);
  });

  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });

  describe('retry-empty: a transaction mined on one node and not on the other', () => {
    let hash: Hex;

    before(async () => {
      const raw = await signTransfer(PK0, 0);
      hash = (await having.rpc('eth_sendRawTransaction', [raw])) as Hex;
      expect(hash).to.equal(keccak256(raw));
      await waitFor(async () => (await having.rpc('eth_getTransactionReceipt', [hash])) !== null);
      expect(await lacking.rpc('eth_getTransactionReceipt', [hash])).to.equal(null);
    });

    it('without the directive the first node’s null comes back', async () => {
      const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]));
      expect(res.status).to.equal(200);
      expect(res.json.result).to.equal(null);
      expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:success:\d+:won$/);
    });

    it('§2.8 #1 — with X-SVC-Retry-Empty: true the receipt is found on the second node; the trace shows the first, then the second', async () => {
      const before = await retriesMetric(svc, 'empty_result', 'eth_getTransactionReceipt');
      const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-empty': 'true' });
      expect(res.status).to.equal(200);
      expect(res.json.result).to.include({ transactionHash: hash, status: '0x1' });
      expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:error:\d+;having=sweep:success:\d+:won$/);
      expect(res.headers['x-svc-upstream']).to.equal('having');
      expect(await retriesMetric(svc, 'empty_result', 'eth_getTransactionReceipt')).to.equal(before + 1);
    });

    it('the query parameter retry-empty=true works the same for eth_getTransactionByHash', async () => {
      const res = await svc.post(`${path}?retry-empty=true`, rpcBody('eth_getTransactionByHash', [hash]));
      expect(res.json.result).to.include({ hash });
      expect(res.json.result.blockNumber).to.match(/^0x[0-9a-f]+$/);
      expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:error:\d+;having=sweep:success:\d+:won$/);
    });

    it('a block only the second node has mined is found with retry-empty', async () => {
      await cluster.mine('having', 5);
      const head = await cluster.head('having');
      expect(head).to.be.greaterThan(await cluster.head('lacking'));
      const number = `0x${head.toString(16)}`;
      const plain = await svc.post(path, rpcBody('eth_getBlockByNumber', [number, false]));
      expect(plain.json.result).to.equal(null);
      const res = await svc.post(path, rpcBody('eth_getBlockByNumber', [number, false]), { 'x-svc-retry-empty': 'true' });
      expect(res.json.result).to.include({ number });
    });

    it('when no node has the transaction the null is the answer, not an error', async () => {
      const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [`0x${'12'.repeat(32)}`]), { 'x-svc-retry-empty': 'true' });
      expect(res.status).to.equal(200);
      expect(res.json).to.not.have.property('error');
      expect(res.json.result).to.equal(null);
      expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:error:\d+;having=sweep:success:\d+:won$/);
    });
  });

  describe('retry-pending: a transaction pending on one node and mined on the other', () => {
    let hash: Hex;

    before(async () => {
      // The same signed transaction on both nodes: the first keeps it in its pool, the second mines it.
      await cluster.setAutomine('lacking', false);
      const raw = await signTransfer(PK1, 0);
      hash = keccak256(raw);
      expect(await lacking.rpc('eth_sendRawTransaction', [raw])).to.equal(hash);
      expect(await having.rpc('eth_sendRawTransaction', [raw])).to.equal(hash);
      await waitFor(async () => (await having.rpc('eth_getTransactionReceipt', [hash])) !== null);
      const pending = (await lacking.rpc('eth_getTransactionByHash', [hash])) as { blockNumber: string | null };
      expect(pending.blockNumber).to.equal(null);
    });

    it('without the directive the pending transaction (blockNumber null) comes back', async () => {
      const res = await svc.post(path, rpcBody('eth_getTransactionByHash', [hash]));
      expect(res.json.result).to.include({ hash, blockNumber: null });
      expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:success:\d+:won$/);
    });

    it('§2.8 #2 — with X-SVC-Retry-Pending: true the mined version is returned; one pending_tx retry is counted', async () => {
      const before = await retriesMetric(svc, 'pending_tx', 'eth_getTransactionByHash');
      const res = await svc.post(path, rpcBody('eth_getTransactionByHash', [hash]), { 'x-svc-retry-pending': 'true' });
      expect(res.json.result.hash).to.equal(hash);
      expect(res.json.result.blockNumber).to.match(/^0x[0-9a-f]+$/);
      expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:error:\d+;having=sweep:success:\d+:won$/);
      expect(await retriesMetric(svc, 'pending_tx', 'eth_getTransactionByHash')).to.equal(before + 1);
    });

    it('directive values other than `true` do not turn it on (spec §2.8 boolean parsing)', async () => {
      // Skipping the cache: the mined version an earlier call fetched is cached (a young anvil chain's blocks are unfinalized, not unknown).
      const res = await svc.post(path, rpcBody('eth_getTransactionByHash', [hash]), { 'x-svc-retry-pending': '1', 'x-svc-skip-cache-read': 'true' });
      expect(res.json.result.blockNumber).to.equal(null);
    });

    it('the pending node’s receipt is null: retry-empty finds the mined receipt', async () => {
      const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-pending': 'true', 'x-svc-retry-empty': 'true' });
      expect(res.json.result).to.include({ transactionHash: hash, status: '0x1' });
    });

    it('in a batch every element gets the HTTP request’s directives and is retried', async () => {
      const res = await svc.post(path, [rpcBody('eth_getTransactionByHash', [hash], 1), rpcBody('eth_getTransactionReceipt', [hash], 2)], {
        'x-svc-retry-pending': 'true',
        'x-svc-retry-empty': 'true',
      });
      expect(res.status).to.equal(200);
      expect(res.json[0].result.blockNumber).to.match(/^0x[0-9a-f]+$/);
      expect(res.json[1].result.transactionHash).to.equal(hash);
    });
  });
});

describe('e2e: the retry-empty cap over three anvil nodes (failsafe[].retry.emptyResultMaxAttempts)', function () {
  this.timeout(60_000);

  let cluster: AnvilCluster;
  const svcs: SvcHandle[] = [];
  let hash: Hex;
  const path = `/main/evm/${CHAIN}`;

  /** An svc over the three nodes; `failsafe` is the network's failsafe config, if any. */
  async function start(failsafe?: unknown): Promise<SvcHandle> {
    const network: Record<string, unknown> = { architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } };
    if (failsafe !== undefined) network.failsafe = failsafe;
    const svc = await startSvc(
      { logLevel: 'error', projects: [{ id: 'main', networks: [network], upstreams: cluster.upstreams() }] },
      { plugins: [...defaultPreset().filter((p) => !['evm-retries', 'evm-methods'].includes(p.name)), evmRetriesPlugin(), evmMethodsPlugin()] },
    );
    svcs.push(svc);
    const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => net.upstreams.length === 3);
    return svc;
  }

  before(async () => {
    cluster = await startAnvilCluster({ chainId: CHAIN, ids: ['n0', 'n1', 'n2'] });
    // Only the last node in config order ever sees the transaction.
    const raw = await signTransfer(PK0, 0);
    hash = (await cluster.node('n2').rpc('eth_sendRawTransaction', [raw])) as Hex;
    await waitFor(async () => (await cluster.node('n2').rpc('eth_getTransactionReceipt', [hash])) !== null);
  });

  after(async () => {
    await Promise.all(svcs.map((s) => s.close()));
    await cluster?.stop();
  });

  it('with the default cap of 2 tries the third node is never asked and the null is the answer', async () => {
    const svc = await start();
    const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-empty': 'true' });
    expect(res.json.result).to.equal(null);
    expect(res.headers['x-svc-upstreams']).to.match(/^n0=primary:error:\d+;n1=sweep:success:\d+:won$/);
  });

  it('§6 svc_upstream_request_retries_total — emptyResultMaxAttempts: 3 reaches the third node (no retry policy otherwise)', async () => {
    const svc = await start({ retry: { maxAttempts: 1, emptyResultMaxAttempts: 3 } });
    const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-empty': 'true' });
    expect(res.json.result).to.include({ transactionHash: hash });
    expect(res.headers['x-svc-upstreams']).to.match(/^n0=primary:error:\d+;n1=sweep:error:\d+;n2=sweep:success:\d+:won$/);
    expect(await retriesMetric(svc, 'empty_result', 'eth_getTransactionReceipt')).to.equal(2);
  });

  it('§2.8 ¶2 — directiveDefaults.retryEmpty in config turns it on without a header', async () => {
    const svc = await start({ retry: { maxAttempts: 1, emptyResultMaxAttempts: 3 }, directiveDefaults: { retryEmpty: true } });
    const res = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]));
    expect(res.json.result).to.include({ transactionHash: hash });
    // and a client can still turn it off for one call
    const off = await svc.post(path, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-empty': 'false', 'x-svc-skip-cache-read': 'true' });
    expect(off.json.result).to.equal(null);
  });
});
