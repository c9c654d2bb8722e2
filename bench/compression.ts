/**
 * The CPU cost of answer compression (`server.enableGzip`), measured on the
 * same call svc makes (`gzipAnswer` from plugins/compression/coding.ts, compiled build) over realistic
 * `eth_getLogs` answers of several sizes: CPU µs per KiB of answer, the compression ratio, and
 * the answer sizes below which svc does not compress (1 KiB).
 */
import { fmt, markdownTable, progress } from './lib.ts';

const { gzipAnswer, GZIP_MIN_BYTES } = (await import(
  new URL('../dist/plugins/compression/coding.js', import.meta.url).href
)) as typeof import('../plugins/compression/coding.ts');

/** A JSON-RPC answer carrying about `kib` KiB of log objects (addresses, topics, hashes, zero-padded data). */
function logsAnswer(kib: number): string {
  const log = (i: number) =>
    `{"address":"0x${'ab'.repeat(20)}","topics":["0x${'cd'.repeat(32)}","0x${i.toString(16).padStart(64, '0')}"],"data":"0x${'00'.repeat(64)}","blockNumber":"0x${(1000 + (i >> 6)).toString(16)}","transactionHash":"0x${(i * 2654435761).toString(16).padStart(64, 'e')}","transactionIndex":"0x${(i & 63).toString(16)}","blockHash":"0x${(1000 + (i >> 6)).toString(16).padStart(64, 'b')}","logIndex":"0x${(i & 63).toString(16)}","removed":false}`;
  const parts: string[] = [];
  let size = 40;
  for (let i = 0; size < kib * 1024; i++) {
    const l = log(i);
    parts.push(l);
    size += l.length + 1;
  }
  return `{"jsonrpc":"2.0","id":1,"result":[${parts.join(',')}]}`;
}

/**
 * Measures gzip CPU per KiB for answers of 4 KiB, 64 KiB and 1 MiB.
 * @returns a markdown section
 */
export async function compressionScenario(): Promise<string> {
  const rows: string[][] = [];
  for (const kib of [4, 64, 1024]) {
    const text = logsAnswer(kib);
    const bytes = Buffer.byteLength(text);
    // Enough repetitions for about 32 MiB of input per size, at least 20.
    const reps = Math.max(20, Math.round((32 * 1024) / kib));
    let zipped = 0;
    for (let i = 0; i < 3; i++) await gzipAnswer(text, undefined); // warm-up
    // zlib runs on the thread pool: process CPU (all threads) is what the compression costs svc.
    const before = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) {
      const z = (await gzipAnswer(text, undefined)) as Buffer;
      zipped = z.length;
    }
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(before);
    const cpuUs = (cpu.user + cpu.system) / reps;
    rows.push([`${fmt(bytes / 1024, 0)} KiB`, fmt(cpuUs, 0), fmt(cpuUs / (bytes / 1024), 2), `${fmt(bytes / zipped, 1)}×`, fmt(wall / reps, 2)]);
    progress(`compression ${fmt(bytes / 1024, 0)} KiB: ${fmt(cpuUs / (bytes / 1024), 2)} µs CPU per KiB, ratio ${fmt(bytes / zipped, 1)}×`);
  }
  const table = markdownTable(['eth_getLogs answer', 'CPU µs per answer', 'CPU µs per KiB', 'size ÷ gzipped', 'wall ms per answer'], rows);
  return `## Answer compression: the CPU cost of gzip (server.enableGzip)

svc gzips an answer over ${GZIP_MIN_BYTES} bytes when the client sends \`Accept-Encoding: gzip\` (zlib's default level, on zlib's thread pool). Measured here on the same function svc calls, over realistic \`eth_getLogs\` answers; CPU is this process's (all threads). The synthetic logs repeat more than real ones, so the ratio here is higher than the 5-10× of real getLogs answers; the CPU per KiB is what to read.

${table}
`;
}
