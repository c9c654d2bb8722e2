/**
 * WebSocket subscriptions that survive upstream failure, with real clients: svc in front of two
 * anvil nodes mined in lockstep (test/helpers/lockstep-anvil.ts: the same chain, hash for hash),
 * a contract logging `Tick(blockNumber)` in every block, and five subscribers at once: a raw `ws`
 * client (`newHeads` and `logs` by address), viem's `webSocket` transport (`watchBlocks`,
 * `watchBlockNumber`, `watchContractEvent`) and ethers' `WebSocketProvider` (`on('block')`).
 *
 * 1. The node that served svc's head polls is SIGKILLed mid-stream while the other keeps mining:
 *    every client sees every block number exactly once and in order, with the survivor's hashes,
 *    and every log exactly once.
 * 2. `anvil_reorg` of depth 2 on the survivor (a Tick call in each replacement block): the `logs`
 *    subscribers get the abandoned blocks' logs again with `removed: true` (newest first, as geth
 *    does) and then the new ones; `newHeads` subscribers get the replacement heads (new hashes at
 *    heights they saw), then the chain goes on.
 */
import { expect } from 'chai';
import { WebSocketProvider } from 'ethers';
import { createPublicClient, webSocket, type Address, type Hex, type PublicClient } from 'viem';
import WebSocket from 'ws';
import { startLockstepAnvil, TICK_ABI, TICK_INIT_CODE, type LockstepAnvil } from '../helpers/lockstep-anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

/** A block as a client saw it (hash unknown for clients that only give numbers). */
interface SeenHead {
  number: number;
  hash?: string;
}
/** A log as a client saw it. */
interface SeenLog {
  blockNumber: number;
  blockHash: string;
  removed: boolean;
  /** The Tick event's argument (the block number the log was emitted in). */
  tick: number;
}

/** Everything the subscribers saw, by stream. */
interface Streams {
  rawHeads: SeenHead[];
  rawLogs: SeenLog[];
  viemBlocks: SeenHead[];
  viemNumbers: SeenHead[];
  viemLogs: SeenLog[];
  ethersBlocks: SeenHead[];
}
const HEAD_STREAMS = ['rawHeads', 'viemBlocks', 'viemNumbers', 'ethersBlocks'] as const;
const LOG_STREAMS = ['rawLogs', 'viemLogs'] as const;

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/**
 * The block numbers of a head stream in the order that stream's client delivered them. viem's
 * `watchBlocks` fetches each notified block by number (`eth_getBlockByNumber`) and calls
 * `onBlock` when that fetch returns, so two notifications in a row (the replacement heads of a
 * reorg, a gap filled after failover) can reach it out of order: its numbers are compared
 * sorted (each still exactly once); the order svc sent is checked on the other streams.
 */
const numbersOf = (k: (typeof HEAD_STREAMS)[number], heads: SeenHead[]) => {
  const n = heads.map((h) => h.number);
  return k === 'viemBlocks' ? n.sort((x, y) => x - y) : n;
};

/** A raw `ws` client subscribed to `newHeads` and to `logs` of one address. */
async function rawSubscriber(url: string, address: Address, s: Streams): Promise<WebSocket> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const kinds = new Map<string, 'heads' | 'logs'>();
  const answers = new Map<number, (r: { result?: string; error?: unknown }) => void>();
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as { id?: number; result?: any; error?: unknown; params?: { subscription: string; result: any } };
    if (m.id !== undefined) return answers.get(m.id)?.(m);
    const kind = kinds.get(m.params?.subscription ?? '');
    const r = m.params?.result;
    if (kind === 'heads') s.rawHeads.push({ number: Number(r.number), hash: r.hash });
    else if (kind === 'logs')
      s.rawLogs.push({ blockNumber: Number(r.blockNumber), blockHash: r.blockHash, removed: r.removed === true, tick: Number(BigInt(r.data)) });
  });
  const subscribe = (id: number, params: unknown[], kind: 'heads' | 'logs') =>
    new Promise<void>((resolve, reject) => {
      answers.set(id, (a) => {
        if (typeof a.result !== 'string') return reject(new Error(`eth_subscribe ${JSON.stringify(params)}: ${JSON.stringify(a.error)}`));
        kinds.set(a.result, kind);
        resolve();
      });
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_subscribe', params }));
    });
  await subscribe(1, ['newHeads'], 'heads');
  await subscribe(2, ['logs', { address }], 'logs');
  return ws;
}

