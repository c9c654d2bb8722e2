/**
 * Cache-hit scenarios of `npm run bench`: svc answering a repeated finalized
 * `eth_getBlockByNumber` from its response cache, (e) the zero-config memory tier and (e′) a
 * Redis tier on a real redis-server, next to the bare node:http responder and the bare Koa +
 * router server in the same interleaved rounds of bench/run.ts. Before the load the cache is
 * primed: the call is sent until a repeat answers `X-SVC-Cache: HIT` (an Error otherwise).
 *
 * This module starts the processes and writes the report section; bench/run.ts measures.
 */
import { procTarget, redisCommandCounts, startRedis } from './redis.ts';
import { fmt, markdownTable, progress, startTarget, TARGETS, type RpcBody, type Target } from './lib.ts';

/** The hit block: well below the fake upstream's finalized block (0x1234567 − 64), so `finalized`. */
export const HIT_BLOCK = '0x1200000';

/** svc's path for project `main`, network `evm:1`. */
const SVC_PATH = '/main/evm/1';

/** How long {@link primeCache} waits for a hit, ms. */
const PRIME_TIMEOUT_MS = 5000;

/** The cached call: `eth_getBlockByNumber(HIT_BLOCK, false)`, id 1. */
export function blockBody(): RpcBody {
  return { text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [HIT_BLOCK, false] }), calls: 1 };
}

/**
 * Sends the call until a repeat is answered from the cache (`X-SVC-Cache: HIT`). The first
 * answers can miss while svc's state poller has not learnt the finalized block yet (the call is
 * then `unknown` and not cached) and while the write is on its way.
 * @param url svc's URL
 * @param body the call
 * @returns the size of the cached answer, bytes
 * @throws Error when no hit came within {@link PRIME_TIMEOUT_MS}, with the last headers seen
 */
