/**
 * "Consensus and integrity" section of `npm run bench`: what the answers that
 * matter cost, as same-run ratios to the same call without them.
 *
 * - Consensus: svc in front of three fake upstreams that answer identically, with the network
 *   failsafe entry `{matchMethod: '*', consensus: {maxParticipants: 3, agreementThreshold: 2}}`
 *   versus a second svc in front of the same three upstreams with `{matchMethod: '*'}` (the same
 *   entry without the policy, so neither runs the built-in default hedge). Load: `eth_getBalance`
 *   at a finalized block. Reported: req/s, p50/p99, svc CPU per request, upstream requests per
 *   client request (the three upstreams' counters summed), and consensus ÷ plain ratios.
 * - Intrinsic integrity: svc with one fake upstream serving a real block with full transactions
 *   (bench/fixtures/block-full.json, captured from anvil by bench/fixtures/capture-block.ts, via
 *   the upstream's `--block-fixture`), `eth_getBlockByNumber(n, true)` with header
 *   `X-SVC-Integrity: intrinsic` versus without, on the same svc process.
 *
 * Both svc setups: response cache and multiplexing off (the load repeats one body, which either
 * would otherwise answer without an upstream), and the state poller polls once at start then
 * hourly, so its requests do not land in the upstream counts. Every answer is checked by
 * autocannon (2xx, one `"result"`, no `"error"`): a failing integrity check shows as failures.
 * Before the load one probe per variant reads the response headers, so the table says whether
 * consensus actually ran (`X-SVC-Consensus-Slots`) and which integrity level svc applied
 * (`X-SVC-Integrity`).
 *
 * Run alone: `npm run build --silent && node --import tsx bench/consensus.ts` (or
 * `BENCH_ONLY_CONSENSUS=1` with bench/run.ts); BENCH_DURATION / BENCH_REPS / BENCH_WARMUP /
 * BENCH_CONNECTIONS apply.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  fmt,
  hasFailures,
  markdownTable,
  measure,
  median,
  progress,
  runLoad,
  startTarget,
  TARGETS,
  type BenchSettings,
  type LoadResult,
  type Measurement,
  type RpcBody,
  type Target,
} from './lib.ts';

/** svc's path for project `main`, network `evm:1`. */
const SVC_PATH = '/main/evm/1';
/** The balance read's block: below the fake upstream's finalized block (0x1234567 − 64), so no tip or interpolation logic differs between runs. */
const BALANCE_BLOCK = '0x1200000';
/** The captured real block (see bench/fixtures/capture-block.ts). */
const FIXTURE = fileURLToPath(new URL('./fixtures/block-full.json', import.meta.url));
/** The consensus policy measured. */
const CONSENSUS = { maxParticipants: 3, agreementThreshold: 2 };

/** One variant under load: a URL of an svc, request headers, and the upstreams behind it. */
interface Variant {
  label: string;
  svc: Target;
  upstreams: Target[];
  body: RpcBody;
  headers: Record<string, string>;
  /** Response headers of the probe worth showing (name → value, `–` when absent). */
  probe: Record<string, string>;
  /** What went wrong in the probe, if anything. */
  probeError?: string;
  /** The measured runs at `settings.connections`. */
  runs: Measurement[];
  /** The runs at one connection (one call at a time), for latency without queueing. */
  lone: LoadResult[];
}

/**
 * A full svc config: one network `evm:1` with the given failsafe, one upstream per target,
 * cache and multiplexing off, the state poller nearly idle.
 */
function svcConfig(upstreams: Target[], failsafe: unknown[]): string {
  return JSON.stringify({
    logLevel: 'error',
    metrics: { enabled: false },
    database: { evmJsonRpcCache: { connectors: [], policies: [] } },
    projects: [
      {
        id: 'main',
        networkDefaults: { multiplexing: false },
        networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe }],
        upstreams: upstreams.map((u, i) => ({ id: `up${i}`, endpoint: `${u.origin}/`, evm: { chainId: 1, statePollerInterval: '1h' } })),
      },
    ],
  });
}

