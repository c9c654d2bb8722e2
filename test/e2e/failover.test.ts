/**
 * End-to-end failover: in front of anvil sit, in config order, an upstream that refuses
 * connections and one that answers garbage. Every client call still succeeds, and the
 * diagnostic headers show the failed attempts; the refusing one is ordered last from its first
 * refused connection. A revert, by contrast, is never retried.
 */
import { expect } from 'chai';
import { JsonRpcProvider, Wallet, isCallException } from 'ethers';
import { createPublicClient, http, type Chain, type HttpTransport, type PublicClient } from 'viem';
import { foundry } from 'viem/chains';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { freePort } from '../helpers/ports.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { selectionState } from '../../plugins/selection/index.ts';
import { ADDR0, ADDR1, CONST_INIT, CONST_WORD, DEV_BALANCE, NOPE_REVERT_DATA, PK0, REVERT_INIT, deployDirect, rpcBody } from './fixtures.ts';

/** `<id>=<reason>:<outcome>:<ms>[:won]` segments of `X-SVC-Upstreams`. */
function parseTrace(header: string | undefined): { id: string; reason: string; outcome: string; ms: number; won: boolean }[] {
  if (!header) return [];
  return header.split(';').map((seg) => {
    const eq = seg.lastIndexOf('=');
    const [reason, outcome, ms, won] = seg.slice(eq + 1).split(':');
    return { id: seg.slice(0, eq), reason: reason!, outcome: outcome!, ms: Number(ms), won: won === 'won' };
  });
}

