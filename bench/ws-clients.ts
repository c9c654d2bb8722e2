/**
 * Child process of the WebSocket section of `npm run bench` (bench/ws.ts): N WebSocket clients
 * (the `ws` package) on one svc URL, each subscribed to `newHeads`, recording when each client
 * receives each block. It runs apart from the bench process so that the parent's own work
 * (starting targets, reading /proc) neither delays the clients nor is charged to them.
 *
 * IPC protocol (parent → child → parent):
 * - `{type:'connect', url, clients}` → opens the sockets (50 handshakes at a time), sends each
 *   `eth_subscribe ["newHeads"]`, answers `{type:'subscribed', ok, failed, error?}` once every
 *   client has its subscription id (or failed).
 * - `{type:'measure', blocks, timeoutMs}` → waits for the first block number above every number
 *   seen so far, records the receive time of that block and the next `blocks − 1` at every client,
 *   and answers `{type:'measured', first, times, complete, cpuMicros}` when every client has the
 *   last one (or at `timeoutMs`): `times[b * clients + c]` is when client `c` received block
 *   `first + b` (epoch ms with sub-ms precision, `performance.timeOrigin + performance.now()`,
 *   comparable across processes), null if it did not; `cpuMicros` is this process's CPU over the window.
 * - `{type:'stats'}` → `{type:'stats', notifications, duplicates, backwards, gaps, closed}` over
 *   the whole run: a block number received twice by one client, lower than one it already had,
 *   or more than one above its last (a missed block); sockets closed by the server.
 * - `{type:'close'}` → closes every socket and exits.
 */
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';

/** One client's socket and what it has seen. */
interface Client {
  ws: WebSocket;
  /** Highest block number received, -1 before the first. */
  last: number;
}

const clients: Client[] = [];
/** The window of a `measure`: from `first`, the first block number above `above` (-1 until it arrives). */
let measuring: { above: number; first: number; blocks: number; times: Float64Array; pending: number; done: () => void } | undefined;
/** Highest block number any client received (the `measure` window starts above it). */
let highest = -1;
const stats = { notifications: 0, duplicates: 0, backwards: 0, gaps: 0, closed: 0 };

const now = () => performance.timeOrigin + performance.now();
const send = (m: unknown) => process.send?.(m);

/** The block number of a `newHeads` notification's text, or NaN (no JSON parse: this is the hot loop). */
function blockNumberOf(text: string): number {
  if (!text.includes('"eth_subscription"')) return Number.NaN;
  const at = text.indexOf('"number":"0x');
  if (at < 0) return Number.NaN;
  const from = at + '"number":"'.length;
  return Number.parseInt(text.slice(from, text.indexOf('"', from)), 16);
}

function onNotification(c: Client, index: number, text: string): void {
  const t = now();
  const n = blockNumberOf(text);
  if (Number.isNaN(n)) return;
  stats.notifications++;
  if (n === c.last) stats.duplicates++;
  else if (n < c.last) stats.backwards++;
  else if (c.last >= 0 && n > c.last + 1) stats.gaps += n - c.last - 1;
  if (n > c.last) c.last = n;
  if (n > highest) highest = n;
  const m = measuring;
  if (!m) return;
  if (m.first < 0 && n > m.above) m.first = n;
  if (m.first < 0) return;
  const b = n - m.first;
  if (b < 0 || b >= m.blocks) return;
  const slot = b * clients.length + index;
  if (!Number.isNaN(m.times[slot] as number)) return;
  m.times[slot] = t;
  if (b === m.blocks - 1 && --m.pending === 0) m.done();
}

/** Opens one client and subscribes it; resolves with an error message or undefined. */
function open(url: string, index: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const c: Client = { ws, last: -1 };
    clients[index] = c;
    let subscribed = false;
    ws.once('error', (e) => {
      if (!subscribed) resolve(e.message);
    });
    ws.once('close', () => {
      stats.closed++;
      if (!subscribed) resolve('closed before subscribing');
    });
    ws.once('open', () => ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}'));
    ws.on('message', (data) => {
      const text = data.toString();
      if (subscribed) return onNotification(c, index, text);
      if (!text.includes('"id":1')) return onNotification(c, index, text);
      subscribed = true;
      resolve(text.includes('"result":"0x') ? undefined : `eth_subscribe answered ${text.slice(0, 200)}`);
    });
  });
}

async function connect(url: string, count: number): Promise<void> {
  let failed = 0;
  let error: string | undefined;
  for (let i = 0; i < count; i += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, count - i) }, (_, k) => open(url, i + k)));
    for (const e of batch) {
      if (e === undefined) continue;
      failed++;
      error ??= e;
    }
  }
  send({ type: 'subscribed', ok: count - failed, failed, error });
}

function measure(blocks: number, timeoutMs: number): void {
  const times = new Float64Array(blocks * clients.length).fill(Number.NaN);
  const cpu0 = process.cpuUsage();
  let finished = false;
  const finish = (complete: boolean) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    const cpu = process.cpuUsage(cpu0);
    const first = measuring?.first ?? -1;
    measuring = undefined;
    send({ type: 'measured', first, times: Array.from(times, (t) => (Number.isNaN(t) ? null : t)), complete, cpuMicros: cpu.user + cpu.system });
  };
  const timer = setTimeout(() => finish(false), timeoutMs);
  measuring = { above: highest, first: -1, blocks, times, pending: clients.length, done: () => finish(true) };
}

process.on('message', (m: { type: string; url?: string; clients?: number; blocks?: number; timeoutMs?: number }) => {
  if (m.type === 'connect') void connect(String(m.url), Number(m.clients));
  else if (m.type === 'measure') measure(Number(m.blocks), Number(m.timeoutMs));
  else if (m.type === 'stats') send({ type: 'stats', ...stats });
  else if (m.type === 'close') {
    for (const c of clients) c?.ws.terminate();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
