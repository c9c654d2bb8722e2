/**
 * Burst scenarios of `npm run bench`: many concurrent calls sent at
 * once through svc, counting what reaches the fake upstream.
 *
 * - Multiplexed burst: 1,000 identical `eth_getBalance` calls at once against an upstream that
 *   answers after 50 ms, with multiplexing on and off (cache off in both).
 * - Outbound batching: 100 concurrent calls with distinct params against an instant upstream,
 *   with `jsonRpc: {supportsBatch: true, batchMaxSize: 10, batchMaxWait: '5ms'}` and without
 *   (multiplexing and cache off in both).
 *
 * Each client call is its own HTTP request on its own keep-alive connection of an undici Pool
 * opened (and warmed by one unmeasured burst) before each measured burst, so TCP connects are
 * not in the latencies. Latency = from dispatching the request to the end of its answer body.
 * svc's state poller polls once at start, then every hour (`statePollerInterval: '1h'`), so its
 * requests do not land in a burst's count.
 */
import { Pool } from 'undici';
import { fmt, markdownTable, median, percentile, progress, startTarget, TARGETS, type BenchSettings, type Target } from './lib.ts';

/** svc's path for project `main`, network `evm:1`. */
const SVC_PATH = '/main/evm/1';
/** The block the burst calls read (finalized at the fake upstream; the cache is off anyway). */
const BLOCK = '0x1200000';

/** One measured burst. */
interface BurstRun {
  /** HTTP requests (POSTs) the fake upstream received during the burst. */
  posts: number;
  /** JSON-RPC calls the fake upstream received (each element of a batch counts). */
  calls: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** svc's CPU over the burst, ms. */
  svcCpuMs: number;
  /** Answers that were not HTTP 200 with a `result` and no `error`, or requests that failed. */
  failures: number;
}

/** One svc under test with its own fake upstream and client pool. */
interface Subject {
  label: string;
  svc: Target;
  upstream: Target;
  pool: Pool;
  runs: BurstRun[];
}

