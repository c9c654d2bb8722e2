/**
 * End-to-end BDS upstreams (bds plugin): svc in front of a fake BDS gRPC server that serves anvil's data as the protobuf models
 * (test/helpers/bds-server.ts) and, as a second upstream, anvil itself over HTTP. Through the BDS upstream (pinned with
 * `use-upstream`), blocks by number and hash, transactions, receipts, block receipts, logs and the chain id equal what anvil
 * answers over JSON-RPC; a method BDS lacks goes to anvil; gRPC failures (a remote CANCELLED included) become svc's named
 * errors and the call fails over, the `X-SVC-Upstreams` trace showing the BDS upstream tried first (anvil is ranked last);
 * headers reach the server as metadata; garbage and oversized answers fail the attempt, never svc; `eth_getLogs` with a block
 * hash and a range is refused as anvil refuses it; an upstream answering another chain is taken out of service.
 */
import { expect } from 'chai';
import { status as Status } from '@grpc/grpc-js';
import { createPublicClient, http } from 'viem';
import { foundry } from 'viem/chains';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startBdsServer, type BdsServer } from '../helpers/bds-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { ADDR0, ADDR1, rpcBody } from './fixtures.ts';

const PATH = '/main/evm/31337';
const TOPIC = `0x${'ab'.repeat(32)}`;
/** Init code whose constructor emits LOG1(TOPIC) with the word 42 as data, and deploys no code. */
const LOGGING_INIT = `0x602a6000527f${TOPIC.slice(2)}60206000a100`;
const TOKEN = 'Bearer bds-e2e-secret-token';

/** The `X-SVC-Upstreams` trace (`<id>=<reason>:<outcome>:<ms>[:won]`, `;`-separated) as `<id>:<outcome>[:won]` entries. */
function trace(r: SvcResponse): string[] {
  const h = r.headers['x-svc-upstreams'];
  return (typeof h === 'string' ? h.split(';') : []).map((seg) => {
    const [id, rest = ''] = seg.split('=');
    const [, outcome, , won] = rest.split(':');
    return `${id}:${outcome}${won ? `:${won}` : ''}`;
  });
}

/** The call was tried on the BDS upstream first, which failed, and the HTTP upstream answered it. */
function expectFailover(r: SvcResponse): void {
  const t = trace(r);
  expect(t[0], String(r.headers['x-svc-upstreams'])).to.match(/^bds:(error|timeout)$/);
  expect(t.at(-1), String(r.headers['x-svc-upstreams'])).to.equal('anvil:success:won');
  expect(r.headers['x-svc-upstream']).to.equal('anvil');
}

/** anvil writes a receipt's `blockTimestamp` as a JSON number; nodes (and svc, from BDS's uint64) write a hex quantity. */
function anvilReceipt(r: Record<string, unknown>): Record<string, unknown> {
  return typeof r.blockTimestamp === 'number' ? { ...r, blockTimestamp: `0x${r.blockTimestamp.toString(16)}` } : r;
}

function config(bds: BdsServer, anvil: AnvilHandle, extra: Record<string, unknown> = {}) {
  return {
    ...NO_CACHE,
    logLevel: 'error',
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
        upstreams: [
          { id: 'bds', endpoint: bds.endpoint, evm: { chainId: 31337 }, grpc: { headers: { Authorization: TOKEN, 'x-tenant': 'e2e' } }, ...extra },
          // Ranked last whatever the scores say: an unpinned call tries the BDS upstream first, so a failover test sees it fail.
          { id: 'anvil', endpoint: anvil.url, evm: { chainId: 31337 }, routing: { scoreMultipliers: [{ overall: 0 }] } },
        ],
      },
    ],
  };
}

