/**
 * Metrics counted as plain numbers on the request path and handed to prom-client only when the
 * registry is read ("count in plain numbers and let the collect callback publish
 * them"). prom-client validates and hashes the label set on every `inc`/`observe`, bound children
 * included; here a call pays a few map lookups on label values (strings whose hash V8 caches).
 * The exposition is prom-client's own: the counter flushes into a prom-client Counter on
 * `collect`, the histogram hands prom-client its bucket, sum and count samples from `get()`,
 * which the registry formats like any histogram. Label sets are bounded by the callers'
 * BoundedLabels, so are the trees.
 */
import { Counter, type Registry } from 'prom-client';

/** A tree from label values to one cell per label set (no string concatenation per call). */
class LabelTree<T> {
  private readonly root = new Map<string, unknown>();
  /** Every cell, in creation order. */
  readonly cells: T[] = [];

  constructor(
    private readonly make: (labels: Record<string, string>) => T,
    private readonly labelNames: readonly string[],
  ) {}

  /** The cell of a label set, created on first use. @param values label values in `labelNames` order */
  cell(values: readonly string[]): T {
    let level = this.root;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      const v = values[i] as string;
      let next = level.get(v) as Map<string, unknown> | undefined;
      if (!next) level.set(v, (next = new Map()));
      level = next;
    }
    let cell = level.get(values[last] as string) as T | undefined;
    if (!cell) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i] as string));
      cell = this.make(labels);
      level.set(values[last] as string, cell);
      this.cells.push(cell);
    }
    return cell;
  }
}

/** A prom-client counter whose increments are summed here and flushed on every registry read. */
export class DeferredCounter {
  private readonly tree: LabelTree<{ labels: Record<string, string>; pending: number }>;
  private readonly counter: Counter<string>;

  /**
   * @param registry the registry the counter is registered in
   * @param config name, help and label names of the counter
   */
  constructor(registry: Registry, config: { name: string; help: string; labelNames: readonly string[] }) {
    this.tree = new LabelTree((labels) => ({ labels, pending: 0 }), config.labelNames);
    this.counter = new Counter({ name: config.name, help: config.help, labelNames: config.labelNames, registers: [registry], collect: () => this.flush() });
  }

  /** Adds 1 to a label set. @param values the label values, in `labelNames` order */
  inc(values: readonly string[]): void {
    this.tree.cell(values).pending++;
  }

  /** Hands the pending counts to prom-client (the counter's `collect`, run on every registry read). */
  flush(): void {
    for (const cell of this.tree.cells) {
      if (cell.pending === 0) continue;
      this.counter.inc(cell.labels, cell.pending);
      cell.pending = 0;
    }
  }
}

/** One label set of a {@link DeferredHistogram}: observations per bucket (not cumulative), sum and count. */
export interface HistogramCell {
  readonly labels: Record<string, string>;
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/** One sample of prom-client's metric `get()` shape. */
export interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * A Prometheus histogram (cumulative `_bucket{le}`, `_sum`, `_count`) registered in a prom-client
 * registry as a metric object: `get()` returns the samples and the registry writes the text.
 */
export class DeferredHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  /** Label names, in `child()` order (read by the metrics plugin's histogram label filter). */
  readonly labelNames: readonly string[];
  private readonly bounds: readonly number[];
  private readonly tree: LabelTree<HistogramCell>;

  /**
   * @param registry the registry it is registered in
   * @param config name, help, label names and bucket upper bounds (seconds, ascending)
   * @throws Error when the registry already has a metric of that name (prom-client's own check)
   */
  constructor(registry: Registry, config: { name: string; help: string; labelNames: readonly string[]; buckets: readonly number[] }) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    const n = this.bounds.length;
    this.tree = new LabelTree((labels) => ({ labels, buckets: new Float64Array(n), sum: 0, count: 0 }), config.labelNames);
    registry.registerMetric(this as never);
  }

  /** The cell of a label set, to observe into directly. @param values label values in `labelNames` order */
  child(values: readonly string[]): HistogramCell {
    return this.tree.cell(values);
  }

  /** Records one observation (same unit as the buckets). */
  observe(cell: HistogramCell, value: number): void {
    if (!Number.isFinite(value)) return;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (value <= (b[i] as number)) {
        (cell.buckets as Float64Array)[i]! += 1;
        break;
      }
    }
    cell.sum += value;
    cell.count++;
  }

  /** prom-client's metric contract: the samples of every label set. */
  get(): { name: string; help: string; type: string; aggregator: string; values: Sample[] } {
    const values: Sample[] = [];
    for (const c of this.tree.cells) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += c.buckets[i] as number;
        values.push({ labels: { le: this.bounds[i] as number, ...c.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { le: '+Inf', ...c.labels }, value: c.count, metricName: `${this.name}_bucket` });
      values.push({ labels: c.labels, value: c.sum, metricName: `${this.name}_sum` });
      values.push({ labels: c.labels, value: c.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** prom-client's `resetMetrics()`: forgets every observation. */
  reset(): void {
    for (const c of this.tree.cells) {
      c.buckets.fill(0);
      c.sum = 0;
      c.count = 0;
    }
  }
}
