/**
 * End-to-end: an answer with a member given twice is one upstream's fault, never what is served
 * (spec §4.2, one parse, one truth; spec §4.5 consensus). One of three anvil nodes sits behind a
 * lying proxy that answers `eth_getBlockByNumber` with `"result":<forged>,"result":<true>` (and
 * the same with the second name spelled `res\u0075lt`): `JSON.parse` keeps the true block, a
 * byte-level reader the forged one. Neither consensus nor the cache may serve the forged block.
 */
import { expect } from 'chai';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startLyingProxy, type LyingProxy } from '../helpers/lying-proxy.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const FORGED_HASH = `0x${'f'.repeat(64)}`;
const rpc = (method: string, params: unknown[], id: unknown = 1) => ({ jsonrpc: '2.0', id, method, params });

describe('e2e: answers with a member given twice (one parse, one truth)', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let liar: LyingProxy;
  const open: SvcHandle[] = [];

  /**
   * Answers `eth_getBlockByNumber(block)` with the forged block first and the true one second:
   * the forged one is the true one with another hash, made larger so "prefer larger" would pick it.
   */
  const forge = async (block: string, escaped: boolean) => {
    const truth = (await liar.forward('eth_getBlockByNumber', [block, false])) as Record<string, unknown>;
    const forged = { ...truth, hash: FORGED_HASH, extraData: `0x${'ab'.repeat(512)}` };
    const second = escaped ? '"res\\u0075lt"' : '"result"';
    liar.truth();
    liar.lieRaw('eth_getBlockByNumber', (_call, id) => `{"jsonrpc":"2.0","id":${id},"result":${JSON.stringify(forged)},${second}:${JSON.stringify(truth)}}`);
    return truth;
  };

  async function svcWith(network: Record<string, unknown>, cache: boolean): Promise<SvcHandle> {
    // One chain behind every upstream: the honest ones agree byte for byte with the liar's truth.
    const node = cluster.nodes[0]!.url;
    const a = { id: 'a', endpoint: node, evm: { chainId: CHAIN, statePollerInterval: '1h' } };
    const b = { id: 'b', endpoint: `${node.replace(/\/$/, '')}/?b`, evm: { chainId: CHAIN, statePollerInterval: '1h' } };
    const svc = await startSvc({
      ...(cache ? {} : NO_CACHE),
      server: { executionHeaders: 'all' },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h', evalFunc: (ups: unknown) => ups }, ...network }],
          // The liar first: without consensus it is asked first.
          upstreams: [{ id: 'liar', endpoint: liar.url, evm: { chainId: CHAIN, statePollerInterval: '1h' } }, a, b],
        },
      ],
    });
    open.push(svc);
    const n = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => n.upstreams.every((u) => u.state === 'ready'));
    return svc;
  }

  before(async () => {
    cluster = await startAnvilCluster({ count: 1, chainId: CHAIN });
    await cluster.mine(0, 3);
    liar = await startLyingProxy(cluster.nodes[0]!.url);
  });
  afterEach(async () => {
    while (open.length) await open.pop()!.close();
  });
  after(async () => {
    await liar?.close();
    await cluster?.stop();
  });

  for (const escaped of [false, true]) {
    const spelled = escaped ? 'the second spelled res\\u0075lt' : 'plain';
    it(`2-of-3 consensus never serves nor caches the forged first member (${spelled})`, async () => {
      const truth = await forge('0x2', escaped);
      const svc = await svcWith({ failsafe: [{ matchMethod: '*', consensus: { maxParticipants: 3, agreementThreshold: 2, preferLargerResponses: true } }] }, true);
      for (let i = 0; i < 4; i++) {
        const res = await svc.post(PATH, rpc('eth_getBlockByNumber', ['0x2', false], i + 1));
        expect(res.status).to.equal(200);
        expect(res.json.result.hash, `call ${i + 1} (${res.headers['x-svc-cache'] ?? 'no cache header'})`).to.equal(truth.hash);
        expect(res.text).to.not.include(FORGED_HASH);
      }
      // The liar was asked, and its answer was refused as malformed (counted, not voted).
      expect(liar.told('eth_getBlockByNumber')).to.be.greaterThan(0);
    });

    it(`without consensus the lying upstream's answer is refused and another upstream serves (${spelled})`, async () => {
      const truth = await forge('0x1', escaped);
      const svc = await svcWith({}, false);
      const res = await svc.post(PATH, rpc('eth_getBlockByNumber', ['0x1', false]));
      expect(res.status).to.equal(200);
      expect(res.json.result.hash).to.equal(truth.hash);
      expect(res.headers['x-svc-upstream']).to.not.equal('liar');
      expect(res.headers['x-svc-upstreams']).to.match(/(^|;)liar=[^;]*:error/);
    });
  }
});
