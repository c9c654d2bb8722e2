/**
 * The hostile suite's shared harness: one realistic deployment (test/chaos/config.ts) started
 * once for the whole chaos folder and attacked by every class, the attacker's view of svc.
 *
 * - Three anvil nodes mining identical chains (fixed genesis timestamp, 1 s block interval, every
 *   chain-changing operation sent to every node through {@link Deployment.everyNode}), so block
 *   hashes agree and the reorg-aware cache sees one chain; nodes disagree only where an attack
 *   makes them (`anvil_setBalance` on one node, never followed by a mined block).
 * - A real Redis and a real PostgreSQL (cache tiers, rate-limit store, API keys, SIWE nonces).
 * - svc in this process (default preset) with a trace-level logger whose every line is scanned
 *   for the config's secrets; every answer fetched through {@link Deployment.post} is scanned too.
 *
 * Each spec file calls {@link useDeployment} inside its `describe`; the deployment starts at the
 * first file's `before` and stops after the last file that uses it, so the rest of `npm test`
 * does not pay for it.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Proxy } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { LOG_REDACTION, redactChildren } from '../../lib/logger.ts';
import { chainStateOf, type NetworkChainState } from '../../plugins/evm-state/chain.ts';
import { metricsAddress } from '../../plugins/metrics/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { freePort } from '../helpers/ports.ts';
import { startPostgres, type PostgresHandle } from '../helpers/postgres.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, waitFor, type SvcResponse } from '../helpers/svc.ts';
import { CHAIN, CONTRACTS, GENESIS_TIMESTAMP, MAIN, NODE_IDS, SECRETS, START_BLOCKS, TIERS, deploymentConfig, type Tier } from './config.ts';
import { postgresPids, postmasterPid } from '../helpers/postgres-processes.ts';

export { waitFor, type SvcResponse };

/** `0x`-prefixed hex of a non-negative integer. */
export const hex = (n: number | bigint): string => `0x${n.toString(16)}`;

/** One log line svc wrote at info level or above, parsed. */
export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** The running deployment. */
export interface Deployment {
  /** The anvil nodes, in {@link NODE_IDS} order. */
  nodes: AnvilHandle[];
  redis: RedisHandle;
  postgres: PostgresHandle;
  proxy: Proxy;
  /** `http://127.0.0.1:<port>` of svc. */
  url: string;
  metricsUrl: string;
  /**
   * POSTs a body (a string is sent byte for byte) to a path of svc; the answer is scanned for
   * secrets ({@link leaks}).
   */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<SvcResponse>;
  /** One JSON-RPC call to the open project's network. */
  rpc(method: string, params: unknown[], headers?: Record<string, string>): Promise<SvcResponse>;
  /** One admin call with the admin secret. */
  admin(method: string, params?: unknown[]): Promise<SvcResponse>;
  /**
   * Sends one call to every node directly (not through svc), in parallel; their results in node
   * order. For a transaction use {@link Deployment.mineTx}.
   */
  everyNode(method: string, params?: unknown[]): Promise<unknown[]>;
  /** Sends a transaction to every node and waits until each has mined it ({@link mineTx}). */
  mineTx(tx: Record<string, string>): Promise<{ hash: string; block: number }>;
  /** The node with that upstream id. */
  node(id: (typeof NODE_IDS)[number]): AnvilHandle;
  /** svc's chain state of a project's network (heads, reorgs) as its state poller sees it. */
  chainState(project?: string): NetworkChainState;
  /**
   * Waits until every node has the same head and svc's poller has seen it; resolves with it.
   * @throws Error when the nodes' blocks at that head differ (an attack changed one node's chain)
   */
  settled(): Promise<number>;
  /**
   * Sum of a metric's samples whose labels include every given pair (0 when none), leaving out the samples whose label has one of the
   * values `except` lists for it.
   */
  metric(name: string, labels?: Record<string, string>, except?: Record<string, readonly string[]>): Promise<number>;
  /** Headers that make a call read only the given cache tier (`X-SVC-Skip-Cache-Read` of the others). */
  onlyTier(tier: Tier): Record<string, string>;
  /** Info-and-above log lines (the last 5,000). */
  logs: LogLine[];
  /** Log lines written so far, any level. */
  logCount(): number;
  /** Where a secret of {@link SECRETS} was seen: `<secret name> in <where>: <excerpt>`. */
  leaks(): string[];
  /** Answers scanned for secrets so far. */
  scannedAnswers(): number;
  /** SIGSTOPs (or SIGCONTs) the Redis server and the PostgreSQL postmaster with its backends. */
  signalStorage(sig: 'SIGSTOP' | 'SIGCONT'): void;
}

