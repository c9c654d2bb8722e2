/**
 * `metrics.histogramDropLabels` and `metrics.histogramLabelOverrides` (eRPC's
 * telemetry/labeled_histogram.go): labels removed from every histogram, except those a histogram's
 * override keeps. Counters and gauges are untouched.
 *
 * svc applies the filter where `/metrics` is written rather than where each histogram is
 * created: every histogram any plugin registers in the proxy's registry (the metrics plugin's
 * latency histograms, the health plugin's cordon durations, a team plugin's own) is filtered
 * alike, and no plugin needs to know the options. A filtered histogram's series that differed
 * only in dropped labels are summed (bucket counts, sum and count), which is what a histogram
 * created without those labels would have recorded. The cost is paid on scrape, never per call.
 */
import { Registry } from 'prom-client';
import { overrideKey, type MetricsOptions } from './options.ts';

/** One sample of prom-client's metric `get()` shape. */
interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** What prom-client's registry reads from a metric. */
interface MetricObject {
  name: string;
  help: string;
  type: string;
  aggregator?: string;
  get():
    | Promise<{ name: string; help: string; type: string; aggregator?: string; values: Sample[] }>
    | { name: string; help: string; type: string; aggregator?: string; values: Sample[] };
}

/**
 * The labels of a histogram that the filter drops.
 * @param name the histogram's name (`svc_...`)
 * @param labels its label names
 */
export function droppedLabels(opts: Pick<MetricsOptions, 'dropLabels' | 'keepLabels'>, name: string, labels: Iterable<string>): Set<string> {
  const keep = opts.keepLabels.get(overrideKey(name));
  const out = new Set<string>();
  for (const l of labels) if (l !== 'le' && opts.dropLabels.has(l) && !keep?.has(l)) out.add(l);
  return out;
}

/**
 * The samples of a histogram with the dropped labels removed and the series they merge summed.
 * @param values the histogram's samples (`_bucket` with `le`, `_sum`, `_count`)
 * @param drop the labels to remove
 */
export function mergeSamples(values: readonly Sample[], drop: ReadonlySet<string>): Sample[] {
  if (drop.size === 0) return values as Sample[];
  const out: Sample[] = [];
  const byKey = new Map<string, Sample>();
  for (const v of values) {
    const labels: Record<string, string | number> = {};
    for (const [k, x] of Object.entries(v.labels)) if (!drop.has(k)) labels[k] = x;
    const key = `${v.metricName ?? ''}\u0000${Object.keys(labels)
      .sort()
      .map((k) => `${k}\u0001${String(labels[k])}`)
      .join('\u0000')}`;
    const seen = byKey.get(key);
    if (seen) seen.value += v.value;
    else {
      const s: Sample = { labels, value: v.value, ...(v.metricName !== undefined ? { metricName: v.metricName } : {}) };
      byKey.set(key, s);
      out.push(s);
    }
  }
  return out;
}

/**
 * A registry view for `/metrics` with the histogram label filter applied; the proxy's registry
 * itself is not changed (its other readers see every label).
 */
export class FilteredRegistry {
  private readonly wrappers = new WeakMap<object, MetricObject>();

  /**
   * @param source the proxy's registry
   * @param opts the drop list and the per-histogram keep lists
   */
  constructor(
    private readonly source: Registry,
    private readonly opts: Pick<MetricsOptions, 'dropLabels' | 'keepLabels'>,
  ) {}

  /** Whether any label is dropped at all (otherwise {@link metrics} is the source's own text). */
  get active(): boolean {
    return this.opts.dropLabels.size > 0;
  }

  /** The exposition text, in the source's content type. */
  async metrics(): Promise<string> {
    return this.view().metrics();
  }

  /**
   * The registry `/metrics` reads: the source itself when nothing is dropped, else a view of
   * the source's current metrics with the histograms filtered (built per read: plugins may
   * register metrics after start-up).
   */
  view(): Registry {
    if (!this.active) return this.source;
    // Same content type as the source (prom-client's constructor takes it; its typings omit it).
    const view = new (Registry as unknown as new (contentType?: string) => Registry)(this.source.contentType);
    for (const m of this.source.getMetricsAsArray() as unknown as MetricObject[]) view.registerMetric((m.type === 'histogram' ? this.wrap(m) : m) as never);
    return view;
  }

  /** The histogram's stand-in: its own samples, filtered and merged on each read. */
  private wrap(m: MetricObject): MetricObject {
    let w = this.wrappers.get(m);
    if (!w) {
      const opts = this.opts;
      w = {
        name: m.name,
        help: m.help,
        type: m.type,
        ...(m.aggregator !== undefined ? { aggregator: m.aggregator } : {}),
        async get() {
          const got = await m.get();
          const names = new Set<string>();
          for (const v of got.values) for (const k of Object.keys(v.labels)) names.add(k);
          return { ...got, values: mergeSamples(got.values, droppedLabels(opts, m.name, names)) };
        },
      };
      this.wrappers.set(m, w);
    }
    return w;
  }
}

/**
 * What the configured filter names that no histogram of the registry has: drop labels on no
 * histogram, override keys naming no histogram, so a start-up warning can say so (eRPC's own
 * candidates such as `user` are not labels of svc's histograms).
 * @returns messages, empty when everything named exists
 */
export async function unknownFilterNames(source: Registry, opts: Pick<MetricsOptions, 'dropLabels' | 'keepLabels'>): Promise<string[]> {
  const histograms = (source.getMetricsAsArray() as unknown as MetricObject[]).filter((m) => m.type === 'histogram');
  const labels = new Set<string>();
  for (const m of histograms) {
    for (const l of (m as unknown as { labelNames?: readonly string[] }).labelNames ?? []) labels.add(l);
    for (const v of (await m.get()).values) for (const k of Object.keys(v.labels)) labels.add(k);
  }
  const names = new Set(histograms.map((m) => overrideKey(m.name)));
  const out: string[] = [];
  const noLabel = [...opts.dropLabels].filter((l) => !labels.has(l));
  if (noLabel.length)
    out.push(
      `metrics.histogramDropLabels: ${noLabel.join(', ')} ${noLabel.length === 1 ? 'is a label' : 'are labels'} of no histogram (histogram labels: ${[...labels]
        .filter((l) => l !== 'le')
        .sort()
        .join(', ')})`,
    );
  const noMetric = [...opts.keepLabels.keys()].filter((n) => !names.has(n));
  if (noMetric.length)
    out.push(
      `metrics.histogramLabelOverrides: ${noMetric.join(', ')} ${noMetric.length === 1 ? 'names' : 'name'} no histogram (histograms: ${[...names].sort().join(', ')})`,
    );
  return out;
}
