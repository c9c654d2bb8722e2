/**
 * "WebSocket newHeads fan-out" section of `npm run bench`: what svc spends to deliver each new
 * block to many `eth_subscribe ["newHeads"]` clients, and how long the last client waits.
 *
 * Setup: the fake upstream in its advancing mode (bench/targets/upstream.ts `--advance-ms`: one
 * new block every `BENCH_WS_ADVANCE_MS`, 200 ms by default, each header's `parentHash` the hash
 * of the block before) behind svc as shipped (default preset, memory cache and multiplexing on,
 * `server.websocket.newHeadsPollInterval` `BENCH_WS_POLL` = 50ms). The clients are `ws` sockets in
 * a child process (bench/ws-clients.ts), so their own work is neither the bench process's nor svc's.
 *
 * Windows, each `BENCH_WS_BLOCKS` (20) blocks long, all on the same svc process:
 * 1. idle: no WebSocket client (svc's state poller only), the same wall time as the others;
 * 2. one subscribed client;
 * 3. `BENCH_WS_CLIENTS` (1,000) subscribed clients, `BENCH_REPS` windows.
 * svc's CPU (user + system, from the target's own report) per emitted block is quoted for each;
 * the difference between 3 and 2, divided by the extra clients, is the CPU of one notification.
 * Fan-out latency, from the receive times the clients record (epoch ms, sub-ms, same clock):
 * per block, the spread from the first client's receipt to the last one's; per notification, its
 * delay after the block's first receipt; and from the upstream's advance (when the block appeared
 * there) to each client, which adds svc's poll wait and its `eth_getBlockByNumber` round trip.
 * Every client's block numbers are checked: none missed, repeated or going backwards.
 *
 * Part of `npm run bench` (`BENCH_SKIP_WS=1` leaves it out); with `BENCH_SCENARIOS=fwd` and the
 * other `BENCH_SKIP_*` set it runs nearly alone (about 30 s). Settings: `BENCH_WS_CLIENTS`,
 * `BENCH_WS_BLOCKS`, `BENCH_WS_ADVANCE_MS`, `BENCH_WS_POLL` (an svc duration), `BENCH_REPS`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fmt, markdownTable, median, percentile, preflight, progress, singleBody, startTarget, TARGETS, type BenchSettings, type Target } from './lib.ts';

/** The client process (bench/ws-clients.ts). */
const CLIENTS = fileURLToPath(new URL('./ws-clients.ts', import.meta.url));
/** The fake upstream's head when the run starts. */
const START_BLOCK = 0x1234567;

