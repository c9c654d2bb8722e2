/**
 * `npm run bench`: svc's overhead next to its floors, all measured in one run.
 *
 * Scenarios (each server under test in its own process, each with its own fake upstream):
 *   (a) the fake upstream called directly
 *   (b) svc (default preset), single calls and 10-call batches; plus svc with the minimal
 *       preset, to split the cost between the core and the default plugins
 *   (c) bare Koa + @koa/router answering a fixed JSON body; (c′) bare node:http doing the same
 *   (d) a minimal node:http + undici Pool forwarder, single calls and 10-call batches; (d″) the
 *       same forwarding inside Koa + @koa/router, the floor of any Koa-based proxy
 *   (e) svc answering a finalized call from its memory cache; (e′) from a Redis tier (bench/cache.ts)
 * After the rounds: hedging (bench/hedge.ts), the multiplexed burst and outbound batching
 * (bench/burst.ts), consensus and integrity (bench/consensus.ts), and memory (bench/memory.ts),
 * each its own section.
 * Rounds are interleaved (round 1 of every scenario, then round 2, …) so slow drift of the
 * machine hits all scenarios alike. Medians over the rounds are quoted.
 *
 * Settings: BENCH_CONNECTIONS (32), BENCH_DURATION (s, 5), BENCH_REPS (3), BENCH_WARMUP (s, 1);
 * BENCH_SCENARIOS (comma list of scenario keys, default all), BENCH_BASELINE_DIST (another build's dist/ to compare with), BENCH_SKIP_HEDGE, BENCH_SKIP_BURST,
 * BENCH_SKIP_CONSENSUS, BENCH_SKIP_MEMORY, BENCH_SKIP_PROFILE, BENCH_SKIP_WRITEBACK, BENCH_SKIP_WORKERS, BENCH_SKIP_WS, BENCH_SKIP_LATENCY, BENCH_SKIP_ALLOC (`1` leaves that section out; a partial run still writes
 * bench/RESULTS.md). BENCH_ONLY_CONSENSUS=1 runs only the consensus and integrity section and
 * prints it, leaving bench/RESULTS.md as it was (a quick check of one section).
 * Output: a markdown report on stdout, also written to bench/RESULTS.md.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { batchingScenario, burstScenario } from './burst.ts';
import { blockBody, cacheSection, setupMemoryCache, setupRedisCache, type CacheRow } from './cache.ts';
import { compressionScenario } from './compression.ts';
import { consensusScenario } from './consensus.ts';
import { targetsSection } from './targets-check.ts';
import { hedgeScenario } from './hedge.ts';
import { profileSection } from './profile.ts';
import { writebackSection } from './writeback.ts';
import { workersScenario } from './workers.ts';
import { wsScenario } from './ws.ts';
import { memoryScenario } from './memory.ts';
import { latencySection } from './latency.ts';
import { BASELINE_DIST, behind, orderOf, RUN_ORDER, scenarios, single, upstream } from './scenarios.ts';
import { type Live, type Summary, summarise } from './summary.ts';
import {
  batchBody,
  ethCallBody,
  rawTxBody,
  benchSettings,
  fmt,
  hasFailures,
  machineLine,
  markdownTable,
  measure,
  median,
  preflight,
  progress,
  runLoad,
  singleBody,
  uniqueBalanceBody,
  startTarget,
  TARGETS,
  type Measurement,
  type RpcBody,
  type Target,
} from './lib.ts';

const settings = benchSettings();
/** Length of each scenario's allocation window, s (the sampling profiler converges within it). */
const ALLOC_WINDOW_S = Math.min(2, settings.durationS);