const SECRET_ENTRIES = Object.entries(SECRETS);
const MAX_LOG_LINES = 5000;

function scan(text: string, where: string, found: string[]): void {
  for (const [name, value] of SECRET_ENTRIES) {
    const at = text.indexOf(value);
    if (at >= 0 && found.length < 100) found.push(`${name} in ${where}: …${text.slice(Math.max(0, at - 80), at + value.length + 40)}…`);
  }
}

/**
 * Sends one transaction to every node (an unlocked dev account) and waits until every node has
 * mined it: anvil answers the hash before the block is sealed, and a node that seals later than
 * the others would take the next operation into another block.
 * @returns the transaction hash and the block number it was mined in
 * @throws Error when the nodes gave different hashes or mined it at different heights
 */
export async function mineTx(nodes: AnvilHandle[], tx: Record<string, string>): Promise<{ hash: string; block: number }> {
  const hashes = (await Promise.all(nodes.map((n) => n.rpc('eth_sendTransaction', [tx])))) as string[];
  if (new Set(hashes).size !== 1) throw new Error(`chaos harness: the nodes hashed one transaction differently: ${hashes.join(' ')}`);
  const blocks: string[] = [];
  await waitFor(async () => {
    const receipts = (await Promise.all(nodes.map((n) => n.rpc('eth_getTransactionReceipt', [hashes[0]])))) as Array<{ blockNumber: string } | null>;
    blocks.splice(0, blocks.length, ...receipts.map((r) => r?.blockNumber ?? ''));
    return receipts.every((r) => r !== null);
  });
  if (new Set(blocks).size !== 1) throw new Error(`chaos harness: the nodes mined one transaction at different heights: ${blocks.join(' ')}`);
  return { hash: hashes[0]!, block: Number.parseInt(blocks[0]!, 16) };
}

