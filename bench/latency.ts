/**
 * Added latency of `npm run bench`: what a client waits for svc as shipped beyond calling its
 * upstream directly, at a fixed moderate rate (a quarter of the minimal forwarder's maximum in the
 * same run) where queueing behind the other processes on the machine does not dominate, as CPU
 * ratios alone would hide it.
 */
import { fmt, markdownTable, median, progress, runLoad, uniqueBalanceBody, type BenchSettings, type LoadResult, type Target } from './lib.ts';

/** One process under load and where to send it. */
export interface LatencyTarget {
  target: Target;
  url: string;
  helpers: Target[];
}

/** The figures of the latency section (ms), medians over the rounds. */
export interface LatencyFigures {
  rate: number;
  directP50: number;
  directP99: number;
  svcP50: number;
  svcP99: number;
}

/**
 * Runs the section: the upstream alone, then svc as shipped in front of its own upstream, each at
 * the same fixed rate, alternating for `settings.reps` rounds.
 * @param settings the bench settings (duration, rounds)
 * @param floorRps the minimal forwarder's requests per second on unique calls, this run
 * @param start starts the upstream alone (`direct`) and svc as shipped (`svc`)
 * @returns the markdown section and its figures
 */
export async function latencySection(
  settings: BenchSettings,
  floorRps: number,
  start: { direct: () => Promise<LatencyTarget>; svc: () => Promise<LatencyTarget> },
): Promise<{ text: string; figures: LatencyFigures }> {
  const rate = Math.max(100, Math.round(floorRps / 4 / 100) * 100);
  progress(`added latency: the upstream direct and svc as shipped at ${rate} req/s, unique eth_getBalance`);
  const direct = await start.direct();
  const svc = await start.svc();
  const runs: { direct: LoadResult[]; svc: LoadResult[] } = { direct: [], svc: [] };
  try {
    const load = (t: LatencyTarget, durationS: number) => runLoad({ url: t.url, body: uniqueBalanceBody(), connections: 16, durationS, rate });
    if (settings.warmupS > 0) await Promise.all([load(direct, settings.warmupS), load(svc, settings.warmupS)].map((p) => p.catch(() => undefined)));
    for (let round = 1; round <= settings.reps; round++) {
      for (const [name, t] of [
        ['direct', direct],
        ['svc', svc],
      ] as const) {
        const r = await load(t, settings.durationS);
        runs[name].push(r);
        progress(`  round ${round}/${settings.reps} ${name} at ${rate} req/s: ${fmt(r.rps, 0)} req/s, p50 ${fmt(r.p50Ms, 3)} ms, p99 ${fmt(r.p99Ms, 3)} ms`);
      }
    }
  } finally {
    await Promise.all([direct, svc].flatMap((t) => [t.target.stop(), ...t.helpers.map((h) => h.stop())]));
  }
  const m = (rs: LoadResult[], f: (r: LoadResult) => number) => median(rs.map(f));
  const figures: LatencyFigures = {
    rate,
    directP50: m(runs.direct, (r) => r.p50Ms),
    directP99: m(runs.direct, (r) => r.p99Ms),
    svcP50: m(runs.svc, (r) => r.p50Ms),
    svcP99: m(runs.svc, (r) => r.p99Ms),
  };
  const failures = [...runs.direct, ...runs.svc].reduce((n, r) => n + r.non2xx + r.errors + r.timeouts + r.mismatches, 0);
  const table = markdownTable(
    ['At a fixed rate', 'req/s', 'p50 ms', 'p99 ms'],
    [
      [
        '(a) upstream direct',
        fmt(
          m(runs.direct, (r) => r.rps),
          0,
        ),
        fmt(figures.directP50, 3),
        fmt(figures.directP99, 3),
      ],
      [
        '(h) svc as shipped',
        fmt(
          m(runs.svc, (r) => r.rps),
          0,
        ),
        fmt(figures.svcP50, 3),
        fmt(figures.svcP99, 3),
      ],
      ['**added by svc**', '', `**${fmt(figures.svcP50 - figures.directP50, 3)}**`, `**${fmt(figures.svcP99 - figures.directP99, 3)}**`],
    ],
  );
  const text = [
    '## Added latency: svc as shipped against calling the upstream directly',
    '',
    `Unique \`eth_getBalance\` calls at a fixed ${rate} req/s (a quarter of the minimal forwarder's maximum in this run, ${fmt(floorRps, 0)} req/s), 16 connections, ${settings.durationS} s per run, ${settings.reps} alternating rounds; medians of each run's percentiles (every response timed). The upstream is the same fake node in both rows; svc runs as shipped (default preset, memory cache and multiplexing on, every call a miss written back).${failures > 0 ? ` ⚠ ${failures} failed requests.` : ''}`,
    '',
    table,
  ].join('\n');
  return { text, figures };
}
