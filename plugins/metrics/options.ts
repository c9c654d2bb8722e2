/**
 * The metrics plugin's keys under `metrics` (eRPC's names and meanings, common/config.go
 * `MetricsConfig`): the error label mode and the histogram options.
 *
 * - `errorLabelMode`: `compact` (default) labels an upstream error by its name
 *   (`ErrEndpointServerSideException`), a short stable set; `verbose` adds the error's message,
 *   cleaned as eRPC cleans it (hashes, addresses, IPs and numbers masked, one line) so the label
 *   set stays small, and bounded here besides (see {@link VerboseErrorLabels}).
 * - `histogramBuckets`: bucket upper bounds of the latency histograms
 *   (`svc_upstream_request_duration_seconds`, `svc_network_request_duration_seconds`), seconds,
 *   as eRPC's comma-separated string (`"0.05,0.5,5,30"`) or a list of numbers; sorted, duplicates
 *   dropped. Histograms with dedicated buckets (cordon durations) keep theirs, as in eRPC.
 * - `histogramDropLabels` / `histogramLabelOverrides`: labels removed from every histogram, and
 *   per histogram (name without the `svc_` prefix, as eRPC names them without `erpc_`) the
 *   labels kept all the same. Applied in ./histogram-filter.ts.
 */
import { type SchemaFragment, Type } from 'svc-proxy/plugin';

/** svc's latency histogram buckets when `histogramBuckets` is unset, seconds. */
export const DEFAULT_LATENCY_BUCKETS: readonly number[] = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);

/** One number as eRPC's `strconv.ParseFloat` reads a bucket (decimal or exponent form). */
const FLOAT = '[-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?';
/** A comma-separated list of numbers, spaces allowed around each; empty = the defaults. */
export const BUCKET_LIST_PATTERN = `^\\s*(?:${FLOAT}(?:\\s*,\\s*${FLOAT})*)?\\s*$`;

/** How the `error` label of `svc_upstream_request_errors_total` is written. */
export type ErrorLabelMode = 'compact' | 'verbose';

/** Schema fragment: the metrics plugin's keys, added to the core's `metrics` object. */
export const metricsSchema: SchemaFragment = {
  extend: {
    metrics: {
      errorLabelMode: Type.Union([Type.Literal('compact'), Type.Literal('verbose')], {
        default: 'compact',
        description:
          '`error` label of svc_upstream_request_errors_total: `compact` = the error name; `verbose` = name and cleaned message (more series; bounded to 1000 values per process)',
      }),
      histogramBuckets: Type.Union([Type.String({ pattern: BUCKET_LIST_PATTERN }), Type.Array(Type.Number(), { minItems: 1 })], {
        description:
          'bucket upper bounds, seconds, of svc_upstream_request_duration_seconds and svc_network_request_duration_seconds: "0.05,0.5,5,30" (eRPC form) or a list; unset or "" = svc\'s 12 defaults',
      }),
      histogramDropLabels: Type.Array(Type.String({ minLength: 1 }), {
        description: 'labels removed from every histogram on /metrics (series that differed only in them are summed); counters and gauges keep them',
      }),
      histogramLabelOverrides: Type.Record(Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 })), {
        description: 'histogram name without `svc_` (e.g. `network_request_duration_seconds`) to labels it keeps even when histogramDropLabels lists them',
      }),
    },
  },
};

