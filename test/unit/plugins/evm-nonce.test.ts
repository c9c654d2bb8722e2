/**
 * Nonces that do not go backwards (evm-nonce plugin): `eth_getTransactionCount` at `pending`
 * is asked of several upstreams at once and the highest count is
 * served, within `maxLead` of the next highest; a dead or hung upstream does not fail or hold
 * the call; other calls and pinned blocks reach one upstream. svc runs for real in front of fake
 * upstreams (node:http) that each answer their own count; viem is one caller.
 */
import { expect } from 'chai';
import { createPublicClient, http } from 'viem';
import { pickHighest } from '../../../plugins/evm-nonce/index.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import { startFakeRpc } from '../../helpers/fake-rpc.ts';
import { startSvc, type SvcHandle } from '../../helpers/svc.ts';

const ADDR = '0x1111111111111111111111111111111111111111';

interface FakeNode {
  url: string;
  /** eth_getTransactionCount calls received. */
  counts: number;
  close(): Promise<void>;
}

/**
 * A fake node: `eth_chainId` 31337, `eth_getTransactionCount` answers `count` (never when `hang`,
 * after `delayMs`, or an error when `fail`), `eth_getBalance` `0x1`, every other method an error
 * (so svc knows no head and `latest` stays unpinned).
 */
async function startNode(count: string, hang = false, delayMs = 0, fail = false): Promise<FakeNode> {
  const node: FakeNode = { url: '', counts: 0, close: async () => undefined };
  const rpc = await startFakeRpc((raw, _req, reply) => {
    const body = raw as { id: unknown; method: string };
    const answer = (payload: object) => reply({ jsonrpc: '2.0', id: body.id, ...payload });
    if (body.method === 'eth_chainId') return answer({ result: '0x7a69' });
    if (body.method === 'eth_getTransactionCount') {
      node.counts++;
      if (hang) return;
      if (fail) return answer({ error: { code: -32000, message: 'header not found' } });
      if (delayMs > 0) return void setTimeout(() => answer({ result: count }), delayMs);
      return answer({ result: count });
    }
    if (body.method === 'eth_getBalance') return answer({ result: '0x1' });
    return answer({ error: { code: -32601, message: 'the method does not exist' } });
  });
  node.url = rpc.url;
  node.close = rpc.close;
  return node;
}

