/**
 * End-to-end proactive getLogs split (`upstreams[].evm.getLogsAutoSplittingRangeThreshold`,
 * as eRPC does) against anvil: an emitter contract logs in many blocks; svc's upstreams are
 * recording forwarders in front of anvil, one with threshold 8 and one with threshold 20, so
 * the network splits at 8. A wide eth_getLogs reaches the upstreams only as consecutive
 * chunks of at most 8 blocks, merged into exactly what anvil answers directly; a range within
 * the threshold goes as one call; the split counts in svc_network_getlogs_splits_total.
 */
import { expect } from 'chai';
import type { Counter } from 'prom-client';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { ADDR0, creationCode, deployDirect, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const TOPIC = `0x${'c3'.repeat(32)}`;
const hex = (n: number) => `0x${n.toString(16)}`;

/** LOG1 of the calldata with a fixed topic (see evm-getlogs.test.ts). */
const emitterRuntime = (topic: string) => `0x366000600037` + `7f${topic.slice(2)}` + `36` + `6000` + `a1` + `00`;

describe('e2e: proactive eth_getLogs split by getLogsAutoSplittingRangeThreshold against anvil', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let a: RecordingProxy;
  let b: RecordingProxy;
  let svc: SvcHandle;
  let head: number;
  const chunkCalls = () => [...a.callsOf('eth_getLogs'), ...b.callsOf('eth_getLogs')];

  before(async () => {
    anvil = await startAnvil();
    const emitter = await deployDirect(anvil, creationCode(emitterRuntime(TOPIC)));
    for (let i = 0; i < 12; i++) {
      await anvil.rpc('eth_sendTransaction', [{ from: ADDR0, to: emitter, data: hex(i + 1).padEnd(66, '0'), gas: '0x30000' }]);
      await anvil.rpc('anvil_mine', ['0x2']);
    }
    head = Number.parseInt((await anvil.rpc('eth_blockNumber')) as string, 16);
    a = await startRecordingProxy(anvil.url);
    b = await startRecordingProxy(anvil.url);
    svc = await startSvc(
      {
        logLevel: 'error',
        ...NO_CACHE,
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN, getLogsSplitConcurrency: 3 } }],
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: CHAIN, statePollerInterval: '200ms', getLogsAutoSplittingRangeThreshold: 8 } },
              { id: 'b', endpoint: b.url, evm: { chainId: CHAIN, statePollerInterval: '200ms', getLogsAutoSplittingRangeThreshold: 20 } },
            ],
          },
        ],
      },
      { plugins: defaultPreset() },
    );
    const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => chainStateOf(network).highestLatest >= head, 10_000);
  });

  after(async () => {
    await svc?.close();
    await a?.close();
    await b?.close();
    await anvil?.stop();
  });

  beforeEach(() => {
    a.calls.length = 0;
    b.calls.length = 0;
  });

  it('a wide range reaches the upstreams as consecutive chunks of 8 blocks, merged into what anvil answers', async () => {
    const filter = { fromBlock: '0x0', toBlock: hex(head), topics: [TOPIC] };
    const res = await svc.post(PATH, rpcBody('eth_getLogs', [filter]));
    const direct = (await anvil.rpc('eth_getLogs', [filter])) as unknown[];
    expect(direct).to.have.length(12);
    expect(res.json.result).to.deep.equal(direct);
    const ranges = chunkCalls()
      .map((c) => c.params[0] as { fromBlock: string; toBlock: string; topics: unknown })
      .map((f) => [Number.parseInt(f.fromBlock, 16), Number.parseInt(f.toBlock, 16)] as const)
      .sort((x, y) => x[0] - y[0]);
    expect(ranges).to.have.length(Math.ceil((head + 1) / 8));
    ranges.forEach(([from, to], i) => {
      expect(from).to.equal(i * 8);
      expect(to).to.equal(Math.min(i * 8 + 7, head));
    });
    expect(chunkCalls().every((c) => JSON.stringify((c.params[0] as { topics: unknown }).topics) === JSON.stringify([TOPIC]))).to.equal(true);
    expect(Number(res.headers['x-svc-upstream-attempts'])).to.equal(ranges.length);
  });

  it('toBlock latest is resolved and split the same way; the split is counted', async () => {
    const counter = svc.proxy.metrics.getSingleMetric('svc_network_getlogs_splits_total') as Counter;
    const before = (await counter.get()).values.find((v) => v.labels.dimension === 'proactive')?.value ?? 0;
    const res = await svc.post(PATH, rpcBody('eth_getLogs', [{ fromBlock: '0x1', toBlock: 'latest' }]));
    expect(res.json.result).to.deep.equal(await anvil.rpc('eth_getLogs', [{ fromBlock: '0x1', toBlock: hex(head) }]));
    expect(chunkCalls()).to.have.length(Math.ceil(head / 8));
    const after = (await counter.get()).values.find((v) => v.labels.dimension === 'proactive')?.value ?? 0;
    expect(after - before).to.equal(1);
  });

  it('a range within the threshold goes as one call', async () => {
    const res = await svc.post(PATH, rpcBody('eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x9' }]));
    expect(res.json.result).to.deep.equal(await anvil.rpc('eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x9' }]));
    expect(chunkCalls()).to.have.length(1);
  });
});