/**
 * One request before the load, checked strictly (HTTP 200, a `result`, no `error`), keeping the
 * named response headers so the report shows what svc did (consensus slots, integrity level).
 */
async function probe(v: Variant, show: readonly string[]): Promise<void> {
  try {
    const res = await fetch(`${v.svc.origin}${SVC_PATH}`, { method: 'POST', headers: { ...v.headers, 'content-type': 'application/json' }, body: v.body.text });
    const text = await res.text();
    for (const h of show) v.probe[h] = res.headers.get(h) ?? '–';
    const doc = JSON.parse(text) as { result?: unknown; error?: unknown };
    if (res.status !== 200 || doc.error !== undefined || doc.result === undefined || doc.result === null)
      v.probeError = `HTTP ${res.status}: ${text.slice(0, 300)}`;
  } catch (e) {
    v.probeError = (e as Error).message;
  }
  if (v.probeError) progress(`  ${v.label}: PROBE FAILED: ${v.probeError}`);
}

/** Medians of a variant's runs. */
interface Summary {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  cpuPerReq: number;
  /** Upstream HTTP requests per completed client request, all upstreams summed. */
  upstreamPerReq: number;
  /** Upstream CPU per completed client request, all upstreams summed, µs. */
  upstreamCpuPerReq: number;
  /** p50 and p99 at one connection, ms. */
  loneP50Ms: number;
  loneP99Ms: number;
  /** Share of the machine used by processes outside the bench during the runs, 0..1 (NaN off Linux). */
  otherCpu: number;
  failures: number;
  statusCodes: Record<string, number>;
}

function summarise(v: Variant): Summary {
  const per = (m: Measurement, x: number) => x / Math.max(1, m.load.responses);
  const statusCodes: Record<string, number> = {};
  for (const r of [...v.runs.map((x) => x.load), ...v.lone]) for (const [c, n] of Object.entries(r.statusCodes)) statusCodes[c] = (statusCodes[c] ?? 0) + n;
  return {
    rps: median(v.runs.map((r) => r.load.rps)),
    p50Ms: median(v.runs.map((r) => r.load.p50Ms)),
    p99Ms: median(v.runs.map((r) => r.load.p99Ms)),
    cpuPerReq: median(v.runs.map((r) => per(r, r.usage.cpuMicros))),
    upstreamPerReq: median(
      v.runs.map((r) =>
        per(
          r,
          r.helpers.reduce((n, h) => n + h.requests, 0),
        ),
      ),
    ),
    upstreamCpuPerReq: median(
      v.runs.map((r) =>
        per(
          r,
          r.helpers.reduce((n, h) => n + h.cpuMicros, 0),
        ),
      ),
    ),
    loneP50Ms: median(v.lone.map((r) => r.p50Ms)),
    loneP99Ms: median(v.lone.map((r) => r.p99Ms)),
    otherCpu: median(v.runs.map((r) => r.otherCpuShare ?? Number.NaN).filter((x) => !Number.isNaN(x))),
    failures: [...v.runs.map((r) => r.load), ...v.lone].reduce((n, r) => n + r.non2xx + r.errors + r.timeouts + r.mismatches, 0) + (v.probeError ? 1 : 0),
    statusCodes,
  };
}

