/**
 * The scenarios of `npm run bench`'s interleaved rounds (bench/run.ts runs and reports them): each
 * server under test with its fake upstream, the body it is sent, and the order of the runs inside
 * a round, with the baseline twins of BENCH_BASELINE_DIST.
 */
import { blockBody, setupMemoryCache, setupRedisCache } from './cache.ts';
import { batchBody, ethCallBody, rawTxBody, type RpcBody, singleBody, startTarget, type Target, TARGETS, uniqueBalanceBody } from './lib.ts';

const SVC_PATH = '/main/evm/1';

/** A scenario: how to start its processes and what to send. */
export interface Scenario {
  key: string;
  label: string;
  /** Name of the process whose CPU/RSS is reported. */
  measured: string;
  body: RpcBody;
  setup(): Promise<{ target: Target; url: string; helpers: Target[] }>;
}

/** A fake upstream of its own. */
export async function upstream(label: string): Promise<Target> {
  return startTarget(TARGETS.upstream, { label });
}

/** Extra argv of svc targets while a baseline twin is set up (`--dist=` of BENCH_BASELINE_DIST). */
let svcTwinArgs: string[] = [];

/**
 * A server under test behind its own fake upstream.
 * @param script the target script (bench/targets/)
 * @param label names the processes in the report
 * @param extraArgs argv of the target
 * @param loader `tsx` to run a TypeScript target from sources
 */
export async function behind(
  script: string,
  label: string,
  extraArgs: string[] = [],
  loader?: 'tsx',
): Promise<{ target: Target; url: string; helpers: Target[] }> {
  const up = await upstream(`${label}/upstream`);
  const twin = script === TARGETS.svc ? svcTwinArgs : [];
  const target = await startTarget(script, { label, args: [`--upstream=${up.origin}/`, ...extraArgs, ...twin], loader });
  return { target, url: `${target.origin}${SVC_PATH}`, helpers: [up] };
}

/** The single-call body (eth_getBalance of one address), also quoted in the report. */
export const single = singleBody();
const call1k = ethCallBody(1024);
const call5k = ethCallBody(5 * 1024);
const rawTx1k = rawTxBody(1024);
/** The recommended failsafe config of docs/fault-tolerance.md ("Example: primary node + two paid providers"). */
const README_FAILSAFE = {
  network: {
    failsafe: [
      { matchMethod: 'eth_getLogs', timeout: { duration: '30s' }, retry: { maxAttempts: 2 } },
      {
        matchMethod: '*',
        timeout: { duration: '10s' },
        retry: { maxAttempts: 3, delay: '100ms', backoffFactor: 2, backoffMaxDelay: '1s' },
        hedge: { quantile: 0.7, minDelay: '100ms', maxDelay: '2s', maxCount: 1 },
      },
    ],
  },
  upstream: { failsafe: [{ timeout: { duration: '5s' }, circuitBreaker: { failureThresholdCount: 20, failureThresholdCapacity: 80, halfOpenAfter: '1m' } }] },
};
const batch10 = batchBody(10);
/** The zero-config cache with its memory tier bounded to one entry (the (h-empty) scenario). */
const ONE_ENTRY_TIER = {
  connectors: [{ id: 'memory-cache', driver: 'memory', memory: { maxItems: 1 } }],
  policies: [
    { network: '*', method: '*', finality: 'finalized', connector: 'memory-cache', ttl: 0 },
    { network: '*', method: '*', finality: 'unfinalized', connector: 'memory-cache', ttl: '10s' },
    { network: '*', method: '*', finality: 'realtime', connector: 'memory-cache', ttl: '2s' },
  ],
};

