/**
 * Heads, finality and chain that one upstream cannot move (head plausibility, docs/evm.md; §1.2 chain
 * id), against real anvil nodes behind small lying forwarders:
 * - an upstream that answers `eth_blockNumber` `0x7fffffff` three times, then behaves, does not
 *   make later `eth_blockNumber` answers `0x7fffffff`;
 * - one far-future `finalized` block does not make recent blocks final, so after `anvil_reorg` the
 *   abandoned block is not served from the cache;
 * - an upstream that passed the chain id probe on 31337, then forwards to a chain-1 node, leaves
 *   rotation at the next state poll and none of its answers is served.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { chainStateOf, type NetworkChainState } from '../../plugins/evm-state/chain.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const ADDR = '0x00000000000000000000000000000000000c0ffe';
const FAR = '0x7fffffff';
const hex = (n: number) => `0x${n.toString(16)}`;

let id = 0;
const call = (svc: SvcHandle, method: string, params: unknown[], headers: Record<string, string> = {}) =>
  svc.post(PATH, { jsonrpc: '2.0', id: ++id, method, params }, headers);
const stateOf = (svc: SvcHandle): NetworkChainState => chainStateOf(svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!);

function config(upstreams: Array<[string, string]>, extra: object = {}): object {
  return {
    logLevel: 'error',
    metrics: { enabled: false },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
        upstreams: upstreams.map(([uid, endpoint]) => ({ id: uid, endpoint, evm: { chainId: CHAIN, statePollerInterval: '100ms' } })),
      },
    ],
    ...extra,
  };
}

/** A forwarder whose target can be switched (a provider's load balancer moving to another node). */
async function startSwitchable(target: string): Promise<{ url: string; target: string; close(): Promise<void> }> {
  const sw: { url: string; target: string; close(): Promise<void> } = { url: '', target, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      fetch(sw.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) })
        .then(async (r) => res.writeHead(200, { 'content-type': 'application/json' }).end(await r.text()))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  sw.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  sw.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return sw;
}

