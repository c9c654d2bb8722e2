/**
 * The `networks[].staticResponses` config (eRPC's key, same shape) and the matching rules of the
 * static-responses plugin. No hooks here: `index.ts` wires them.
 *
 * Matching, as eRPC's: the method is compared exactly (case-sensitive); the params are compared
 * deeply, where two numbers are equal when their values are (a YAML `1` and a JSON `1.0`), a
 * number never equals a string (`1` and `"1"`, `"0x1"` and `"0x01"` differ: hex is not
 * normalised), object keys match whatever their order, and empty params (omitted, `null` or
 * `[]`) match one another. The first matching entry, in config order, wins.
 */
import { eachNetwork, isConfigObject, pathOf, type ConfigDocument, type NormalizeReport, type SchemaFragment, Strict, Type } from 'svc-proxy/plugin';

/** Most entries one network's `staticResponses` may hold: the list is walked per method on a hit. */
export const MAX_STATIC_RESPONSES = 1000;

/** Longest `method` of an entry, characters: svc refuses longer method names from clients anyway. */
export const MAX_STATIC_METHOD_LENGTH = 256;

/**
 * Deepest nesting compared in params (each array or object one level): a request's nesting is
 * bounded by `server.maxJsonDepth` (64 by default); deeper values never match.
 */
export const MAX_PARAMS_DEPTH = 64;

/** One configured error answer: a JSON-RPC error object as the client sees it. */
const StaticErrorSchema = Strict(
  {
    code: Type.Integer({ description: 'JSON-RPC error code sent to the client' }),
    message: Type.String({ description: 'error message sent to the client, as written' }),
    data: Type.Optional(Type.Unknown({ description: 'error data sent to the client, as written (omitted when unset: svc adds nothing)' })),
  },
  { description: 'the error answered, exactly `{code, message, data}` as configured' },
);

/** One `staticResponses` entry. */
const StaticResponseSchema = Strict({
  method: Type.String({ minLength: 1, maxLength: MAX_STATIC_METHOD_LENGTH, description: 'method matched exactly (case-sensitive)' }),
  params: Type.Optional(
    Type.Union([Type.Array(Type.Unknown()), Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
      description:
        'params matched deeply (numbers by value, object keys in any order, strings and hex as written); omitted, null and [] all match a call with no params',
    }),
  ),
  response: Strict(
    {
      result: Type.Optional(Type.Unknown({ description: 'the result answered (any JSON value, null included)' })),
      error: Type.Optional(StaticErrorSchema),
    },
    { description: 'exactly one of `result` or `error`' },
  ),
});

/** The plugin's keys under `networks[]` and `networkDefaults` (read with `settingsOf`). */
export const STATIC_RESPONSES_NETWORK_KEYS = {
  staticResponses: Type.Array(StaticResponseSchema, {
    maxItems: MAX_STATIC_RESPONSES,
    description:
      'calls answered from config before multiplexing, the cache and any upstream (svc_network_static_response_served_total); the first entry whose method and params match wins; a list set on the network replaces the one of networkDefaults',
  }),
};

/** The schema fragment of the static-responses plugin: one key under `networks[]` and `networkDefaults`. */
export const staticResponsesSchema: SchemaFragment = {
  network: STATIC_RESPONSES_NETWORK_KEYS,
  normalize: checkStaticResponses,
};

/**
 * Load-time checks the schema cannot say clearly: each entry's `response` holds exactly one of
 * `result` and `error`, and `params` is a list, an object or null (YAML would otherwise let a
 * stray scalar through as null by type coercion).
 * @param doc the raw config document
 * @param out where problems are reported
 */
export function checkStaticResponses(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const list = n.staticResponses;
    if (!Array.isArray(list)) return;
    list.forEach((e, i) => {
      if (!isConfigObject(e)) return;
      const at = pathOf(pathOf(path, 'staticResponses'), i);
      const p = e.params;
      if (p !== undefined && p !== null && typeof p !== 'object')
        out.problem(pathOf(at, 'params'), 'params must be a list, an object or null (omit it, or write [], for a call without params)');
      const r = e.response;
      if (!isConfigObject(r)) return;
      const hasResult = Object.hasOwn(r, 'result');
      const hasError = Object.hasOwn(r, 'error');
      if (hasResult === hasError)
        out.problem(
          pathOf(at, 'response'),
          hasResult ? 'set either result or error, not both' : 'set result (any JSON value, null included) or error ({code, message, data?})',
        );
    });
  });
}

/** A configured error answer. */
export interface StaticError {
  /** JSON-RPC error code. */
  code: number;
  /** Error message, as written. */
  message: string;
  /** Error data, as written; absent when not configured. */
  data?: unknown;
}

/** One `staticResponses` entry as resolved from config. */
export interface StaticResponseConfig {
  /** Method matched exactly. */
  method: string;
  /** Params matched deeply; undefined, null and [] mean "no params". */
  params?: unknown;
  /** Exactly one of `result` (any JSON value, null included) and `error`. */
  response: { result?: unknown; error?: StaticError };
}

/** Whether params are empty: omitted, null or `[]` (eRPC: a call with none matches these). */
export function isEmptyParams(p: unknown): boolean {
  return p === undefined || p === null || (Array.isArray(p) && p.length === 0);
}

/** Whether a value is a JSON object (not an array, not null). */
function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Deep equality of two JSON values, as eRPC compares a config value with a request value: numbers
 * (and bigints, from a YAML reader that makes them) by numeric value, strings and booleans
 * exactly, null only to null, arrays element by element, objects key by key in any order.
 * @param a one value
 * @param b the other
 * @param depth nesting reached so far (values deeper than {@link MAX_PARAMS_DEPTH} never match)
 */
export function jsonEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (a === undefined || a === null || b === undefined || b === null) return (a ?? null) === (b ?? null);
  const ta = typeof a;
  const tb = typeof b;
  if (ta === 'number' || ta === 'bigint') return (tb === 'number' || tb === 'bigint') && Number(a) === Number(b);
  if (ta === 'string' || ta === 'boolean') return a === b;
  if (depth >= MAX_PARAMS_DEPTH) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    for (const k of keys) if (!Object.hasOwn(b, k) || !jsonEqual(a[k], b[k], depth + 1)) return false;
    return true;
  }
  return false;
}

/**
 * Whether a call's params match an entry's params: both empty (omitted, null or `[]`), or deeply
 * equal ({@link jsonEqual}).
 * @param configured the entry's `params`
 * @param sent the call's params as sent
 */
export function paramsMatch(configured: unknown, sent: unknown): boolean {
  if (isEmptyParams(configured)) return isEmptyParams(sent);
  return jsonEqual(configured, sent);
}
