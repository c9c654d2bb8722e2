/**
 * eRPC's shapes of the cache keys (`database.evmJsonRpcCache`) rewritten into svc's at load time
 * (the plugin's `SchemaFragment.normalize`), as eRPC's common/config.go reads them:
 *
 * - `connectors[].redis` in eRPC's fields (`addr`, `username`, `db`, `tls`) → `uri`
 *   (`normalizeRedisBlock`); `getTimeout`/`setTimeout`/`initTimeout` → `readTimeout`/
 *   `writeTimeout`/`connectTimeout`.
 * - `connectors[].postgresql.getTimeout`/`setTimeout` → `readTimeout`/`writeTimeout`.
 * - `connectors[].failsafeForGets`/`failsafeForSets` as one object → a one-entry list; in each
 *   entry `matchFinality` as one value, in any case or as eRPC's number 0..3 → a list of svc's
 *   names; `hedge.delay` / `timeout.duration` as eRPC's `{base, quantile, min, max}` object →
 *   the fixed `base` (eRPC resolves a cache connector's durations without latency samples);
 *   a hedge `quantile` is refused (as eRPC refuses it), an adaptive timeout too.
 * - `policies[].finality` in any case or as eRPC's number 0..3 → svc's name.
 * - `driver: dynamodb` → `driver: keyv` with `@keyv/dynamo` (`erpc-dynamo.ts`).
 */
import { mapDynamoConnector } from './erpc-dynamo.ts';
import {
  isConfigObject,
  normalizeRedisBlock,
  pathOf,
  renameKey,
  rewriteKey,
  type ConfigDocument,
  type ConfigObject,
  type NormalizeReport,
} from 'svc-proxy/plugin';

const FINALITIES = ['finalized', 'unfinalized', 'realtime', 'unknown'] as const;

function finalityName(v: unknown): unknown {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < FINALITIES.length) return FINALITIES[v];
  if (typeof v !== 'string') return v;
  const s = v.trim().toLowerCase();
  if (/^[0-3]$/.test(s)) return FINALITIES[Number(s)];
  return (FINALITIES as readonly string[]).includes(s) ? s : v;
}

/** One connector failsafe entry in eRPC's shapes (see the module comment). */
function normalizeFailsafeEntry(e: ConfigObject, path: string, out: NormalizeReport): void {
  if (e.matchFinality !== undefined) {
    const list = Array.isArray(e.matchFinality) ? e.matchFinality : [e.matchFinality];
    const names = list.map(finalityName);
    if (!Array.isArray(e.matchFinality) || names.some((n, i) => n !== list[i])) rewriteKey(e, 'matchFinality', pathOf(path, 'matchFinality'), names, out);
  }
  for (const [block, key] of [
    ['hedge', 'delay'],
    ['timeout', 'duration'],
  ] as const) {
    const b = e[block];
    if (!isConfigObject(b) || !isConfigObject(b[key])) continue;
    const adaptive = b[key];
    const at = pathOf(pathOf(path, block), key);
    out.rewrite(at, adaptive, adaptive.base ?? '0');
    b[key] = adaptive.base ?? '0';
    if (adaptive.quantile !== undefined && adaptive.quantile !== 0) {
      if (block === 'hedge') b.quantile = adaptive.quantile;
      else
        out.problem(
          at,
          "eRPC's adaptive (quantile) timeout on a cache connector: a connector keeps no latency samples; give a fixed duration (eRPC uses base + min until it has samples)",
        );
    }
  }
  const h = e.hedge;
  if (isConfigObject(h) && h.quantile !== undefined) {
    out.problem(
      pathOf(pathOf(path, 'hedge'), 'quantile'),
      'a quantile hedge on a cache connector: a connector keeps no latency samples (eRPC refuses it here too); give a fixed `delay`',
    );
  }
}

/** The cache plugin's `normalize` (see the module comment). */
export function normalizeCacheShapes(doc: ConfigDocument, out: NormalizeReport): void {
  const db = doc.database;
  if (!isConfigObject(db) || !isConfigObject(db.evmJsonRpcCache)) return;
  const cache = db.evmJsonRpcCache;
  const base = 'database.evmJsonRpcCache';
  if (Array.isArray(cache.connectors)) {
    cache.connectors.forEach((c, i) => {
      if (!isConfigObject(c)) return;
      const cp = `${base}.connectors[${i}]`;
      if (isConfigObject(c.redis))
        normalizeRedisBlock(c.redis, `${cp}.redis`, out, { getTimeout: 'readTimeout', setTimeout: 'writeTimeout', initTimeout: 'connectTimeout' });
      if (isConfigObject(c.postgresql)) {
        renameKey(c.postgresql, `${cp}.postgresql`, 'getTimeout', 'readTimeout', out);
        renameKey(c.postgresql, `${cp}.postgresql`, 'setTimeout', 'writeTimeout', out);
      }
      for (const k of ['failsafeForGets', 'failsafeForSets']) {
        if (isConfigObject(c[k])) rewriteKey(c, k, pathOf(cp, k), [c[k]], out);
        const list = c[k];
        if (Array.isArray(list)) list.forEach((e, j) => isConfigObject(e) && normalizeFailsafeEntry(e, `${pathOf(cp, k)}[${j}]`, out));
      }
      if (c.driver === 'dynamodb') mapDynamoConnector(c, cp, out);
    });
  }
  if (Array.isArray(cache.policies)) {
    cache.policies.forEach((p, i) => {
      if (!isConfigObject(p) || p.finality === undefined) return;
      const name = finalityName(p.finality);
      if (name !== p.finality) rewriteKey(p, 'finality', `${base}.policies[${i}].finality`, name, out);
    });
  }
}
