/**
 * End-to-end block-tag interpolation (spec §2.8 #5): anvil mines a block
 * every second; svc reaches it through two recording node:http proxies (`u1`, `u2`) and learns
 * the head from the state poller. A contract that returns `block.number` shows which block an
 * upstream actually answered about. Proves:
 * - with interpolation, a hedged `eth_call(latest)` whose two legs reach anvil 1.5 s apart (a new
 *   block in between) is answered by both upstreams about the same block, the one svc pinned;
 *   with `skip-interpolation` the same race gives two different blocks;
 * - `finalized` becomes the known finalized block; `safe`/`pending`, `eth_getBlockByNumber`
 *   and EIP-1898 objects pass through; eth_getLogs fromBlock/toBlock become numbers;
 * - once the head goes stale (no poll for over two block times) tags pass through again.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import type { Network } from '../../core/registry/project.ts';
import { statePollerOf } from '../../plugins/evm-state/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { ADDR1, creationCode, deployDirect, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** Runtime: `NUMBER PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN`: returns the block number it runs at. */
const NUMBER_RUNTIME = '0x4360005260206000f3';
const word = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;
const num = (h: string) => Number.parseInt(h, 16);

/** One request a recorder forwarded, with anvil's answer. */
interface Recorded {
  upstream: string;
  method: string;
  params: unknown;
  result?: unknown;
}

/** Shared by both recorders: the next request of `method` (whichever recorder gets it) waits `ms` before going to anvil. */
interface DelayRule {
  method: string;
  ms: number;
}

interface Recorder {
  url: string;
  close(): Promise<void>;
}

/**
 * A node:http proxy in front of anvil that records every single request with anvil's answer.
 * A delayed request still reaches anvil (and is recorded) after svc dropped it (lost hedge leg).
 */
