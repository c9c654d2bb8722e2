/**
 * Benchmark target: a fake EVM JSON-RPC upstream on node:http (127.0.0.1).
 *
 * Answers every call with a fixed result, echoing the request id; a batch body (a JSON array)
 * is answered element-wise, as one JSON array in one HTTP answer. `eth_chainId` / `net_version`
 * answer the configured chain (svc probes it); `eth_getBlockByNumber` answers a block header
 * object (`number`, `hash`, `parentHash`, … with `transactions: []`) for a hex number or a tag
 * (`latest`/`pending` → `--latest-block`, `finalized` → `--finalized-block`, `safe` halfway
 * between, `earliest` → 0) and `null` beyond the latest block, so svc's state poller learns a
 * head and a finalized block; `eth_syncing` answers `false`; every other method answers
 * `--result`. The request counter counts HTTP requests (POSTs, a batch once) and JSON-RPC calls
 * (each element of a batch).
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
 * - `latest-block` the chain head, a block number (default 19088743 = 0x1234567, what `--result`
 *   answers for `eth_blockNumber` by default)
 * - `finalized-block` the finalized block (default latest − 64)
 * - `big-mib` when > 0, `eth_getLogs` answers an array of realistic log objects of about this
 *   many MiB (built once at start), for the memory scenario (default 0)
 * - `advance-ms` when > 0, the chain advances: the head is `latest-block` plus one block every
 *   this many ms since `advance-origin-ms` (so `eth_blockNumber` and `eth_getBlockByNumber`
 *   follow it, each header's `parentHash` the hash of the block before, and the finalized block
 *   stays `latest − 64`), and `eth_getLogs` answers `[]`: a live chain for WebSocket
 *   subscriptions (default 0: a fixed head)
 * - `advance-origin-ms` wall-clock time (`Date.now()`, ms) at which the head is `latest-block`,
 *   so the parent knows when each block appeared (default: when the target starts)
 * - `block-fixture` path of a JSON file holding one real block with full transactions (an
 *   `eth_getBlockByNumber(n, true)` result, e.g. bench/fixtures/block-full.json): calls of
 *   `eth_getBlockByNumber` for that block's number answer it (with transaction hashes only when
 *   the second param is false), so its hash and roots verify; every other block is generated as
 *   above (default none)
 *
 * Later fault-tolerance scenarios spawn two of these with different options (e.g.
 * `--slow-fraction=0.1 --slow-ms=1000` for the flaky one).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { listenTarget, numberOption, option, readBody, serveTarget } from './common.ts';

const port = numberOption('port', 0);
const chainId = numberOption('chain-id', 1);
const result = JSON.stringify(option('result', '0x1234567'));
const slowFraction = numberOption('slow-fraction', 0);
const slowMs = numberOption('slow-ms', 1000);
const slowSeedRaw = option('slow-seed', '');
const delayMs = numberOption('delay-ms', 0);
const bigMiB = numberOption('big-mib', 0);
const startBlock = numberOption('latest-block', 0x1234567);
const finalizedLag = startBlock - numberOption('finalized-block', startBlock - 64);
const advanceMs = numberOption('advance-ms', 0);
const advanceOriginMs = numberOption('advance-origin-ms', Date.now());

/** The head now: `latest-block`, plus the blocks mined since `advance-origin-ms` when the chain advances. */
function latestNow(): number {
  if (advanceMs <= 0) return startBlock;
  return startBlock + Math.max(0, Math.floor((Date.now() - advanceOriginMs) / advanceMs));
}
const blockFixturePath = option('block-fixture', '');

/**
 * The `--block-fixture` block: its number and both answers as JSON text, serialised once at
 * start so serving it costs the upstream no more than any fixed answer.
 */
const fixture = blockFixturePath === '' ? undefined : loadFixture(blockFixturePath);