/** `a ÷ b` as `1.23×`, `–` when either is missing. */
function ratio(a: number, b: number): string {
  return Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${fmt(a / b, 2)}×` : '–';
}

/** The ratio cells `a ÷ b`: CPU/req, p50, p99, lone p50, lone p99, upstream req/req. */
function ratioCells(a: Summary, b: Summary): string[] {
  const keys = ['cpuPerReq', 'p50Ms', 'p99Ms', 'loneP50Ms', 'loneP99Ms', 'upstreamPerReq'] as const;
  return keys.map((k) => ratio(a[k], b[k]));
}

/** The failures cell: count, and the status codes when there were any. */
function failCell(v: Variant, s: Summary): string {
  return s.failures > 0 ? `⚠ ${s.failures} ${JSON.stringify(s.statusCodes)}${v.probeError ? ' probe' : ''}` : '0';
}

/**
 * Runs the consensus-overhead and intrinsic-integrity measurements and writes their section.
 * @param settings connections, duration (s), rounds and warm-up (s), as for the other scenarios
 * @returns a markdown section (heading, tables, reading)
 */
export async function consensusScenario(settings: BenchSettings): Promise<string> {
  const procs: Target[] = [];
  const start = async (script: string, label: string, args: string[] = []) => {
    const t = await startTarget(script, { label, args });
    procs.push(t);
    return t;
  };
  const block = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { number: string; hash: string; transactions: Array<{ type: string }> };
  const balance: RpcBody = {
    text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [`0x${'ab'.repeat(20)}`, BALANCE_BLOCK] }),
    calls: 1,
  };
  const fullBlock: RpcBody = { text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [block.number, true] }), calls: 1 };
  const consensusHeaders = ['x-svc-consensus-slots', 'x-svc-consensus-disputes', 'x-svc-consensus-low-participants'];
  const integrityHeaders = ['x-svc-integrity'];
  let variants: Variant[];
  try {
    // The same three upstreams serve both svc processes (runs are sequential): identical upstream state.
    const ups = [
      await start(TARGETS.upstream, 'consensus/up0'),
      await start(TARGETS.upstream, 'consensus/up1'),
      await start(TARGETS.upstream, 'consensus/up2'),
    ];
    const plainSvc = await start(TARGETS.svc, 'svc 3 upstreams, no consensus', [`--config=${svcConfig(ups, [{ matchMethod: '*' }])}`]);
    const consSvc = await start(TARGETS.svc, 'svc 3 upstreams, consensus', [`--config=${svcConfig(ups, [{ matchMethod: '*', consensus: CONSENSUS }])}`]);
    const fixtureUp = await start(TARGETS.upstream, 'integrity/upstream', [`--block-fixture=${FIXTURE}`]);
    const intSvc = await start(TARGETS.svc, 'svc integrity', [`--config=${svcConfig([fixtureUp], [{ matchMethod: '*' }])}`]);
    const v = (label: string, svc: Target, upstreams: Target[], body: RpcBody, headers: Record<string, string> = {}): Variant => ({
      label,
      svc,
      upstreams,
      body,
      headers,
      probe: {},
      runs: [],
      lone: [],
    });
    variants = [
      v('eth_getBalance, no consensus', plainSvc, ups, balance),
      v(`eth_getBalance, consensus ${CONSENSUS.agreementThreshold} of ${CONSENSUS.maxParticipants}`, consSvc, ups, balance),
      v('eth_getBlockByNumber(full), integrity off', intSvc, [fixtureUp], fullBlock),
      v('eth_getBlockByNumber(full), X-SVC-Integrity: intrinsic', intSvc, [fixtureUp], fullBlock, { 'x-svc-integrity': 'intrinsic' }),
    ];
    for (const [i, x] of variants.entries()) {
      await probe(x, i < 2 ? consensusHeaders : integrityHeaders);
      if (settings.warmupS > 0) {
        const w = await runLoad({
          url: `${x.svc.origin}${SVC_PATH}`,
          body: x.body,
          headers: x.headers,
          connections: settings.connections,
          durationS: settings.warmupS,
        });
        progress(`  warm-up ${x.label}: ${fmt(w.rps, 0)} req/s${hasFailures(w) ? ' (with failures)' : ''}`);
      }
    }
    // Interleaved rounds; each compared pair runs back to back so it shares the machine's state.
    // At the bench's connections svc is CPU-bound, so latency there is mostly queueing
    // (p50 ≈ connections ÷ req/s); a shorter run at one connection shows what a lone call waits.
    const loneS = Math.max(1, Math.floor(settings.durationS / 2));
    for (let round = 1; round <= settings.reps; round++) {
      for (const x of variants) {
        const url = `${x.svc.origin}${SVC_PATH}`;
        const m = await measure(
          x.svc,
          { url, body: x.body, headers: x.headers, connections: settings.connections, durationS: settings.durationS },
          x.upstreams,
        );
        x.runs.push(m);
        const lone = await runLoad({ url, body: x.body, headers: x.headers, connections: 1, durationS: loneS });
        x.lone.push(lone);
        const ups = m.helpers.reduce((n, h) => n + h.requests, 0) / Math.max(1, m.load.responses);
        const f = [m.load, lone].some(hasFailures)
          ? ` FAILURES non2xx=${m.load.non2xx + lone.non2xx} errors=${m.load.errors + lone.errors} timeouts=${m.load.timeouts + lone.timeouts} bad bodies=${m.load.mismatches + lone.mismatches}`
          : '';
        progress(
          `  round ${round}/${settings.reps} ${x.label}: ${fmt(m.load.rps, 0)} req/s, p50 ${fmt(m.load.p50Ms, 2)} ms, p99 ${fmt(m.load.p99Ms, 2)} ms, ${fmt(m.usage.cpuMicros / Math.max(1, m.load.responses), 1)} µs CPU/req, ${fmt(ups, 2)} upstream req/req; 1 connection p50 ${fmt(lone.p50Ms, 2)} ms${f}`,
        );
      }
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop().catch(() => undefined)));
  }

  const [plain, cons, intOff, intOn] = variants as [Variant, Variant, Variant, Variant];
  const [sp, sc, so, si] = [plain, cons, intOff, intOn].map(summarise) as [Summary, Summary, Summary, Summary];
  const label = (x: Variant, s: Summary) => (s.failures > 0 ? `⚠ ${x.label}` : x.label);
  const consTable = markdownTable(
    [
      'Scenario',
      'req/s',
      'p50 ms',
      'p99 ms',
      '1 conn p50 ms',
      '1 conn p99 ms',
      'svc CPU µs/req',
      'upstream req/req (3 summed)',
      'upstreams CPU µs/req',
      'X-SVC-Consensus-Slots',
      'other procs CPU %',
      'failures',
    ],
    [plain, cons].map((x, i) => {
      const s = i === 0 ? sp : sc;
      return [
        label(x, s),
        fmt(s.rps, 0),
        fmt(s.p50Ms, 2),
        fmt(s.p99Ms, 2),
        fmt(s.loneP50Ms, 2),
        fmt(s.loneP99Ms, 2),
        fmt(s.cpuPerReq, 1),
        fmt(s.upstreamPerReq, 2),
        fmt(s.upstreamCpuPerReq, 1),
        x.probe['x-svc-consensus-slots'] ?? '–',
        fmt(s.otherCpu * 100, 0),
        failCell(x, s),
      ];
    }),
  );
  const applied = intOn.probe['x-svc-integrity'] ?? '–';
  const intTable = markdownTable(
    ['Scenario', 'req/s', 'p50 ms', 'p99 ms', '1 conn p50 ms', '1 conn p99 ms', 'svc CPU µs/call', 'X-SVC-Integrity (answer)', 'other procs CPU %', 'failures'],
    [intOff, intOn].map((x, i) => {
      const s = i === 0 ? so : si;
      return [
        label(x, s),
        fmt(s.rps, 0),
        fmt(s.p50Ms, 2),
        fmt(s.p99Ms, 2),
        fmt(s.loneP50Ms, 2),
        fmt(s.loneP99Ms, 2),
        fmt(s.cpuPerReq, 1),
        x.probe['x-svc-integrity'] ?? '–',
        fmt(s.otherCpu * 100, 0),
        failCell(x, s),
      ];
    }),
  );
  const ratios = markdownTable(
    ['Ratio (same run, ratio of medians)', 'CPU/req', 'p50', 'p99', '1 conn p50', '1 conn p99', 'upstream req/req'],
    [
      [`consensus ${CONSENSUS.agreementThreshold} of ${CONSENSUS.maxParticipants} ÷ no consensus (eth_getBalance, 3 upstreams)`, ...ratioCells(sc, sp)],
      ['intrinsic integrity ÷ off (eth_getBlockByNumber full)', ...ratioCells(si, so)],
    ],
  );
  const notApplied = applied !== 'intrinsic';
  const slots = cons.probe['x-svc-consensus-slots'] ?? '–';
  const noRound = slots !== String(CONSENSUS.maxParticipants);
  const types = [...new Set(block.transactions.map((t) => t.type))].join(', ');
  return [
    '## Consensus and integrity: what answers that matter cost',
    '',
    `svc with the response cache and multiplexing off and its state poller nearly idle (one poll at start, then hourly), so every call reaches an upstream and the upstream counts are the calls'. ${settings.connections} connections, ${settings.durationS} s per run, ${settings.warmupS} s warm-up, ${settings.reps} interleaved rounds, medians. Every answer is checked (2xx, one \`"result"\`, no \`"error"\`); ⚠ marks a row with failures.`,
    '',
    `**Consensus.** Three fake upstreams answering identically behind two svc processes: one with the network failsafe \`${JSON.stringify({ matchMethod: '*', consensus: CONSENSUS })}\`, one with \`{"matchMethod":"*"}\` (the same entry without the policy). Call: \`${balance.text}\`. "upstream req/req" sums the three upstreams' HTTP requests per completed client request; "X-SVC-Consensus-Slots" is read from one probe answer before the load.`,
    '',
    consTable,
    '',
    `**Intrinsic integrity.** One fake upstream serving a real block (bench/fixtures/block-full.json: block ${Number(block.number)} of an anvil chain under Prague rules, ${block.transactions.length} transactions of types ${types}, hash and transactions root verified when captured by bench/fixtures/capture-block.ts) to one svc process; \`${fullBlock.text}\` with header \`X-SVC-Integrity: intrinsic\` versus without. "X-SVC-Integrity (answer)" is the level svc says it applied, read from one probe answer before the load.`,
    '',
    intTable,
    '',
    ratios,
    '',
    `- At ${settings.connections} connections svc is CPU-bound in every row, so those latencies are mostly queueing (p50 ≈ ${settings.connections} ÷ req/s) and their ratios follow the CPU ratio; the "1 conn" columns (${Math.max(1, Math.floor(settings.durationS / 2))} s at one connection, one call at a time, each round) show what a lone call waits.`,
    `- Added svc CPU per call: consensus ${fmt(sc.cpuPerReq - sp.cpuPerReq, 0)} µs; intrinsic integrity ${fmt(si.cpuPerReq - so.cpuPerReq, 0)} µs for a block of ${block.transactions.length} transactions (${fmt((si.cpuPerReq - so.cpuPerReq) / block.transactions.length, 0)} µs per transaction).`,
    `- Consensus: each client call becomes ${CONSENSUS.maxParticipants} upstream requests started together; the round can end once ${CONSENSUS.agreementThreshold} agree, but with \`preferLargerResponses\` (default true) it then waits for the third slot, at most about as long as the round took so far (5 ms..1 s); with upstreams this alike the third answer arrives well within that. svc's CPU per call grows with the extra requests it sends and the answers it hashes; on ${os.availableParallelism()} cores the three upstreams' extra CPU competes with svc and the load generator, so part of the latency ratio is the fake upstreams' own work (see "upstreams CPU µs/req").${noRound ? ` ⚠ The probe answer carried \`X-SVC-Consensus-Slots: ${slots}\`, not ${CONSENSUS.maxParticipants}: the round did not run as configured, so the consensus row does not measure it.` : ''}`,
    `- Integrity: the CPU difference is the intrinsic checks of a full block per call (block hash recomputed from the header, each transaction's hash from its fields, the transactions and withdrawals roots; viem and @ethereumjs/mpt); the upstream's work is the same in both rows.${notApplied ? ` ⚠ svc answered \`X-SVC-Integrity: ${applied}\` to \`intrinsic\`: the level was not applied (integrity plugin not implemented yet, or the header is denied), so the two rows measure the same thing.` : ''}`,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { benchSettings } = await import('./lib.ts');
  process.stdout.write(`${await consensusScenario(benchSettings())}\n`);
}
