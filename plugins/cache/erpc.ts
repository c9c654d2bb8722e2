/**
 * eRPC's shapes of the cache keys (`database.evmJsonRpcCache`) rewritten into svc's at load time
 * (the plugin's `SchemaFragment.normalize`), as eRPC's common/config.go reads them:
 *
 * - `connectors[].redis` in eRPC's fields (`addr`, `username`, `db`, `tls`) → `uri`
 *   (`normalizeRedisBlock`); `getTimeout`/`setTimeout`/`initTimeout` → `readTimeout`/
 *   `writeTimeout`/`connectTimeout`.
 * - `connectors[].postgresql.getTimeout`/`setTimeout` → `readTimeout`/`writeTimeout`.
 * - `connectors[].failsafeForGets`/`failsafeForSets` as one object → a one-entry list.
 * - `policies[].finality` in any case or as eRPC's number 0..3 → svc's name.
 * - `driver: dynamodb` is a problem naming svc's way there: `driver: keyv` with `@keyv/dynamo`.
 */
import { isConfigObject, normalizeRedisBlock, pathOf, renameKey, rewriteKey, type ConfigDocument, type NormalizeReport } from 'svc/plugin';

const FINALITIES = ['finalized', 'unfinalized', 'realtime', 'unknown'] as const;

function finalityName(v: unknown): unknown {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < FINALITIES.length) return FINALITIES[v];
  if (typeof v !== 'string') return v;
  const s = v.trim().toLowerCase();
  if (/^[0-3]$/.test(s)) return FINALITIES[Number(s)];
  return (FINALITIES as readonly string[]).includes(s) ? s : v;
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
      if (isConfigObject(c.redis)) normalizeRedisBlock(c.redis, `${cp}.redis`, out, { getTimeout: 'readTimeout', setTimeout: 'writeTimeout', initTimeout: 'connectTimeout' });
      if (isConfigObject(c.postgresql)) {
        renameKey(c.postgresql, `${cp}.postgresql`, 'getTimeout', 'readTimeout', out);
        renameKey(c.postgresql, `${cp}.postgresql`, 'setTimeout', 'writeTimeout', out);
      }
      for (const k of ['failsafeForGets', 'failsafeForSets']) if (isConfigObject(c[k])) rewriteKey(c, k, pathOf(cp, k), [c[k]], out);
      if (c.driver === 'dynamodb') {
        out.problem(`${cp}.driver`, "eRPC's DynamoDB connector: in svc write `driver: keyv` with `keyv: {adapter: '@keyv/dynamo', options: {tableName, ...}}` (the keyv adapter for DynamoDB; install it next to svc)");
      }
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
