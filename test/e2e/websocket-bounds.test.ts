/**
 * WebSocket bounds and the head follower against real anvil nodes behind a recording proxy:
 * an upgrade from a browser origin the project's CORS does not allow is refused 403 (no Origin,
 * the svc host's own origin and a listed origin pass); `maxConnectionsPerClient` (429) and
 * `maxConnections` (503) refuse the upgrade over the cap; each `eth_subscribe` counts against
 * the caller's rate-limit budget (svc's own follower polls spend none of it); 5 sockets × 20
 * distinct `logs` filters cost one `eth_getLogs` per block upstream and each subscriber gets
 * exactly its logs; one far-future `latest` block
 * answered by the upstream neither reaches `newHeads` subscribers nor stops the real heads.
 */
import { expect } from 'chai';
import WebSocket from 'ws';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rejectRefusedUpgrade } from '../helpers/ws-upgrade.ts';

const rpc = (id: number | string, method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

/** An open socket: answers by id, notifications by subscription id. */
interface Client {
  ws: WebSocket;
  ask(body: ReturnType<typeof rpc>): Promise<any>;
  notes: Map<string, any[]>;
}

/** Opens a socket; rejects with `{status}` when the upgrade is refused. */
function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const waiting = new Map<unknown, (v: any) => void>();
    const notes = new Map<string, any[]>();
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.method === 'eth_subscription') {
        const list = notes.get(m.params.subscription) ?? [];
        list.push(m.params.result);
        notes.set(m.params.subscription, list);
      } else waiting.get(m.id)?.(m);
    });
    rejectRefusedUpgrade(ws, reject);
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        ws,
        notes,
        ask: (body) =>
          new Promise((r) => {
            waiting.set(body.id, r);
            ws.send(JSON.stringify(body));
          }),
      }),
    );
  });
}

/** The HTTP status an upgrade is refused with, or 101 when it opened (then closed at once). */
async function statusOf(url: string, headers: Record<string, string> = {}): Promise<number> {
  try {
    const c = await connect(url, headers);
    c.ws.close();
    return 101;
  } catch (e) {
    return (e as { status: number }).status;
  }
}

/** Closes sockets and waits until each has closed. */
async function closeAll(list: Client[]): Promise<void> {
  await Promise.all(
    list.splice(0).map((c) => new Promise<void>((r) => (c.ws.readyState === WebSocket.CLOSED ? r() : (c.ws.once('close', () => r()), c.ws.close())))),
  );
}