async function startRecorder(id: string, target: string, log: Recorded[], delay: { next?: DelayRule }): Promise<Recorder> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const doc = JSON.parse(text) as { method?: string; params?: unknown } | unknown[];
        const single = Array.isArray(doc) ? undefined : doc;
        if (single?.method !== undefined && delay.next?.method === single.method) {
          const ms = delay.next.ms;
          delay.next = undefined;
          await new Promise((r) => setTimeout(r, ms));
        }
        const r = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
        const answer = await r.text();
        if (single?.method !== undefined) {
          const parsed = JSON.parse(answer) as { result?: unknown };
          log.push({ upstream: id, method: single.method, params: single.params, result: parsed.result });
        }
        if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
      })().catch(() => {
        if (!res.destroyed) res.writeHead(502).end();
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('e2e: block-tag interpolation against anvil (1 s blocks) through two upstreams', function () {
  this.timeout(60_000);

  let anvil: AnvilHandle;
  let u1: Recorder;
  let u2: Recorder;
  let svc: SvcHandle;
  let network: Network;
  let numberContract: string;
  const log: Recorded[] = [];
  const delay: { next?: DelayRule } = {};

  const post = (method: string, params: unknown[], headers?: Record<string, string>) => svc.post(PATH, rpcBody(method, params), headers);
  const sent = (method: string) => log.filter((r) => r.method === method);

  /**
   * Waits for a new head, then until both upstreams' polled heads agree with the network head:
   * the head is then as fresh as it gets (the freshness window is about two block times from
   * the moment a head is first seen) and block availability keeps both upstreams selectable.
   */
  async function alignedHead(): Promise<number> {
    const st = chainStateOf(network);
    const start = st.highestLatest;
    await waitFor(() => st.highestLatest > start, 5000);
    await waitFor(() => network.upstreams.every((u) => st.peek(u)?.latest === st.highestLatest), 2000);
    return st.highestLatest;
  }

  before(async () => {
    anvil = await startAnvil({ blockTime: 1 });
    numberContract = await deployDirect(anvil, creationCode(NUMBER_RUNTIME));
    // Enough history on top of the contract for a finalized block that has it (anvil: latest - 64).
    await anvil.rpc('anvil_mine', ['0x50']);
    u1 = await startRecorder('u1', anvil.url, log, delay);
    u2 = await startRecorder('u2', anvil.url, log, delay);
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [{ matchMethod: 'eth_call', hedge: { delay: '300ms', maxCount: 1 } }] }],
            upstreams: [
              { id: 'u1', endpoint: u1.url, evm: { chainId: CHAIN, statePollerInterval: '100ms' } },
              { id: 'u2', endpoint: u2.url, evm: { chainId: CHAIN, statePollerInterval: '100ms' } },
            ],
          },
        ],
      },
      { plugins: defaultPreset() },
    );
    network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    const st = chainStateOf(network);
    // A few blocks seen: a block-time estimate exists and the finalized block is known.
    await waitFor(() => st.blockTimeMs !== undefined && st.highestFinalized > 0 && st.isHeadFresh(), 15_000);
  });

  after(async () => {
    await svc?.close();
    await u1?.close();
    await u2?.close();
    await anvil?.stop();
  });

  beforeEach(() => {
    log.length = 0;
    delay.next = undefined;
  });

  it('the network head follows anvil, fresh within about two block times', async () => {
    await alignedHead();
    const st = chainStateOf(network);
    expect(st.blockTimeMs).to.be.greaterThan(0);
    const h = num((await anvil.rpc('eth_blockNumber')) as string);
    expect(st.highestLatest).to.be.within(h - 1, h);
    expect(st.isHeadFresh()).to.equal(true);
  });

  it('a hedged eth_call(latest) is answered by both upstreams about the same, pinned block', async () => {
    await alignedHead();
    // Whichever upstream gets the call first holds it 1.5 s (a new block is mined meanwhile);
    // the hedge leg goes to the other one after 300 ms.
    delay.next = { method: 'eth_call', ms: 1500 };
    const res = await post('eth_call', [{ to: numberContract, data: '0x' }, 'latest']);
    expect(res.status).to.equal(200);
    await waitFor(() => sent('eth_call').length === 2, 5000);
    const calls = sent('eth_call');
    expect(calls.map((c) => c.upstream).sort()).to.deep.equal(['u1', 'u2']);
    const pinned = (calls[0]!.params as unknown[])[1] as string;
    expect(pinned).to.match(/^0x[0-9a-f]+$/);
    for (const c of calls) {
      expect(c.params).to.deep.equal([{ to: numberContract, data: '0x' }, pinned]);
      expect(c.result).to.equal(word(num(pinned)));
    }
    expect(res.json.result).to.equal(word(num(pinned)));
    // By the time the slow leg reached anvil the chain had moved on.
    expect(num((await anvil.rpc('eth_blockNumber')) as string)).to.be.greaterThan(num(pinned));
  });

  it('§2.8 #5 — control: with skip-interpolation the same race is answered about two different blocks', async () => {
    await alignedHead();
    delay.next = { method: 'eth_call', ms: 1500 };
    const res = await post('eth_call', [{ to: numberContract, data: '0x' }, 'latest'], { 'X-SVC-Skip-Interpolation': 'true' });
    expect(res.status).to.equal(200);
    await waitFor(() => sent('eth_call').length === 2, 5000);
    const calls = sent('eth_call');
    for (const c of calls) expect((c.params as unknown[])[1]).to.equal('latest');
    const blocks = calls.map((c) => num(c.result as string));
    expect(blocks[0]).to.not.equal(blocks[1]);
  });

  it('finalized becomes the known finalized block', async () => {
    await alignedHead();
    const res = await post('eth_call', [{ to: numberContract, data: '0x' }, 'finalized']);
    const c = sent('eth_call')[0]!;
    const tag = (c.params as unknown[])[1] as string;
    expect(tag).to.match(/^0x[0-9a-f]+$/);
    expect(num(tag)).to.be.within(chainStateOf(network).highestFinalized - 2, chainStateOf(network).highestFinalized);
    expect(res.json.result).to.equal(word(num(tag)));
    const anvilFinalized = num(((await anvil.rpc('eth_getBlockByNumber', ['finalized', false])) as { number: string }).number);
    expect(num(tag)).to.be.within(anvilFinalized - 2, anvilFinalized);
  });

  it('eth_getBalance(latest) and eth_getLogs fromBlock/toBlock reach the upstream as numbers', async () => {
    await alignedHead();
    const bal = await post('eth_getBalance', [ADDR1, 'latest']);
    expect(bal.json.result).to.match(/^0x[0-9a-f]+$/);
    expect((sent('eth_getBalance')[0]!.params as unknown[])[1]).to.match(/^0x[0-9a-f]+$/);
    await alignedHead();
    const logs = await post('eth_getLogs', [{ fromBlock: 'latest', toBlock: 'latest' }]);
    expect(logs.json.result).to.be.an('array');
    const f = (sent('eth_getLogs')[0]!.params as { fromBlock: string; toBlock: string }[])[0]!;
    expect(f.fromBlock).to.match(/^0x[0-9a-f]+$/);
    expect(f.toBlock).to.equal(f.fromBlock);
  });

  it('safe, pending, EIP-1898 objects and eth_getBlockByNumber pass through', async () => {
    for (const ref of ['safe', 'pending', { blockNumber: '0x1' }]) {
      log.length = 0;
      await post('eth_getBalance', [ADDR1, ref]);
      expect(sent('eth_getBalance')[0]!.params, JSON.stringify(ref)).to.deep.equal([ADDR1, ref]);
    }
    log.length = 0;
    // `true` (full transactions): the state poller's own reads use `false`, so these are the client's.
    const block = await post('eth_getBlockByNumber', ['latest', true]);
    expect(block.json.result.number).to.match(/^0x[0-9a-f]+$/);
    const mine = sent('eth_getBlockByNumber').filter((c) => (c.params as unknown[])[1] === true);
    expect(mine.length).to.be.greaterThan(0);
    expect(mine[0]!.params).to.deep.equal(['latest', true]);
  });

  // Last: stops the state pollers.
  it('once the head goes stale (no poll for over two block times) tags pass through', async () => {
    for (const u of network.upstreams) statePollerOf(svc.proxy, u)?.stop();
    const st = chainStateOf(network);
    await waitFor(() => !st.isHeadFresh(), 5000);
    log.length = 0;
    await post('eth_getBalance', [ADDR1, 'latest']);
    expect(sent('eth_getBalance')[0]!.params).to.deep.equal([ADDR1, 'latest']);
  });
});
