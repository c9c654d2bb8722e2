/**
 * Benchmark helpers (parent side), statistics and formatting: medians, percentiles, number
 * formatting, markdown tables, the machine line, settings from the environment and progress
 * lines. Re-exported by `bench/lib.ts`.
 */
import os from 'node:os';

/**
 * Median of a list (mean of the two middle values for an even count).
 * @param xs values in any unit
 * @returns the median in the same unit, NaN for an empty list
 */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/**
 * Nearest-rank percentile of an ascending-sorted list.
 * @param sorted values sorted ascending (any unit)
 * @param p percentile, 0..100
 * @returns the value in the same unit, NaN for an empty list
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1] as number;
}

/**
 * Formats a number for a table: fixed decimals, thousands grouping, `–` for NaN.
 * @param x the value
 * @param digits decimals (default 1)
 */
export function fmt(x: number, digits = 1): string {
  if (!Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/**
 * A markdown table with padded columns.
 * @param headers column titles
 * @param rows cells, one array per row
 * @param align per column `l` or `r` (default: first column left, others right)
 * @returns the table text, lines joined with `\n`, no trailing newline
 */
export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[], align?: readonly ('l' | 'r')[]): string {
  const al = headers.map((_, i) => align?.[i] ?? (i === 0 ? 'l' : 'r'));
  const width = headers.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)));
  const pad = (s: string, i: number) => (al[i] === 'r' ? s.padStart(width[i] as number) : s.padEnd(width[i] as number));
  const line = (cells: readonly string[]) => `| ${headers.map((_, i) => pad(cells[i] ?? '', i)).join(' | ')} |`;
  const sep = `|${headers.map((_, i) => (al[i] === 'r' ? `${'-'.repeat((width[i] as number) + 1)}:` : `:${'-'.repeat((width[i] as number) + 1)}`)).join('|')}|`;
  return [line(headers), sep, ...rows.map(line)].join('\n');
}

/**
 * One line describing the machine: CPU model, logical cores, Node.js version, total memory, OS.
 */
export function machineLine(): string {
  const cpus = os.cpus();
  const model = (cpus[0]?.model ?? 'unknown CPU').replace(/\s+/g, ' ').trim();
  return `${model}, ${cpus.length} logical cores (availableParallelism ${os.availableParallelism()}), Node.js ${process.version}, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB RAM, ${os.platform()} ${os.release()}`;
}

/** Benchmark settings read from the environment. */
export interface BenchSettings {
  /** Concurrent connections (env BENCH_CONNECTIONS, default 32). */
  connections: number;
  /** Measured run length, s (env BENCH_DURATION, default 5). */
  durationS: number;
  /** Repetitions per scenario (env BENCH_REPS, default 3). */
  reps: number;
  /** Warm-up run length per target, s (env BENCH_WARMUP, default 1; 0 disables). */
  warmupS: number;
}

function envInt(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}=${raw}: expected an integer >= ${min}`);
  return n;
}

/**
 * Reads {@link BenchSettings} from BENCH_CONNECTIONS, BENCH_DURATION (s), BENCH_REPS and
 * BENCH_WARMUP (s).
 * @throws Error on a malformed value
 */
export function benchSettings(): BenchSettings {
  return {
    connections: envInt('BENCH_CONNECTIONS', 32, 1),
    durationS: envInt('BENCH_DURATION', 5, 1),
    reps: envInt('BENCH_REPS', 3, 1),
    warmupS: envInt('BENCH_WARMUP', 1, 0),
  };
}

/**
 * Writes a progress line to stderr (stdout carries only the result table).
 * @param msg the message
 */
export function progress(msg: string): void {
  process.stderr.write(`${msg}\n`);
}