async function main(): Promise<void> {
  // One section alone must not replace the whole report in bench/RESULTS.md: stdout only.
  if (process.env.BENCH_ONLY_CONSENSUS === '1') {
    process.stdout.write(`${await consensusScenario(settings)}\n`);
    return;
  }
  const started = Date.now();
  const loadBefore = os.loadavg()[0] ?? Number.NaN;
  progress(`bench: ${settings.connections} connections, ${settings.durationS} s × ${settings.reps} rounds, ${settings.warmupS} s warm-up per target`);
  const lives: Live[] = [];
  try {
    const only = (process.env.BENCH_SCENARIOS ?? '').split(',').filter(Boolean);
    for (const s of scenarios) {
      if (only.length > 0 && !only.includes(s.key.replace(/@base$/, ''))) continue;
      const { target, url, helpers } = await s.setup();
      const l: Live = { scenario: s, target, url, helpers, runs: [] };
      l.preflightError = await preflight(url, s.body);
      if (l.preflightError) progress(`  ${s.label}: PREFLIGHT FAILED: ${l.preflightError}`);
      if (settings.warmupS > 0) {
        const w = await runLoad({ url, body: s.body, connections: settings.connections, durationS: settings.warmupS });
        progress(`  warm-up ${s.label}: ${fmt(w.rps, 0)} req/s${hasFailures(w) ? ' (with failures)' : ''}`);
      }
      lives.push(l);
    }
    // Within a round, compared pairs run back to back, so they share the machine's state.
    const runOrder = [...lives].sort((x, y) => orderOf(x.scenario.key) - orderOf(y.scenario.key));
    for (let round = 1; round <= settings.reps; round++) {
      for (const l of runOrder) {
        const m = await measure(l.target, { url: l.url, body: l.scenario.body, connections: settings.connections, durationS: settings.durationS }, l.helpers);
        l.runs.push(m);
        const f = hasFailures(m.load)
          ? ` FAILURES non2xx=${m.load.non2xx} errors=${m.load.errors} timeouts=${m.load.timeouts} mismatches=${m.load.mismatches} codes=${JSON.stringify(m.load.statusCodes)}`
          : '';
        const other = m.otherCpuShare === undefined ? '' : `, other procs ${fmt(m.otherCpuShare * 100, 0)}% of machine`;
        progress(
          `  round ${round}/${settings.reps} ${l.scenario.label}: ${fmt(m.load.rps, 0)} req/s, p50 ${fmt(m.load.p50Ms, 2)} ms, p99 ${fmt(m.load.p99Ms, 2)} ms, ${fmt(m.usage.cpuMicros / Math.max(1, m.load.responses), 1)} µs CPU/req${other}${f}`,
        );
      }
    }
    // One allocation window per scenario after the timed rounds (the profiler's own cost stays out of
    // the CPU figures): the bytes a request leaves to the garbage collector.
    if (process.env.BENCH_SKIP_ALLOC !== '1') {
      for (const l of runOrder) {
        const m = await measure(l.target, { url: l.url, body: l.scenario.body, connections: settings.connections, durationS: ALLOC_WINDOW_S }, l.helpers, true);
        l.allocPerReq = m.usage.allocBytes / Math.max(1, m.load.responses);
        progress(`  allocation ${l.scenario.label}: ${fmt(l.allocPerReq / 1024, 1)} KB/req`);
      }
    }
  } finally {
    await Promise.all(lives.flatMap((l) => [l.target.stop(), ...l.helpers.map((h) => h.stop())]));
  }

  const sums = lives.map(summarise);
  const by = (key: string) => sums.find((s) => s.live.scenario.key === key);
  const rows = sums.map((s) => [
    s.failures > 0 ? `⚠ ${s.live.scenario.label}` : s.live.scenario.label,
    s.live.scenario.measured,
    `${fmt(s.cpuPerReq, 1)} (${fmt(s.cpuPerReqMin, 1)}–${fmt(s.cpuPerReqMax, 1)})`,
    s.live.scenario.body.calls > 1 ? fmt(s.cpuPerCall, 1) : '',
    fmt(s.live.runs.length ? median(s.live.runs.map((r) => r.load.meanMs)) : Number.NaN, 2),
    fmt(s.p50Ms, 2),
    fmt(s.p99Ms, 2),
    fmt(s.rps, 0),
    fmt(s.gcPerReq, 1),
    fmt(s.allocPerReq / 1024, 1),
    fmt(s.peakRssMiB, 1),
    fmt(s.upstreamPerReq, 2),
    fmt(s.otherCpu * 100, 0),
    s.failures > 0 ? `${s.failures} ${JSON.stringify(s.statusCodes)}${s.live.preflightError ? ' preflight' : ''}` : '0',
  ]);
  const table = markdownTable(
    [
      'Scenario',
      'Process measured',
      'CPU µs/req (min–max)',
      'CPU µs/call',
      'mean ms',
      'p50 ms',
      'p99 ms',
      'req/s',
      'GC µs/req',
      'alloc KB/req',
      'peak RSS MiB',
      'upstream req/req',
      'other procs CPU %',
      'failures',
    ],
    rows,
  );

  const ratio = (a: Summary | undefined, b: Summary | undefined, f: (s: Summary) => number) => (a && b ? `${fmt(f(a) / f(b), 2)}×` : '–');
  const ratioRows: string[][] = [];
  const addRatio = (name: string, a?: Summary, b?: Summary) =>
    ratioRows.push([name, ratio(a, b, (s) => s.cpuPerReq), ratio(a, b, (s) => s.p50Ms), ratio(a, b, (s) => s.p99Ms)]);
  addRatio('b/d: svc single / min forwarder single', by('svc'), by('fwd'));
  addRatio('b/d: svc batch10 / min forwarder batch10', by('svc-batch'), by('fwd-batch'));
  addRatio('b‴/d: svc batch10 with outbound batching / min forwarder batch10', by('svc-batch-ob'), by('fwd-batch'));
  {
    const a = by('svc-batch');
    const b = by('fwd');
    ratioRows.push([
      'b/d: svc batch10 per call / min forwarder single (one upstream request each)',
      a && b ? `${fmt(a.cpuPerCall / b.cpuPerReq, 2)}×` : '–',
      '–',
      '–',
    ]);
  }
  addRatio('b/c: svc single / bare Koa', by('svc'), by('koa'));
  addRatio('f/d: svc eth_call 1 KiB / min forwarder single', by('svc-call1k'), by('fwd'));
  addRatio('f′/d′: svc eth_call 5 KiB / min forwarder, same body', by('svc-call5k'), by('fwd-call5k'));
  addRatio('f″/d: svc eth_sendRawTransaction 1 KiB / min forwarder single', by('svc-rawtx'), by('fwd'));
  addRatio('g/b: svc with the recommended failsafe config / svc default', by('svc-failsafe'), by('svc'));
  addRatio('b′/d: svc minimal preset / min forwarder single', by('svc-minimal'), by('fwd'));
  addRatio('d″/d: Koa forwarder / min forwarder (the floor of a Koa-based proxy)', by('fwd-koa'), by('fwd'));
  addRatio('b′/d″: svc minimal preset / Koa forwarder', by('svc-minimal'), by('fwd-koa'));
  addRatio('b/d″: svc single / Koa forwarder', by('svc'), by('fwd-koa'));
  addRatio('b/b″: svc compiled (dist) / svc from sources through tsx', by('svc'), by('svc-src'));
  addRatio('d/c: min forwarder single / bare Koa', by('fwd'), by('koa'));
  addRatio('c/c′: bare Koa / bare node:http', by('koa'), by('http'));
  addRatio('e/c′: svc memory cache hit / bare node:http', by('svc-cache'), by('http'));
  addRatio('e/c: svc memory cache hit / bare Koa', by('svc-cache'), by('koa'));
  addRatio('e′/c′: svc Redis cache hit / bare node:http (svc CPU only)', by('svc-redis'), by('http'));
  addRatio('e′/c: svc Redis cache hit / bare Koa (svc CPU only)', by('svc-redis'), by('koa'));
  addRatio('e/b: svc memory cache hit / svc forwarding (cache off)', by('svc-cache'), by('svc'));
  addRatio('h/d: svc as shipped, unique calls / min forwarder, same calls', by('svc-shipped'), by('fwd-unique'));
  addRatio('h/d″: svc as shipped, unique calls / Koa forwarder, same calls', by('svc-shipped'), by('fwd-koa-unique'));
  addRatio('h/h′: svc as shipped / svc with cache and multiplexing off, unique calls', by('svc-shipped'), by('svc-nocache-unique'));
  addRatio('h′/h″: svc default preset / minimal preset, unique calls, cache off', by('svc-nocache-unique'), by('svc-minimal-unique'));
  addRatio('h‴/h′: memory cache alone (read miss + write-back) / both off, unique calls', by('svc-cacheonly-unique'), by('svc-nocache-unique'));
  addRatio('h⁗/h′: multiplexing alone / both off, unique calls', by('svc-muxonly-unique'), by('svc-nocache-unique'));
  const full = by('svc-shipped');
  const empty = by('svc-shipped-tier-empty');
  if (full && empty)
    ratioRows.push(['h/h-empty: GC CPU per request, memory tier full (100,000 entries) / holding nothing', ratio(full, empty, (x) => x.gcPerReq), '–', '–']);
  const fwdUnique = by('fwd-unique');
  if (full && fwdUnique)
    ratioRows.push([
      `h/d: peak RSS of svc as shipped minus the ${fmt(full.heldMiB, 1)} MiB its memory tier accounts / min forwarder's peak RSS`,
      fmt((full.peakRssMiB - full.heldMiB) / fwdUnique.peakRssMiB, 2) + '×',
      '–',
      '–',
    ]);
  const ratios = markdownTable(['Ratio (same run, ratio of medians)', 'CPU/req', 'p50', 'p99'], ratioRows);
  const twinRows: string[][] = [];
  for (const s of sums) {
    if (!s.live.scenario.key.endsWith('@base')) continue;
    const own = by(s.live.scenario.key.slice(0, -5));
    if (own) twinRows.push([own.live.scenario.label, ratio(own, s, (x) => x.cpuPerReq), ratio(own, s, (x) => x.p50Ms), ratio(own, s, (x) => x.p99Ms)]);
  }
  const baseline = twinRows.length
    ? `\nThis build ÷ the baseline build \`${BASELINE_DIST}\` (BENCH_BASELINE_DIST), each pair run back to back in every round:\n\n${markdownTable(['Scenario', 'CPU/req', 'p50', 'p99'], twinRows)}\n`
    : '';
  // The memory tier's write-back alone (BENCH_SKIP_WRITEBACK=1 leaves it out): target 2 reads it.
  const writeback = process.env.BENCH_SKIP_WRITEBACK === '1' ? undefined : await writebackSection(settings.reps);
  // server.workers: 1 worker against auto (BENCH_SKIP_WORKERS=1 leaves it out).
  const workers = process.env.BENCH_SKIP_WORKERS === '1' ? undefined : await workersScenario(settings);
  const figure = (v: number | undefined) => (v === undefined ? undefined : { cpuPerReq: v, cpuPerCall: v, rps: 0, peakRssMiB: 0 });
  const targets = `\n${targetsSection((key) => (key === 'writeback' ? figure(writeback?.medianMicros) : key === 'workers' ? figure(workers?.cpuRatio) : by(key)))}`;

  const svc = by('svc');
  const fwd = by('fwd');
  const svcBatch = by('svc-batch');
  const extra =
    svc && fwd && svcBatch
      ? `svc spends ${fmt(svc.cpuPerReq - fwd.cpuPerReq, 1)} µs CPU per single call above the minimal forwarder; in a 10-call batch it spends ${fmt(svcBatch.cpuPerCall, 1)} µs per call (it sends one upstream request per call: ${fmt(svcBatch.upstreamPerReq, 1)} upstream requests per batch).`
      : '';
  const anyFail = sums.some((s) => s.failures > 0);
  const maxOther = Math.max(...sums.map((s) => s.otherCpu).filter((x) => !Number.isNaN(x)), 0);
  const elapsed = (Date.now() - started) / 1000;
  const runOrderText = RUN_ORDER.map((k) => scenarios.find((x) => x.key === k)?.label)
    .filter((x) => x !== undefined && lives.some((l) => l.scenario.label === x))
    .join(', ');
  const cacheRow = (s: Summary | undefined): CacheRow | undefined =>
    s && {
      label: s.live.scenario.label,
      rps: s.rps,
      cpuPerReq: s.cpuPerReq,
      p50Ms: s.p50Ms,
      p99Ms: s.p99Ms,
      upstreamPerReq: s.upstreamPerReq,
      redisCpuPerReq: s.extraHelperCpuPerReq,
      redisGetsPerReq: s.extraHelperReqPerReq,
      failures: s.failures,
    };
  const cache =
    by('svc-cache') || by('svc-redis')
      ? `\n${cacheSection([cacheRow(by('svc-cache')), cacheRow(by('svc-redis'))], cacheRow(by('http')), cacheRow(by('koa')))}\n`
      : '';

  const md = `# svc benchmark results

Generated by \`npm run bench\` (bench/run.ts) on ${new Date().toISOString()}, in ${fmt(elapsed, 0)} s.

- Machine: ${machineLine()}; 1-min load average ${fmt(loadBefore, 2)} before the run, ${fmt(os.loadavg()[0] ?? Number.NaN, 2)} after.
- Load: autocannon in the parent process, ${settings.connections} connections, no pipelining, ${settings.durationS} s per run, ${settings.warmupS} s warm-up per target, ${settings.reps} interleaved rounds; medians over the rounds (CPU also min–max).
- Bodies: single \`${single.text}\`; batch10 = 10 of the same (ids 1..10); (e)/(e′) \`${blockBody().text}\`. Every answer is checked (2xx, one \`"result"\` per call, no \`"error"\`).
- Each server under test runs in its own process as plain JavaScript (\`node target.mjs\`: the target scripts are bundled once per run with esbuild, svc itself is \`dist/\`; only (b″) runs under the tsx loader), with its own fake upstream process. CPU = user+system time of that process (all threads) over the run, divided by the completed HTTP requests. Peak RSS = \`process.resourceUsage().maxRSS\` of that process.
- **Read CPU µs/req and the same-run ratios.** With ${machineLine().match(/(\d+) logical cores/)?.[1] ?? '?'} cores the load generator, the server under test and the fake upstream compete for CPU, so absolute requests/s (and latencies, which include queueing behind the other processes) are noise across machines and runs.

${table}

${ratios}
${baseline}
${extra}

Notes:
- "upstream req/req": HTTP requests the fake upstream received per completed client request (svc splits a batch into one upstream request per call; the minimal forwarder sends the batch body as one request). Slightly above 1 or 10 because the requests in flight when the load stops reached the upstream but are not counted as completed; svc made no retries or hedges (no failures, one upstream).
- The bare Koa server answers a fixed body without reading the request body; the minimal forwarder reads the body, forwards it verbatim through one undici \`Pool\` (128 connections, like svc) and buffers the answer.
- (d″) is the same forwarder inside Koa 3 + @koa/router (one route, the same undici \`Pool\`): svc is a Koa application, so (d″)/(d) is the part of every ratio to (d) that Koa alone takes.
- (b′) is svc with the \`minimal\` preset (select + forward plugins only), to separate the core's cost from the default plugins'. (b) runs the compiled package (\`dist/\`, as \`svc start\` does); (b″) the same svc from its TypeScript sources through tsx.
- "other procs CPU %": CPU used during the runs by processes outside the benchmark (\`/proc/stat\` busy time minus the target, its upstream, redis-server for (e′), and the load generator), as a share of all cores. ${maxOther > 0.05 ? `⚠ Up to ${fmt(maxOther * 100, 0)}% here: other work shared the machine, so this run is noisier than a quiet one.` : 'Near 0: the machine was otherwise quiet.'}
- Within a round the runs go: ${runOrderText} (each svc run right after its floor). Ratios are ratios of the medians.
- (b), (b′), (b″) run svc with the response cache off (\`--cache=0\`: \`database.evmJsonRpcCache: {connectors: [], policies: []}\`) and multiplexing off, so svc forwards every call like the forwarder; (e)/(e′) turn the cache on (next section). The fake upstream answers \`eth_getBlockByNumber\` with block headers (latest 0x1234567, finalized 0x1234527) and \`eth_syncing\` with \`false\`, so svc's state poller knows the head and the finalized block, as with a real node.
- Load generator CPU per request (autocannon, same process for all scenarios): ${sums.map((s) => `${s.live.scenario.key} ${fmt(s.loaderCpuPerReq, 0)} µs`).join(', ')}.
${anyFail ? '- ⚠ marks scenarios with non-2xx answers, connection errors, timeouts or bad bodies; their numbers are not comparable.\n' : ''}`;

  // Added latency at a fixed moderate rate (BENCH_SKIP_LATENCY=1 leaves it out; needs the forwarder's unique-call run).
  const floor = by('fwd-unique');
  const latency =
    process.env.BENCH_SKIP_LATENCY === '1' || !floor
      ? ''
      : `\n${
          (
            await latencySection(settings, floor.rps, {
              direct: async () => {
                const t = await upstream('latency-direct');
                return { target: t, url: `${t.origin}/`, helpers: [] };
              },
              svc: () => behind(TARGETS.svc, 'latency-svc', ['--cache=1', '--multiplexing=1']),
            })
          ).text
        }\n`;
  // Hedging a flaky upstream, same run (BENCH_SKIP_HEDGE=1 leaves it out).
  const hedge = process.env.BENCH_SKIP_HEDGE === '1' ? '' : `\n${await hedgeScenario(settings)}\n`;
  // Multiplexed burst and outbound batching (BENCH_SKIP_BURST=1 leaves them out).
  const burst = process.env.BENCH_SKIP_BURST === '1' ? '' : `\n${await burstScenario(settings)}\n\n${await batchingScenario(settings)}\n`;
  // Consensus overhead and intrinsic-integrity CPU (BENCH_SKIP_CONSENSUS=1 leaves it out).
  const consensus = process.env.BENCH_SKIP_CONSENSUS === '1' ? '' : `\n${await consensusScenario(settings)}\n`;
  // Peak RSS of one large body and one large answer (BENCH_SKIP_MEMORY=1 leaves it out).
  const memory = process.env.BENCH_SKIP_MEMORY === '1' ? '' : `\n${await memoryScenario()}\n`;
  // The CPU cost of gzip per KiB of answer.
  const compression = `\n${await compressionScenario()}\n`;
  // Where the time goes: CPU profiles of svc as shipped and the floor (BENCH_SKIP_PROFILE=1 leaves it out).
  const profile = process.env.BENCH_SKIP_PROFILE === '1' ? '' : `\n${await profileSection(settings)}\n`;
  // WebSocket newHeads fan-out to 1,000 subscribers (BENCH_SKIP_WS=1 leaves it out).
  const ws = process.env.BENCH_SKIP_WS === '1' ? '' : `\n${await wsScenario(settings)}\n`;
  const report =
    md +
    targets +
    latency +
    (writeback ? `\n${writeback.text}` : '') +
    cache +
    hedge +
    burst +
    consensus +
    memory +
    compression +
    (workers ? `\n${workers.text}\n` : '') +
    ws +
    profile;
  process.stdout.write(report);
  const out = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
  writeFileSync(out, report);
  progress(`wrote ${out}`);
}

main().catch((e: unknown) => {
  process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exitCode = 1;
});