/** Every scenario of the rounds, the baseline twins of BENCH_BASELINE_DIST appended below. */
export const scenarios: Scenario[] = [
  {
    key: 'direct',
    label: '(a) upstream direct, single',
    measured: 'fake upstream',
    body: single,
    async setup() {
      const t = await upstream('direct');
      return { target: t, url: `${t.origin}/`, helpers: [] };
    },
  },
  { key: 'svc', label: '(b) svc, single', measured: 'svc', body: single, setup: () => behind(TARGETS.svc, 'svc') },
  { key: 'svc-batch', label: '(b) svc, batch10', measured: 'svc', body: batch10, setup: () => behind(TARGETS.svc, 'svc-batch') },
  // Realistic bodies (ABI-padded calldata, a raw transaction) and the failsafe config of docs/fault-tolerance.md.
  { key: 'svc-call1k', label: '(f) svc, eth_call with 1 KiB calldata', measured: 'svc', body: call1k, setup: () => behind(TARGETS.svc, 'svc-call1k') },
  { key: 'svc-call5k', label: '(f′) svc, eth_call with 5 KiB calldata', measured: 'svc', body: call5k, setup: () => behind(TARGETS.svc, 'svc-call5k') },
  {
    key: 'fwd-call5k',
    label: '(d′) min forwarder, eth_call with 5 KiB calldata',
    measured: 'forwarder',
    body: call5k,
    setup: () => behind(TARGETS.forwarder, 'fwd-call5k'),
  },
  { key: 'svc-rawtx', label: '(f″) svc, eth_sendRawTransaction of 1 KiB', measured: 'svc', body: rawTx1k, setup: () => behind(TARGETS.svc, 'svc-rawtx') },
  {
    key: 'svc-failsafe',
    label: '(g) svc with the recommended failsafe config, single',
    measured: 'svc',
    body: single,
    setup: () =>
      behind(TARGETS.svc, 'svc-failsafe', [
        `--network-defaults=${JSON.stringify(README_FAILSAFE.network)}`,
        `--upstream-defaults=${JSON.stringify(README_FAILSAFE.upstream)}`,
      ]),
  },
  {
    key: 'svc-batch-ob',
    label: '(b‴) svc, batch10, upstream supportsBatch',
    measured: 'svc',
    body: batch10,
    // Outbound batching: the 10 calls leave as one upstream POST, like the forwarder's batch.
    setup: () =>
      behind(TARGETS.svc, 'svc-batch-ob', [
        `--upstream-options=${JSON.stringify({ jsonRpc: { supportsBatch: true, batchMaxSize: 10, batchMaxWait: '2ms' } })}`,
      ]),
  },
  {
    key: 'svc-src',
    label: '(b″) svc from TypeScript sources (tsx), single',
    measured: 'svc',
    body: single,
    setup: () => behind(TARGETS.svc, 'svc-src', ['--build=source'], 'tsx'),
  },
  {
    key: 'svc-minimal',
    label: '(b′) svc minimal preset, single',
    measured: 'svc',
    body: single,
    setup: () => behind(TARGETS.svc, 'svc-minimal', ['--preset=minimal']),
  },
  {
    key: 'http',
    label: '(c′) bare node:http, single',
    measured: 'http',
    body: single,
    async setup() {
      const t = await startTarget(TARGETS.http, { label: 'http' });
      return { target: t, url: `${t.origin}${SVC_PATH}`, helpers: [] };
    },
  },
  { key: 'svc-cache', label: '(e) svc, memory cache hit', measured: 'svc', body: blockBody(), setup: setupMemoryCache },
  { key: 'svc-redis', label: '(e′) svc, Redis cache hit', measured: 'svc', body: blockBody(), setup: setupRedisCache },
  {
    key: 'koa',
    label: '(c) bare Koa + router, single',
    measured: 'koa',
    body: single,
    async setup() {
      const t = await startTarget(TARGETS.koa, { label: 'koa' });
      return { target: t, url: `${t.origin}${SVC_PATH}`, helpers: [] };
    },
  },
  { key: 'fwd', label: '(d) min forwarder, single', measured: 'forwarder', body: single, setup: () => behind(TARGETS.forwarder, 'fwd') },
  // The floor of a Koa-based proxy, to read the targets (ratios to the node:http forwarder) against.
  {
    key: 'fwd-koa',
    label: '(d″) Koa forwarder, single',
    measured: 'forwarder',
    body: single,
    setup: () => behind(TARGETS.forwarder, 'fwd-koa', ['--framework=koa']),
  },
  { key: 'fwd-batch', label: '(d) min forwarder, batch10', measured: 'forwarder', body: batch10, setup: () => behind(TARGETS.forwarder, 'fwd-batch') },
  // svc as a user runs it: the default preset with its zero-config memory cache and multiplexing
  // on, every call a different eth_getBalance at a finalized block, so every call is a miss that
  // is written back. Its floors get the same unique bodies.
  {
    key: 'fwd-unique',
    label: '(d) min forwarder, unique eth_getBalance',
    measured: 'forwarder',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.forwarder, 'fwd-unique'),
  },
  {
    key: 'fwd-koa-unique',
    label: '(d″) Koa forwarder, unique eth_getBalance',
    measured: 'forwarder',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.forwarder, 'fwd-koa-unique', ['--framework=koa']),
  },
  {
    key: 'svc-shipped',
    label: '(h) svc as shipped (default preset, memory cache + multiplexing on), unique eth_getBalance',
    measured: 'svc',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.svc, 'svc-shipped', ['--cache=1', '--multiplexing=1']),
  },
  // (h) with a memory tier that holds nothing (one entry): every write-back still runs, nothing is
  // retained, so (h)/(h-empty) in GC CPU is what holding up to 100,000 answers costs the collector.
  {
    key: 'svc-shipped-tier-empty',
    label: '(h-empty) svc as shipped, memory tier bounded to 1 entry, unique eth_getBalance',
    measured: 'svc',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.svc, 'svc-shipped-tier-empty', [`--cache=${JSON.stringify(ONE_ENTRY_TIER)}`, '--multiplexing=1']),
  },
  // Diagnostics of what (h) adds to (h′): the memory cache alone (read miss + write-back) and multiplexing alone.
  {
    key: 'svc-cacheonly-unique',
    label: '(h‴) svc default preset, memory cache on, multiplexing off, unique eth_getBalance',
    measured: 'svc',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.svc, 'svc-cacheonly-unique', ['--cache=1']),
  },
  {
    key: 'svc-muxonly-unique',
    label: '(h⁗) svc default preset, multiplexing on, cache off, unique eth_getBalance',
    measured: 'svc',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.svc, 'svc-muxonly-unique', ['--multiplexing=1']),
  },
  {
    key: 'svc-nocache-unique',
    label: '(h′) svc default preset, cache and multiplexing off, unique eth_getBalance',
    measured: 'svc',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.svc, 'svc-nocache-unique'),
  },
  {
    key: 'svc-minimal-unique',
    label: '(h″) svc minimal preset, unique eth_getBalance',
    measured: 'svc',
    body: uniqueBalanceBody(),
    setup: () => behind(TARGETS.svc, 'svc-minimal-unique', ['--preset=minimal']),
  },
];

