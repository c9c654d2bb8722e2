/**
 * `svc validate --from-erpc FILE`: an eRPC config file as it is, turned into svc's config. On top
 * of the load-time normalisation every config gets (config/normalize.ts), an eRPC file names
 * eRPC's own things, which this step renames (only here: in a svc config such a string may be
 * meant as written):
 *
 * - header names `X-ERPC-*` (CORS allowed/exposed headers, trusted IP headers, response headers)
 *   → `X-SVC-*`;
 * - `erpc_` prefixes (the rate limiter's `cacheKeyPrefix` default `erpc_rl_`, key prefixes,
 *   eRPC metric names in the metrics options, e.g. `erpc_upstream_request_duration_seconds`)
 *   → `svc_`, in values and in map keys.
 *
 * Then {@link renderNormalized} prints the result as YAML with one comment line per rewrite.
 */
import { stringify } from 'yaml';
import { isConfigObject, type ConfigDocument, type NormalizeReport, type Rewrite } from './normalize.ts';
import { CORE_NORMALIZERS } from './erpc.ts';
import { normalizeDocument } from './normalize.ts';
import type { SchemaFragment } from './schema.ts';
import { cloneConfig } from './load.ts';

/** One eRPC name in svc's spelling, or undefined when it is not an eRPC name. */
export function svcName(s: string): string | undefined {
  if (/^x-erpc-/i.test(s)) return `X-SVC-${s.slice('x-erpc-'.length)}`;
  if (s.startsWith('erpc_')) return `svc_${s.slice(5)}`;
  if (s.startsWith('erpc:')) return `svc:${s.slice(5)}`;
  return undefined;
}

/**
 * Renames eRPC's header names and `erpc_` prefixes everywhere in a document (values and map
 * keys), in place, recording each rename.
 */
export function renameErpcNames(doc: ConfigDocument, out: NormalizeReport): void {
  const walk = (node: unknown, path: string): unknown => {
    if (typeof node === 'string') {
      const to = svcName(node);
      if (to === undefined) return node;
      out.rewrite(path, node, to);
      return to;
    }
    if (Array.isArray(node)) {
      node.forEach((v, i) => (node[i] = walk(v, `${path}[${i}]`)));
      return node;
    }
    if (isConfigObject(node)) {
      for (const k of Object.keys(node)) {
        const at = path ? `${path}.${k}` : k;
        const v = walk(node[k], at);
        const nk = svcName(k);
        if (nk !== undefined && !(nk in node)) {
          delete node[k];
          node[nk] = v;
          out.rewrite(at, k, nk);
        } else node[k] = v;
      }
    }
    return node;
  };
  walk(doc, '');
}

/**
 * The normalised form of a raw document, without `${ENV}` expansion (so no secret from the
 * environment is printed): the core's and the fragments' rewrites, and with `fromErpc` eRPC's
 * names first.
 * @param raw the document as read from the file (not mutated)
 * @param fragments the preset's schema fragments
 * @param fromErpc whether to rename eRPC's header names and prefixes too
 */
export function normalizedForPrint(
  raw: unknown,
  fragments: readonly SchemaFragment[],
  fromErpc: boolean,
): { document: ConfigDocument; rewrites: Rewrite[]; problems: Array<{ path: string; message: string }> } {
  const doc = (isConfigObject(raw) ? cloneConfig(raw) : {}) as ConfigDocument;
  const core = fromErpc ? [renameErpcNames, ...CORE_NORMALIZERS] : CORE_NORMALIZERS;
  const { rewrites, problems } = normalizeDocument(doc, core, fragments);
  return { document: doc, rewrites, problems };
}

function brief(v: unknown, unset: string): string {
  if (v === undefined) return unset;
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 160 ? `${s.slice(0, 157)}...` : s;
}

/**
 * The printed form: one `# path: from -> to` comment per rewrite, then the document as YAML.
 * @param redact applied to each rewrite line (a value may hold a secret)
 */
export function renderNormalized(document: ConfigDocument, rewrites: readonly Rewrite[], redact: (s: string) => string = (s) => s): string {
  const head = rewrites.length
    ? [
        "# rewritten into svc's shape:",
        ...rewrites.map((r) => `#   ${redact(`${r.path}: ${brief(r.from, '(unset)')} -> ${brief(r.to, '(removed)')}`).replace(/\n/g, ' ')}`),
        '',
      ]
    : ["# no rewrite: the config is in svc's shape", ''];
  return `${head.join('\n')}${stringify(document, { lineWidth: 0 })}`;
}
