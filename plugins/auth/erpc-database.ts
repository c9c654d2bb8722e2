/**
 * eRPC's `database` auth strategy (`type: database`, `database: {connector, cache, retry,
 * failOpen, maxWait}`, eRPC's common/config.go `DatabaseStrategyConfig`) rewritten at load time into
 * svc's API-key strategy of the same type (`type: database`, `connector`, `cache`; docs/access.md
 * "API keys"), keeping eRPC's meaning and defaults (common/defaults.go):
 *
 * - `database.connector` → `connector`; a connector without `id` gets eRPC's default
 *   `auth-<driver>`. Its Redis block in eRPC's fields (`addr`, `db`...) becomes `uri`
 *   (`normalizeRedisBlock`); Redis and PostgreSQL `getTimeout` → `lookupTimeout`, `setTimeout` →
 *   `writeTimeout`. Drivers svc's key store lacks (dynamodb, grpc) and eRPC's pool settings are
 *   refused by name.
 * - `database.cache.ttl` → `cache.ttl`; without one, eRPC's default `1h` is written out (svc's own
 *   default is 1m). `cache.maxSize: 10000` (eRPC's default) is svc's fixed bound and is dropped;
 *   other sizes and ristretto's `maxCost`/`numCounters` are refused.
 * - `database.maxWait` (the whole lookup's deadline) → the Redis/PostgreSQL block's
 *   `lookupTimeout` (svc makes one lookup, so the smaller of it and `getTimeout` bounds it);
 *   dropped for the memory driver, whose lookups never wait.
 * - `database.failOpen.enabled: false` (eRPC's default: refuse while the store is down, as svc
 *   does) is dropped; an enabled block (`userId`, `rateLimitBudget`) moves to the strategy's
 *   `failOpen`. `database.retry` is refused (svc makes one lookup per key, behind a circuit breaker).
 */
import { isConfigObject, normalizeRedisBlock, parseDuration, pathOf, renameKey, type ConfigObject, type NormalizeReport } from 'svc-proxy/plugin';

/** eRPC's positive-cache TTL of a database strategy when its config gives none. */
export const ERPC_DATABASE_CACHE_TTL = '1h';
/** eRPC's default `cache.maxSize`, which is svc's fixed bound of cached lookups per key space. */
const SVC_CACHE_ENTRIES = 10_000;

const REMOTE = ['redis', 'postgresql'] as const;

/** eRPC connector keys svc's key store has no counterpart for, with the reason. */
const REFUSED_CONNECTOR_KEYS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  postgresql: {
    minConns: "eRPC's minimum PostgreSQL pool size: svc opens connections on demand; remove minConns",
    maxConns: "eRPC's PostgreSQL pool size: svc's API-key store keeps its own small pool; remove maxConns",
    initTimeout: "eRPC's PostgreSQL connect timeout: each lookup is bounded by lookupTimeout; remove initTimeout",
    iamAuth: "eRPC's AWS IAM authentication: put a password in connectionUri",
    skipSchemaSetup: 'svc creates its API-key table when missing; create it beforehand if the user may not',
  },
  memory: { maxTotalSize: "eRPC's memory size bound: svc's memory key store is bounded by `memory.maxItems`" },
};

/** Milliseconds of a duration as written, or undefined when it does not parse. */
function ms(v: unknown): number | undefined {
  try {
    return typeof v === 'string' || typeof v === 'number' ? parseDuration(v) : undefined;
  } catch {
    return undefined;
  }
}

/** The connector: id default, driver block in svc's shape, refused keys reported. */
function normalizeConnector(connector: ConfigObject, path: string, out: NormalizeReport): void {
  const driver = typeof connector.driver === 'string' ? connector.driver : '';
  if (connector.id === undefined && driver) {
    connector.id = `auth-${driver}`;
    out.rewrite(pathOf(path, 'id'), undefined, connector.id);
  }
  if (driver === 'dynamodb' || driver === 'grpc')
    out.problem(
      pathOf(path, 'driver'),
      `eRPC's ${driver} API-key store is not supported by svc: keep API keys in redis, postgresql or memory (docs/access.md "API keys"), created through the admin API`,
    );
  const block = connector[driver];
  if (!isConfigObject(block)) return;
  const bp = pathOf(path, driver);
  if (driver === 'redis') normalizeRedisBlock(block, bp, out, { getTimeout: 'lookupTimeout', setTimeout: 'writeTimeout' });
  if (driver === 'postgresql') {
    renameKey(block, bp, 'getTimeout', 'lookupTimeout', out);
    renameKey(block, bp, 'setTimeout', 'writeTimeout', out);
  }
  for (const [k, message] of Object.entries(REFUSED_CONNECTOR_KEYS[driver] ?? {})) if (k in block) out.problem(pathOf(bp, k), message);
}

