/**
 * eRPC's shapes of the rate-limit keys rewritten into svc's at load time (the plugin's
 * `SchemaFragment.normalize`), as eRPC's common/config.go reads them:
 *
 * - `rules[].period`: eRPC's aliases (any case) `1s`/`60s`/`1m` → `second`/`minute`, `1h`/`3600s` →
 *   `hour`, `24h`/`1d`/`86400s` → `day`, any duration equal to one of those, and eRPC's numbers
 *   0..3. eRPC's `week`, `month` and `year` (4..6) are problems: svc's windows stop at a day.
 * - `store.redis` in eRPC's fields (`addr`, `username`, `db`, `tls`) → `uri`
 *   (`normalizeRedisBlock`); `getTimeout` → `timeout`.
 * - `store.cacheKeyPrefix` → `store.redis.keyPrefix` (dropped with the memory store, which has no
 *   keys).
 */
import { isConfigObject, normalizeRedisBlock, parseDuration, pathOf, rewriteKey, type ConfigDocument, type NormalizeReport } from 'svc-proxy/plugin';

const NAMES = ['second', 'minute', 'hour', 'day', 'week', 'month', 'year'] as const;
const SECONDS: Readonly<Record<number, (typeof NAMES)[number]>> = {
  1: 'second',
  60: 'minute',
  3600: 'hour',
  86400: 'day',
  604800: 'week',
  2592000: 'month',
  31536000: 'year',
};

/** eRPC's period (name, number 0..6 or duration) as its name, or undefined when it is none of them. */
export function periodName(v: unknown): (typeof NAMES)[number] | undefined {
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 && v < NAMES.length ? NAMES[v] : undefined;
  if (typeof v !== 'string') return undefined;
  const s = v.trim().toLowerCase();
  if ((NAMES as readonly string[]).includes(s)) return s as (typeof NAMES)[number];
  if (/^[0-6]$/.test(s)) return NAMES[Number(s)];
  try {
    return /^\d+(\.\d+)?\s*[a-z]+$/.test(s) ? SECONDS[parseDuration(s) / 1000] : undefined;
  } catch {
    return undefined;
  }
}

/** The rate-limit plugin's `normalize` (see the module comment). */
export function normalizeRateLimitShapes(doc: ConfigDocument, out: NormalizeReport): void {
  const rl = doc.rateLimiters;
  if (!isConfigObject(rl)) return;
  if (Array.isArray(rl.budgets)) {
    rl.budgets.forEach((b, bi) => {
      if (!isConfigObject(b) || !Array.isArray(b.rules)) return;
      b.rules.forEach((r, ri) => {
        if (!isConfigObject(r) || r.period === undefined) return;
        const at = `rateLimiters.budgets[${bi}].rules[${ri}].period`;
        const name = periodName(r.period);
        if (name === 'week' || name === 'month' || name === 'year')
          out.problem(
            at,
            `eRPC's ${name}-long rate-limit window is not supported: svc's periods are second, minute, hour and day (use day with maxCount divided accordingly)`,
          );
        else if (name !== undefined) rewriteKey(r, 'period', at, name, out);
      });
    });
  }
  const store = rl.store;
  if (!isConfigObject(store)) return;
  if (isConfigObject(store.redis)) normalizeRedisBlock(store.redis, 'rateLimiters.store.redis', out, { getTimeout: 'timeout' });
  if ('cacheKeyPrefix' in store) {
    const prefix = store.cacheKeyPrefix;
    if (isConfigObject(store.redis)) {
      if (store.redis.keyPrefix === undefined) {
        delete store.cacheKeyPrefix;
        store.redis.keyPrefix = prefix;
        out.rewrite(pathOf('rateLimiters.store', 'cacheKeyPrefix'), 'rateLimiters.store.cacheKeyPrefix', 'rateLimiters.store.redis.keyPrefix');
      } else out.problem('rateLimiters.store.cacheKeyPrefix', "eRPC's cacheKeyPrefix and svc's redis.keyPrefix are both set: keep redis.keyPrefix");
    } else rewriteKey(store, 'cacheKeyPrefix', 'rateLimiters.store.cacheKeyPrefix', undefined, out);
  }
}