/** Order of the runs inside a round: each svc scenario right after its floor. */
/**
 * BENCH_BASELINE_DIST: another build of svc (the `dist/` of an older commit, built there): every svc
 * scenario of this run also runs against it, right before its own run in each round, and a table
 * gives this build ÷ the baseline. The fairest before/after comparison on a noisy machine.
 */
export const BASELINE_DIST = process.env.BENCH_BASELINE_DIST;
if (BASELINE_DIST) {
  for (const s of [...scenarios]) {
    if (s.measured !== 'svc' || s.key === 'svc-src') continue;
    scenarios.push({
      ...s,
      key: `${s.key}@base`,
      label: `${s.label} [baseline]`,
      setup: async () => {
        svcTwinArgs = [`--dist=${BASELINE_DIST}`];
        try {
          return await s.setup();
        } finally {
          svcTwinArgs = [];
        }
      },
    });
  }
}
/** Run order of a scenario key: a baseline twin just before its own scenario. */
export const orderOf = (key: string): number => (key.endsWith('@base') ? RUN_ORDER.indexOf(key.slice(0, -5)) - 0.5 : RUN_ORDER.indexOf(key));

export const RUN_ORDER = [
  'direct',
  'http',
  'koa',
  'svc-cache',
  'svc-redis',
  'fwd',
  'fwd-koa',
  'svc',
  'svc-src',
  'svc-minimal',
  'fwd-batch',
  'svc-batch',
  'svc-batch-ob',
  'svc-call1k',
  'fwd-call5k',
  'svc-call5k',
  'svc-rawtx',
  'svc-failsafe',
  'fwd-unique',
  'fwd-koa-unique',
  'svc-shipped',
  'svc-shipped-tier-empty',
  'svc-cacheonly-unique',
  'svc-muxonly-unique',
  'svc-nocache-unique',
  'svc-minimal-unique',
];
