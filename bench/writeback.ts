/**
 * The memory tier's write-back cost of `npm run bench`: what storing one
 * miss's answer costs, measured alone. A child process (so its heap and GC threads hold nothing
 * else) runs the cache plugin's own write path, as a miss runs it after its answer: the params
 * hash (SHA-256 of the canonical params), the call key, `writeEntry` with the zero-config
 * policies, and the memory tier's LRU insert with its byte accounting and eviction. The tier is
 * filled to its 100,000-entry bound first, so every measured write also evicts. CPU is the whole
 * child's (every thread, V8's GC helpers included) per write.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fmt, markdownTable, median, progress } from './lib.ts';

/** What the child reports for one round. */
interface WritebackRound {
  writes: number;
  cpuMicrosPerWrite: number;
  heapUsedMiB: number;
  entries: number;
}

const CHILD = fileURLToPath(new URL('./writeback-child.ts', import.meta.url));

/** Runs the child and collects its rounds. */
function runChild(rounds: number): Promise<{ rounds: WritebackRound[]; heapPerEntry: number; accountedPerEntry: number }> {
  return new Promise((resolve, reject) => {
    const child = fork(CHILD, [String(rounds)], {
      execArgv: ['--expose-gc', '--import', 'tsx', '--conditions=svc-source'],
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`write-back bench child exited with ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}') as { rounds: WritebackRound[]; heapPerEntry: number; accountedPerEntry: number });
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
}

/**
 * The write-back section: CPU µs per write-back into a full memory tier, median of the rounds.
 * @param reps rounds (each 200,000 writes after the fill)
 * @returns the markdown section and the median, µs
 */
export async function writebackSection(reps: number): Promise<{ text: string; medianMicros: number }> {
  progress('write-back: the memory tier filled to its bound, then unique misses written back');
  const { rounds, heapPerEntry, accountedPerEntry } = await runChild(Math.max(1, reps));
  const med = median(rounds.map((r) => r.cpuMicrosPerWrite));
  for (const [i, r] of rounds.entries())
    progress(`  round ${i + 1}/${rounds.length}: ${fmt(r.cpuMicrosPerWrite, 2)} µs CPU per write-back, ${r.entries} entries held`);
  const rows = rounds.map((r, i) => [String(i + 1), fmt(r.writes, 0), fmt(r.cpuMicrosPerWrite, 2), fmt(r.entries, 0), fmt(r.heapUsedMiB, 0)]);
  const text = [
    '## Cache write-back: what storing a miss costs the memory tier',
    '',
    "The cache plugin's own write path, alone in a child process: for each unique `eth_getBalance` answer, the params hash (SHA-256 of the canonical params), the call key, `writeEntry` with the zero-config policies (finalized, unfinalized, realtime) and the memory tier's insert with its byte accounting. The tier is filled to its 100,000-entry bound before the measured writes, so every one of them also evicts the least recently used entry. CPU is the child's whole process (V8's GC threads included) per write. The write runs after the answer is on its way (once per loop turn for all of that turn's misses), and for Redis and PostgreSQL it is never awaited by the call.",
    '',
    markdownTable(['Round', 'writes', 'CPU µs per write-back', 'entries held', 'heap used MiB'], rows),
    '',
    `Median: **${fmt(med, 2)} µs** per write-back (target: at most 5 µs).`,
    '',
    `Memory: once full, the tier held ${fmt(heapPerEntry, 0)} bytes of heap per entry after a full GC, and accounted ${fmt(accountedPerEntry, 0)} bytes per entry towards \`maxTotalSize\` (${fmt(accountedPerEntry / heapPerEntry, 2)}× the real heap), so the byte bound is a bound on the heap the tier really holds. With the default 100,000-entry bound, answers of this size hold about ${fmt((heapPerEntry * 100_000) / 2 ** 20, 0)} MiB.`,
    '',
  ].join('\n');
  return { text, medianMicros: med };
}
