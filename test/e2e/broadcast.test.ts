/**
 * Transactions broadcast to several upstreams, and private relays (broadcast plugin), on anvil
 * nodes behind counting forwarders: with `broadcast.enabled` a transaction sent through svc by
 * viem or ethers reaches every node of the set exactly once and a dead member does not fail the
 * call; a member's refusal is the answer when nobody accepts; with `broadcast.private` a
 * transaction reaches only the relay and reads never do.
 */
import { expect } from 'chai';
import { FetchRequest, JsonRpcProvider, Wallet } from 'ethers';
import { createWalletClient, http, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { freePort } from '../helpers/ports.ts';
import { type RecordingProxy, startRecordingProxy } from '../helpers/recording-proxy.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
// anvil's first three development keys.
const KEYS = [
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
] as const;
const TO = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';

describe('e2e: transaction broadcast and private relays', function () {
  this.timeout(60_000);
  const anvils: AnvilHandle[] = [];
  const proxies: RecordingProxy[] = [];
  let svc: SvcHandle;
  const sent = (p: RecordingProxy) => p.callsOf('eth_sendRawTransaction').length;
  const txOn = (a: AnvilHandle, hash: string) => a.rpc('eth_getTransactionByHash', [hash]) as Promise<{ hash: string } | null>;

  before(async () => {
    for (let i = 0; i < 3; i++) anvils.push(await startAnvil());
    for (const a of anvils) proxies.push(await startRecordingProxy(a.url));
    const dead = `http://127.0.0.1:${await freePort()}`;
    const [pa, pb, pc] = proxies as [RecordingProxy, RecordingProxy, RecordingProxy];
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'bc',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, broadcast: { enabled: true } }],
          upstreams: [
            { id: 'a', endpoint: pa.url, evm: { chainId: CHAIN } },
            { id: 'b', endpoint: pb.url, evm: { chainId: CHAIN } },
            { id: 'dead', endpoint: dead, evm: { chainId: CHAIN } },
          ],
        },
        {
          id: 'private',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, broadcast: { private: true } }],
          upstreams: [
            { id: 'public', endpoint: pa.url, evm: { chainId: CHAIN } },
            { id: 'relay', endpoint: pc.url, evm: { chainId: CHAIN }, relay: true },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    for (const p of proxies) await p.close();
    for (const a of anvils) await a.stop();
  });
  beforeEach(() => {
    for (const p of proxies) p.calls.length = 0;
  });

  it('viem sendTransaction through svc: the transaction reaches every node of the set once; the dead member does not fail it', async () => {
    const wallet = createWalletClient({ account: privateKeyToAccount(KEYS[0]), transport: http(`${svc.url}/bc/evm/${CHAIN}`) });
    const hash = await wallet.sendTransaction({ to: TO, value: parseEther('0.01'), chain: null });
    expect(sent(proxies[0]!)).to.equal(1);
    expect(sent(proxies[1]!)).to.equal(1);
    expect((await txOn(anvils[0]!, hash))?.hash).to.equal(hash);
    expect((await txOn(anvils[1]!, hash))?.hash).to.equal(hash);
    const m = await svc.proxy.metrics.getSingleMetricAsString('svc_tx_broadcast_total');
    expect(m).to.match(/project="bc",network="evm:31337",upstream="a",outcome="accepted"\} 1/);
    expect(m).to.match(/project="bc",network="evm:31337",upstream="b",outcome="accepted"\} 1/);
    expect(m).to.match(/project="bc",network="evm:31337",upstream="dead",outcome="failed"\} 1/);
  });

  it('ethers Wallet.sendTransaction through svc: both nodes have it, each sent it once', async () => {
    const req = new FetchRequest(`${svc.url}/bc/evm/${CHAIN}`);
    const provider = new JsonRpcProvider(req, CHAIN, { staticNetwork: true, cacheTimeout: -1 });
    const tx = await new Wallet(KEYS[1], provider).sendTransaction({ to: TO, value: 1n });
    expect((await txOn(anvils[0]!, tx.hash))?.hash).to.equal(tx.hash);
    expect((await txOn(anvils[1]!, tx.hash))?.hash).to.equal(tx.hash);
    expect(sent(proxies[0]!) + sent(proxies[1]!)).to.equal(2);
    provider.destroy();
  });

  it('the trace: one consensus_slot per member, only the send that answered is :won', async () => {
    const account = privateKeyToAccount(KEYS[0]);
    const nonce = Number.parseInt((await anvils[0]!.rpc('eth_getTransactionCount', [account.address, 'pending'])) as string, 16);
    const raw = await account.signTransaction({
      chainId: CHAIN,
      type: 'eip1559',
      to: TO,
      value: 1n,
      nonce,
      gas: 21_000n,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n,
    });
    const res = await svc.post(`/bc/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: [raw] });
    expect(res.json.result, res.text).to.match(/^0x[0-9a-f]{64}$/);
    const segments = res.headers['x-svc-upstreams']!.split(';');
    expect(segments.map((x) => x.split('=')[0]).sort()).to.deep.equal(['a', 'b', 'dead']);
    expect(segments.every((x) => x.includes('=consensus_slot:'))).to.equal(true);
    expect(segments.filter((x) => x.endsWith(':won'))).to.have.length(1);
    expect(res.headers['x-svc-upstream']).to.be.oneOf(['a', 'b']);
  });

  it('a transaction every member refuses: the node’s own error is the answer (a bad raw transaction)', async () => {
    const res = await svc.post(`/bc/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: ['0x1234'] });
    expect(res.json.error, res.text).to.be.an('object');
    expect(res.json.error.code).to.not.equal(-32603);
    expect(sent(proxies[0]!)).to.equal(1);
    expect(sent(proxies[1]!)).to.equal(1);
  });

  it('private mode: the transaction reaches only the relay, and reads never reach the relay', async () => {
    const wallet = createWalletClient({ account: privateKeyToAccount(KEYS[2]), transport: http(`${svc.url}/private/evm/${CHAIN}`) });
    const hash = await wallet.sendTransaction({ to: TO, value: 1n, chain: null });
    expect(sent(proxies[2]!)).to.equal(1);
    expect(sent(proxies[0]!)).to.equal(0);
    expect((await txOn(anvils[2]!, hash))?.hash).to.equal(hash);
    expect(await txOn(anvils[0]!, hash)).to.equal(null);
    await svc.post(`/private/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [TO, 'latest'] });
    // The client reads (viem's nonce, fee and gas lookups, the balance) went to the public node only;
    // svc's own state polls (block headers, syncing) may still ask the relay.
    const clientReads = ['eth_getBalance', 'eth_getTransactionCount', 'eth_estimateGas', 'eth_gasPrice', 'eth_maxPriorityFeePerGas', 'eth_feeHistory'];
    expect(
      clientReads.map((m) => proxies[2]!.callsOf(m).length),
      'the relay got no client read',
    ).to.deep.equal(clientReads.map(() => 0));
    expect(proxies[0]!.callsOf('eth_getBalance')).to.have.length(1);
  });

  it('private mode: a use-upstream pin cannot take a transaction to the public node', async () => {
    const account = privateKeyToAccount(KEYS[2]);
    const raw = await account.signTransaction({
      chainId: CHAIN,
      type: 'eip1559',
      to: TO,
      value: 1n,
      nonce: 50,
      gas: 21_000n,
      maxFeePerGas: 10_000_000_000n,
      maxPriorityFeePerGas: 1n,
    });
    const res = await svc.post(
      `/private/evm/${CHAIN}`,
      { jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: [raw] },
      { 'X-SVC-Use-Upstream': 'public' },
    );
    expect(res.json.error?.message, res.text).to.match(/privately \(broadcast.private\)/);
    expect(sent(proxies[0]!)).to.equal(0);
  });
});