function loadFixture(path: string): { number: number; full: string; hashes: string } {
  const block = JSON.parse(readFileSync(path, 'utf8')) as { number?: unknown; transactions?: unknown };
  if (typeof block.number !== 'string' || !Array.isArray(block.transactions))
    throw new Error(`block-fixture ${path}: not a block with a number and transactions`);
  const txs = block.transactions as Array<string | { hash: string }>;
  return {
    number: parseInt(block.number, 16),
    full: JSON.stringify(block),
    hashes: JSON.stringify({ ...block, transactions: txs.map((t) => (typeof t === 'string' ? t : t.hash)) }),
  };
}

/** A plausible, deterministic block hash for a block number (32 bytes, hex). */
function blockHash(n: number): string {
  return `0x${createHash('sha256').update(`bench-block-${n}`).digest('hex')}`;
}

/**
 * The block header object of `eth_getBlockByNumber(n, false)` as JSON text, or `null` beyond
 * the latest block (or for a malformed block param).
 */
function blockJson(param: unknown): string {
  const latestBlock = latestNow();
  const finalizedBlock = latestBlock - finalizedLag;
  let n: number;
  switch (param) {
    case 'latest':
    case 'pending':
      n = latestBlock;
      break;
    case 'finalized':
      n = finalizedBlock;
      break;
    case 'safe':
      n = Math.floor((latestBlock + finalizedBlock) / 2);
      break;
    case 'earliest':
      n = 0;
      break;
    default:
      n = typeof param === 'string' && /^0x[0-9a-fA-F]{1,16}$/.test(param) ? parseInt(param, 16) : Number.NaN;
  }
  if (!Number.isSafeInteger(n) || n < 0 || n > latestBlock) return 'null';
  const hex = (x: number) => `0x${x.toString(16)}`;
  return JSON.stringify({
    number: hex(n),
    hash: blockHash(n),
    parentHash: n > 0 ? blockHash(n - 1) : `0x${'0'.repeat(64)}`,
    nonce: '0x0000000000000000',
    sha3Uncles: '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347',
    logsBloom: `0x${'0'.repeat(512)}`,
    transactionsRoot: '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421',
    stateRoot: blockHash(n + 0x1000000000),
    receiptsRoot: '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421',
    miner: '0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5',
    difficulty: '0x0',
    totalDifficulty: '0xc70d815d562d3cfa955',
    extraData: '0x6265617665726275696c642e6f7267',
    size: '0x3a8',
    gasLimit: '0x1c9c380',
    gasUsed: '0x0',
    timestamp: hex(1_600_000_000 + n * 12),
    baseFeePerGas: '0x3b9aca00',
    mixHash: blockHash(n + 0x2000000000),
    transactions: [],
    uncles: [],
  });
}

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
  const o = el as { id?: unknown; method?: unknown; params?: unknown };
  const id = o.id === undefined ? 'null' : JSON.stringify(o.id);
  switch (o.method) {
    case 'eth_chainId':
      return `{"jsonrpc":"2.0","id":${id},"result":"0x${chainId.toString(16)}"}`;
    case 'net_version':
      return `{"jsonrpc":"2.0","id":${id},"result":"${chainId}"}`;
    case 'eth_getBlockByNumber':
      if (
        fixture &&
        Array.isArray(o.params) &&
        typeof o.params[0] === 'string' &&
        /^0x[0-9a-fA-F]{1,16}$/.test(o.params[0]) &&
        parseInt(o.params[0], 16) === fixture.number
      ) {
        return `{"jsonrpc":"2.0","id":${id},"result":${o.params[1] === true ? fixture.full : fixture.hashes}}`;
      }
      return `{"jsonrpc":"2.0","id":${id},"result":${blockJson(Array.isArray(o.params) ? (o.params[0] as unknown) : undefined)}}`;
    case 'eth_syncing':
      return `{"jsonrpc":"2.0","id":${id},"result":false}`;
    case 'eth_blockNumber':
      if (advanceMs > 0) return `{"jsonrpc":"2.0","id":${id},"result":"0x${latestNow().toString(16)}"}`;
      return `{"jsonrpc":"2.0","id":${id},"result":${result}}`;
    case 'eth_getLogs':
      if (advanceMs > 0) return `{"jsonrpc":"2.0","id":${id},"result":[]}`;
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
        counter.calls += Array.isArray(doc) ? doc.length : 1;
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
  return listenTarget(server, port);
});