describe('e2e: BDS gRPC upstreams (grpc://) served from anvil through a fake BDS server', function () {
  this.timeout(60_000);

  let anvil: AnvilHandle;
  let bds: BdsServer;
  let svc: SvcHandle;
  let txLegacy: string;
  let tx1559: string;
  let txDeploy: string;

  /** A call through svc, pinned to one upstream unless `to` is undefined. */
  const call = (method: string, params: unknown[], to: string | null = 'bds'): Promise<SvcResponse> =>
    svc.post(PATH, rpcBody(method, params), to ? { 'x-svc-use-upstream': to } : {});

  before(async () => {
    anvil = await startAnvil();
    txLegacy = await anvil.rpc('eth_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x10', gasPrice: '0x3b9aca00', type: '0x0' }]);
    tx1559 = await anvil.rpc('eth_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x20' }]);
    txDeploy = await anvil.rpc('eth_sendTransaction', [{ from: ADDR0, data: LOGGING_INIT }]);
    bds = await startBdsServer((m, p) => anvil.rpc(m, p));
    svc = await startSvc(config(bds, anvil));
  });

  after(async () => {
    await svc?.close();
    await bds?.stop();
    await anvil?.stop();
  });

  it("svc's chain id probe asks the BDS ChainId RPC, and the upstream is verified on its chain", async () => {
    const u = svc.proxy.projects.get('main')?.upstreams.get('bds');
    await waitFor(() => u?.state === 'ready');
    expect(u?.chainId).to.equal(31337);
    expect(bds.calls('ChainId')).to.be.greaterThan(0);
    const r = await call('eth_getBlockByNumber', ['0x1', false]);
    expect(r.headers['x-svc-upstream']).to.equal('bds');
  });

  it('blocks by number (hashes and full transactions) and by hash equal anvil’s', async () => {
    for (const n of ['0x1', '0x2', '0x3']) {
      for (const full of [false, true]) {
        const want = await anvil.rpc('eth_getBlockByNumber', [n, full]);
        const got = await call('eth_getBlockByNumber', [n, full]);
        expect(got.json.result, `block ${n} full=${full}`).to.deep.equal(want);
        const byHash = await call('eth_getBlockByHash', [want.hash, full]);
        expect(byHash.json.result).to.deep.equal(want);
      }
    }
    expect(bds.calls('GetBlockByHash')).to.be.greaterThan(0);
  });

  it('legacy, EIP-1559 and contract-creation transactions and their receipts equal anvil’s', async () => {
    for (const h of [txLegacy, tx1559, txDeploy]) {
      expect((await call('eth_getTransactionByHash', [h])).json.result).to.deep.equal(await anvil.rpc('eth_getTransactionByHash', [h]));
      expect((await call('eth_getTransactionReceipt', [h])).json.result).to.deep.equal(anvilReceipt(await anvil.rpc('eth_getTransactionReceipt', [h])));
    }
    const deploy = (await call('eth_getTransactionReceipt', [txDeploy])).json.result;
    expect(deploy.to).to.equal(null);
    expect(deploy.contractAddress).to.match(/^0x[0-9a-f]{40}$/);
  });

  it('block receipts by number and hash equal anvil’s', async () => {
    const block = await anvil.rpc('eth_getBlockByNumber', ['0x3', false]);
    const want = ((await anvil.rpc('eth_getBlockReceipts', ['0x3'])) as Record<string, unknown>[]).map(anvilReceipt);
    expect((await call('eth_getBlockReceipts', ['0x3'])).json.result).to.deep.equal(want);
    expect((await call('eth_getBlockReceipts', [block.hash])).json.result).to.deep.equal(want);
  });

  it('eth_getLogs by range, address, topic positions and block hash equals anvil’s', async () => {
    const receipt = await anvil.rpc('eth_getTransactionReceipt', [txDeploy]);
    const filters = [
      { fromBlock: '0x0', toBlock: '0x3' },
      { fromBlock: '0x3', toBlock: '0x3', address: receipt.contractAddress, topics: [TOPIC] },
      { fromBlock: '0x0', toBlock: '0x3', topics: [[TOPIC, `0x${'cd'.repeat(32)}`]] },
      { fromBlock: '0x0', toBlock: '0x3', topics: [null, TOPIC] },
      { blockHash: receipt.blockHash },
    ];
    for (const f of filters) {
      const want = await anvil.rpc('eth_getLogs', [f]);
      const got = (await call('eth_getLogs', [f])).json.result;
      expect(got, JSON.stringify(f)).to.deep.equal(want);
    }
    expect((await call('eth_getLogs', [filters[0]])).json.result).to.have.length(1);
    // The null position stays a wildcard at its place: topic[1] = TOPIC matches nothing here.
    expect((await call('eth_getLogs', [filters[3]])).json.result).to.deep.equal([]);
  });

  it('not found is null, as a node answers', async () => {
    const none = `0x${'00'.repeat(31)}01`;
    expect((await call('eth_getTransactionByHash', [none])).json).to.include({ result: null });
    expect((await call('eth_getTransactionReceipt', [none])).json).to.include({ result: null });
    expect((await call('eth_getBlockByHash', [none, false])).json).to.include({ result: null });
  });

  it('a viem client reads the same block, transaction and receipt through svc as from anvil', async () => {
    const headers = { 'x-svc-use-upstream': 'bds' };
    const viaSvc = createPublicClient({ chain: foundry, transport: http(`${svc.url}${PATH}`, { fetchOptions: { headers } }) });
    const direct = createPublicClient({ chain: foundry, transport: http(anvil.url) });
    expect(await viaSvc.getBlock({ blockNumber: 2n, includeTransactions: true })).to.deep.equal(
      await direct.getBlock({ blockNumber: 2n, includeTransactions: true }),
    );
    expect(await viaSvc.getTransaction({ hash: tx1559 as `0x${string}` })).to.deep.equal(await direct.getTransaction({ hash: tx1559 as `0x${string}` }));
    expect((await viaSvc.getTransactionReceipt({ hash: txDeploy as `0x${string}` })).logs).to.deep.equal(
      (await direct.getTransactionReceipt({ hash: txDeploy as `0x${string}` })).logs,
    );
    expect(await viaSvc.getChainId()).to.equal(31337);
  });

  it('grpc.headers reach the server as metadata (names lower-cased)', async () => {
    await call('eth_getTransactionByHash', [tx1559]);
    expect(bds.lastMetadata).to.include({ authorization: TOKEN, 'x-tenant': 'e2e' });
  });

  it('every request asserts the configured chain id', async () => {
    const before = bds.calls('GetBlockReceipts');
    await call('eth_getBlockReceipts', ['0x1']);
    expect(bds.calls('GetBlockReceipts')).to.equal(before + 1);
    expect(bds.requests.get('GetBlockReceipts')?.at(-1)?.chainId).to.equal('31337');
  });

  it('eth_getLogs with both blockHash and a range is refused as the node refuses it (-32602), without asking the BDS server', async () => {
    const block = await anvil.rpc('eth_getBlockByNumber', ['0x1', false]);
    const filter = { blockHash: block.hash, fromBlock: '0x1' };
    const node = await fetch(anvil.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(rpcBody('eth_getLogs', [filter])),
    });
    const want = ((await node.json()) as { error: { code: number } }).error;
    const before = bds.calls('GetLogs');
    const got = await call('eth_getLogs', [filter]);
    expect(got.json.error?.code, JSON.stringify(got.json)).to.equal(want.code).and.equal(-32602);
    expect(bds.calls('GetLogs')).to.equal(before);
  });

  it('a method BDS has no RPC for goes to the HTTP upstream; pinned to the BDS upstream it is unsupported (-32601)', async () => {
    const r = await call('eth_getBalance', [ADDR1, 'latest'], null);
    expect(r.json.result).to.equal(await anvil.rpc('eth_getBalance', [ADDR1, 'latest']));
    expect(r.headers['x-svc-upstream']).to.equal('anvil');
    expect(trace(r)).to.deep.equal(['bds:error', 'anvil:success:won']);
    // Pinned to the BDS upstream alone, the method is unsupported there (-32601).
    const pinned = await call('eth_getBalance', [ADDR1, 'latest']);
    expect(pinned.json.error.code).to.equal(-32601);
  });

  describe('gRPC failures', () => {
    afterEach(() => bds.faults.clear());

    const cases: Array<{
      rpc: string;
      method: string;
      params: () => unknown[];
      fault: Parameters<BdsServer['faults']['set']>[1];
      code: number;
      name: RegExp;
      svcName: string;
    }> = [
      {
        rpc: 'GetTransactionReceipt',
        method: 'eth_getTransactionReceipt',
        params: () => [tx1559],
        fault: { code: Status.UNAVAILABLE, message: 'backend down' },
        code: -32603,
        name: /UNAVAILABLE backend down/,
        svcName: 'ErrEndpointServerSideException',
      },
      {
        rpc: 'GetTransactionReceipt',
        method: 'eth_getTransactionReceipt',
        params: () => [tx1559],
        fault: { code: Status.CANCELLED, message: 'stream reset by the load balancer' },
        code: -32603,
        name: /CANCELLED stream reset by the load balancer/,
        svcName: 'ErrEndpointServerSideException',
      },
      {
        rpc: 'GetTransactionByHash',
        method: 'eth_getTransactionByHash',
        params: () => [tx1559],
        fault: { code: Status.DEADLINE_EXCEEDED, message: 'indexer too slow' },
        code: -32603,
        name: /DEADLINE_EXCEEDED indexer too slow/,
        svcName: 'ErrEndpointRequestTimeout',
      },
      {
        rpc: 'GetBlockReceipts',
        method: 'eth_getBlockReceipts',
        params: () => ['0x2'],
        fault: { code: Status.NOT_FOUND, message: 'block not indexed' },
        code: -32014,
        name: /NOT_FOUND block not indexed/,
        svcName: 'ErrEndpointMissingData',
      },
      {
        rpc: 'GetLogs',
        method: 'eth_getLogs',
        params: () => [{ fromBlock: '0x0', toBlock: '0x3' }],
        fault: { code: Status.FAILED_PRECONDITION, message: 'range too large', bdsCode: 'RANGE_TOO_LARGE' },
        code: -32012,
        name: /RANGE_TOO_LARGE range too large/,
        svcName: 'ErrEndpointRequestTooLarge',
      },
    ];
    for (const c of cases) {
      it(`${c.rpc} answering ${'bdsCode' in c.fault && c.fault.bdsCode ? c.fault.bdsCode : Status[(c.fault as { code: Status }).code]}: the named error when pinned; unpinned, the BDS upstream fails and anvil answers`, async () => {
        bds.faults.set(c.rpc, c.fault);
        const pinned = await call(c.method, c.params());
        expect(pinned.json.error?.code, JSON.stringify(pinned.json)).to.equal(c.code);
        expect(JSON.stringify(pinned.json.error)).to.match(c.name);
        expect(pinned.headers['x-svc-error']).to.include(c.svcName);
        const tried = bds.calls(c.rpc);
        const served = await call(c.method, c.params(), null);
        const want = await anvil.rpc(c.method, c.params());
        expect(served.json.result).to.deep.equal(want);
        expectFailover(served);
        expect(bds.calls(c.rpc)).to.be.greaterThan(tried);
      });
    }

    it('a garbage answer fails the attempt as malformed; svc keeps serving', async () => {
      bds.faults.set('GetTransactionByHash', { raw: Buffer.from('ff'.repeat(64), 'hex') });
      const pinned = await call('eth_getTransactionByHash', [tx1559]);
      expect(JSON.stringify(pinned.json.error)).to.match(/malformed/);
      const served = await call('eth_getTransactionByHash', [tx1559], null);
      expect(served.json.result).to.deep.equal(await anvil.rpc('eth_getTransactionByHash', [tx1559]));
      expectFailover(served);
    });

    it('an answer over maxResponseSize fails the attempt as malformed; svc keeps serving', async () => {
      const small = await startSvc(config(bds, anvil, { maxResponseSize: '64KiB' }));
      try {
        bds.faults.set('GetTransactionByHash', { raw: Buffer.alloc(200 * 1024, 0x0a) });
        const pinned = await small.post(PATH, rpcBody('eth_getTransactionByHash', [tx1559]), { 'x-svc-use-upstream': 'bds' });
        expect(JSON.stringify(pinned.json.error)).to.match(/larger than maxResponseSize \(65536 bytes; over the receive cap of 65536 bytes of protobuf/);
        expect(pinned.headers['x-svc-error']).to.include('ErrUpstreamMalformedResponse');
        bds.faults.clear();
        const again = await small.post(PATH, rpcBody('eth_getTransactionByHash', [tx1559]), { 'x-svc-use-upstream': 'bds' });
        expect(again.json.result.hash).to.equal(tx1559);
        expect(again.headers['x-svc-upstream']).to.equal('bds');
      } finally {
        await small.close();
      }
    });
  });

  it("a BDS answer is cached like any upstream's: the second call is a cache hit, without a second BDS call", async () => {
    const cfg = config(bds, anvil) as { projects: Array<{ upstreams: unknown[] }>; database?: unknown };
    delete cfg.database;
    cfg.projects[0]!.upstreams = cfg.projects[0]!.upstreams.slice(0, 1);
    const cached = await startSvc(cfg);
    try {
      const block = await anvil.rpc('eth_getBlockByNumber', ['0x1', false]);
      const n = bds.calls('GetBlockByHash');
      const first = await cached.post(PATH, rpcBody('eth_getBlockByHash', [block.hash, false]));
      const second = await cached.post(PATH, rpcBody('eth_getBlockByHash', [block.hash, false]));
      expect(first.json.result).to.deep.equal(block);
      expect(second.json.result).to.deep.equal(block);
      expect(second.headers['x-svc-cache']).to.equal('HIT');
      expect(bds.calls('GetBlockByHash')).to.equal(n + 1);
    } finally {
      await cached.close();
    }
  });

  it('a BDS call that never answers is cancelled at the attempt deadline and the call fails over', async () => {
    const timed = await startSvc(config(bds, anvil, { failsafe: [{ timeout: { duration: '300ms' }, retry: { maxAttempts: 1 } }] }));
    try {
      bds.faults.set('GetTransactionByHash', { hang: true });
      const pinned = await timed.post(PATH, rpcBody('eth_getTransactionByHash', [tx1559]), { 'x-svc-use-upstream': 'bds' });
      expect(pinned.json.error, JSON.stringify(pinned.json)).to.not.equal(undefined);
      expect(pinned.headers['x-svc-error']).to.match(/Timeout/);
      const tried = bds.calls('GetTransactionByHash');
      const served = await timed.post(PATH, rpcBody('eth_getTransactionByHash', [tx1559]));
      expect(served.json.result).to.deep.equal(await anvil.rpc('eth_getTransactionByHash', [tx1559]));
      expectFailover(served);
      expect(trace(served)[0]).to.equal('bds:timeout');
      expect(bds.calls('GetTransactionByHash')).to.equal(tried + 1);
    } finally {
      bds.faults.clear();
      await timed.close();
    }
  });

  it('an upstream whose BDS server answers another chain is taken out of service; calls go to anvil', async () => {
    const wrong = await startBdsServer((m, p) => anvil.rpc(m, p));
    wrong.chainIdOverride = 999;
    const other = await startSvc(config(wrong, anvil));
    try {
      const u = other.proxy.projects.get('main')?.upstreams.get('bds');
      await waitFor(() => u?.state === 'failed', 10_000);
      expect(wrong.calls('ChainId')).to.be.greaterThan(0);
      const r = await other.post(PATH, rpcBody('eth_getBlockByNumber', ['0x1', false]));
      expect(r.json.result.hash).to.equal((await anvil.rpc('eth_getBlockByNumber', ['0x1', false])).hash);
      expect(trace(r)).to.deep.equal(['anvil:success:won']);
    } finally {
      await other.close();
      await wrong.stop();
    }
  });

  it('a chain-aware BDS server now serving another chain refuses the calls, which assert the configured chain', async () => {
    const moved = await startBdsServer((m, p) => anvil.rpc(m, p));
    const other = await startSvc(config(moved, anvil));
    try {
      const u = other.proxy.projects.get('main')?.upstreams.get('bds');
      await waitFor(() => u?.state === 'ready', 10_000);
      moved.chainIdOverride = 999;
      const r = await other.post(PATH, rpcBody('eth_getBlockByNumber', ['0x1', false]), { 'x-svc-use-upstream': 'bds' });
      expect(JSON.stringify(r.json.error), JSON.stringify(r.json)).to.match(/INVALID_ARGUMENT this server serves chain 999, not 31337/);
      const seen = moved.requests.get('GetBlockByNumber') ?? [];
      expect(seen).to.not.have.length(0);
      for (const req of seen) expect(req.chainId).to.equal('31337');
    } finally {
      await other.close();
      await moved.stop();
    }
  });
});
