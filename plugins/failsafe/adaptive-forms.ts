/**
 * eRPC's current shapes of adaptive durations, rewritten into svc's flat keys (for the config
 * loader's eRPC normalisation; pure, no hooks). eRPC (common/config.go) writes an adaptive
 * duration as an object, `timeout.duration: {base, quantile, min, max}` and
 * `hedge.delay: {base, quantile, min, max}`, and still reads the older flat siblings
 * (`timeout.quantile`/`minDuration`/`maxDuration`, `hedge.quantile`/`minDelay`/`maxDelay`);
 * svc's own shape is the flat one:
 *
 * | eRPC | svc |
 * |---|---|
 * | `timeout.duration.base` | `timeout.duration` |
 * | `timeout.duration.quantile` / `.min` / `.max` | `timeout.quantile` / `minDuration` / `maxDuration` |
 * | `hedge.delay.base` | `hedge.delay` |
 * | `hedge.delay.quantile` / `.min` / `.max` | `hedge.quantile` / `minDelay` / `maxDelay` |
 *
 * As in eRPC, a field the object sets wins over its flat sibling; a sibling fills only a field
 * the object leaves unset or zero. A policy written as `null` (eRPC's `hedge: null` "no hedge
 * here") is dropped.
 */

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Whether a duration value is unset or zero (`0`, `"0"`, `"0ms"`, `"0s"`...). */
function isZero(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (typeof v === 'number') return v === 0;
  return typeof v === 'string' && /^\s*0+(\.0*)?\s*(ns|us|µs|ms|s|m|h)?\s*$/.test(v);
}

/** Flattens one `{base, quantile, min, max}` object of `policy[key]` into svc's keys. */
function flattenOne(policy: Obj, key: string, names: { quantile: string; min: string; max: string }): Obj {
  const spec = policy[key];
  if (!isObj(spec)) return policy;
  const out: Obj = { ...policy };
  delete out[key];
  if (!isZero(spec.base)) out[key] = spec.base;
  const q = spec.quantile;
  if (typeof q === 'number' && q !== 0) out[names.quantile] = q;
  else if (q !== undefined && typeof q !== 'number') out[names.quantile] = q; // kept as written: the schema names the bad value
  if (!isZero(spec.min)) out[names.min] = spec.min;
  if (!isZero(spec.max)) out[names.max] = spec.max;
  // Keys the object form does not have are reported by the schema under their own names.
  for (const k of Object.keys(spec)) if (!['base', 'quantile', 'min', 'max'].includes(k)) out[`${key}.${k}`] = spec[k];
  return out;
}

/** One failsafe entry with its adaptive objects flattened and `null` policies dropped. */
function flattenEntry(entry: unknown): unknown {
  if (!isObj(entry)) return entry;
  let out: Obj | undefined;
  const edit = (): Obj => (out ??= { ...entry });
  for (const k of ['timeout', 'retry', 'hedge', 'circuitBreaker', 'consensus']) if (k in entry && entry[k] === null) delete edit()[k];
  if (isObj(entry.timeout) && isObj(entry.timeout.duration))
    edit().timeout = flattenOne(entry.timeout, 'duration', { quantile: 'quantile', min: 'minDuration', max: 'maxDuration' });
  if (isObj(entry.hedge) && isObj(entry.hedge.delay))
    edit().hedge = flattenOne(entry.hedge, 'delay', { quantile: 'quantile', min: 'minDelay', max: 'maxDelay' });
  return out ?? entry;
}

/**
 * A `failsafe` value (one entry or a list) in svc's shape: eRPC's object forms of
 * `timeout.duration` and `hedge.delay` flattened, `null` policies dropped. Returns the input
 * itself when nothing needed rewriting.
 * @param failsafe a network's or upstream's raw `failsafe` value
 */
export function flattenAdaptiveForms(failsafe: unknown): unknown {
  if (Array.isArray(failsafe)) {
    let changed = false;
    const list = failsafe.map((e) => {
      const f = flattenEntry(e);
      if (f !== e) changed = true;
      return f;
    });
    return changed ? list : failsafe;
  }
  return flattenEntry(failsafe);
}
