/**
 * The WebSocket endpoint (websocket plugin) on a real server in front of anvil, with the `ws`
 * client, viem and ethers: calls and batches through the pipeline (ids and order kept), routing
 * and auth on the upgrade (404, 401 before the socket opens, credentials in a header or the
 * query), rate-limit budgets counting calls made over the socket, subscriptions answered by the
 * hub (alone or inside a batch) and a newHeads notification, the message-size and send-buffer
 * limits (1009, 1008), ping/pong liveness, metrics, the public lifecycle hooks, and the drain (1001).
 */
import { expect } from 'chai';
import { WebSocketProvider } from 'ethers';
import { createPublicClient, webSocket } from 'viem';
import WebSocket from 'ws';
import { definePlugin } from '../../core/plugin-api.ts';
import { WEBSOCKET_SERVICE } from 'svc-proxy/plugins/websocket';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rejectRefusedUpgrade } from '../helpers/ws-upgrade.ts';

const SECRET = 'ws-secret-0123456789-abcdefghij';
const rpc = (id: number | string, method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

/** An open client socket with its answers read in order. */
interface Client {
  ws: WebSocket;
  /** Sends one text frame and resolves with the next text frame. */
  ask(body: unknown): Promise<any>;
  /** Resolves with the close code and reason. */
  closed: Promise<{ code: number; reason: string }>;
}

/** Opens a client socket; rejects with the HTTP status when the upgrade is refused. */
function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const queue: Array<(t: string) => void> = [];
    ws.on('message', (d) => queue.shift()?.(d.toString()));
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    rejectRefusedUpgrade(ws, reject);
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        ws,
        closed,
        ask: (body) =>
          new Promise((r) => {
            queue.push((t) => r(JSON.parse(t)));
            ws.send(typeof body === 'string' ? body : JSON.stringify(body));
          }),
      }),
    );
  });
}

/** The refusal of an upgrade that must not open. */
async function refusal(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  try {
    const c = await connect(url, headers);
    c.ws.close();
  } catch (e) {
    const { status, body } = e as { status: number; body: string };
    return { status, body: JSON.parse(body) };
  }
  throw new Error('the socket opened');
}