/** Sends all bodies at once, one request each; latencies sorted ascending, ms. */
async function fire(pool: Pool, bodies: readonly string[]): Promise<{ latencies: Float64Array; failures: number }> {
  const latencies = new Float64Array(bodies.length);
  let failures = 0;
  await Promise.all(
    bodies.map(async (body, i) => {
      const t0 = performance.now();
      try {
        const res = await pool.request({ path: SVC_PATH, method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const text = await res.body.text();
        if (res.statusCode !== 200 || !text.includes('"result"') || text.includes('"error"')) failures++;
      } catch {
        failures++;
      }
      latencies[i] = performance.now() - t0;
    }),
  );
  return { latencies: latencies.sort(), failures };
}

/** Starts a fake upstream and svc behind it; the pool holds `connections` client connections. */
async function subject(label: string, upstreamArgs: string[], svcArgs: string[], connections: number): Promise<Subject> {
  const upstream = await startTarget(TARGETS.upstream, { label: `${label}/upstream`, args: upstreamArgs });
  const svc = await startTarget(TARGETS.svc, { label, args: [`--upstream=${upstream.origin}/`, '--cache=0', ...svcArgs] });
  const pool = new Pool(svc.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  return { label, svc, upstream, pool, runs: [] };
}

/** One warm-up burst (unmeasured), then one measured burst. */
async function measureBurst(s: Subject, bodies: readonly string[]): Promise<BurstRun> {
  await fire(s.pool, bodies);
  await Promise.all([s.svc.reset(), s.upstream.reset()]);
  const { latencies, failures } = await fire(s.pool, bodies);
  const [svcUsage, upUsage] = await Promise.all([s.svc.report(), s.upstream.report()]);
  const run: BurstRun = {
    posts: upUsage.requests,
    calls: upUsage.calls,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies[latencies.length - 1] ?? Number.NaN,
    svcCpuMs: svcUsage.cpuMicros / 1000,
    failures,
  };
  s.runs.push(run);
  return run;
}

/** Runs `bursts` bursts per subject, interleaved. */
async function runAll(subjects: Subject[], bursts: number, bodies: (burst: number) => string[]): Promise<void> {
  for (let r = 0; r < bursts; r++) {
    for (const s of subjects) {
      const run = await measureBurst(s, bodies(r));
      progress(
        `  burst ${r + 1}/${bursts} ${s.label}: ${run.posts} upstream POSTs (${run.calls} calls), p50 ${fmt(run.p50Ms, 1)} ms, p99 ${fmt(run.p99Ms, 1)} ms, svc CPU ${fmt(run.svcCpuMs, 0)} ms${run.failures ? `, ${run.failures} FAILURES` : ''}`,
      );
    }
  }
}

/** Stops every subject's pool and processes. */
async function stopAll(subjects: Subject[]): Promise<void> {
  await Promise.all(subjects.flatMap((s) => [s.pool.close(), s.svc.stop(), s.upstream.stop()]));
}

/** Sends the bodies one after another (each alone in svc); latencies sorted ascending, ms. */
async function oneByOne(pool: Pool, bodies: readonly string[]): Promise<{ latencies: Float64Array; failures: number }> {
  const latencies = new Float64Array(bodies.length);
  let failures = 0;
  for (const [i, body] of bodies.entries()) {
    const one = await fire(pool, [body]);
    latencies[i] = one.latencies[0] as number;
    failures += one.failures;
  }
  return { latencies: latencies.sort(), failures };
}

/** `n` burst(s). */
function bursts(n: number): string {
  return `${n} measured burst${n === 1 ? '' : 's'}`;
}

/** Medians of a subject's bursts: [POSTs, calls, p50, p99, max, svc CPU, failures] as cells. */
function cells(s: Subject): string[] {
  const m = (f: (r: BurstRun) => number) => median(s.runs.map(f));
  const failures = s.runs.reduce((n, r) => n + r.failures, 0);
  return [
    fmt(
      m((r) => r.posts),
      0,
    ),
    fmt(
      m((r) => r.calls),
      0,
    ),
    fmt(
      m((r) => r.p50Ms),
      1,
    ),
    fmt(
      m((r) => r.p99Ms),
      1,
    ),
    fmt(
      m((r) => r.maxMs),
      1,
    ),
    fmt(
      m((r) => r.svcCpuMs),
      0,
    ),
    String(failures),
  ];
}

const HEADERS = ['upstream POSTs', 'upstream calls', 'p50 ms', 'p99 ms', 'max ms', 'svc CPU ms / burst', 'failed calls (all bursts)'];

/**
 * Multiplexed burst: 1,000 identical concurrent calls, multiplexing on versus off.
 * @param settings `reps` sets the number of measured bursts per mode
 * @returns a markdown section
 */
export async function burstScenario(settings: BenchSettings): Promise<string> {
  const n = 1000;
  const delayMs = 50;
  const poller = `--upstream-options=${JSON.stringify({ evm: { statePollerInterval: '1h' } })}`;
  const on = await subject('burst multiplexing on', [`--delay-ms=${delayMs}`], ['--multiplexing=1', poller], n);
  const off = await subject('burst multiplexing off', [`--delay-ms=${delayMs}`], ['--multiplexing=0', poller], n);
  const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [`0x${'ab'.repeat(20)}`, BLOCK] });
  try {
    await runAll([on, off], settings.reps, () => Array.from({ length: n }, () => call));
  } finally {
    await stopAll([on, off]);
  }
  const table = markdownTable(
    ['Scenario (medians of the bursts)', 'client calls', ...HEADERS],
    [on, off].map((s) => [s.label, String(n), ...cells(s)]),
  );
  return `## Multiplexed burst: ${fmt(n, 0)} identical concurrent calls

${fmt(n, 0)} identical \`${call}\` requests sent at once (one HTTP request each, ${fmt(n, 0)} open keep-alive connections), the fake upstream answering each call after ${delayMs} ms; svc with the response cache off, multiplexing on versus off (\`networkDefaults.multiplexing: false\`). ${bursts(settings.reps)} per mode (each after one unmeasured warm-up burst), interleaved; medians.

${table}

- With multiplexing on, calls that arrive while an identical call is in flight wait for its answer instead of calling the upstream; only a call arriving after the shared answer came back starts a new upstream call. Latencies well above the upstream's ${delayMs} ms are svc's own CPU: the ${fmt(n, 0)} requests queue on one event loop (see "svc CPU ms / burst"), on cores shared with the load generator and the upstream.
- With multiplexing off every call reaches the upstream; svc's upstream pool (128 connections) queues them, which is most of the latency.`;
}

/**
 * Outbound batching: 100 concurrent calls with distinct params, supportsBatch on versus off.
 * @param settings `reps` rounds of 5 measured bursts per mode
 * @returns a markdown section
 */
export async function batchingScenario(settings: BenchSettings): Promise<string> {
  const n = 100;
  const batch = { supportsBatch: true, batchMaxSize: 10, batchMaxWait: '5ms' };
  const evm = { statePollerInterval: '1h' };
  const on = await subject('batching on', [], [`--upstream-options=${JSON.stringify({ evm, jsonRpc: batch })}`], n);
  const off = await subject('batching off', [], [`--upstream-options=${JSON.stringify({ evm })}`], n);
  const count = settings.reps * 5;
  const lone = 50;
  // Distinct addresses in every call and every burst: nothing collapses, nothing is cached.
  const bodies = (burst: number, size = n) =>
    Array.from({ length: size }, (_, i) =>
      JSON.stringify({ jsonrpc: '2.0', id: i + 1, method: 'eth_getBalance', params: [`0x${(burst * n + i + 1).toString(16).padStart(40, '0')}`, BLOCK] }),
    );
  /** p50 of lone calls (one at a time), ms, per subject. */
  const loneP50 = new Map<Subject, number>();
  try {
    await runAll([on, off], count, bodies);
    for (const s of [on, off]) {
      const r = await oneByOne(s.pool, bodies(count + 1, lone));
      loneP50.set(s, percentile(r.latencies, 50));
      if (r.failures) progress(`  ${s.label}: ${r.failures} lone calls FAILED`);
      progress(`  ${s.label}: ${lone} lone calls one at a time, p50 ${fmt(percentile(r.latencies, 50), 2)} ms`);
    }
  } finally {
    await stopAll([on, off]);
  }
  const p50 = (s: Subject) => median(s.runs.map((r) => r.p50Ms));
  const table = markdownTable(
    ['Scenario (medians of the bursts)', 'client calls', ...HEADERS, `lone call p50 ms`],
    [
      [
        `supportsBatch on (batchMaxSize ${batch.batchMaxSize}, batchMaxWait ${batch.batchMaxWait})`,
        String(n),
        ...cells(on),
        fmt(loneP50.get(on) ?? Number.NaN, 2),
      ],
      ['supportsBatch off', String(n), ...cells(off), fmt(loneP50.get(off) ?? Number.NaN, 2)],
    ],
  );
  const added = p50(on) - p50(off);
  const addedLone = (loneP50.get(on) ?? Number.NaN) - (loneP50.get(off) ?? Number.NaN);
  return `## Outbound batching: ${n} concurrent calls

${n} concurrent \`eth_getBalance\` calls with distinct addresses (one HTTP request each), svc with multiplexing and the response cache off, its one upstream configured \`jsonRpc: ${JSON.stringify(batch)}\` versus without batching; the fake upstream answers at once and answers a JSON array (a JSON-RPC batch) element by element. ${bursts(count)} per mode (each after one unmeasured warm-up burst), interleaved; medians. "lone call p50": ${lone} calls sent one at a time afterwards (each alone in the queue). Expected upstream POSTs with batching: ceil(${n}/${batch.batchMaxSize}) = ${Math.ceil(n / batch.batchMaxSize)}.

${table}

Latency added by batching, p50 on − off: ${fmt(added, 2)} ms in the burst, ${fmt(addedLone, 2)} ms for a lone call. A full batch leaves as soon as its ${batch.batchMaxSize}th call arrives, so a burst pays little or nothing of batchMaxWait (and with the CPU shared by the load generator, svc and the upstream, 10× fewer upstream requests can even make it faster); a lone call is a partial batch and waits the whole ${batch.batchMaxWait}.`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { benchSettings } = await import('./lib.ts');
  const s = benchSettings();
  process.stdout.write(`${await burstScenario(s)}\n\n${await batchingScenario(s)}\n`);
}
