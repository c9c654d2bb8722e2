/**
 * End-to-end: the default preset in front of a real anvil, driven by ethers v6 (which sends
 * batches) and viem (which omits empty `params`). Both upstreams are the same anvil, one via
 * 127.0.0.1 and one via localhost, with their default (host-derived) ids.
 */
import { expect } from 'chai';
import { Contract, FetchRequest, JsonRpcProvider, Wallet, isCallException, version as ethersVersion } from 'ethers';
import {
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  http,
  type PublicClient,
  type WalletClient,
  type Account,
  type Chain,
  type HttpTransport,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import {
  ADDR0,
  ADDR1,
  ADDR2,
  CONST_INIT,
  CONST_RUNTIME,
  CONST_WORD,
  DEV_BALANCE,
  NOPE_REVERT_DATA,
  PK0,
  REVERT_INIT,
  REVERT_RUNTIME,
  VALUE_ABI,
  rpcBody,
} from './fixtures.ts';

describe('e2e: ethers and viem through svc (default preset) against anvil', function () {
  this.timeout(30_000);

  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let rpcUrl: string;
  let provider: JsonRpcProvider;
  let wallet: Wallet;
  let pub: PublicClient<HttpTransport, Chain>;
  let walletClient: WalletClient<HttpTransport, Chain, Account>;
  /** Every payload ethers sent (arrays are batches). */
  const ethersPayloads: unknown[] = [];
  let constAddr: string;
  let revertAddr: `0x${string}`;
  let deployBlock: number;

  before(async () => {
    anvil = await startAnvil();
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [
            { endpoint: `http://127.0.0.1:${anvil.port}`, evm: { chainId: 31337 } },
            { endpoint: `http://localhost:${anvil.port}`, evm: { chainId: 31337 } },
          ],
        },
      ],
    });
    rpcUrl = `${svc.url}/main/evm/31337`;
    const req = new FetchRequest(rpcUrl);
    req.setHeader('user-agent', `ethers/${ethersVersion}`);
    // cacheTimeout -1: ethers would otherwise share identical requests for 250 ms (stale block numbers).
    provider = new JsonRpcProvider(req, 31337, { cacheTimeout: -1 });
    provider.on('debug', (e: { action?: string; payload?: unknown }) => {
      if (e.action === 'sendRpcPayload') ethersPayloads.push(e.payload);
    });
    wallet = new Wallet(PK0, provider);
    pub = createPublicClient({ chain: foundry, transport: http(rpcUrl) });
    walletClient = createWalletClient({ account: privateKeyToAccount(PK0), chain: foundry, transport: http(rpcUrl) });

    // Deploy both contracts through svc: one as an ethers-signed transaction, one via viem.
    const tx = await wallet.sendTransaction({ data: CONST_INIT });
    let receipt = await provider.getTransactionReceipt(tx.hash);
    await waitFor(async () => (receipt = await provider.getTransactionReceipt(tx.hash)) !== null);
    expect(receipt!.status).to.equal(1);
    constAddr = receipt!.contractAddress as string;
    deployBlock = receipt!.blockNumber;
    const hash = await walletClient.sendTransaction({ data: REVERT_INIT as `0x${string}` });
    const r2 = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20, timeout: 10_000 });
    expect(r2.status).to.equal('success');
    revertAddr = r2.contractAddress as `0x${string}`;
  });

  after(async () => {
    provider?.destroy();
    await svc?.close();
    await anvil?.stop();
  });

  describe('deployment sanity (checked on anvil directly)', () => {
    it('deployed runtimes are the hand-assembled bytecode', async () => {
      expect(await anvil.rpc('eth_getCode', [constAddr, 'latest'])).to.equal(CONST_RUNTIME);
      expect(await anvil.rpc('eth_getCode', [revertAddr, 'latest'])).to.equal(REVERT_RUNTIME);
    });
  });

  describe('ethers v6 JsonRpcProvider', () => {
    it('chain id', async () => {
      const net = await provider.getNetwork();
      expect(net.chainId).to.equal(31337n);
      expect(await provider.send('eth_chainId', [])).to.equal('0x7a69');
    });

    it('block number matches anvil', async () => {
      const [viaSvc, direct] = await Promise.all([provider.getBlockNumber(), anvil.rpc('eth_blockNumber')]);
      expect(viaSvc).to.equal(Number.parseInt(direct as string, 16));
    });

    it('sends JSON-RPC batches that svc answers', async () => {
      ethersPayloads.length = 0;
      const [bn, bal, code] = await Promise.all([provider.getBlockNumber(), provider.getBalance(ADDR1), provider.getCode(constAddr)]);
      expect(bn).to.be.a('number');
      expect(bal).to.equal(DEV_BALANCE);
      expect(code).to.equal(CONST_RUNTIME);
      expect(
        ethersPayloads.some((p) => Array.isArray(p) && p.length > 1),
        'ethers sent at least one batch',
      ).to.equal(true);
    });

    it('full block with transactions', async () => {
      const block = await provider.getBlock(deployBlock, true);
      expect(block).to.not.equal(null);
      expect(block!.number).to.equal(deployBlock);
      expect(block!.prefetchedTransactions.length).to.be.greaterThan(0);
      const direct = (await anvil.rpc('eth_getBlockByNumber', [`0x${deployBlock.toString(16)}`, true])) as { hash: string; transactions: { hash: string }[] };
      expect(block!.hash).to.equal(direct.hash);
      expect(block!.prefetchedTransactions.map((t) => t.hash)).to.deep.equal(direct.transactions.map((t) => t.hash));
      expect(block!.prefetchedTransactions[0]!.from).to.equal(ADDR0);
    });

    it('balances of funded accounts', async () => {
      expect(await provider.getBalance(ADDR2)).to.equal(DEV_BALANCE);
      const bn = await provider.getBlockNumber();
      const tag = `0x${bn.toString(16)}`;
      const direct = BigInt((await anvil.rpc('eth_getBalance', [ADDR0, tag])) as string);
      expect(await provider.getBalance(ADDR0, bn)).to.equal(direct);
      expect(direct < DEV_BALANCE).to.equal(true);
    });

    it('eth_call on a deployed contract', async () => {
      expect(await provider.call({ to: constAddr, data: '0x12345678' })).to.equal(CONST_WORD);
      const c = new Contract(constAddr, VALUE_ABI, provider);
      expect(await c.getFunction('value').staticCall()).to.equal(42n);
    });

    it('signed transaction sent through svc, receipt read back through svc', async () => {
      const before = await provider.getBalance(ADDR1);
      const tx = await wallet.sendTransaction({ to: ADDR1, value: 12345n });
      expect(tx.hash).to.match(/^0x[0-9a-f]{64}$/);
      let receipt = await provider.getTransactionReceipt(tx.hash);
      await waitFor(async () => (receipt = await provider.getTransactionReceipt(tx.hash)) !== null);
      expect(receipt!.status).to.equal(1);
      expect(receipt!.from).to.equal(ADDR0);
      expect(receipt!.to).to.equal(ADDR1);
      const direct = (await anvil.rpc('eth_getTransactionReceipt', [tx.hash])) as { blockHash: string };
      expect(receipt!.blockHash).to.equal(direct.blockHash);
      expect(await provider.getBalance(ADDR1)).to.equal(before + 12345n);
      const got = await provider.getTransaction(tx.hash);
      expect(got!.value).to.equal(12345n);
    });

    it('a revert reaches the client with its data (CALL_EXCEPTION, reason "nope")', async () => {
      let caught: unknown;
      try {
        await provider.call({ to: revertAddr, data: '0x12345678' });
      } catch (e) {
        caught = e;
      }
      expect(isCallException(caught), `expected CALL_EXCEPTION, got ${String(caught)}`).to.equal(true);
      const e = caught as { reason?: string; data?: string };
      expect(e.reason).to.equal('nope');
      expect(e.data).to.equal(NOPE_REVERT_DATA);
    });

    it('a revert through a Contract call', async () => {
      const c = new Contract(revertAddr, VALUE_ABI, provider);
      try {
        await c.getFunction('value').staticCall();
        expect.fail('should revert');
      } catch (e) {
        expect(isCallException(e)).to.equal(true);
        expect((e as { reason?: string }).reason).to.equal('nope');
      }
    });
  });

  describe('viem', () => {
    it('chain id and block number', async () => {
      expect(await pub.getChainId()).to.equal(31337);
      const bn = await pub.getBlockNumber({ cacheTime: 0 });
      expect(bn).to.equal(BigInt((await anvil.rpc('eth_blockNumber')) as string));
    });

    it('full block with transactions', async () => {
      const block = await pub.getBlock({ blockNumber: BigInt(deployBlock), includeTransactions: true });
      expect(Number(block.number)).to.equal(deployBlock);
      expect(block.transactions.length).to.be.greaterThan(0);
      expect(typeof block.transactions[0]).to.equal('object');
      expect((block.transactions[0] as { from: string }).from.toLowerCase()).to.equal(ADDR0.toLowerCase());
    });

    it('balances', async () => {
      expect(await pub.getBalance({ address: ADDR2 })).to.equal(DEV_BALANCE);
    });

    it('eth_call and readContract', async () => {
      const r = await pub.call({ to: constAddr as `0x${string}`, data: '0xdeadbeef' });
      expect(r.data).to.equal(CONST_WORD);
      expect(await pub.readContract({ address: constAddr as `0x${string}`, abi: VALUE_ABI, functionName: 'value' })).to.equal(42n);
    });

    it('signed transaction and receipt', async () => {
      const hash = await walletClient.sendTransaction({ to: ADDR2, value: 777n });
      const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 20, timeout: 10_000 });
      expect(receipt.status).to.equal('success');
      expect(receipt.to?.toLowerCase()).to.equal(ADDR2.toLowerCase());
      expect(await pub.getBalance({ address: ADDR2 })).to.equal(DEV_BALANCE + 777n);
    });

    it('batched transport (JSON arrays) works too', async () => {
      const batched = createPublicClient({ chain: foundry, transport: http(rpcUrl, { batch: { batchSize: 10, wait: 5 } }) });
      const [bn, bal, code] = await Promise.all([
        batched.getBlockNumber({ cacheTime: 0 }),
        batched.getBalance({ address: ADDR1 }),
        batched.getCode({ address: constAddr as `0x${string}` }),
      ]);
      expect(bn > 0n).to.equal(true);
      expect(bal > 0n).to.equal(true);
      expect(code).to.equal(CONST_RUNTIME);
    });

    it('revert: ContractFunctionRevertedError with reason "nope"', async () => {
      try {
        await pub.readContract({ address: revertAddr, abi: VALUE_ABI, functionName: 'value' });
        expect.fail('should revert');
      } catch (e) {
        expect(e).to.be.instanceOf(BaseError);
        const rev = (e as BaseError).walk((x) => x instanceof ContractFunctionRevertedError);
        expect(rev, String(e)).to.be.instanceOf(ContractFunctionRevertedError);
        expect((rev as ContractFunctionRevertedError).reason).to.equal('nope');
      }
    });

    it('revert: raw eth_call error carries the revert data', async () => {
      try {
        await pub.call({ to: revertAddr, data: '0x12345678' });
        expect.fail('should revert');
      } catch (e) {
        const withData = (e as BaseError).walk((x) => typeof (x as { data?: unknown }).data === 'string') as { data?: string } | null;
        expect(withData?.data).to.equal(NOPE_REVERT_DATA);
      }
    });
  });

  describe('raw JSON batch', () => {
    it('keeps order and ids; invalid and unknown elements fail alone; HTTP 200', async () => {
      const body = [
        rpcBody('eth_chainId', [], 1),
        { id: 2, method: 'eth_blockNumber', params: [] },
        rpcBody('eth_noSuchMethodAtAll', [], 'three'),
        rpcBody('eth_getBalance', [ADDR1, 'latest'], 4),
        rpcBody('eth_call', [{ to: constAddr, data: '0x' }, 'latest'], 5),
      ];
      const res = await svc.post('/main/evm/31337', body);
      expect(res.status).to.equal(200);
      expect(res.headers['content-type']).to.equal('application/json');
      const arr = res.json as { id: unknown; result?: unknown; error?: { code: number } }[];
      expect(arr).to.be.an('array').with.length(5);
      expect(arr.map((x) => x.id)).to.deep.equal([1, 2, 'three', 4, 5]);
      expect(arr[0]!.result).to.equal('0x7a69');
      expect(arr[1]!.error?.code).to.equal(-32600);
      expect(arr[2]!.error?.code).to.equal(-32601);
      expect(arr[2]!.result).to.equal(undefined);
      expect(BigInt(arr[3]!.result as string) >= DEV_BALANCE).to.equal(true);
      expect(arr[4]!.result).to.equal(CONST_WORD);
      for (const el of arr) expect((el as { jsonrpc?: string }).jsonrpc).to.equal('2.0');
    });

    it('a single raw call names the winning upstream (default id from the endpoint host)', async () => {
      const res = await svc.post('/main/evm/31337', rpcBody('eth_blockNumber'));
      expect(res.status).to.equal(200);
      expect(res.json.result).to.match(/^0x[0-9a-f]+$/);
      expect(res.headers['x-svc-upstream']).to.equal(`127.0.0.1:${anvil.port}`);
      expect(res.headers['x-svc-upstreams']).to.match(new RegExp(`^127\\.0\\.0\\.1:${anvil.port}=primary:success:\\d+:won$`));
    });
  });
});
