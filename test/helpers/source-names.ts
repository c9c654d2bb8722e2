/**
 * The names svc's source code actually defines, for the docs test (test/unit/docs.test.ts): a
 * name the docs mention must be one of these. Read with the TypeScript compiler's parser from
 * every .ts file under core/, lib/, plugins/ and presets/, so only string literals and declarations
 * count, never comments (a comment may mention a name that no longer exists).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { ERROR_TABLE } from '../../core/wire/errors-wire.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

/** What the source defines. Header names are lower-cased (HTTP header names are case-insensitive). */
export interface SourceNames {
  /**
   * Every `svc_[a-z0-9_]+` that starts a string literal and ends at a non-name character:
   * metric names, admin methods, table names, key prefixes (`'svc_rl:'` gives `svc_rl`).
   */
  metrics: Set<string>;
  /**
   * The `name` of every `new Histogram({ name: '...' })` or `new DeferredHistogram(registry, { name: '...' })`:
   * these also expose `_bucket`, `_sum` and `_count`.
   */
  histograms: Set<string>;
  /** Every string literal of the form `x-svc-[a-z0-9-]+`, lower-cased. */
  headers: Set<string>;
  /**
   * Suffixes svc appends to a header name at run time: the literal tail of a template such as
   * `${name}-Truncated`, lower-cased (`-truncated`).
   */
  headerSuffixes: Set<string>;
  /** Error names: every `ERROR_TABLE` row, every `class Err...`, every `'Err...'` string literal. */
  errors: Set<string>;
}

/** The folders whose .ts files define svc's names. */
const SOURCE_DIRS = ['core', 'lib', 'plugins', 'presets'];

function* tsFiles(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    // Hidden entries are no sources: a test's throwaway probe folder (plugins/.boundary-probe-*)
    // may appear and vanish while a parallel worker walks the tree.
    if (e.name.startsWith('.')) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* tsFiles(p);
    else if (e.name.endsWith('.ts')) yield p;
  }
}

const METRIC = /^svc_[a-z0-9_]+(?![A-Za-z0-9])/;
const HEADER = /^x-svc-[a-z0-9-]+$/i;
const ERROR = /^Err[A-Z][A-Za-z]+$/;
const SUFFIX = /^-[A-Za-z][A-Za-z0-9-]*$/;

/** Classes whose instances are histograms (prom-client's, and svc's hot-path one in lib/deferred-metrics.ts). */
const HISTOGRAM_CLASSES = new Set(['Histogram', 'DeferredHistogram']);

/** The `name` of `new Histogram({ name: '...' })` (the options object may be any argument), if `node` is one. */
function histogramName(node: ts.Node): string | undefined {
  if (!ts.isNewExpression(node) || !ts.isIdentifier(node.expression) || !HISTOGRAM_CLASSES.has(node.expression.text)) return undefined;
  for (const arg of node.arguments ?? []) {
    if (!ts.isObjectLiteralExpression(arg)) continue;
    for (const p of arg.properties) {
      if (ts.isPropertyAssignment(p) && ts.isIdentifier(p.name) && p.name.text === 'name' && ts.isStringLiteralLike(p.initializer)) return p.initializer.text;
    }
  }
  return undefined;
}

let cached: SourceNames | undefined;

/** Parses the sources once per process (about 0.5 s) and returns what they define. */
export function sourceNames(): SourceNames {
  if (cached) return cached;
  const out: SourceNames = {
    metrics: new Set(),
    histograms: new Set(),
    headers: new Set(),
    headerSuffixes: new Set(),
    errors: new Set(ERROR_TABLE.map((r) => r.name)),
  };
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node)) {
      const metric = METRIC.exec(node.text);
      if (metric) out.metrics.add(metric[0]);
      if (HEADER.test(node.text)) out.headers.add(node.text.toLowerCase());
      if (ERROR.test(node.text)) out.errors.add(node.text);
    } else if (ts.isClassDeclaration(node) && node.name && ERROR.test(node.name.text)) {
      out.errors.add(node.name.text);
    } else if (ts.isTemplateExpression(node) && node.head.text === '' && node.templateSpans.length === 1) {
      const tail = node.templateSpans[0]!.literal.text;
      if (SUFFIX.test(tail)) out.headerSuffixes.add(tail.toLowerCase());
    }
    const h = histogramName(node);
    if (h) out.histograms.add(h);
    ts.forEachChild(node, visit);
  };
  for (const dir of SOURCE_DIRS) {
    for (const file of tsFiles(join(PACKAGE_ROOT, dir))) {
      visit(ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS));
    }
  }
  cached = out;
  return out;
}

/**
 * Whether the source defines a metric name a page mentions: registered (or starting a string
 * literal), a histogram's `_bucket`/`_sum`/`_count` series, or, ending in `_` (`svc_cache_*`),
 * the prefix of one.
 */
export function isKnownMetric(src: SourceNames, name: string): boolean {
  if (name.endsWith('_')) return [...src.metrics].some((k) => k.startsWith(name));
  if (src.metrics.has(name)) return true;
  const series = /^(.*)_(bucket|sum|count)$/.exec(name);
  return series !== null && src.histograms.has(series[1]!);
}

/**
 * Whether the source defines a header name a page mentions (case-insensitive): a literal, a
 * literal plus a run-time suffix (`X-SVC-Methods-Truncated`), or, ending in `-`
 * (`X-SVC-Consensus-*`), the prefix of one.
 */
export function isKnownHeader(src: SourceNames, name: string): boolean {
  const l = name.toLowerCase();
  if (l.endsWith('-')) return [...src.headers].some((k) => k.startsWith(l));
  return src.headers.has(l) || [...src.headerSuffixes].some((s) => l.endsWith(s) && src.headers.has(l.slice(0, -s.length)));
}

/** Whether an error name a page mentions is a row of the error table or an error class or name of the source. */
export function isKnownError(src: SourceNames, name: string): boolean {
  return src.errors.has(name);
}