async function start(): Promise<{ dep: Deployment; stop: () => Promise<void> }> {
  const [nodes, redis, postgres, closedPort] = await Promise.all([
    Promise.all(NODE_IDS.map(() => startAnvil({ chainId: CHAIN, args: ['--timestamp', String(GENESIS_TIMESTAMP)] }))),
    startRedis(),
    startPostgres(),
    freePort(),
  ]);
  const everyNode = (method: string, params: unknown[] = []) => Promise.all(nodes.map((n) => n.rpc(method, params)));
  // Identical chains: the same contracts before block 1, the same timestamps.
  await everyNode('anvil_setBlockTimestampInterval', [1]);
  for (const [address, code] of CONTRACTS) await everyNode('anvil_setCode', [address, code]);
  await everyNode('anvil_mine', [hex(START_BLOCKS)]);
  const heads = (await everyNode('eth_getBlockByNumber', ['latest', false])) as Array<{ hash: string }>;
  if (new Set(heads.map((h) => h.hash)).size !== 1)
    throw new Error(`chaos harness: the nodes did not mine identical chains: ${JSON.stringify(heads.map((h) => h.hash))}`);

  const postmaster = await postmasterPid(postgres.url);
  const leaks: string[] = [];
  const logs: LogLine[] = [];
  let logCount = 0;
  let scanned = 0;
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        logCount++;
        scan(line, 'a log line', leaks);
        // Parse only info and above (levels 30-60): the trace lines are scanned, not kept.
        if (/^\{"level":[3-6]0,/.test(line)) {
          logs.push(JSON.parse(line) as LogLine);
          if (logs.length > MAX_LOG_LINES) logs.splice(0, logs.length - MAX_LOG_LINES);
        }
      }
      done();
    },
  });
  const logger = redactChildren(pino({ level: 'trace', base: { service: 'svc' }, ...LOG_REDACTION }, sink));
  const config = deploymentConfig({ nodeUrls: nodes.map((n) => n.url), redisUrl: redis.url, postgresUrl: postgres.url, closedPort });
  const proxy = createProxy({ config, plugins: defaultPreset(), logger, port: 0, host: '127.0.0.1', metricsPort: 0, probeBackoffMs: 50 });
  const stopServers = async () => {
    await Promise.all([...nodes.map((n) => n.stop()), redis.stop(), postgres.stop()]);
  };
  let addr;
  try {
    addr = await proxy.start();
  } catch (e) {
    await proxy.close().catch(() => undefined);
    await stopServers();
    throw e;
  }
  const url = `http://127.0.0.1:${addr.port}`;
  const metricsUrl = `http://127.0.0.1:${metricsAddress(proxy)!.port}/metrics`;
  let stopped: number[] = [];

  const network = (project: string) => proxy.projects.get(project)!.networks.get(`evm:${CHAIN}`)!;
  const dep: Deployment = {
    nodes,
    redis,
    postgres,
    proxy,
    url,
    metricsUrl,
    post: async (path, body, headers = {}) => {
      const res = await httpRequest('POST', `${url}${path}`, typeof body === 'string' ? body : JSON.stringify(body), {
        'content-type': 'application/json',
        ...headers,
      });
      scanned++;
      scan(res.text, `the answer to POST ${path}`, leaks);
      scan(JSON.stringify(res.headers), `the headers of POST ${path}`, leaks);
      return res;
    },
    rpc: (method, params, headers) => dep.post(MAIN, { jsonrpc: '2.0', id: 1, method, params }, headers),
    admin: (method, params) =>
      dep.post('/admin', { jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) }, { 'x-svc-secret-token': SECRETS.adminSecret }),
    everyNode,
    mineTx: (tx) => mineTx(nodes, tx),
    node: (id) => nodes[NODE_IDS.indexOf(id)]!,
    chainState: (project = 'main') => chainStateOf(network(project)),
    settled: async () => {
      let head = 0;
      await waitFor(async () => {
        const all = (await everyNode('eth_blockNumber')).map((h) => Number.parseInt(h as string, 16));
        head = all[0]!;
        return all.every((h) => h === head) && dep.chainState('main').highestLatest >= head && dep.chainState('gated').highestLatest >= head;
      }, 10_000);
      const hashes = (await everyNode('eth_getBlockByNumber', [hex(head), false])) as Array<{ hash: string }>;
      if (new Set(hashes.map((b) => b.hash)).size !== 1)
        throw new Error(`chaos harness: the nodes' chains diverged at block ${head}: ${hashes.map((b) => b.hash).join(' ')}`);
      return head;
    },
    metric: async (name, labels = {}, except = {}) => {
      const text = (await httpRequest('GET', metricsUrl)).text;
      scan(text, '/metrics', leaks);
      let n = 0;
      for (const line of text.split('\n')) {
        if (!line.startsWith(`${name}{`)) continue;
        const inside = line.slice(name.length + 1, line.lastIndexOf('}')).split(',');
        if (!Object.entries(labels).every(([k, v]) => inside.includes(`${k}="${v}"`))) continue;
        if (Object.entries(except).some(([k, vs]) => vs.some((v) => inside.includes(`${k}="${v}"`)))) continue;
        n += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return n;
    },
    onlyTier: (tier) => ({ 'x-svc-skip-cache-read': TIERS.filter((t) => t !== tier).join('|') }),
    logs,
    logCount: () => logCount,
    leaks: () => [...leaks],
    scannedAnswers: () => scanned,
    signalStorage: (sig) => {
      // A stopped postmaster forks no new backend: the list taken at SIGSTOP is complete.
      if (sig === 'SIGSTOP') stopped = [redis.pid, ...postgresPids(postmaster)];
      for (const pid of stopped) {
        try {
          process.kill(pid, sig);
        } catch {
          /* gone */
        }
      }
      if (sig === 'SIGCONT') stopped = [];
    },
  };
  // Every upstream verified and every head seen before the first attack.
  await waitFor(() => ['main', 'gated'].every((p) => NODE_IDS.every((id) => proxy.projects.get(p)!.upstreams.get(id)?.state === 'ready')), 10_000);
  await dep.settled();
  const stop = async () => {
    if (stopped.length) dep.signalStorage('SIGCONT');
    await proxy.close().catch(() => undefined);
    await stopServers();
  };
  return { dep, stop };
}

let starting: Promise<{ dep: Deployment; stop: () => Promise<void> }> | undefined;
let users = 0;

async function release(): Promise<void> {
  const s = starting;
  starting = undefined;
  if (s) await (await s.catch(() => undefined))?.stop();
}

/**
 * Shares the deployment with the current `describe`: started by the first user's `before`
 * (at most 60 s), stopped by the last user's `after`. Call inside a `describe` callback.
 * @returns a getter for the running deployment (valid from the describe's `before` on)
 * @throws from the `before` hook when a server cannot start (the suite fails, never skips)
 */
export function useDeployment(): () => Deployment {
  users++;
  let dep: Deployment | undefined;
  before(async function () {
    this.timeout(60_000);
    starting ??= start();
    dep = (await starting).dep;
  });
  after(async function () {
    this.timeout(20_000);
    if (--users === 0) await release();
  });
  return () => {
    if (!dep) throw new Error('chaos harness: the deployment is not started (call the getter in a test or hook)');
    return dep;
  };
}

// Fallback when a filtered run (--grep) skipped the last user's after hook: stop at the end.
after(async function chaosDeploymentStop() {
  this.timeout(20_000);
  await release();
});
