/**
 * `trace_filter` split like `eth_getLogs`, end to end on anvil (which implements `trace_filter`):
 * an upstream's `traceFilterAutoSplittingRangeThreshold` cuts a wide range into chunks sent with
 * `traceFilterSplitConcurrency` in flight, and the answer svc joins is the answer anvil gives for
 * the whole range; `after`/`count` paging is sent whole; a range over `getLogsMaxAllowedRange`
 * is refused before forwarding, as for `eth_getLogs` (spec §2.8 #8).
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const DEV0 = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const RECIPIENTS = ['0x70997970c51812dc3a010c7d01b50e0d17dc79c8', '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc', '0x90f79bf6eb2c4f870365e785982e1f101e93b906'];
const hex = (n: number) => `0x${n.toString(16)}`;

describe('e2e: trace_filter range splitting on anvil', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let head = 0;
  const sentHashes: string[] = [];
  const path = `/main/evm/${CHAIN}`;
  const call = (params: unknown[]) => svc.post(path, { jsonrpc: '2.0', id: 1, method: 'trace_filter', params });

  before(async () => {
    anvil = await startAnvil();
    // One value transfer per block (anvil mines each transaction), spread over empty blocks.
    for (let i = 0; i < 9; i++) {
      await anvil.rpc('anvil_mine', ['0x2']);
      const hash = (await anvil.rpc('eth_sendTransaction', [{ from: DEV0, to: RECIPIENTS[i % RECIPIENTS.length], value: hex(i + 1) }])) as string;
      sentHashes.push(hash);
      // Mined before the next blocks are: on a loaded machine anvil may answer the send first.
      await waitFor(async () => (await anvil.rpc('eth_getTransactionReceipt', [hash])) !== null, 10_000);
    }
    // Two empty blocks after the last transfer: every traced block is behind the head.
    await anvil.rpc('anvil_mine', ['0x2']);
    head = Number.parseInt((await anvil.rpc('eth_blockNumber', [])) as string, 16);
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN, getLogsMaxAllowedRange: 100, traceFilterSplitConcurrency: 2 } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN, traceFilterAutoSplittingRangeThreshold: 4 } }],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it("a range wider than the upstream's threshold is sent in chunks and answered exactly as anvil answers the whole range", async () => {
    const filter = { fromBlock: '0x1', toBlock: hex(head) };
    const direct = (await anvil.rpc('trace_filter', [filter])) as unknown[];
    expect(
      direct.map((t) => (t as { transactionHash: string }).transactionHash),
      'anvil traces the 9 transfers',
    ).to.deep.equal(sentHashes);
    const res = await call([filter]);
    expect(res.status).to.equal(200);
    expect(res.json.result).to.deep.equal(direct);
    // head blocks in chunks of 4, none refused: that many upstream requests.
    expect(Number(res.headers['x-svc-upstream-attempts'])).to.equal(Math.ceil(head / 4));
    const metrics = await svc.proxy.metrics.getSingleMetricAsString('svc_network_getlogs_splits_total');
    expect(metrics).to.match(/method="trace_filter",dimension="proactive"\} 1/);
  });

  it('the filter is kept in every chunk: fromAddress/toAddress narrow the joined answer as they narrow anvil’s', async () => {
    const filter = { fromBlock: '0x1', toBlock: hex(head), toAddress: [RECIPIENTS[1]] };
    const direct = (await anvil.rpc('trace_filter', [filter])) as unknown[];
    expect(direct).to.have.length(3);
    expect((await call([filter])).json.result).to.deep.equal(direct);
  });

  it('after/count paging is sent whole (paging a split range would page each part)', async () => {
    const filter = { fromBlock: '0x1', toBlock: hex(head), after: 2, count: 3 };
    const direct = (await anvil.rpc('trace_filter', [filter])) as unknown[];
    const res = await call([filter]);
    expect(res.json.result).to.deep.equal(direct);
    expect(Number(res.headers['x-svc-upstream-attempts'])).to.equal(1);
  });

  it('a range over getLogsMaxAllowedRange is refused before forwarding (-32012), as eth_getLogs is', async () => {
    const res = await call([{ fromBlock: '0x0', toBlock: hex(200) }]);
    expect(res.status).to.equal(200);
    expect(res.json.error.code).to.equal(-32012);
    expect(res.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedRange');
    expect(res.headers['x-svc-upstream-attempts']).to.equal('0');
  });
});
