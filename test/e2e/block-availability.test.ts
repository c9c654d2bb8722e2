/**
 * End-to-end `upstreams[].evm.blockAvailability` (eRPC's key) through the real server against a
 * real anvil node with 300 mined blocks: a pruned upstream (a node:http proxy in front of the
 * node that forgets blocks and state below block 200, and counts what it is asked) and archive
 * upstreams on the node itself. Archive calls skip the pruned upstream before it is dialled (its
 * window given as `latestBlockMinus`, as eRPC's deprecated `nodeType: full`, or as
 * `earliestBlockPlus` with the earliest block found by binary search), and a block no upstream's
 * window holds answers eRPC's -32014 "block not available".
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

const CHAIN = 31337;
const HEAD = 300;
const PRUNED_BELOW = 200;
const hex = (n: number) => `0x${n.toString(16)}`;

interface Pruner {
  url: string;
  server: Server;
  /** Block numbers asked by eth_getBlockByNumber / eth_getBalance, in order. */
  asked: number[];
}

/** A node that has pruned everything below {@link PRUNED_BELOW}: null blocks, "missing trie node" for state. */
async function startPruner(target: string): Promise<Pruner> {
  const asked: number[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const q = JSON.parse(body);
      res.setHeader('content-type', 'application/json');
      const ref = q.method === 'eth_getBlockByNumber' ? q.params?.[0] : q.method === 'eth_getBalance' ? q.params?.[1] : undefined;
      const n = typeof ref === 'string' && ref.startsWith('0x') ? Number.parseInt(ref, 16) : undefined;
      if (n !== undefined) asked.push(n);
      if (n !== undefined && n < PRUNED_BELOW) {
        const answer =
          q.method === 'eth_getBlockByNumber'
            ? { jsonrpc: '2.0', id: q.id, result: null }
            : { jsonrpc: '2.0', id: q.id, error: { code: -32000, message: `missing trie node (state at block ${n} is pruned)` } };
        res.end(JSON.stringify(answer));
        return;
      }
      const up = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      res.end(await up.text());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, asked };
}

