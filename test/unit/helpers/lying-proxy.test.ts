/**
 * Self-check of the lying proxy (test/helpers/lying-proxy.ts) against a real anvil: it forwards
 * the truth, tells each lie only as often as asked (raw bytes included), applies lies inside
 * batches, moves to another node on command, and pipes WebSockets while forging `newHeads`.
 */
import { expect } from 'chai';
import WebSocket from 'ws';
import { startAnvil, type AnvilHandle } from '../../helpers/anvil.ts';
import { startLyingProxy, type LyingProxy } from '../../helpers/lying-proxy.ts';

async function post(url: string, body: string): Promise<string> {
  return (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text();
}
const call = (method: string, params: unknown[] = [], id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

describe('test helper: lying proxy', function () {
  this.timeout(30_000);
  let node: AnvilHandle;
  let other: AnvilHandle;
  let proxy: LyingProxy;

  before(async () => {
    [node, other] = await Promise.all([startAnvil(), startAnvil({ chainId: 1 })]);
  });
  beforeEach(async () => {
    proxy = await startLyingProxy(node.url);
  });
  afterEach(() => proxy.close());
  after(() => Promise.all([node?.stop(), other?.stop()]));

  it('forwards the truth and records every call', async () => {
    expect(JSON.parse(await post(proxy.url, call('eth_chainId'))).result).to.equal('0x7a69');
    expect(proxy.calls.map((c) => c.method)).to.deep.equal(['eth_chainId']);
    expect(proxy.told()).to.equal(0);
  });

  it('tells a lie only as many times as asked, then the truth; raw lies keep their exact bytes', async () => {
    proxy.lie('eth_blockNumber', () => '0x7fffffff', 2);
    const heads = [];
    for (let i = 0; i < 3; i++) heads.push(JSON.parse(await post(proxy.url, call('eth_blockNumber', [], i))) as { id: number; result: string });
    expect(heads.map((h) => h.result).slice(0, 2)).to.deep.equal(['0x7fffffff', '0x7fffffff']);
    expect(heads[2]!.result).to.not.equal('0x7fffffff');
    expect(heads.map((h) => h.id)).to.deep.equal([0, 1, 2]);
    expect(proxy.told('eth_blockNumber')).to.equal(2);

    proxy.lieRaw('eth_getBalance', (_c, id) => `{"jsonrpc":"2.0","id":${id},"result":"0x1","res\\u0075lt":"0x2"}`);
    expect(await post(proxy.url, call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'], 7))).to.equal(
      '{"jsonrpc":"2.0","id":7,"result":"0x1","res\\u0075lt":"0x2"}',
    );
    proxy.truth();
    expect(JSON.parse(await post(proxy.url, call('eth_blockNumber'))).result).to.not.equal('0x7fffffff');
  });

  it('applies lies to each element of a batch', async () => {
    proxy.lie('eth_getBalance', () => null);
    const answers = JSON.parse(
      await post(proxy.url, `[${call('eth_chainId', [], 1)},${call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'], 2)}]`),
    ) as Array<{ id: number; result: unknown }>;
    expect(answers).to.deep.equal([
      { jsonrpc: '2.0', id: 1, result: '0x7a69' },
      { jsonrpc: '2.0', id: 2, result: null },
    ]);
  });

  it('retarget moves the forwarding to another node', async () => {
    proxy.retarget(other.url);
    expect(JSON.parse(await post(proxy.url, call('eth_chainId'))).result).to.equal('0x1');
  });

  it("pipes a WebSocket to the node and forges a newHeads notification under the node's subscription id", async () => {
    const ws = new WebSocket(proxy.wsUrl);
    try {
      const got: Array<{ id?: number; result?: unknown; params?: { subscription: string; result: { number: string } } }> = [];
      ws.on('message', (m) => got.push(JSON.parse(m.toString())));
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      ws.send(call('eth_subscribe', ['newHeads'], 5));
      const deadline = Date.now() + 5000;
      while (!got.some((m) => m.id === 5) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const sub = got.find((m) => m.id === 5)?.result as string;
      expect(sub).to.be.a('string');
      expect(proxy.pushNewHead({ number: '0x7fffffff' })).to.equal(1);
      await node.rpc('anvil_mine', ['0x1']);
      while (got.filter((m) => m.params).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const notes = got.filter((m) => m.params).map((m) => m.params!);
      expect(notes.map((n) => n.subscription)).to.deep.equal([sub, sub]);
      expect(notes[0]!.result.number).to.equal('0x7fffffff');
      expect(Number(notes[1]!.result.number)).to.be.below(0x7fffffff);
    } finally {
      ws.terminate();
    }
  });
});