function envInt(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}=${raw}: expected an integer >= ${min}`);
  return n;
}

/** One measured window of the client process. */
interface Window {
  clients: number;
  /** First block number of the window. */
  first: number;
  blocks: number;
  /** `times[b * clients + c]`: when client `c` received block `first + b`, epoch ms; NaN = not received. */
  times: number[];
  /** Whether every client received the window's last block before the timeout. */
  complete: boolean;
  /** svc's CPU over the window, µs. */
  svcCpuMicros: number;
  /** The client process's CPU over the window, µs. */
  clientCpuMicros: number;
  /** svc's RSS and V8 heap at the end of the window, KiB. */
  svcRssKb: number;
  svcHeapKb: number;
}

/** The client process, with a typed wait for its next message of a type. */
interface ClientProcess {
  child: ChildProcess;
  next<T>(type: string): Promise<T>;
  close(): Promise<void>;
}

function startClients(): ClientProcess {
  const child = fork(CLIENTS, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiters = new Map<string, Array<(m: unknown) => void>>();
  child.on('message', (m: { type: string }) => waiters.get(m.type)?.shift()?.(m));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    next: <T>(type: string) =>
      new Promise<T>((resolve, reject) => {
        const list = waiters.get(type) ?? [];
        list.push((m) => resolve(m as T));
        waiters.set(type, list);
        void exited.then(() => reject(new Error(`ws clients: exited while waiting for ${type}`)));
      }),
    async close() {
      if (child.exitCode === null && child.connected) child.send({ type: 'close' });
      const hard = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(hard);
    },
  };
}

/**
 * Measures one window of `blocks` blocks with the client process's subscribed clients.
 * @throws Error when the clients saw no block at all before the timeout
 */
async function measureWindow(svc: Target, cp: ClientProcess, clients: number, blocks: number, advanceMs: number): Promise<Window> {
  await svc.reset();
  const answer = cp.next<{ first: number; times: Array<number | null>; complete: boolean; cpuMicros: number }>('measured');
  cp.child.send({ type: 'measure', blocks, timeoutMs: (blocks + 2) * advanceMs + 10_000 });
  const m = await answer;
  const usage = await svc.report();
  if (m.first < 0) throw new Error(`ws: no newHeads notification reached ${clients} client(s) within the window`);
  return {
    clients,
    first: m.first,
    blocks,
    times: m.times.map((t) => (t === null ? Number.NaN : t)),
    complete: m.complete,
    svcCpuMicros: usage.cpuMicros,
    clientCpuMicros: m.cpuMicros,
    svcRssKb: usage.rssKb,
    svcHeapKb: usage.heapUsedKb,
  };
}

/** Connects `clients` sockets in a new client process and subscribes each to newHeads. */
async function connectClients(url: string, clients: number): Promise<ClientProcess> {
  const cp = startClients();
  const answer = cp.next<{ ok: number; failed: number; error?: string }>('subscribed');
  cp.child.send({ type: 'connect', url, clients });
  const s = await answer;
  if (s.failed > 0) {
    await cp.close();
    throw new Error(`ws: ${s.failed} of ${clients} clients could not subscribe: ${s.error}`);
  }
  return cp;
}

/** Latency figures of a set of windows, ms. */
function latencies(windows: Window[], originMs: number, advanceMs: number): { spread: number[]; delay: number[]; fromAdvance: number[]; missing: number } {
  const spread: number[] = [];
  const delay: number[] = [];
  const fromAdvance: number[] = [];
  let missing = 0;
  for (const w of windows) {
    for (let b = 0; b < w.blocks; b++) {
      const row = w.times.slice(b * w.clients, (b + 1) * w.clients);
      const got = row.filter((t) => !Number.isNaN(t));
      missing += row.length - got.length;
      if (got.length === 0) continue;
      const first = Math.min(...got);
      spread.push(Math.max(...got) - first);
      // When the upstream's head became this block (its --advance-origin-ms clock is ours).
      const appeared = originMs + (w.first + b - START_BLOCK) * advanceMs;
      for (const t of got) {
        delay.push(t - first);
        fromAdvance.push(t - appeared);
      }
    }
  }
  const asc = (xs: number[]) => xs.sort((a, b) => a - b);
  return { spread: asc(spread), delay: asc(delay), fromAdvance: asc(fromAdvance), missing };
}

/**
 * Runs the WebSocket fan-out section.
 * @param settings `reps` is the number of windows with every client
 * @returns the markdown section
 * @throws Error when svc does not serve, a client cannot subscribe, or no block reaches the clients
 */
export async function wsScenario(settings: BenchSettings): Promise<string> {
  const clients = envInt('BENCH_WS_CLIENTS', 1000, 2);
  const blocks = envInt('BENCH_WS_BLOCKS', 20, 2);
  const advanceMs = envInt('BENCH_WS_ADVANCE_MS', 200, 20);
  const poll = process.env.BENCH_WS_POLL ?? '50ms';
  progress(`ws: ${clients} newHeads subscribers, one block every ${advanceMs} ms, poll ${poll}, ${blocks} blocks × ${settings.reps} windows`);
  const originMs = Date.now();
  const targets: Target[] = [];
  const windows: Window[] = [];
  let idleCpuMicros = Number.NaN;
  let one: Window | undefined;
  let stats = { notifications: 0, duplicates: 0, backwards: 0, gaps: 0, closed: 0 };
  try {
    const upstream = await startTarget(TARGETS.upstream, { label: 'ws/upstream', args: [`--advance-ms=${advanceMs}`, `--advance-origin-ms=${originMs}`] });
    targets.push(upstream);
    const svc = await startTarget(TARGETS.svc, {
      label: 'ws/svc',
      args: [
        `--upstream=${upstream.origin}/`,
        '--cache=1',
        '--multiplexing=1',
        // Every client comes from this one address: the per-client cap (100 by default) is raised to the client count.
        `--server-options=${JSON.stringify({ websocket: { newHeadsPollInterval: poll, maxConnectionsPerClient: clients, maxConnections: Math.max(clients, 10_000) } })}`,
      ],
    });
    targets.push(svc);
    const bad = await preflight(`${svc.origin}/main/evm/1`, singleBody());
    if (bad) throw new Error(`ws: svc does not serve: ${bad}`);
    const url = `${svc.origin.replace(/^http/, 'ws')}/main/evm/1`;

    // 1. svc with no WebSocket client, as long as a window.
    await svc.reset();
    await new Promise((r) => setTimeout(r, blocks * advanceMs));
    idleCpuMicros = (await svc.report()).cpuMicros;

    // 2. One subscribed client.
    const single = await connectClients(url, 1);
    one = await measureWindow(svc, single, 1, blocks, advanceMs);
    await single.close();

    // 3. Every client.
    const many = await connectClients(url, clients);
    try {
      for (let r = 1; r <= settings.reps; r++) {
        const w = await measureWindow(svc, many, clients, blocks, advanceMs);
        windows.push(w);
        progress(
          `  window ${r}/${settings.reps}: blocks ${w.first}..${w.first + blocks - 1}, svc ${fmt(w.svcCpuMicros / blocks / 1000, 2)} ms CPU/block${w.complete ? '' : ' (INCOMPLETE)'}`,
        );
      }
      const got = many.next<typeof stats>('stats');
      many.child.send({ type: 'stats' });
      stats = await got;
    } finally {
      await many.close();
    }
  } finally {
    await Promise.all(targets.reverse().map((t) => t.stop()));
  }

  const perBlock = (w: Window) => w.svcCpuMicros / w.blocks;
  const cpuN = median(windows.map(perBlock));
  const cpu1 = one ? perBlock(one) : Number.NaN;
  const idle = idleCpuMicros / blocks;
  const perNotification = (cpuN - cpu1) / (clients - 1);
  const lat = latencies(windows, originMs, advanceMs);
  const lat1 = one ? latencies([one], originMs, advanceMs) : undefined;
  const ms = (x: number) => fmt(x, 2);
  const last = windows.at(-1);
  const p50p99 = (xs: number[] | undefined) => (xs && xs.length > 0 ? `${ms(percentile(xs, 50))} / ${ms(percentile(xs, 99))}` : '–');
  const rows = [
    ['svc idle (no WebSocket client)', ms(idle / 1000), '–', '–', '–', '–'],
    ['1 subscriber', ms(cpu1 / 1000), p50p99(lat1?.fromAdvance), '–', '–', ms((one?.clientCpuMicros ?? Number.NaN) / blocks / 1000)],
    [
      `${clients.toLocaleString('en-US')} subscribers`,
      ms(cpuN / 1000),
      p50p99(lat.fromAdvance),
      p50p99(lat.delay),
      p50p99(lat.spread),
      ms(median(windows.map((w) => w.clientCpuMicros / w.blocks)) / 1000),
    ],
  ];
  const faults = stats.duplicates + stats.backwards + stats.gaps + lat.missing + stats.closed;
  return [
    '## WebSocket newHeads fan-out',
    '',
    `svc as shipped (default preset, \`server.websocket.newHeadsPollInterval: ${poll}\`) in front of the fake upstream whose head advances one block every ${advanceMs} ms; ${clients.toLocaleString('en-US')} \`ws\` clients in a child process, each with its own socket and \`eth_subscribe ["newHeads"]\`. Windows of ${blocks} blocks: svc idle, 1 subscriber, then ${settings.reps} window(s) with every subscriber (medians). CPU is svc's whole process (user + system) over the window divided by the blocks emitted, so it includes the head polls and svc's own state poller; latencies are client receive times (one clock, sub-ms).`,
    '',
    markdownTable(
      [
        'WebSocket clients',
        'svc CPU ms/block',
        'upstream advance → client p50 / p99 ms',
        'after the block’s first receipt p50 / p99 ms',
        'per block, first → last client p50 / p99 ms',
        'client process CPU ms/block',
      ],
      rows,
    ),
    '',
    `- **CPU per emitted block with ${clients.toLocaleString('en-US')} subscribers: ${ms(cpuN / 1000)} ms** (${ms((cpuN - idle) / 1000)} ms above idle svc); one more subscriber costs about **${fmt(perNotification, 1)} µs** of svc CPU per block (the ${clients.toLocaleString('en-US')}-subscriber figure minus the 1-subscriber one, divided by the extra subscribers).`,
    `- **Fan-out latency p99: ${ms(percentile(lat.delay, 99))} ms** after the block's first receipt (p50 ${ms(percentile(lat.delay, 50))} ms); the last client of a block got it ${ms(percentile(lat.spread, 50))} ms after the first at the median block (p99 of blocks ${ms(percentile(lat.spread, 99))} ms, over ${lat.spread.length} blocks). Upstream advance → client adds svc's poll wait (up to ${poll}) and one \`eth_getBlockByNumber\` round trip.`,
    `- svc with ${clients.toLocaleString('en-US')} sockets open: RSS ${fmt((last?.svcRssKb ?? Number.NaN) / 1024, 1)} MiB, V8 heap ${fmt((last?.svcHeapKb ?? Number.NaN) / 1024, 1)} MiB.`,
    `- Delivery: ${stats.notifications.toLocaleString('en-US')} notifications received; ${faults === 0 ? 'no block missed, repeated or out of order at any client, no socket closed' : `⚠ ${stats.gaps} missed, ${stats.duplicates} repeated, ${stats.backwards} backwards, ${lat.missing} missing in the windows, ${stats.closed} sockets closed`}${windows.every((w) => w.complete) ? '' : '; ⚠ a window timed out before every client had its last block'}.`,
    "- On a 2-core machine svc, the client process and the upstream share the cores: the spread includes the client process reading 1,000 sockets one after another (its CPU per block is in the last column), so it is an upper bound of svc's own fan-out time.",
    '',
  ].join('\n');
}