describe('e2e: failover past a refusing and a garbage upstream to anvil', function () {
  this.timeout(30_000);

  let anvil: AnvilHandle;
  let garbage: FaultServer;
  let deadPort: number;
  let svc: SvcHandle;
  let rpcUrl: string;
  let provider: JsonRpcProvider;
  let constAddr: string;
  let revertAddr: string;

  before(async () => {
    anvil = await startAnvil();
    // eth_chainId is scripted too, so even svc's own chain-id probes meet the garbage.
    garbage = await startFaultServer({ scriptChainId: true });
    garbage.setDefault({ kind: 'garbage' });
    deadPort = await freePort();
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [
            { id: 'dead', endpoint: `http://127.0.0.1:${deadPort}`, evm: { chainId: 31337 } },
            { id: 'garbage', endpoint: garbage.url, evm: { chainId: 31337 } },
            { id: 'anvil', endpoint: anvil.url, evm: { chainId: 31337 } },
          ],
        },
      ],
    });
    rpcUrl = `${svc.url}/main/evm/31337`;
    provider = new JsonRpcProvider(rpcUrl, 31337, { cacheTimeout: -1 });
    constAddr = await deployDirect(anvil, CONST_INIT);
    revertAddr = await deployDirect(anvil, REVERT_INIT);
  });

  after(async () => {
    provider?.destroy();
    await svc?.close();
    await garbage?.close();
    await anvil?.stop();
  });

  it('serves all three upstreams in config order', () => {
    const net = svc.proxy.projects.get('main')!.networks.get('evm:31337')!;
    expect(net.upstreams.map((u) => u.id)).to.deep.equal(['dead', 'garbage', 'anvil']);
  });

  it('the refusing upstream is ordered last once a connection to it was refused (its first state poll): the trace shows the garbage attempt, then the winner', async () => {
    await waitFor(() => selectionState(svc.proxy, 'main', 'evm:31337')?.order.at(-1) === 'dead', 10_000);
    const res = await svc.post('/main/evm/31337', rpcBody('eth_blockNumber', []));
    expect(res.status).to.equal(200);
    expect(res.json.result).to.match(/^0x[0-9a-f]+$/);
    expect(res.headers['x-svc-upstreams']).to.match(/^garbage=primary:error:\d+;anvil=sweep:success:\d+:won$/);
    expect(res.headers['x-svc-upstream-attempts']).to.equal('2');
    expect(res.headers['x-svc-upstream']).to.equal('anvil');
    const trace = parseTrace(res.headers['x-svc-upstreams']);
    expect(trace.map((t) => t.id)).to.deep.equal(['garbage', 'anvil']);
    expect(trace.filter((t) => t.won).map((t) => t.id)).to.deep.equal(['anvil']);
  });

  it('net_version (raw call) still succeeds past both', async () => {
    const res = await svc.post('/main/evm/31337', rpcBody('net_version', [], 'nv'));
    expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 'nv', result: '31337' });
    expect(res.headers['x-svc-upstreams']).to.match(/^garbage=primary:error:\d+;anvil=sweep:success:\d+:won$/);
    expect(garbage.calls.some((c) => c.method === 'net_version')).to.equal(true);
  });

  it('eth_chainId (raw call) is answered from config: no upstream attempt, so no failover needed', async () => {
    const res = await svc.post('/main/evm/31337', rpcBody('eth_chainId', [], 'cid'));
    expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 'cid', result: '0x7a69' });
    expect(res.headers['x-svc-upstream-attempts']).to.equal('0');
    expect(res.headers['x-svc-upstream']).to.equal(undefined);
    expect(res.headers['x-svc-upstreams']).to.equal(undefined);
  });

  it('ethers: chain id, block number, balance, eth_call (batched)', async () => {
    expect((await provider.getNetwork()).chainId).to.equal(31337n);
    const [bn, bal, word] = await Promise.all([provider.getBlockNumber(), provider.getBalance(ADDR1), provider.call({ to: constAddr, data: '0x' })]);
    expect(bn).to.equal(Number.parseInt((await anvil.rpc('eth_blockNumber')) as string, 16));
    expect(bal).to.equal(DEV_BALANCE);
    expect(word).to.equal(CONST_WORD);
  });

  it('ethers: full block with transactions', async () => {
    const block = await provider.getBlock(1, true);
    expect(block!.prefetchedTransactions.length).to.equal(1);
    expect(block!.prefetchedTransactions[0]!.from).to.equal(ADDR0);
  });

  it('ethers: signed transaction sent through svc and its receipt read back', async () => {
    const wallet = new Wallet(PK0, provider);
    const before = await provider.getBalance(ADDR1);
    const tx = await wallet.sendTransaction({ to: ADDR1, value: 1000n });
    let receipt = await provider.getTransactionReceipt(tx.hash);
    await waitFor(async () => (receipt = await provider.getTransactionReceipt(tx.hash)) !== null);
    expect(receipt!.status).to.equal(1);
    expect(await provider.getBalance(ADDR1)).to.equal(before + 1000n);
    // Exactly one transaction reached the chain.
    const block = (await anvil.rpc('eth_getBlockByNumber', [`0x${receipt!.blockNumber.toString(16)}`, false])) as { transactions: string[] };
    expect(block.transactions).to.deep.equal([tx.hash]);
  });

  it('ethers: a revert still reaches the client with its data', async () => {
    try {
      await provider.call({ to: revertAddr, data: '0x' });
      expect.fail('should revert');
    } catch (e) {
      expect(isCallException(e), String(e)).to.equal(true);
      expect((e as { reason?: string }).reason).to.equal('nope');
      expect((e as { data?: string }).data).to.equal(NOPE_REVERT_DATA);
    }
  });

  it('viem: chain id, block number, balance, eth_call', async () => {
    const pub: PublicClient<HttpTransport, Chain> = createPublicClient({ chain: foundry, transport: http(rpcUrl) });
    expect(await pub.getChainId()).to.equal(31337);
    expect(await pub.getBlockNumber({ cacheTime: 0 })).to.equal(BigInt((await anvil.rpc('eth_blockNumber')) as string));
    expect(await pub.getBalance({ address: ADDR1 })).to.be.a('bigint');
    expect((await pub.call({ to: constAddr as `0x${string}`, data: '0x' })).data).to.equal(CONST_WORD);
  });

  it('a raw batch aggregates attempts across sub-calls', async () => {
    const res = await svc.post('/main/evm/31337', [rpcBody('net_version', [], 1), rpcBody('eth_blockNumber', [], 2)]);
    expect(res.status).to.equal(200);
    expect(res.json.map((x: { id: number }) => x.id)).to.deep.equal([1, 2]);
    expect(res.json.every((x: { result?: string }) => typeof x.result === 'string')).to.equal(true);
    expect(res.headers['x-svc-upstream-attempts']).to.equal('4');
    expect(res.headers['x-svc-upstream']).to.equal(undefined);
    expect(parseTrace(res.headers['x-svc-upstreams']).map((t) => `${t.id}:${t.outcome}`)).to.deep.equal([
      'garbage:error',
      'anvil:success',
      'garbage:error',
      'anvil:success',
    ]);
  });

  it('a batch trace beyond 50 segments is truncated and the overflow counted', async () => {
    // Two attempts per call (garbage, then anvil; the refusing upstream is ordered last): 60 segments.
    const body = Array.from({ length: 30 }, (_, i) => rpcBody('net_version', [], i));
    const res = await svc.post('/main/evm/31337', body);
    expect(res.status).to.equal(200);
    expect(res.json.every((x: { result?: string }) => x.result === '31337')).to.equal(true);
    expect(res.headers['x-svc-upstream-attempts']).to.equal('60');
    expect(res.headers['x-svc-upstreams']!.split(';')).to.have.length(50);
    expect(res.headers['x-svc-upstreams-truncated']).to.equal('10');
  });

  it('metrics count the failed upstream attempts', async () => {
    const text = await (await fetch(svc.metricsUrl!)).text();
    expect(text).to.match(/svc_upstream_request_errors_total\{[^}]*upstream="dead"[^}]*error="ErrEndpointServerSideException"[^}]*\} [1-9]/);
    expect(text).to.match(/svc_upstream_request_errors_total\{[^}]*upstream="garbage"[^}]*error="ErrUpstreamMalformedResponse"[^}]*\} [1-9]/);
  });

  describe('a revert is not retried on another upstream', () => {
    let svc2: SvcHandle;

    before(async () => {
      svc2 = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: [
              { id: 'anvil-a', endpoint: anvil.url, evm: { chainId: 31337 } },
              { id: 'anvil-b', endpoint: `http://localhost:${anvil.port}`, evm: { chainId: 31337 } },
            ],
          },
        ],
      });
    });

    after(async () => {
      await svc2?.close();
    });

    it('one attempt, outcome exec_revert; the client gets code 3 with the revert data', async () => {
      const res = await svc2.post('/main/evm/31337', rpcBody('eth_call', [{ to: revertAddr, data: '0x' }, 'latest'], 7));
      expect(res.status).to.equal(200);
      expect(res.json.id).to.equal(7);
      expect(res.json.error.code).to.equal(3);
      expect(res.json.error.data).to.equal(NOPE_REVERT_DATA);
      expect(res.json.error.message).to.match(/nope/);
      expect(res.headers['x-svc-upstreams']).to.match(/^anvil-a=primary:exec_revert:\d+$/);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
    });

    it('the same revert behind a failing upstream: the sweep stops at the revert', async () => {
      const res = await svc.post('/main/evm/31337', rpcBody('eth_call', [{ to: revertAddr, data: '0x' }, 'latest'], 8));
      expect(res.json.error.code).to.equal(3);
      expect(res.json.error.data).to.equal(NOPE_REVERT_DATA);
      expect(res.headers['x-svc-upstreams']).to.match(/^garbage=primary:error:\d+;anvil=sweep:exec_revert:\d+$/);
    });
  });
});
