/**
 * The subscription hub's upstream WebSocket side (`upstreams[].wsEndpoint`) with real anvil nodes
 * mined in lockstep (test/helpers/lockstep-anvil.ts); test/e2e/websocket-failover.test.ts covers
 * polling-only failover and reorgs with real clients.
 *
 * svc polls heads only every 30 s here, so a head that reaches a client within a second came from
 * an upstream's `newHeads` notification waking the follower:
 * 1. `newPendingTransactions` is passed through from a node's WebSocket: a transaction put in the
 *    pool reaches the subscriber as its hash.
 * 2. newHeads arrive at once (woken by the first node's WebSocket); that node is SIGKILLed
 *    mid-stream, the wake-up feed moves to the other node, and the subscriber still sees every
 *    block once, in order, with the survivor's hashes, again within a second of each block.
 */
import { expect } from 'chai';
import { keccak256, type Hex } from 'viem';
import WebSocket from 'ws';
import { startLockstepAnvil, type LockstepAnvil } from '../helpers/lockstep-anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

/** A raw `ws` client: subscribe calls answered by id, notifications collected per subscription with their arrival time. */
async function client(
  url: string,
): Promise<{ ws: WebSocket; subscribe(params: unknown[]): Promise<string>; events: Map<string, Array<{ at: number; result: any }>> }> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const events = new Map<string, Array<{ at: number; result: any }>>();
  const answers = new Map<number, (m: { result?: string; error?: { message: string } }) => void>();
  let next = 0;
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as { id?: number; result?: string; error?: { message: string }; params?: { subscription: string; result: unknown } };
    if (m.id !== undefined) return answers.get(m.id)?.(m);
    if (m.params) events.get(m.params.subscription)?.push({ at: Date.now(), result: m.params.result });
  });
  return {
    ws,
    events,
    subscribe: (params) =>
      new Promise((resolve, reject) => {
        const id = ++next;
        answers.set(id, (m) => {
          if (typeof m.result !== 'string') return reject(new Error(`eth_subscribe ${JSON.stringify(params)}: ${m.error?.message}`));
          events.set(m.result, []);
          resolve(m.result);
        });
        ws.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_subscribe', params }));
      }),
  };
}

describe('websocket subscriptions: upstream WebSocket feeds (wsEndpoint) with real nodes', function () {
  this.timeout(60_000);
  let chain: LockstepAnvil;
  let svc: SvcHandle;
  let url: string;
  const sockets: WebSocket[] = [];

  before(async () => {
    chain = await startLockstepAnvil();
    svc = await startSvc({
      server: { websocket: { newHeadsPollInterval: '30s' } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: chain.chainId } }],
          upstreams: chain.upstreams().map((u) => ({ ...u, wsEndpoint: u.endpoint.replace(/^http/, 'ws') })),
        },
      ],
    });
    url = `${svc.url.replace(/^http/, 'ws')}/main/evm/${chain.chainId}`;
  });

  after(async () => {
    for (const s of sockets) s.terminate();
    await chain?.stopMining().catch(() => undefined);
    await svc?.close();
    await chain?.stop();
  });

  it('passes newPendingTransactions through from a node: a transaction put in the pool reaches the subscriber as its hash', async () => {
    const c = await client(url);
    sockets.push(c.ws);
    const sub = await c.subscribe(['newPendingTransactions']);
    const events = c.events.get(sub) as Array<{ result: unknown }>;
    // The upstream subscription is made when the first client subscribes: give it a moment, then
    // retry with a new transaction until one is announced (best effort by design).
    const seen: Hex[] = [];
    await waitFor(async () => {
      const raw = await chain.signCall(chain.from, '0x');
      seen.push(keccak256(raw));
      await chain.mine([raw]);
      return events.some((e) => seen.includes(e.result as Hex));
    }, 10_000);
    expect(events.every((e) => typeof e.result === 'string' && /^0x[0-9a-f]{64}$/.test(e.result))).to.equal(true);
    c.ws.terminate();
  });

  it('heads come at once from the feeding node’s notifications; when that node dies the other feeds, and every block arrives once, in order', async () => {
    const c = await client(url);
    sockets.push(c.ws);
    const sub = await c.subscribe(['newHeads']);
    const heads = c.events.get(sub) as Array<{ at: number; result: { number: Hex; hash: Hex } }>;
    const mined = new Map<number, { at: number; hash: Hex }>();
    chain.startMining(250, { onBlock: (b) => mined.set(Number(b.number), { at: Date.now(), hash: b.hash }) });
    await waitFor(() => heads.length >= 4, 10_000);
    const killedAt = await chain.head();
    const killTime = Date.now();
    await chain.kill('anvil-a');
    await waitFor(() => heads.length > 0 && Number(heads[heads.length - 1]?.result.number) >= killedAt + 14, 20_000);
    await chain.stopMining();
    const last = await chain.head();
    await waitFor(() => Number(heads[heads.length - 1]?.result.number) >= last, 10_000);

    const numbers = heads.map((h) => Number(h.result.number));
    const first = numbers[0] as number;
    expect(numbers, 'every block once, in order').to.deep.equal(Array.from({ length: last - first + 1 }, (_, i) => first + i));
    let checkedAfter = 0;
    for (const h of heads) {
      const n = Number(h.result.number);
      const b = mined.get(n);
      if (!b) continue;
      if (b.at > killTime + 2_000) checkedAfter++;
      expect(h.result.hash, `hash of block ${n}`).to.equal(b.hash);
      if (b.at < killTime - 300 || b.at > killTime + 2_000) {
        // Not counting the blocks mined while the feed moved (0.5 s backoff), each head came within a second: a wake-up, not the 30 s poll.
        expect(h.at - b.at, `block ${n} delivered after`).to.be.lessThan(1_000);
      }
    }
    expect(checkedAfter, "blocks delivered through the second node's feed").to.be.greaterThan(3);
    const survivor = chain.node('anvil-b');
    const tip = (await survivor.rpc('eth_getBlockByNumber', ['latest', false])) as { hash: Hex };
    expect(heads[heads.length - 1]?.result.hash).to.equal(tip.hash);
  });
});