export async function primeCache(url: string, body: RpcBody): Promise<number> {
  const deadline = Date.now() + PRIME_TIMEOUT_MS;
  let last = '';
  for (let i = 0; ; i++) {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body.text });
    const text = await res.text();
    const outcome = res.headers.get('x-svc-cache');
    if (res.status === 200 && outcome === 'HIT' && i > 0) return Buffer.byteLength(text);
    last = `HTTP ${res.status}, X-SVC-Cache ${outcome ?? '(absent)'}, body ${text.slice(0, 200)}`;
    if (Date.now() > deadline) throw new Error(`cache never hit within ${PRIME_TIMEOUT_MS} ms (${i + 1} tries); last answer: ${last}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What a cache scenario's setup hands to bench/run.ts. */
export interface CacheSetup {
  target: Target;
  url: string;
  /** The fake upstream first (upstream req/req), then redis-server when there is one. */
  helpers: Target[];
}

/** Answer size of the primed call, bytes (for the report). */
let answerBytes = Number.NaN;

async function svcWithCache(label: string, cache: (upstream: Target) => Promise<{ arg: string; extra: Target[] }>): Promise<CacheSetup> {
  const up = await startTarget(TARGETS.upstream, { label: `${label}/upstream` });
  const helpers: Target[] = [up];
  try {
    const { arg, extra } = await cache(up);
    helpers.push(...extra);
    const target = await startTarget(TARGETS.svc, { label, args: [`--upstream=${up.origin}/`, `--cache=${arg}`] });
    const url = `${target.origin}${SVC_PATH}`;
    try {
      answerBytes = await primeCache(url, blockBody());
    } catch (e) {
      await target.stop();
      throw new Error(`${label}: ${(e as Error).message}`);
    }
    progress(`  ${label}: cache primed (X-SVC-Cache: HIT, ${answerBytes} bytes)`);
    return { target, url, helpers };
  } catch (e) {
    await Promise.all(helpers.map((h) => h.stop()));
    throw e;
  }
}

/** (e) svc with its zero-config memory cache (`--cache=1`), primed. */
export function setupMemoryCache(): Promise<CacheSetup> {
  return svcWithCache('svc-cache', () => Promise.resolve({ arg: '1', extra: [] }));
}

/** (e′) svc with one Redis tier (finalized answers, forever) on a fresh redis-server, primed. */
export function setupRedisCache(): Promise<CacheSetup> {
  return svcWithCache('svc-redis', async () => {
    const redis = await startRedis();
    const cache = { connectors: [{ id: 'redis', driver: 'redis', redis: { uri: redis.uri } }], policies: [{ connector: 'redis', finality: 'finalized' }] };
    const gets = async () => (await redisCommandCounts(redis.port)).get ?? 0;
    return { arg: JSON.stringify(cache), extra: [procTarget(redis.pid, 'redis-server', redis.stop, gets)] };
  });
}

/** One scenario's medians, as bench/run.ts summarises them. */
export interface CacheRow {
  label: string;
  rps: number;
  /** CPU of the measured process per request, µs. */
  cpuPerReq: number;
  p50Ms: number;
  p99Ms: number;
  /** Upstream HTTP requests per client request. */
  upstreamPerReq: number;
  /** CPU of redis-server per request, µs (NaN without one). */
  redisCpuPerReq: number;
  /** Redis GET commands per request (NaN without a Redis tier). */
  redisGetsPerReq: number;
  failures: number;
}

/**
 * The report section: the cache-hit scenarios as ratios of the bare node:http responder and the
 * bare Koa server of the same run.
 * @param rows (e) and (e′), when measured
 * @param http the bare node:http responder's medians
 * @param koa the bare Koa + router server's medians
 * @returns a markdown section
 */
export function cacheSection(rows: ReadonlyArray<CacheRow | undefined>, http: CacheRow | undefined, koa: CacheRow | undefined): string {
  const ratio = (a: number, b: number | undefined) => (b === undefined || !Number.isFinite(a / b) ? '–' : `${fmt(a / b, 2)}×`);
  const lines = rows
    .filter((r): r is CacheRow => r !== undefined)
    .map((r) => [
      r.failures > 0 ? `⚠ ${r.label}` : r.label,
      fmt(r.rps, 0),
      ratio(r.rps, http?.rps),
      ratio(r.rps, koa?.rps),
      fmt(r.cpuPerReq, 1),
      ratio(r.cpuPerReq, http?.cpuPerReq),
      ratio(r.cpuPerReq, koa?.cpuPerReq),
      fmt(r.redisCpuPerReq, 1),
      fmt(r.redisGetsPerReq, 2),
      fmt(r.p50Ms, 2),
      fmt(r.p99Ms, 2),
      fmt(r.upstreamPerReq, 4),
    ]);
  for (const [name, b] of [
    ['(c′) bare node:http, single', http],
    ['(c) bare Koa + router, single', koa],
  ] as const) {
    if (b)
      lines.push([
        name,
        fmt(b.rps, 0),
        ratio(b.rps, http?.rps),
        ratio(b.rps, koa?.rps),
        fmt(b.cpuPerReq, 1),
        ratio(b.cpuPerReq, http?.cpuPerReq),
        ratio(b.cpuPerReq, koa?.cpuPerReq),
        '–',
        '–',
        fmt(b.p50Ms, 2),
        fmt(b.p99Ms, 2),
        '–',
      ]);
  }
  const table = markdownTable(
    [
      'Scenario (same rounds as above, medians)',
      'req/s',
      'req/s ÷ node:http',
      'req/s ÷ Koa',
      'CPU µs/req',
      'CPU ÷ node:http',
      'CPU ÷ Koa',
      'redis-server CPU µs/req',
      'Redis GETs/req',
      'p50 ms',
      'p99 ms',
      'upstream req/req',
    ],
    lines,
  );
  return `## Cache hits: svc answering from its response cache

(e) svc (default preset, zero-config memory cache \`memory-cache\`) and (e′) svc with one Redis tier instead (\`connectors: [{id: 'redis', driver: 'redis', redis: {uri}}]\`, one policy \`{connector: 'redis', finality: 'finalized'}\`, a fresh \`redis-server\` on a free loopback port), both serving the same finalized call \`eth_getBlockByNumber("${HIT_BLOCK}", false)\` over and over (the fake upstream's finalized block is 0x1234527). Multiplexing is off in both, as in (b), so every request reads the cache itself (with it on, identical requests waiting on one Redis read would share it). Before the load each svc is primed until a repeat answers \`X-SVC-Cache: HIT\`. They ran in the same interleaved rounds as the table above, next to the bare node:http responder (c′) and the bare Koa + router server (c); ratios are ratios of the medians.

${table}

Notes:
- A hit answers the cached block header (${Number.isFinite(answerBytes) ? `${answerBytes} bytes` : 'about 1.3 KB'} of JSON); the bare servers answer a fixed 45-byte body without reading the request, so they are floors, not like-for-like servers.
- "upstream req/req" near 0 shows every request was a hit (the few upstream requests are svc's state poller, every 30 s).
- CPU µs/req is svc's process only; for (e′) redis-server's own CPU per request is in its column (so the Redis tier's total is the sum), and "Redis GETs/req" (from \`INFO commandstats\`) shows each request read Redis once. node-redis pipelines the commands issued in the same tick on its one connection, which keeps redis-server's share small.`;
}