describe('e2e: WebSocket subscriptions across an upstream failure and a reorg (real anvil nodes, viem, ethers)', function () {
  this.timeout(60_000);
  let chain: LockstepAnvil;
  let svc: SvcHandle;
  let tick: Address;
  let raw: WebSocket | undefined;
  let viem: PublicClient | undefined;
  let ethers: WebSocketProvider | undefined;
  const unwatch: Array<() => void> = [];
  const errors: unknown[] = [];
  const s: Streams = { rawHeads: [], rawLogs: [], viemBlocks: [], viemNumbers: [], viemLogs: [], ethersBlocks: [] };
  /** First block number the assertions of part 1 cover (every subscriber was live before it was mined). */
  let from = 0;
  /** Last block number of part 1. */
  let to = 0;

  /** Mines a block (with a Tick call) every 300 ms on the live nodes. */
  const mineWithTicks = () => chain.startMining(300, { txsFor: async () => [await chain.signCall(tick)] });
  /** Waits until every stream (and every log stream) holds block `n`. */
  const reached = (n: number, hash?: string) =>
    waitFor(
      () =>
        HEAD_STREAMS.every((k) => s[k].some((h) => h.number === n && (hash === undefined || h.hash === undefined || h.hash === hash))) &&
        LOG_STREAMS.every((k) => s[k].some((l) => l.blockNumber === n && !l.removed && (hash === undefined || l.blockHash === hash))),
      15_000,
    );
  /** eth_getBlockByNumber calls each upstream has served so far (svc's metrics). */
  const blockReads = async (): Promise<Record<string, number>> => {
    const text = await (await fetch(svc.metricsUrl as string)).text();
    const out: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m = /^svc_upstream_request_total\{([^}]*)\} (\S+)$/.exec(line);
      if (!m || !m[1]?.includes('category="eth_getBlockByNumber"')) continue;
      const up = /upstream="([^"]+)"/.exec(m[1])?.[1] ?? '';
      out[up] = (out[up] ?? 0) + Number(m[2]);
    }
    return out;
  };

  before(async () => {
    chain = await startLockstepAnvil();
    tick = await chain.deploy(TICK_INIT_CODE);
    svc = await startSvc({
      metrics: { enabled: true, port: 0 },
      server: { websocket: { newHeadsPollInterval: '100ms' } },
      projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: chain.chainId } }], upstreams: chain.upstreams() }],
    });
    const url = `${svc.url.replace(/^http/, 'ws')}/main/evm/${chain.chainId}`;

    raw = await rawSubscriber(url, tick, s);
    viem = createPublicClient({ transport: webSocket(url, { retryCount: 0 }) });
    unwatch.push(
      viem.watchBlocks({ onBlock: (b) => s.viemBlocks.push({ number: Number(b.number), hash: b.hash ?? undefined }), onError: (e) => errors.push(e) }),
      viem.watchBlockNumber({ onBlockNumber: (n) => s.viemNumbers.push({ number: Number(n) }), onError: (e) => errors.push(e) }),
      viem.watchContractEvent({
        address: tick,
        abi: TICK_ABI,
        eventName: 'Tick',
        onLogs: (logs) => {
          for (const l of logs)
            s.viemLogs.push({ blockNumber: Number(l.blockNumber), blockHash: l.blockHash as Hex, removed: l.removed, tick: Number(l.args.blockNumber) });
        },
        onError: (e) => errors.push(e),
      }),
    );
    ethers = new WebSocketProvider(url);
    await ethers.on('block', (n: number) => s.ethersBlocks.push({ number: n }));

    // Every subscriber is live once it has seen a block; the checked range starts after that.
    mineWithTicks();
    await waitFor(() => [...HEAD_STREAMS, ...LOG_STREAMS].every((k) => s[k].length > 0), 15_000);
    from = (await chain.head()) + 1;
  });

  after(async () => {
    for (const u of unwatch) u();
    await ethers?.destroy();
    // viem's webSocket transport keeps its socket in a shared RPC client: close it.
    const transport = viem?.transport as { getRpcClient?: () => Promise<{ close(): void }> } | undefined;
    await transport?.getRpcClient?.().then(
      (c) => c.close(),
      () => undefined,
    );
    raw?.terminate();
    await chain?.stopMining().catch(() => undefined);
    await svc?.close();
    await chain?.stop();
  });

  it('kills the node serving the head polls mid-stream: every block and every log once, in order, with the survivor’s hashes', async () => {
    while ((await chain.head()) < from + 2) await new Promise((r) => setTimeout(r, 50));
    // The node svc's head follower reads from: the one whose eth_getBlockByNumber count grows
    // faster (evm-state's poller reads both alike; the subscriptions' follower and viem's
    // block reads go through the pipeline to the selected one).
    const r0 = await blockReads();
    await new Promise((r) => setTimeout(r, 700));
    const r1 = await blockReads();
    const [a, b] = chain.ids as [string, string];
    const victim = (r1[a] ?? 0) - (r0[a] ?? 0) >= (r1[b] ?? 0) - (r0[b] ?? 0) ? a : b;
    const survivor = victim === a ? b : a;
    await chain.kill(victim);
    const killedAt = await chain.head();
    while ((await chain.head()) < killedAt + 6) await new Promise((r) => setTimeout(r, 50));
    await chain.stopMining();
    to = await chain.head();
    await reached(to);
    // The survivor took over the head reads.
    const r2 = await blockReads();
    expect((r2[survivor] ?? 0) - (r1[survivor] ?? 0), `eth_getBlockByNumber reads served by ${survivor} after the kill`).to.be.greaterThan(to - killedAt);

    const hashes = new Map<number, string>();
    for (const n of range(from, to)) hashes.set(n, (await chain.block(n)).hash);
    for (const k of HEAD_STREAMS) {
      const seen = s[k].filter((h) => h.number >= from);
      expect(numbersOf(k, seen), `${k}: block numbers`).to.deep.equal(range(from, to));
      for (const h of seen) if (h.hash !== undefined) expect(h.hash, `${k}: hash of ${h.number}`).to.equal(hashes.get(h.number));
    }
    // Before the window too: the raw stream never repeats a block or goes back.
    const all = s.rawHeads.map((h) => h.number);
    expect(all, 'raw newHeads from the start').to.deep.equal(range(all[0] as number, to));
    for (const k of LOG_STREAMS) {
      const seen = s[k].filter((l) => l.blockNumber >= from);
      expect(
        seen.map((l) => l.blockNumber),
        `${k}: one log per block`,
      ).to.deep.equal(range(from, to));
      for (const l of seen) {
        expect(l.removed, `${k}: removed at ${l.blockNumber}`).to.equal(false);
        expect(l.blockHash, `${k}: block hash at ${l.blockNumber}`).to.equal(hashes.get(l.blockNumber));
        expect(l.tick, `${k}: Tick argument`).to.equal(l.blockNumber);
      }
    }
    expect(errors, 'viem watcher errors').to.deep.equal([]);
  });

  it('a reorg of depth 2 on the survivor: removed: true logs for the abandoned blocks, then the new ones; newHeads with the replacement heads', async () => {
    const head = to;
    const old = [await chain.block(head - 1), await chain.block(head)];
    const cut = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, (v as unknown[]).length])) as Record<keyof Streams, number>;
    const replaced = await chain.reorg(2, [
      { to: tick, blockOffset: 0 },
      { to: tick, blockOffset: 1 },
    ]);
    // Two more blocks on the new branch.
    await chain.mine([await chain.signCall(tick)]);
    const last = await chain.mine([await chain.signCall(tick)]);
    await reached(head + 2, last.hash);

    const newHashes = new Map<number, string>();
    for (const n of range(head - 1, head + 2)) newHashes.set(n, (await chain.block(n)).hash);
    expect(newHashes.get(head - 1)).to.equal(replaced[0]?.hash);
    for (const k of LOG_STREAMS) {
      const after = s[k].slice(cut[k]).map((l) => ({ n: l.blockNumber, hash: l.blockHash, removed: l.removed }));
      expect(after, `${k} after the reorg`).to.deep.equal([
        { n: head, hash: old[1]?.hash, removed: true },
        { n: head - 1, hash: old[0]?.hash, removed: true },
        ...range(head - 1, head + 2).map((n) => ({ n, hash: newHashes.get(n), removed: false })),
      ]);
    }
    for (const k of HEAD_STREAMS) {
      const after = s[k].slice(cut[k]);
      expect(numbersOf(k, after), `${k} after the reorg`).to.deep.equal(range(head - 1, head + 2));
      for (const h of after) if (h.hash !== undefined) expect(h.hash, `${k}: hash of ${h.number} after the reorg`).to.equal(newHashes.get(h.number));
    }
    expect(errors, 'viem watcher errors').to.deep.equal([]);
  });
});
