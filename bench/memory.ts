/**
 * Memory scenario of `npm run bench`: the peak RSS one large request body and
 * one large upstream answer add to the process serving them, for svc and for the minimal
 * forwarder in the same run. The peak is Linux's VmHWM, reset through `/proc/<pid>/clear_refs`
 * right before each case, so start-up peaks do not hide it; the added peak is VmHWM minus the
 * RSS at reset. Each case runs in a fresh process warmed by one call of the same kind, so the
 * figure is what one more such call costs a running server. Cases: one 9 MiB request body (`eth_call` with 9 MiB of data), 8 of them at
 * once, one 50 MiB upstream answer (`eth_getLogs`), 8 of them at once.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'undici';
import { fmt, markdownTable, progress, startTarget, TARGETS, type Target } from './lib.ts';

const MiB = 1024 * 1024;
const BODY_MIB = 9;
const ANSWER_MIB = 50;

/** VmRSS and VmHWM of a process, KiB (Linux). */
function vm(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? Number.NaN);
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** Resets the peak RSS of a process to its current RSS (Linux `clear_refs` 5). */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

async function post(url: string, body: string): Promise<number> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  let n = 0;
  for await (const chunk of res.body) n += (chunk as Buffer).length;
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
  return n;
}

/** One case: the added peak in MiB and as a multiple of `sizeMiB`. */
async function runCase(t: Target, url: string, body: string, concurrent: number, sizeMiB: number): Promise<{ addedMiB: number; ratio: number }> {
  // Warm: one call of the same kind first, so one-time growth (V8 heap spaces, code, socket
  // buffers) is not charged to the measured one; then let its garbage go.
  await post(url, body);
  await new Promise((r) => setTimeout(r, 500));
  await post(url, '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}');
  if (!resetPeak(t.pid)) throw new Error('cannot reset the peak RSS (needs Linux /proc/<pid>/clear_refs)');
  const base = vm(t.pid).rss;
  await Promise.all(Array.from({ length: concurrent }, () => post(url, body)));
  const addedMiB = (vm(t.pid).hwm - base) / 1024;
  return { addedMiB, ratio: addedMiB / (sizeMiB * concurrent) };
}

/** Calls in the big-batch case. */
const BIG_BATCH = 10_000;

/** The big-batch case: RSS when idle (after one warm-up batch) and the peak while answering one more. */
async function batchPeak(t: Target, url: string, body: string): Promise<{ idleMiB: number; peakMiB: number; ratio: number }> {
  await post(url, body);
  await new Promise((r) => setTimeout(r, 500));
  if (!resetPeak(t.pid)) throw new Error('cannot reset the peak RSS (needs Linux /proc/<pid>/clear_refs)');
  const idle = vm(t.pid).rss;
  await post(url, body);
  const peak = vm(t.pid).hwm;
  return { idleMiB: idle / 1024, peakMiB: peak / 1024, ratio: peak / idle };
}

/**
 * Runs the memory cases against svc and the minimal forwarder.
 * @returns a markdown section
 */
export async function memoryScenario(): Promise<string> {
  const bigBody = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x${'11'.repeat(20)}","data":"0x${'ab'.repeat((BODY_MIB * MiB) / 2 - 200)}"},"latest"]}`;
  const logsCall = '{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x1","toBlock":"0x2"}]}';
  const rows: string[][] = [];
  let batchRow: string[] | undefined;
  const up = await startTarget(TARGETS.upstream, { label: 'memory/upstream', args: [`--big-mib=${ANSWER_MIB}`] });
  try {
    const cases: Array<[string, string, number, number]> = [
      [`one ${BODY_MIB} MiB request body`, bigBody, 1, BODY_MIB],
      [`8 × ${BODY_MIB} MiB request bodies at once`, bigBody, 8, BODY_MIB],
      [`one ${ANSWER_MIB} MiB upstream answer`, logsCall, 1, ANSWER_MIB],
      [`8 × ${ANSWER_MIB} MiB upstream answers at once`, logsCall, 8, ANSWER_MIB],
    ];
    for (const [name, body, n, size] of cases) {
      // A fresh process per case: memory an earlier case left to V8 would hide this one's peak.
      const one = async (script: string, path: string) => {
        const t = await startTarget(script, { label: `memory/${name}`, args: [`--upstream=${up.origin}/`] });
        try {
          return await runCase(t, `${t.origin}${path}`, body, n, size);
        } finally {
          await t.stop();
        }
      };
      const s = await one(TARGETS.svc, '/main/evm/1');
      const f = await one(TARGETS.forwarder, '/');
      progress(`  memory ${name}: svc +${fmt(s.addedMiB, 0)} MiB (${fmt(s.ratio, 2)}× the size), forwarder +${fmt(f.addedMiB, 0)} MiB (${fmt(f.ratio, 2)}×)`);
      rows.push([
        name,
        fmt(s.addedMiB, 0),
        `${fmt(s.ratio, 2)}×`,
        fmt(f.addedMiB, 0),
        `${fmt(f.ratio, 2)}×`,
        n === 1 ? (s.ratio <= 4 ? 'met (≤ 4×)' : '⚠ above 4×') : '',
      ]);
    }
    // A 10,000-element batch, streamed out; RSS must stay within 2× its idle value.
    const batch = `[${Array.from({ length: BIG_BATCH }, (_, i) => `{"jsonrpc":"2.0","id":${i + 1},"method":"eth_blockNumber","params":[]}`).join(',')}]`;
    const t = await startTarget(TARGETS.svc, {
      label: 'memory/batch',
      args: [`--upstream=${up.origin}/`, `--server-options=${JSON.stringify({ maxBatchSize: BIG_BATCH })}`],
    });
    try {
      const idle = await batchPeak(t, `${t.origin}/main/evm/1`, batch);
      batchRow = [
        `one ${BIG_BATCH.toLocaleString('en')}-call batch (svc)`,
        fmt(idle.idleMiB, 0),
        fmt(idle.peakMiB, 0),
        `${fmt(idle.ratio, 2)}×`,
        idle.ratio <= 2 ? 'met (≤ 2× idle)' : '⚠ above 2× idle',
      ];
      progress(`  memory ${batchRow[0]}: idle ${batchRow[1]} MiB, peak ${batchRow[2]} MiB (${batchRow[3]})`);
    } finally {
      await t.stop();
    }
  } finally {
    await up.stop();
  }
  const batchTable = batchRow ? `\n\n${markdownTable(['Case', 'idle RSS MiB', 'peak RSS MiB', 'peak ÷ idle', 'target'], [batchRow])}` : '';
  return `### Memory: large bodies and large answers (hostile-input limits)

Peak RSS added to the serving process (Linux VmHWM after a reset, minus the RSS at reset), with the size multiple. Target for svc: one request or one answer adds at most 4× its size.

${markdownTable(['Case', 'svc +MiB', 'svc × size', 'forwarder +MiB', 'forwarder × size', 'target'], rows)}${batchTable}
`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  memoryScenario().then(
    (md) => process.stdout.write(md),
    (e: unknown) => {
      process.stderr.write(`memory bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