describe('evm-nonce: the highest pending count among the upstreams', function () {
  this.timeout(20_000);
  const nodes: Record<string, FakeNode> = {};
  let svc: SvcHandle;
  const call = (project: string, params: unknown[], method = 'eth_getTransactionCount') =>
    svc.post(`/${project}/evm/31337`, { jsonrpc: '2.0', id: 1, method, params });
  const asked = (...ids: string[]) => ids.map((id) => nodes[id]!.counts);

  before(async () => {
    for (const [id, count, hang] of [
      ['a', '0x5'],
      ['b', '0x7'],
      ['c', '0x6'],
      ['liar', '0xffffff'],
      ['hung', '0x9', true],
    ] as const)
      nodes[id] = await startNode(count, hang === true);
    nodes.slow = await startNode('0x8', false, 150);
    nodes.broken1 = await startNode('0x0', false, 0, true);
    nodes.broken2 = await startNode('0x0', false, 0, true);
    const ups = (...ids: string[]) => ids.map((id) => ({ id, endpoint: nodes[id]!.url, evm: { chainId: 31337 } }));
    const project = (id: string, upstreams: string[], evm: Record<string, unknown> = {}) => ({
      id,
      networks: [{ architecture: 'evm', evm: { chainId: 31337, ...evm } }],
      upstreams: ups(...upstreams),
    });
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        project('three', ['a', 'b', 'c']),
        project('liar', ['a', 'c', 'liar']),
        project('hung', ['a', 'hung']),
        project('off', ['a', 'b'], { nonceQuorum: { enabled: false } }),
        project('one', ['a']),
        project('fast-and-slow', ['a', 'slow']),
        project('fallback', ['broken1', 'broken2', 'c'], { nonceQuorum: { maxUpstreams: 2 } }),
      ],
    });
  });
  after(async () => {
    await svc?.close();
    for (const n of Object.values(nodes)) await n.close();
  });
  beforeEach(() => {
    for (const n of Object.values(nodes)) n.counts = 0;
  });

  it('pending: every upstream asked once at once, the highest count served, only its slot :won', async () => {
    const res = await call('three', [ADDR, 'pending']);
    expect(res.json.result).to.equal('0x7');
    expect(asked('a', 'b', 'c')).to.deep.equal([1, 1, 1]);
    expect(res.headers['x-svc-upstream']).to.equal('b');
    const segments = res.headers['x-svc-upstreams']!.split(';');
    expect(segments).to.have.length(3);
    expect(segments.every((s) => s.includes('=consensus_slot:success:'))).to.equal(true);
    expect(segments.filter((s) => s.endsWith(':won'))).to.have.length(1);
    expect(segments.find((s) => s.endsWith(':won'))).to.match(/^b=/);
    const m = await svc.proxy.metrics.getSingleMetricAsString('svc_network_nonce_rounds_total');
    expect(m).to.match(/svc_network_nonce_rounds_total\{project="three",network="evm:31337",outcome="highest"\} 1/);
  });

  it('latest, a block number (what interpolation pins latest to) and other methods reach one upstream', async () => {
    await call('three', [ADDR, 'latest']);
    await call('three', [ADDR, '0x10']);
    await call('three', [ADDR, 'latest'], 'eth_getBalance');
    expect(asked('a', 'b', 'c').reduce((x, y) => x + y, 0)).to.equal(2);
  });

  it('one upstream answering a count far ahead of the others is not served: the next highest is (outlier_dropped)', async () => {
    const res = await call('liar', [ADDR, 'pending']);
    expect(res.json.result).to.equal('0x6');
    expect(res.headers['x-svc-upstream']).to.equal('c');
    const m = await svc.proxy.metrics.getSingleMetricAsString('svc_network_nonce_rounds_total');
    expect(m).to.match(/project="liar",network="evm:31337",outcome="outlier_dropped"\} 1/);
  });

  it('an upstream that never answers does not hold the call: answered from the others after a bounded wait', async () => {
    const t0 = Date.now();
    const res = await call('hung', [ADDR, 'pending']);
    expect(res.json.result).to.equal('0x5');
    expect(asked('hung')).to.deep.equal([1]);
    // With one answer in, svc waits at most 1 s for a second; the hung node would hold the call until its deadline.
    expect(Date.now() - t0).to.be.below(8000);
    const segments = res.headers['x-svc-upstreams']!.split(';');
    expect(segments.find((s) => s.startsWith('hung='))).to.not.match(/:won$/);
  });

  it('one fast node alone does not set the count: a slower node answering within the wait is heard', async () => {
    const res = await call('fast-and-slow', [ADDR, 'pending']);
    expect(res.json.result).to.equal('0x8');
    expect(res.headers['x-svc-upstream']).to.equal('slow');
  });

  it('when every upstream of the round fails, the rest of the selection is swept as for any read', async () => {
    const res = await call('fallback', [ADDR, 'pending']);
    expect(res.json.result, res.text).to.equal('0x6');
    expect(asked('broken1', 'broken2', 'c')).to.deep.equal([1, 1, 1]);
  });

  it('nonceQuorum.enabled false, or a network of one upstream: one upstream asked', async () => {
    const off = await call('off', [ADDR, 'pending']);
    expect(off.json.result).to.be.oneOf(['0x5', '0x7']);
    expect(asked('a', 'b').reduce((x, y) => x + y, 0)).to.equal(1);
    expect((await call('one', [ADDR, 'pending'])).json.result).to.equal('0x5');
  });

  it('viem getTransactionCount({ blockTag: "pending" }) through svc gets the highest count', async () => {
    const client = createPublicClient({ transport: http(`${svc.url}/three/evm/31337`) });
    expect(await client.getTransactionCount({ address: ADDR, blockTag: 'pending' })).to.equal(7);
  });

  it('pickHighest: the highest within maxLead of the next; ties and a lone answer served; non-quantities only when nothing else', () => {
    const a = (id: string, v: string) => ({ upstreamId: id, count: /^0x[0-9a-f]+$/.test(v) ? BigInt(v) : undefined, result: new RpcResult(v) });
    expect(pickHighest([a('x', '0x5'), a('y', '0x45'), a('z', '0x6')], 64)?.answer.upstreamId).to.equal('y');
    expect(pickHighest([a('x', '0x5'), a('y', '0x46'), a('z', '0x5')], 64)).to.deep.include({ dropped: 1 });
    expect(pickHighest([a('x', '0x5'), a('y', '0x46'), a('z', '0x5')], 64)?.answer.upstreamId).to.equal('x');
    expect(pickHighest([a('y', '0xffff')], 0)?.answer.upstreamId).to.equal('y');
    expect(pickHighest([a('x', 'oops'), a('y', '0x2')], 0)?.answer.upstreamId).to.equal('y');
    expect(pickHighest([a('x', 'oops')], 0)?.answer.upstreamId).to.equal('x');
    expect(pickHighest([], 0)).to.equal(undefined);
  });
});