describe('e2e: WebSocket endpoint', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let base: string;
  const seen: string[] = [];
  const clients: Client[] = [];
  const open = async (path: string, headers?: Record<string, string>) => {
    const c = await connect(`${base}${path}`, headers);
    clients.push(c);
    return c;
  };

  /** A plugin tapping the endpoint's lifecycle hooks (and one tap that always throws). */
  const tapPlugin = definePlugin({
    name: 'ws-observer',
    dependsOn: ['websocket'],
    apply(host) {
      const ws = host.services.require(WEBSOCKET_SERVICE);
      ws.hooks.open.tap('ws-observer', (c) => seen.push(`open ${c.project.id} ${c.id}`));
      ws.hooks.message.tap('ws-observer', (c, text) => seen.push(`message ${c.id} ${text.length}`));
      ws.hooks.close.tap('ws-observer', (c, code) => seen.push(`close ${c.id} ${code}`));
      ws.hooks.message.tap('ws-observer:broken', () => {
        throw new Error('a broken observer');
      });
    },
  });

  before(async () => {
    anvil = await startAnvil();
    const net = { architecture: 'evm', evm: { chainId: anvil.chainId } };
    const up = () => ({ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } });
    svc = await startSvc(
      {
        metrics: { enabled: true, port: 0 },
        server: { maxBodySize: '256KiB', websocket: { maxBufferedBytes: '16KiB', pingInterval: '5s', newHeadsPollInterval: '100ms' } },
        rateLimiters: { budgets: [{ id: 'three', rules: [{ method: '*', maxCount: 3, period: 'hour' }] }] },
        projects: [
          { id: 'main', networks: [net], upstreams: [up()] },
          { id: 'sec', networks: [net], upstreams: [up()], auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
          { id: 'limited', rateLimitBudget: 'three', networks: [net], upstreams: [up()] },
        ],
      },
      { plugins: [...defaultPreset(), tapPlugin] },
    );
    base = svc.url.replace(/^http/, 'ws');
  });
  after(async () => {
    for (const c of clients) c.ws.terminate();
    await svc?.close();
    await anvil?.stop();
  });

  it('serves calls and batches through the pipeline: eth_blockNumber, eth_chainId, a batch of 3 with ids and order kept', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    const head = await anvil.rpc('eth_blockNumber');
    expect(await c.ask(rpc(1, 'eth_blockNumber'))).to.deep.equal({ jsonrpc: '2.0', id: 1, result: head });
    expect(await c.ask(rpc('chain', 'eth_chainId'))).to.deep.equal({ jsonrpc: '2.0', id: 'chain', result: `0x${anvil.chainId.toString(16)}` });
    // Ids as sent, byte for byte: a number above 2^53 too.
    const batch = await c.ask(
      `[${JSON.stringify(rpc('a', 'eth_chainId'))},{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_blockNumber","params":[]},${JSON.stringify(rpc(3, 'net_version'))}]`,
    );
    // biome-ignore lint/correctness/noPrecisionLoss: the id as JSON.parse reads it (a double), which is the point
    expect(batch.map((a: { id: unknown }) => a.id)).to.deep.equal(['a', 12345678901234567890, 3]);
    expect(batch[1].result).to.equal(head);
    expect(batch[2].result).to.equal(String(anvil.chainId));
  });

  it('routes like HTTP: the network from a body networkId on /<project>; a bad body gets the HTTP error', async () => {
    const c = await open('/main');
    const a = await c.ask({ ...rpc(5, 'eth_chainId'), networkId: `evm:${anvil.chainId}` });
    expect(a).to.deep.equal({ jsonrpc: '2.0', id: 5, result: `0x${anvil.chainId.toString(16)}` });
    expect((await c.ask(rpc(6, 'eth_chainId'))).error.message).to.match(/no network/);
    expect((await c.ask('{not json')).error.code).to.equal(-32700);
  });

  it('refuses an upgrade to a path that names no project or network with HTTP 404 before the socket opens', async () => {
    const r = await refusal(`${base}/nope/evm/${anvil.chainId}`);
    expect(r.status).to.equal(404);
    expect(r.body.error.message).to.match(/project "nope" not found/);
    expect((await refusal(`${base}/main/evm/999999`)).status).to.equal(404);
  });

  it("checks the project's auth on the upgrade: no credential is HTTP 401 with a JSON-RPC error; a header or the query opens", async () => {
    const path = `${base}/sec/evm/${anvil.chainId}`;
    for (const headers of [{}, { 'x-svc-secret-token': 'wrong' }] as Array<Record<string, string>>) {
      const r = await refusal(path, headers);
      expect(r.status).to.equal(401);
      expect(r.body).to.include({ jsonrpc: '2.0', id: null });
      expect(r.body.error.code).to.equal(-32016);
    }
    const byHeader = await open(`/sec/evm/${anvil.chainId}`, { 'x-svc-secret-token': SECRET });
    expect((await byHeader.ask(rpc(1, 'eth_chainId'))).result).to.match(/^0x/);
    const byQuery = await open(`/sec/evm/${anvil.chainId}?secret=${SECRET}`);
    expect((await byQuery.ask(rpc(1, 'eth_chainId'))).result).to.match(/^0x/);
  });

  it("counts every call made over the socket against the project's rate-limit budget", async () => {
    const c = await open(`/limited/evm/${anvil.chainId}`);
    for (let i = 0; i < 3; i++) expect((await c.ask(rpc(i, 'eth_blockNumber'))).result, `call ${i}`).to.match(/^0x/);
    const over = await c.ask(rpc(3, 'eth_blockNumber'));
    expect(over.id).to.equal(3);
    expect(over.error).to.include({ code: -32005, message: 'rate-limit exceeded' });
  });

  it('eth_subscribe goes to the subscription hub: the caller id is kept, alone or inside a batch in order', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    const a = await c.ask(rpc('sub-1', 'eth_subscribe', ['newHeads']));
    expect(a.id).to.equal('sub-1');
    expect(a.result).to.match(/^0x[0-9a-f]+$/);
    const b = await c.ask([rpc(1, 'eth_chainId'), rpc(2, 'eth_subscribe', ['newHeads']), rpc(3, 'eth_unsubscribe', ['0x00']), rpc(4, 'eth_blockNumber')]);
    expect(b.map((x: { id: number }) => x.id)).to.deep.equal([1, 2, 3, 4]);
    expect(b[0].result).to.equal(`0x${anvil.chainId.toString(16)}`);
    expect(b[1].result).to.match(/^0x[0-9a-f]+$/);
    expect(b[2].result).to.equal(false);
    expect(b[3].result).to.match(/^0x/);
    expect((await c.ask(rpc(9, 'eth_unsubscribe', [1, 2]))).error.code).to.equal(-32602);
  });

  it('closes a message larger than server.maxBodySize with 1009', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    c.ws.send(JSON.stringify(rpc(1, 'eth_call', [{ data: `0x${'00'.repeat(160 * 1024)}` }, 'latest'])));
    expect((await c.closed).code).to.equal(1009);
  });

  it('closes a client that does not read with 1008 and a reason, rather than buffering without bound', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    // Each answer is about 100 blocks; the kernel's socket buffers take some megabytes first.
    const batch = JSON.stringify(Array.from({ length: 100 }, (_, i) => rpc(i, 'eth_getBlockByNumber', ['0x0', true])));
    expect((await c.ask(batch)).length).to.equal(100);
    const socket = (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause();
    const before = await counter(svc, 'in');
    const sent = 250;
    for (let i = 0; i < sent; i++) c.ws.send(batch);
    // svc has read what it will read and written (or dropped) every answer: both counters settle.
    let last = '';
    let steady = 0;
    await waitFor(async () => {
      const now = `${await counter(svc, 'in')}/${await counter(svc, 'out')}`;
      steady = now === last ? steady + 1 : 0;
      last = now;
      return steady >= 10;
    }, 30_000);
    expect(await counter(svc, 'in')).to.be.greaterThan(before);
    let answers = 0;
    c.ws.on('message', () => answers++);
    socket.resume();
    const closed = await c.closed;
    expect(closed.code).to.equal(1008);
    expect(closed.reason).to.equal('send buffer over 16384 bytes: client too slow');
    expect(answers).to.be.lessThan(sent);
  });

  it('exports svc_ws_connections, svc_ws_subscriptions and svc_ws_messages_total on /metrics', async () => {
    await open(`/main/evm/${anvil.chainId}`);
    const text = await (await fetch(svc.metricsUrl as string)).text();
    expect(text).to.match(/^svc_ws_connections\{project="main"\} [1-9]/m);
    expect(text).to.match(/^svc_ws_messages_total\{project="main",direction="in"\} [1-9]/m);
    expect(text).to.match(/^svc_ws_messages_total\{project="main",direction="out"\} [1-9]/m);
    expect(text).to.include('# TYPE svc_ws_subscriptions gauge');
    expect(text).to.match(/^svc_plugin_errors_total\{plugin="ws-observer",hook="ws.message"\} [1-9]/m);
  });

  it('serves viem (webSocket transport) and ethers (WebSocketProvider)', async () => {
    const url = `${base}/main/evm/${anvil.chainId}`;
    const head = BigInt(await anvil.rpc('eth_blockNumber'));
    const client = createPublicClient({ transport: webSocket(url) });
    expect(await client.getBlockNumber({ cacheTime: 0 })).to.equal(head);
    expect((await client.getBalance({ address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266' })) > 0n).to.equal(true);
    (await client.transport.getRpcClient()).close();
    const provider = new WebSocketProvider(url);
    try {
      expect(await provider.getBlockNumber()).to.equal(Number(head));
    } finally {
      await provider.destroy();
    }
  });

  it('a plugin tapping WEBSOCKET_SERVICE sees open, message and close; a throwing tap breaks nothing', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    await c.ask(rpc(1, 'eth_chainId'));
    const id = seen
      .filter((s) => s.startsWith('open main '))
      .at(-1)
      ?.split(' ')[2];
    expect(id).to.match(/^ws-\d+$/);
    c.ws.close(1000);
    await waitFor(() => seen.includes(`close ${id} 1000`));
    expect(seen).to.include(`message ${id} ${JSON.stringify(rpc(1, 'eth_chainId')).length}`);
    expect(svc.proxy.services.require(WEBSOCKET_SERVICE).connections()).to.be.greaterThan(0);
  });

  it('a newHeads subscription gets the next block as an eth_subscription notification; svc_ws_subscriptions counts it', async () => {
    const c = await open(`/main/evm/${anvil.chainId}`);
    const sub = await c.ask(rpc('s', 'eth_subscribe', ['newHeads']));
    expect(sub.result).to.match(/^0x[0-9a-f]+$/);
    const note = new Promise<any>((resolve) =>
      c.ws.on('message', (d) => {
        const m = JSON.parse(d.toString());
        if (m.method === 'eth_subscription') resolve(m);
      }),
    );
    await anvil.rpc('evm_mine');
    const head = await anvil.rpc('eth_blockNumber');
    const n = await note;
    expect(n.params.subscription).to.equal(sub.result);
    expect(n.params.result.number).to.equal(head);
    const text = await (await fetch(svc.metricsUrl as string)).text();
    expect(text).to.match(/^svc_ws_subscriptions\{type="newHeads"\} [1-9]/m);
  });

  it('pings each connection: a peer that never pongs is cut, one that does stays; every connection gets 1001 on shutdown, which does not wait for them', async () => {
    const other = await startSvc({
      server: { websocket: { pingInterval: '150ms' } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
        },
      ],
    });
    const url = `${other.url.replace(/^http/, 'ws')}/main/evm/${anvil.chainId}`;
    const live = await connect(url);
    const mute = await new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(url, { autoPong: false });
      ws.once('open', () => resolve(ws));
      ws.once('error', reject);
    });
    const muteClosed = new Promise<number>((r) => mute.on('close', (code) => r(code)));
    expect(await muteClosed).to.equal(1006);
    expect((await live.ask(rpc(1, 'eth_chainId'))).result).to.match(/^0x/);
    // The open socket is closed when close() begins, so the listener stops at once: no wait for
    // the 2 s cut of connections still busy after the drain.
    const t0 = performance.now();
    await other.close();
    expect(performance.now() - t0, 'shutdown with a WebSocket open').to.be.below(1500);
    expect(await live.closed).to.deep.equal({ code: 1001, reason: 'server shutting down' });
  });
});

/** `svc_ws_messages_total{project="main",direction}` from /metrics. */
async function counter(svc: SvcHandle, direction: 'in' | 'out'): Promise<number> {
  const text = await (await fetch(svc.metricsUrl as string)).text();
  const m = new RegExp(`^svc_ws_messages_total\\{project="main",direction="${direction}"\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}