/** `cache` in svc's shape: ttl kept or eRPC's default written; sizes dropped or refused. */
function normalizeCache(s: ConfigObject, cache: ConfigObject | undefined, path: string, out: NormalizeReport): void {
  const to: ConfigObject = { ttl: cache?.ttl ?? ERPC_DATABASE_CACHE_TTL };
  out.rewrite(path, cache, to);
  s.cache = to;
  if (!cache) return;
  if ('maxSize' in cache && Number(cache.maxSize) !== SVC_CACHE_ENTRIES)
    out.problem(
      pathOf(path, 'maxSize'),
      `eRPC's database cache size: svc caches up to ${SVC_CACHE_ENTRIES} lookups per connector (least recently used first out); remove maxSize`,
    );
  for (const k of ['maxCost', 'numCounters'])
    if (k in cache)
      out.problem(pathOf(path, k), `eRPC's ristretto cache tuning (${k}): svc caches up to ${SVC_CACHE_ENTRIES} lookups per connector; remove ${k}`);
  for (const k of Object.keys(cache)) if (!['ttl', 'maxSize', 'maxCost', 'numCounters'].includes(k)) out.problem(pathOf(path, k), `unknown key "${k}"`);
}

/**
 * Rewrites one eRPC-shaped `database` strategy (one with a `database` block) in place.
 * @param s the strategy (`type: database`)
 * @param sp its path, e.g. `projects[0].auth.strategies[1]`
 */
export function normalizeDatabaseStrategy(s: ConfigObject, sp: string, out: NormalizeReport): void {
  const db = s.database;
  if (!isConfigObject(db)) return;
  const dp = pathOf(sp, 'database');
  if (s.connector !== undefined || s.cache !== undefined) {
    out.problem(dp, "eRPC's `database` block and svc's `connector`/`cache` are both set on this strategy: keep one");
    return;
  }
  delete s.database;
  const connector = isConfigObject(db.connector) ? db.connector : undefined;
  if (connector) {
    out.rewrite(pathOf(dp, 'connector'), `${dp}.connector`, `${sp}.connector`);
    s.connector = connector;
    normalizeConnector(connector, pathOf(sp, 'connector'), out);
  } else
    out.problem(
      dp,
      'eRPC\'s database auth strategy without a `database.connector`: name the API-key store (`connector: {id, driver: memory | redis | postgresql, <driver>: {...}}`, docs/access.md "API keys")',
    );
  normalizeCache(s, isConfigObject(db.cache) ? db.cache : undefined, pathOf(dp, 'cache'), out);
  if ('maxWait' in db) {
    const driver = typeof connector?.driver === 'string' ? connector.driver : '';
    const block = connector?.[driver];
    if ((REMOTE as readonly string[]).includes(driver) && isConfigObject(block)) {
      const wait = ms(db.maxWait);
      const own = ms(block.lookupTimeout);
      const to = own !== undefined && wait !== undefined && own < wait ? block.lookupTimeout : db.maxWait;
      out.rewrite(pathOf(dp, 'maxWait'), db.maxWait, { [`connector.${driver}.lookupTimeout`]: to });
      block.lookupTimeout = to;
    } else out.rewrite(pathOf(dp, 'maxWait'), db.maxWait, '(removed: memory lookups never wait)');
  }
  if ('failOpen' in db) {
    const fo = db.failOpen;
    if (isConfigObject(fo) && (fo.enabled === false || fo.enabled === undefined))
      out.rewrite(pathOf(dp, 'failOpen'), fo, "(removed: disabled, eRPC's default: a lookup that fails refuses the call, as svc does)");
    else {
      // The same block in svc's shape, on the strategy: an emergency user while the store fails (plugins/auth/index.ts).
      out.rewrite(pathOf(dp, 'failOpen'), `${dp}.failOpen`, `${sp}.failOpen`);
      s.failOpen = fo;
    }
  }
  if ('retry' in db)
    out.problem(
      pathOf(dp, 'retry'),
      "eRPC's retried API-key lookups are not supported by svc: it makes one lookup per key, bounded by the connector's `lookupTimeout` and guarded by its circuit breaker (`breaker`); remove retry",
    );
  for (const k of Object.keys(db)) if (!['connector', 'cache', 'maxWait', 'failOpen', 'retry'].includes(k)) out.problem(pathOf(dp, k), `unknown key "${k}"`);
}