describe('e2e: upstreams[].evm.blockAvailability (archive calls skip pruned nodes)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let pruner: Pruner;
  let svc: SvcHandle;

  // Config order (the tests decide who is asked first): the pruned upstream always comes first.
  const network = {
    architecture: 'evm',
    evm: { chainId: CHAIN },
    selectionPolicy: { evalInterval: '1h', evalFunc: (u: { removeCordoned(): unknown }) => u.removeCordoned() },
  };
  const up = (id: string, endpoint: string, evm: Record<string, unknown> = {}) => ({
    id,
    endpoint,
    evm: { chainId: CHAIN, statePollerInterval: '200ms', ...evm },
  });
  const rpc = (project: string, method: string, params: unknown[]): Promise<SvcResponse> =>
    svc.post(`/${project}/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method, params });
  const [account] = ['0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266'];

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    await anvil.rpc('anvil_mine', [hex(HEAD)]);
    pruner = await startPruner(anvil.url);
    svc = await startSvc({
      logLevel: 'error',
      ...NO_CACHE,
      projects: [
        {
          id: 'window',
          networks: [network],
          upstreams: [up('pruned', pruner.url, { blockAvailability: { lower: { latestBlockMinus: HEAD - PRUNED_BELOW } } }), up('archive', anvil.url)],
        },
        // eRPC's deprecated form: nodeType full = the last 128 blocks.
        { id: 'legacy', networks: [network], upstreams: [up('pruned', pruner.url, { nodeType: 'full' }), up('archive', anvil.url)] },
        {
          id: 'probed',
          networks: [network],
          upstreams: [up('pruned', pruner.url, { blockAvailability: { lower: { earliestBlockPlus: 0, probe: 'callState' } } }), up('archive', anvil.url)],
        },
        {
          id: 'alone',
          networks: [{ ...network, failsafe: [{ matchMethod: '*', retry: { maxAttempts: 3, delay: '10ms' } }] }],
          upstreams: [up('pruned', pruner.url, { blockAvailability: { lower: { latestBlockMinus: HEAD - PRUNED_BELOW } } })],
        },
      ],
    });
    for (const p of ['window', 'legacy', 'probed', 'alone']) {
      const net = svc.proxy.projects.get(p)!.networks.get(`evm:${CHAIN}`)!;
      const st = networkChainState(svc.proxy, net);
      await waitFor(() => net.upstreams.every((u) => (st.peek(u)?.latest ?? 0) >= HEAD));
    }
  });

  after(async () => {
    await svc?.close();
    await new Promise((r) => pruner?.server.close(r));
    await anvil?.stop();
  });

  /** How often the pruned node was asked for block `n` since `from` (an index into `asked`). */
  const askedFor = (n: number, from: number) => pruner.asked.slice(from).filter((x) => x === n).length;

  it('latestBlockMinus: a block below the window goes to the archive node without dialling the pruned one; recent blocks go to the pruned one', async () => {
    const mark = pruner.asked.length;
    const old = await rpc('window', 'eth_getBlockByNumber', [hex(10), false]);
    expect(old.json.result.number).to.equal(hex(10));
    expect(old.headers['x-svc-upstream']).to.equal('archive');
    expect(old.headers['x-svc-upstreams']).to.match(/^archive=/, 'the pruned upstream was never tried');
    const state = await rpc('window', 'eth_getBalance', [account, hex(150)]);
    expect(state.json.result).to.match(/^0x/);
    expect(state.headers['x-svc-upstream']).to.equal('archive');
    const logs = await rpc('window', 'eth_getLogs', [{ fromBlock: hex(190), toBlock: hex(250) }]);
    expect(logs.json.result).to.deep.equal([]);
    expect(logs.headers['x-svc-upstream']).to.equal('archive', 'a range reaching below the window');
    expect(askedFor(10, mark) + askedFor(150, mark)).to.equal(0);

    const recent = await rpc('window', 'eth_getBlockByNumber', [hex(250), false]);
    expect(recent.headers['x-svc-upstream']).to.equal('pruned');
    expect(recent.json.result.number).to.equal(hex(250));
  });

  it("eRPC's deprecated nodeType: full keeps the last 128 blocks on the node", async () => {
    expect((await rpc('legacy', 'eth_getBlockByNumber', [hex(HEAD - 129), false])).headers['x-svc-upstream']).to.equal('archive');
    expect((await rpc('legacy', 'eth_getBlockByNumber', [hex(HEAD - 100), false])).headers['x-svc-upstream']).to.equal('pruned');
  });

  it('earliestBlockPlus: the earliest block the node holds is found by binary search with the callState probe; older state calls skip it', async () => {
    await waitFor(async () =>
      (await (await fetch(svc.metricsUrl!)).text()).includes(
        `svc_upstream_earliest_block{project="probed",network="evm:${CHAIN}",upstream="pruned",probe="callState"} ${PRUNED_BELOW}`,
      ),
    );
    const mark = pruner.asked.length;
    const old = await rpc('probed', 'eth_getBalance', [account, hex(PRUNED_BELOW - 1)]);
    expect(old.headers['x-svc-upstream']).to.equal('archive');
    expect(askedFor(PRUNED_BELOW - 1, mark)).to.equal(0);
    const kept = await rpc('probed', 'eth_getBalance', [account, hex(PRUNED_BELOW)]);
    expect(kept.headers['x-svc-upstream']).to.equal('pruned');
  });

  it('no upstream holds the block: eRPC\'s -32014 "block not available", nothing dialled, not retried', async () => {
    const mark = pruner.asked.length;
    const res = await rpc('alone', 'eth_getBlockByNumber', [hex(10), false]);
    expect(res.status).to.equal(200);
    expect(res.json.error.code).to.equal(-32014);
    expect(res.json.error.message).to.match(/^block not available: block 10 is outside the block availability of every upstream/);
    expect(res.headers['x-svc-upstreams'] ?? '').to.not.match(/pruned=/);
    expect(askedFor(10, mark)).to.equal(0);
  });
});
