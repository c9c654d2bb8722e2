/**
 * Benchmark target: a fake EVM JSON-RPC upstream on node:http (127.0.0.1).
 *
 * Answers every call with a fixed result, echoing the request id; a batch body is answered
 * element-wise. `eth_chainId` / `net_version` answer the configured chain (svc probes it),
 * every other method answers `--result`.
 *
 * Options (`--name=value` or env `BENCH_<NAME>`, see `option()` in ./common.ts):
 * - `port` (default 0 = free port)
 * - `chain-id` (default 1)
 * - `result` JSON-RPC result string for every other method (default `0x1234567`)
 * - `slow-fraction` share of HTTP requests answered late, 0..1 (default 0). `eth_chainId`
 *   requests are never slowed, so svc's probe is not disturbed.
 * - `slow-ms` extra delay of a slow answer, ms (default 1000)
 * - `slow-seed` when set, slow requests are picked at random with this seed; otherwise they are
 *   spread evenly (exactly every 1/fraction-th request)
 * - `delay-ms` delay added to every answer, ms (default 0)
 * - `big-mib` when > 0, `eth_getLogs` answers an array of realistic log objects of about this
 *   many MiB (built once at start), for the memory scenario (default 0)
 *
 * Later fault-tolerance scenarios spawn two of these with different options (e.g.
 * `--slow-fraction=0.1 --slow-ms=1000` for the flaky one).
 */
import { createServer } from 'node:http';
import { numberOption, option, portOf, readBody, serveTarget } from './common.ts';

const port = numberOption('port', 0);
const chainId = numberOption('chain-id', 1);
const result = JSON.stringify(option('result', '0x1234567'));
const slowFraction = numberOption('slow-fraction', 0);
const slowMs = numberOption('slow-ms', 1000);
const slowSeedRaw = option('slow-seed', '');
const delayMs = numberOption('delay-ms', 0);
const bigMiB = numberOption('big-mib', 0);

/** About `mib` MiB of eth_getLogs result: the JSON text of an array of log objects. */
function bigLogs(mib: number): string {
  const log = (i: number) =>
    `{"address":"0x${'ab'.repeat(20)}","topics":["0x${'cd'.repeat(32)}","0x${i.toString(16).padStart(64, '0')}"],"data":"0x${'00'.repeat(64)}","blockNumber":"0x${(1000 + (i >> 6)).toString(16)}","transactionHash":"0x${i.toString(16).padStart(64, 'e')}","transactionIndex":"0x${(i & 63).toString(16)}","blockHash":"0x${(1000 + (i >> 6)).toString(16).padStart(64, 'b')}","logIndex":"0x${(i & 63).toString(16)}","removed":false}`;
  const parts: string[] = [];
  let size = 2;
  for (let i = 0; size < mib * 1024 * 1024; i++) {
    const l = log(i);
    parts.push(l);
    size += l.length + 1;
  }
  return `[${parts.join(',')}]`;
}
const bigResult = bigMiB > 0 ? bigLogs(bigMiB) : undefined;

/** mulberry32: a tiny seeded PRNG in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const random = slowSeedRaw === '' ? undefined : prng(Number(slowSeedRaw) || 1);
let eligible = 0;
/** Whether the next eligible request is a slow one. */
function pickSlow(): boolean {
  if (slowFraction <= 0) return false;
  if (random) return random() < slowFraction;
  const n = eligible++;
  return Math.floor((n + 1) * slowFraction) > Math.floor(n * slowFraction);
}

function answerOne(el: unknown): string {
  if (el === null || typeof el !== 'object' || Array.isArray(el)) {
    return '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}';
  }
  const o = el as { id?: unknown; method?: unknown };
  const id = o.id === undefined ? 'null' : JSON.stringify(o.id);
  switch (o.method) {
    case 'eth_chainId':
      return `{"jsonrpc":"2.0","id":${id},"result":"0x${chainId.toString(16)}"}`;
    case 'net_version':
      return `{"jsonrpc":"2.0","id":${id},"result":"${chainId}"}`;
    case 'eth_getLogs':
      if (bigResult !== undefined) return `{"jsonrpc":"2.0","id":${id},"result":${bigResult}}`;
      return `{"jsonrpc":"2.0","id":${id},"result":${result}}`;
    default:
      return `{"jsonrpc":"2.0","id":${id},"result":${result}}`;
  }
}

await serveTarget('upstream', async (counter) => {
  const server = createServer((req, res) => {
    counter.count++;
    readBody(req).then(
      (buf) => {
        let doc: unknown;
        try {
          doc = JSON.parse(buf.toString('utf8'));
        } catch {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}');
          return;
        }
        const text = Array.isArray(doc) ? `[${doc.map(answerOne).join(',')}]` : answerOne(doc);
        const isProbe = !Array.isArray(doc) && (doc as { method?: unknown } | null)?.method === 'eth_chainId';
        const wait = delayMs + (!isProbe && pickSlow() ? slowMs : 0);
        const send = () => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
          res.end(text);
        };
        if (wait > 0) setTimeout(send, wait);
        else send();
      },
      () => res.destroy(),
    );
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: portOf(server),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
});