/** The resolved options. */
export interface MetricsOptions {
  errorLabelMode: ErrorLabelMode;
  /** Latency histogram buckets, seconds, ascending, distinct. */
  buckets: readonly number[];
  /** Labels dropped from every histogram. */
  dropLabels: ReadonlySet<string>;
  /** Per histogram name (without `svc_`), labels kept despite {@link dropLabels}. */
  keepLabels: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * Parses `histogramBuckets`.
 * @param raw the configured value (a comma-separated string or numbers), or undefined
 * @returns ascending distinct finite bounds; the defaults for unset or an empty string
 * @throws Error naming the value when a part is not a finite number (the schema refuses it first)
 */
export function parseBuckets(raw: unknown): readonly number[] {
  if (raw === undefined || (typeof raw === 'string' && raw.trim() === '')) return DEFAULT_LATENCY_BUCKETS;
  const parts = typeof raw === 'string' ? raw.split(',').map((p) => p.trim()) : (raw as unknown[]);
  const out: number[] = [];
  for (const p of parts) {
    const n = typeof p === 'number' ? p : Number(p);
    if (!Number.isFinite(n) || (typeof p === 'string' && p === '')) throw new Error(`metrics.histogramBuckets: ${JSON.stringify(p)} is not a number`);
    out.push(n);
  }
  return [...new Set(out)].sort((a, b) => a - b);
}

/** A histogram's name as `histogramLabelOverrides` keys it: without `svc_` (nor eRPC's `erpc_`). */
export function overrideKey(name: string): string {
  return name.replace(/^(svc|erpc)_/, '');
}

/**
 * The options of a resolved `metrics` block.
 * @param settings `config.metrics.settings` (defaults filled by the schema)
 */
export function metricsOptionsOf(settings: Record<string, unknown>): MetricsOptions {
  const overrides = (settings.histogramLabelOverrides ?? {}) as Record<string, string[]>;
  return {
    errorLabelMode: settings.errorLabelMode === 'verbose' ? 'verbose' : 'compact',
    buckets: parseBuckets(settings.histogramBuckets),
    dropLabels: new Set(((settings.histogramDropLabels ?? []) as string[]).map((l) => l.trim()).filter((l) => l !== '' && l !== 'le')),
    keepLabels: new Map(Object.entries(overrides).map(([name, keep]) => [overrideKey(name.trim()), new Set(keep.map((l) => l.trim()))])),
  };
}

// eRPC's cleanUpMessage (common/errors.go) and ErrorFingerprint, in this order.
const LONG_HASH = /0x[a-fA-F0-9][a-fA-F0-9]+/g;
const TX_HASH = /transaction [a-fA-F0-9][a-fA-F0-9][a-fA-F0-9]+/g;
const TRIE_NODE = /trie node [a-fA-F0-9][a-fA-F0-9][a-fA-F0-9]+/g;
const REVERTED = /.*execution reverted.*/g;
const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;
const DIGITS = /\d\d+/g;
const NEWLINES = /[\r\n\t]+/g;
const SPACES = /\s{2,}/g;
const LONG_WORD = /[a-zA-Z0-9-]{31,}/g;
const NOT_LABEL = /[^a-zA-Z0-9\s_.-]+/g;

/** Longest verbose error label, characters (eRPC's fingerprint length). */
export const MAX_VERBOSE_ERROR_LABEL = 256;
/** Distinct verbose error labels per process; later new ones become `<name> other`. */
export const MAX_VERBOSE_ERROR_LABELS = 1000;

/**
 * An error as eRPC's verbose mode labels it: the name and the message with hashes
 * (`0xREDACTED`), IPv4 addresses (`X.X.X.X`), numbers of two digits or more and words of 31
 * characters or more (`XX`) masked, a revert message reduced to `execution reverted`, one line,
 * punctuation turned to spaces, at most 256 characters.
 * @param name the error's name
 * @param message its message (already redacted by the upstream's transport)
 */
export function verboseErrorLabel(name: string, message: string): string {
  let s = message.length > 2048 ? message.slice(0, 2048) : message;
  s = s
    .replace(LONG_HASH, '0xREDACTED')
    .replace(TX_HASH, 'transaction 0xREDACTED')
    .replace(TRIE_NODE, 'trie node 0xREDACTED')
    .replace(REVERTED, 'execution reverted');
  s = s.replace(IPV4, 'X.X.X.X').replace(DIGITS, 'XX').replace(NEWLINES, ' ').replace(SPACES, ' ').replace(LONG_WORD, 'XX');
  s = `${name}: ${s.slice(0, 512)}`.replace(NOT_LABEL, ' ').replace(SPACES, ' ').trim();
  return s.length > MAX_VERBOSE_ERROR_LABEL ? s.slice(0, MAX_VERBOSE_ERROR_LABEL) : s;
}

/**
 * The `error` label of the verbose mode, bounded: the first {@link MAX_VERBOSE_ERROR_LABELS}
 * distinct labels pass, later new ones become `<name> other`, so upstream messages cannot grow
 * `/metrics` without end.
 */
export class VerboseErrorLabels {
  private readonly seen = new Set<string>();
  /** @param max distinct labels kept (default {@link MAX_VERBOSE_ERROR_LABELS}) */
  constructor(private readonly max = MAX_VERBOSE_ERROR_LABELS) {}
  /** The label of an error. */
  value(name: string, message: string): string {
    const v = verboseErrorLabel(name, message);
    if (this.seen.has(v)) return v;
    if (this.seen.size >= this.max) return `${name} other`;
    this.seen.add(v);
    return v;
  }
}