describe('e2e: head plausibility and the chain id re-check (lying upstreams, real anvil)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let other: AnvilHandle | undefined;
  let liar: RecordingProxy | undefined;
  let svc: SvcHandle | undefined;

  beforeEach(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
  });
  afterEach(async () => {
    await svc?.close();
    await liar?.close();
    await anvil?.stop();
    await other?.stop();
    svc = liar = other = undefined;
  });

  it('three far-future eth_blockNumber answers from one upstream never become the answer once it behaves', async () => {
    await anvil.rpc('anvil_mine', ['0x5']);
    const lying = await startRecordingProxy(anvil.url);
    liar = lying;
    let lies = 3;
    lying.intercept = (c) => (c.method === 'eth_blockNumber' && lies > 0 ? (lies--, { result: FAR }) : undefined);
    svc = await startSvc(
      config(
        [
          ['liar', lying.url],
          ['honest', anvil.url],
        ],
        NO_CACHE,
      ),
    );
    const st = stateOf(svc);
    await waitFor(() => st.highestLatest === 5, 10_000);
    // Pinned to the liar: its three lies are told to svc, whatever selection would have picked.
    for (let i = 0; i < 3; i++) await call(svc, 'eth_blockNumber', [], { 'x-svc-use-upstream': 'liar' });
    expect(lies, 'the liar told its three lies').to.equal(0);
    const answers = new Set<string>();
    for (let i = 0; i < 10; i++) answers.add((await call(svc, 'eth_blockNumber', [])).json.result as string);
    expect([...answers]).to.deep.equal([hex(5)]);
    expect(st.highestLatest).to.equal(5);
    // Marked, visibly: counted per report, by upstream and kind.
    const counted = (await svc.proxy.metrics.getSingleMetric('svc_upstream_implausible_head_total')!.get()).values;
    expect(counted.find((v) => v.labels.upstream === 'liar' && v.labels.kind === 'latest')?.value).to.equal(3);
  });

  it('an upstream that lies from start-up, before any head is known, stops counting once an honest upstream reports', async () => {
    await anvil.rpc('anvil_mine', ['0x5']);
    const lying = await startRecordingProxy(anvil.url);
    liar = lying;
    const forged = { number: FAR, hash: `0x${'ab'.repeat(32)}`, parentHash: `0x${'cd'.repeat(32)}`, timestamp: '0x1', transactions: [] };
    lying.intercept = (c) =>
      c.method === 'eth_blockNumber' ? { result: FAR } : c.method === 'eth_getBlockByNumber' && c.params[0] === 'latest' ? { result: forged } : undefined;
    svc = await startSvc(
      config(
        [
          ['liar', lying.url],
          ['honest', anvil.url],
        ],
        NO_CACHE,
      ),
    );
    const st = stateOf(svc);
    await waitFor(() => st.highestLatest === 5, 10_000);
    const answers = new Set<string>();
    for (let i = 0; i < 10; i++) answers.add((await call(svc, 'eth_blockNumber', [])).json.result as string);
    expect([...answers]).to.deep.equal([hex(5)]);
    expect(st.highestLatest).to.equal(5);
  });

  it('one far-future finalized block does not make recent blocks final: after anvil_reorg the abandoned block is no HIT', async () => {
    // anvil keeps `finalized` 64 blocks behind latest: block 118 is unfinalized.
    await anvil.rpc('anvil_mine', [hex(120)]);
    const lying = await startRecordingProxy(anvil.url);
    liar = lying;
    let lies = 0;
    lying.intercept = (c) =>
      c.method === 'eth_getBlockByNumber' && c.params[0] === 'finalized' && lies > 0
        ? (lies--, { result: { number: FAR, hash: `0x${'ab'.repeat(32)}`, parentHash: `0x${'cd'.repeat(32)}`, timestamp: '0x1', transactions: [] } })
        : undefined;
    svc = await startSvc(config([['liar', lying.url]]));
    const st = stateOf(svc);
    await waitFor(() => st.highestLatest >= 120 && st.highestFinalized > 0, 10_000);
    lies = 1;
    await waitFor(() => lies === 0, 5000);
    // Give the lie (told to a poll or an answer) time to land, had it been believed.
    await anvil.rpc('anvil_mine', ['0x1']);
    await waitFor(() => st.highestLatest >= 121, 5000);
    expect(st.highestFinalized).to.be.below(121);

    const block = [hex(118), false];
    const first = (await call(svc, 'eth_getBlockByNumber', block)).json.result as { hash: string };
    await waitFor(async () => (await call(svc!, 'eth_getBlockByNumber', block)).headers['x-svc-cache'] === 'HIT', 5000);
    const reorgsBefore = st.lastReorg?.at ?? 0;
    await anvil.rpc('anvil_reorg', [5, []]);
    await waitFor(() => (st.lastReorg?.at ?? 0) > reorgsBefore, 5000);
    const direct = (await anvil.rpc('eth_getBlockByNumber', block)) as { hash: string };
    expect(direct.hash, 'anvil replaced block 118').to.not.equal(first.hash);
    const got = await call(svc, 'eth_getBlockByNumber', block);
    expect(got.json.result.hash, `X-SVC-Cache ${got.headers['x-svc-cache']}`).to.equal(direct.hash);
  });

  it('an upstream that passed the chain id probe, then forwards to a chain-1 node, leaves rotation at the next poll', async () => {
    other = await startAnvil({ chainId: 1 });
    await other.rpc('anvil_setBalance', [ADDR, '0x1111']);
    await anvil.rpc('anvil_setBalance', [ADDR, '0x2222']);
    const sw = await startSwitchable(anvil.url);
    try {
      svc = await startSvc(
        config(
          [
            ['switcher', sw.url],
            ['honest', anvil.url],
          ],
          NO_CACHE,
        ),
      );
      const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
      await waitFor(() => network.upstreams.every((u) => u.state === 'ready') && network.upstreams.length === 2, 10_000);
      expect((await call(svc, 'eth_getBalance', [ADDR, 'latest'], { 'x-svc-use-upstream': 'switcher' })).json.result).to.equal('0x2222');
      sw.target = other.url;
      await waitFor(() => !network.upstreams.some((u) => u.id === 'switcher'), 5000);
      const served: unknown[] = [];
      for (let i = 0; i < 20; i++) {
        served.push((await call(svc, 'eth_getBalance', [ADDR, 'latest'])).json.result);
        served.push((await call(svc, 'eth_getBalance', [ADDR, 'latest'], { 'x-svc-use-upstream': 'switcher' })).json.result);
      }
      expect(
        served.filter((r) => r === '0x1111'),
        'answers from chain 1',
      ).to.deep.equal([]);
      expect(served.filter((r) => r === '0x2222').length).to.be.at.least(20);
      const changed = (await svc.proxy.metrics.getSingleMetric('svc_upstream_chain_changed_total')!.get()).values;
      expect(changed.map((v) => [v.labels.upstream, v.value])).to.deep.equal([['switcher', 1]]);
    } finally {
      await sw.close();
    }
  });
});
