/**
 * Fault-tolerance scenario of `npm run bench`: two upstreams, one answering
 * 10% of calls after 1 s ("flaky", first in config order) and one healthy, behind svc with the
 * example failsafe of docs/fault-tolerance.md. Reports p50/p99/max latency through svc with
 * hedging on versus off, and calling the flaky upstream directly — all in the same run, medians
 * of the rounds.
 * svc's response cache is off (the svc target applies its default `--cache=0` to this raw
 * config), so every call reaches an upstream.
 * Latency is the point here, so the load is light (8 connections) to keep queueing out of it.
 */
import {
  fmt,
  hasFailures,
  markdownTable,
  median,
  progress,
  runLoad,
  singleBody,
  startTarget,
  TARGETS,
  type BenchSettings,
  type LoadResult,
  type Target,
} from './lib.ts';

/** The example network failsafe of docs/fault-tolerance.md ("primary node + two paid providers + a public fallback"). */
export function readmeFailsafe(hedge: boolean): Record<string, unknown>[] {
  return [
    {
      matchMethod: '*',
      timeout: { duration: '10s' },
      retry: { maxAttempts: 3, delay: '100ms', backoffFactor: 2, backoffMaxDelay: '1s' },
      ...(hedge ? { hedge: { quantile: 0.7, minDelay: '100ms', maxDelay: '2s', maxCount: 1 } } : {}),
    },
  ];
}

function svcConfig(flaky: Target, healthy: Target, hedge: boolean): unknown {
  return {
    logLevel: 'error',
    metrics: { enabled: false },
    projects: [
      {
        id: 'main',
        networkDefaults: { failsafe: readmeFailsafe(hedge) },
        networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
        upstreams: [
          { id: 'flaky', endpoint: `${flaky.origin}/`, evm: { chainId: 1 } },
          { id: 'healthy', endpoint: `${healthy.origin}/`, evm: { chainId: 1 } },
        ],
      },
    ],
  };
}

/**
 * Runs the scenario.
 * @param settings duration (s) and repetitions; connections are fixed at 8
 * @returns a markdown section (heading, table, reading)
 */
export async function hedgeScenario(settings: BenchSettings): Promise<string> {
  const connections = 8;
  const slow = ['--slow-fraction=0.1', '--slow-ms=1000'];
  const procs: Target[] = [];
  try {
    const flakyDirect = await startTarget(TARGETS.upstream, { label: 'flaky/direct', args: slow });
    const flakyA = await startTarget(TARGETS.upstream, { label: 'flaky/hedge-on', args: slow });
    const healthyA = await startTarget(TARGETS.upstream, { label: 'healthy/hedge-on' });
    const flakyB = await startTarget(TARGETS.upstream, { label: 'flaky/hedge-off', args: slow });
    const healthyB = await startTarget(TARGETS.upstream, { label: 'healthy/hedge-off' });
    procs.push(flakyDirect, flakyA, healthyA, flakyB, healthyB);
    const on = await startTarget(TARGETS.svc, { label: 'svc hedge on', args: [`--config=${JSON.stringify(svcConfig(flakyA, healthyA, true))}`] });
    const off = await startTarget(TARGETS.svc, { label: 'svc hedge off', args: [`--config=${JSON.stringify(svcConfig(flakyB, healthyB, false))}`] });
    procs.push(on, off);
    const scenarios: Array<{ label: string; url: string }> = [
      { label: 'flaky upstream called directly', url: `${flakyDirect.origin}/` },
      { label: 'svc, hedging off (flaky primary + healthy)', url: `${off.origin}/main/evm/1` },
      { label: 'svc, hedging on (flaky primary + healthy)', url: `${on.origin}/main/evm/1` },
    ];
    const runs = new Map<string, LoadResult[]>();
    const body = singleBody();
    // Warm-up also gives svc's health tracker latency samples for the quantile hedge delay.
    for (const s of scenarios) await runLoad({ url: s.url, body, connections, durationS: Math.max(1, settings.warmupS) });
    for (let r = 0; r < settings.reps; r++) {
      for (const s of scenarios) {
        progress(`hedge scenario round ${r + 1}/${settings.reps}: ${s.label}`);
        const res = await runLoad({ url: s.url, body, connections, durationS: settings.durationS });
        runs.set(s.label, [...(runs.get(s.label) ?? []), res]);
      }
    }
    const rows = scenarios.map((s) => {
      const rs = runs.get(s.label) ?? [];
      return [
        s.label,
        fmt(median(rs.map((x) => x.p50Ms)), 2),
        fmt(median(rs.map((x) => x.p99Ms)), 1),
        fmt(median(rs.map((x) => x.maxMs)), 0),
        fmt(median(rs.map((x) => x.rps)), 0),
        String(rs.filter(hasFailures).length ? rs.reduce((n, x) => n + x.non2xx + x.errors + x.timeouts + x.mismatches, 0) : 0),
      ];
    });
    const table = markdownTable(['Scenario', 'p50 ms', 'p99 ms', 'max ms', 'req/s', 'failures'], rows, ['l', 'r', 'r', 'r', 'r', 'r']);
    return [
      '## Fault tolerance: hedging a flaky upstream',
      '',
      `Two fake upstreams: "flaky" (first in config order) answers 10% of calls after 1 s, "healthy" always answers at once. svc uses the recommended network failsafe (docs/fault-tolerance.md) (timeout 10s, retry 3) with and without its hedge (quantile 0.7 of the method latency, clamped to 100 ms..2 s, one extra leg); its response cache is off (the svc target's default \`--cache=0\`), or the repeated \`eth_blockNumber\` would be answered from it for 2 s at a time. ${connections} connections, ${settings.durationS} s per run, ${settings.reps} rounds, medians.`,
      '',
      table,
      '',
      'With hedging the slow 10% are answered by the healthy upstream one hedge delay (100 ms, the p70 of a fast upstream clamped to minDelay) after the primary leg started, so p99 sits near 100 ms plus the healthy upstream latency instead of near 1 s.',
    ].join('\n');
  } finally {
    await Promise.all(procs.map((p) => p.stop().catch(() => undefined)));
  }
}
