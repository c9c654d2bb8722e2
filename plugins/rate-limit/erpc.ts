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
 * - `store.nearLimitRatio` (eRPC's docs: no effect on its blocking, only on internal counters it
 *   does not export) → removed.
 * - `rules[].waitTime: 0` (eRPC's default) → removed: refusing a limited call at once is svc's
 *   behaviour; any other value is refused by validation.
 */
import {
  isConfigObject,
  normalizeRedisBlock,
  parseDuration,
  pathOf,
  rewriteKey,
  type ConfigDocument,
  type ConfigObject,
  type NormalizeReport,
} from 'svc-proxy/plugin';

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

/** Whether eRPC's `waitTime` value is zero (`0`, `"0"`, `0s`, `0ms`...). */
function isZeroDuration(v: unknown): boolean {
  if (v === 0 || v === null) return true;
  if (typeof v !== 'string') return false;
  try {
    return parseDuration(v) === 0;
  } catch {
    return false;
  }
}

/**
 * eRPC's `waitTime` on a rule: `0` (eRPC's default: answer a limited call at once, which is what
 * svc does) is removed with a rewrite line saying so. Any other value stays, and validation
 * refuses it by name (config/erpc-keys.ts): eRPC 0.0.x waited that long for a permit.
 */
function normalizeWaitTime(rule: ConfigObject, path: string, out: NormalizeReport): void {
  if (!isZeroDuration(rule.waitTime)) return;
  out.rewrite(pathOf(path, 'waitTime'), rule.waitTime, "(removed: 0 is svc's behaviour, a limited call is refused at once)");
  delete rule.waitTime;
}

/** The rate-limit plugin's `normalize` (see the module comment). */
export function normalizeRateLimitShapes(doc: ConfigDocument, out: NormalizeReport): void {
  const rl = doc.rateLimiters;
  if (!isConfigObject(rl)) return;
  if (Array.isArray(rl.budgets)) {
    rl.budgets.forEach((b, bi) => {
      if (!isConfigObject(b) || !Array.isArray(b.rules)) return;
      b.rules.forEach((r, ri) => {
        if (!isConfigObject(r)) return;
        if ('waitTime' in r) normalizeWaitTime(r, `rateLimiters.budgets[${bi}].rules[${ri}]`, out);
        if (r.period === undefined) return;
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
  if ('nearLimitRatio' in store) {
    out.rewrite(
      'rateLimiters.store.nearLimitRatio',
      store.nearLimitRatio,
      "(removed: eRPC's limiter never reads it to block or warn; it feeds internal counters eRPC does not export)",
    );
    delete store.nearLimitRatio;
  }
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