describe('e2e: WebSocket bounds and head follower', function () {
  this.timeout(90_000);
  let anvil: AnvilHandle;
  let proxy: RecordingProxy;
  let svc: SvcHandle;
  let base: string;
  const clients: Client[] = [];
  const open = async (path: string, headers?: Record<string, string>) => {
    const c = await connect(`${base}${path}`, headers);
    clients.push(c);
    return c;
  };

  before(async () => {
    anvil = await startAnvil();
    proxy = await startRecordingProxy(anvil.url);
    const net = { architecture: 'evm', evm: { chainId: anvil.chainId } };
    // No state polls after the first: the follower's reads are the only `latest` reads.
    const up = () => ({ id: 'anvil', endpoint: proxy.url, evm: { chainId: anvil.chainId, statePollerInterval: '1h' } });
    svc = await startSvc({
      server: { websocket: { newHeadsPollInterval: '100ms', maxConnectionsPerClient: 6, maxConnections: 50 } },
      rateLimiters: { budgets: [{ id: 'three', rules: [{ method: '*', maxCount: 3, period: 'hour' }] }] },
      projects: [
        { id: 'main', networks: [net], upstreams: [up()] },
        { id: 'web', cors: { allowedOrigins: ['https://dapp.example'] }, networks: [net], upstreams: [up()] },
        { id: 'limited', rateLimitBudget: 'three', networks: [net], upstreams: [up()] },
      ],
    });
    base = svc.url.replace(/^http/, 'ws');
  });
  afterEach(() => closeAll(clients));
  after(async () => {
    await closeAll(clients);
    await svc?.close();
    await proxy?.close();
    await anvil?.stop();
  });

  it("refuses an upgrade whose Origin the project's CORS does not allow with 403; no Origin, the svc host's own and a listed one open", async () => {
    const path = `/main/evm/${anvil.chainId}`;
    expect(await statusOf(`${base}${path}`, { Origin: 'https://evil.example' })).to.equal(403);
    expect(await statusOf(`${base}/web/evm/${anvil.chainId}`, { Origin: 'https://evil.example' })).to.equal(403);
    expect(await statusOf(`${base}/web/evm/${anvil.chainId}`, { Origin: 'https://dapp.example' })).to.equal(101);
    expect(await statusOf(`${base}${path}`)).to.equal(101);
    expect(await statusOf(`${base}${path}`, { Origin: svc.url })).to.equal(101);
    const refused = await connect(`${base}${path}`, { Origin: 'https://evil.example' }).catch((e: { body: string }) => JSON.parse(e.body));
    expect(refused.error.message).to.match(/origin not allowed/);
  });

  it('refuses the upgrade past maxConnectionsPerClient with 429; a closed socket makes room', async () => {
    const path = `/main/evm/${anvil.chainId}`;
    for (let i = 0; i < 6; i++) await open(path);
    expect(await statusOf(`${base}${path}`)).to.equal(429);
    await closeAll(clients.slice(0, 1));
    clients.shift();
    await waitFor(async () => (await statusOf(`${base}${path}`)) === 101, 5000);
  });

  it('refuses the upgrade past maxConnections with 503', async () => {
    const small = await startSvc({
      server: { websocket: { maxConnections: 2 } },
      projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }], upstreams: [{ id: 'a', endpoint: anvil.url }] }],
    });
    try {
      const url = `${small.url.replace(/^http/, 'ws')}/main/evm/${anvil.chainId}`;
      clients.push(await connect(url), await connect(url));
      expect(await statusOf(url)).to.equal(503);
      await closeAll(clients);
    } finally {
      await small.close();
    }
  });

  it("counts each eth_subscribe against the caller's rate-limit budget; the head follower's own polls spend none of it", async () => {
    const c = await open(`/limited/evm/${anvil.chainId}`);
    expect((await c.ask(rpc('h', 'eth_subscribe', ['newHeads']))).result).to.match(/^0x/);
    // The follower polls every 100 ms through the project's pipeline meanwhile.
    await new Promise((r) => setTimeout(r, 350));
    for (let i = 1; i < 3; i++)
      expect((await c.ask(rpc(i, 'eth_subscribe', ['logs', { address: `0x${String(i).repeat(40)}` }]))).result, `subscription ${i}`).to.match(/^0x/);
    const over = await c.ask(rpc(3, 'eth_subscribe', ['newHeads']));
    expect(over.error).to.include({ code: -32005, message: 'rate-limit exceeded' });
  });

  it('5 sockets × 20 distinct logs filters cost one eth_getLogs per block upstream; each subscriber gets exactly its logs', async () => {
    const [from] = (await anvil.rpc('eth_accounts')) as string[];
    // A contract whose code emits one LOG0 per call.
    const deploy = async () => {
      const tx = await anvil.rpc('eth_sendTransaction', [{ from, data: '0x6006600c60003960066000f360006000a000' }]);
      // Automine answers the hash before the receipt is readable on a busy machine: wait for it.
      let receipt: { contractAddress: string } | null = null;
      await waitFor(async () => (receipt = (await anvil.rpc('eth_getTransactionReceipt', [tx])) as { contractAddress: string } | null) !== null, 10_000);
      return (receipt as unknown as { contractAddress: string }).contractAddress.toLowerCase();
    };
    const a = await deploy();
    const b = await deploy();
    const subs: Array<{ c: Client; id: string; address: string }> = [];
    for (let s = 0; s < 5; s++) {
      const c = await open(`/main/evm/${anvil.chainId}`);
      for (let f = 0; f < 20; f++) {
        const address = f === 0 ? a : f === 1 ? b : `0x${(s * 100 + f).toString(16).padStart(40, 'c')}`;
        const r = await c.ask(rpc(f, 'eth_subscribe', ['logs', { address }]));
        subs.push({ c, id: r.result as string, address });
      }
    }
    const head = await c0BlockNumber(anvil);
    const before = proxy.callsOf('eth_getLogs').length;
    await anvil.rpc('eth_sendTransaction', [{ from, to: a }]);
    await anvil.rpc('eth_sendTransaction', [{ from, to: b }]);
    const gotAll = () => subs.every((x) => (x.c.notes.get(x.id)?.length ?? 0) === (x.address === a || x.address === b ? 1 : 0));
    await waitFor(gotAll, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const blocks = (await c0BlockNumber(anvil)) - head;
    const calls = proxy.callsOf('eth_getLogs').length - before;
    expect(calls, `${calls} eth_getLogs for ${blocks} blocks`).to.be.at.most(blocks);
    expect(gotAll()).to.equal(true);
    for (const x of subs.filter((s) => s.address === a || s.address === b)) expect(x.c.notes.get(x.id)?.[0].address).to.equal(x.address);
  });

  it('one far-future latest block answered by the upstream is not emitted, and the real heads keep coming', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    const id = (await c.ask(rpc(1, 'eth_subscribe', ['newHeads']))).result as string;
    const real = (await anvil.rpc('eth_getBlockByNumber', ['latest', false])) as Record<string, unknown>;
    let lied = false;
    proxy.intercept = (call) => {
      if (lied || call.method !== 'eth_getBlockByNumber' || call.params[0] !== 'latest') return undefined;
      lied = true;
      return { result: { ...real, number: '0x7fffffff', hash: `0x${'f'.repeat(64)}` } };
    };
    await waitFor(() => lied, 5000);
    proxy.intercept = undefined;
    const start = await c0BlockNumber(anvil);
    for (let i = 0; i < 3; i++) await anvil.rpc('evm_mine');
    await waitFor(() => (c.notes.get(id) ?? []).some((h) => Number.parseInt(h.number, 16) === start + 3), 10_000);
    const numbers = (c.notes.get(id) ?? []).map((h) => Number.parseInt(h.number, 16));
    expect(
      numbers.every((n) => n <= start + 3),
      numbers.join(','),
    ).to.equal(true);
    expect(numbers.slice(-3)).to.deep.equal([start + 1, start + 2, start + 3]);
  });
});

async function c0BlockNumber(anvil: AnvilHandle): Promise<number> {
  return Number.parseInt((await anvil.rpc('eth_blockNumber')) as string, 16);
}
