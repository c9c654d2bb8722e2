/**
 * Linear, non-recursive scans over JSON text (spec §4.2). Skippers,
 * not parsers: they find where values begin and end so svc can echo a caller's raw id, splice
 * an upstream's raw result bytes, and measure nesting depth before anything recursive
 * (`JSON.stringify`, plugins walking params) can overflow the stack. Every function advances
 * its index on every character, so malformed text cannot loop; callers that need validity
 * parse with `JSON.parse` (which V8 runs iteratively) as well.
 */

const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const COMMA = 44;
const COLON = 58;

/** Index of the first non-blank character at or after `i`. */
export function skipWs(s: string, i: number): number {
  for (;;) {
    const c = s.charCodeAt(i);
    if (c === 32 || c === 10 || c === 13 || c === 9) i++;
    else return i;
  }
}

/**
 * Index just past the string starting at `i` (an opening quote); the text end when unterminated.
 * Jumps from quote to quote with `indexOf` (long hex strings are most of a large body) and counts
 * the backslashes before each: an odd run escapes it. Still linear: each character is looked at
 * at most twice.
 */
function skipString(s: string, i: number): number {
  i++;
  for (;;) {
    const q = s.indexOf('"', i);
    if (q === -1) return s.length;
    let b = q - 1;
    while (b >= i && s.charCodeAt(b) === BACKSLASH) b--;
    if ((q - 1 - b) % 2 === 0) return q + 1;
    i = q + 1;
  }
}

/** Index just past the value starting at `i` (object, array, string or scalar). */
function skipValue(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c === QUOTE) return skipString(s, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    for (;;) {
      const d = s.charCodeAt(i);
      if (Number.isNaN(d)) return i;
      if (d === QUOTE) {
        i = skipString(s, i);
        continue;
      }
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
  }
  for (;;) {
    const d = s.charCodeAt(i);
    if (Number.isNaN(d) || d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || d === 32 || d === 10 || d === 13 || d === 9) return i;
    i++;
  }
}

/**
 * Where a top-level member's value lies in an object document, without building it. The first
 * occurrence wins (callers validate with the raw text, so a duplicate key cannot make the raw
 * and the parsed value disagree in kind).
 * @param text a JSON document (validated by the caller)
 * @param key member name (compared with the raw key text, so keys with escapes never match)
 * @param from where the object starts in `text` (default 0)
 * @returns `[start, end)` of the value, or undefined when the key is absent or it is not an object
 */
export function findTopLevelValue(text: string, key: string, from = 0): [number, number] | undefined {
  let i = skipWs(text, from);
  if (text.charCodeAt(i) !== OPEN_BRACE) return undefined;
  i++;
  for (;;) {
    i = skipWs(text, i);
    if (text.charCodeAt(i) !== QUOTE) return undefined;
    const keyEnd = skipString(text, i);
    const matches = keyEnd - i - 2 === key.length && text.startsWith(key, i + 1);
    i = skipWs(text, keyEnd);
    if (text.charCodeAt(i) !== COLON) return undefined;
    i = skipWs(text, i + 1);
    const end = skipValue(text, i);
    if (matches) return [i, end];
    i = skipWs(text, end);
    if (text.charCodeAt(i) !== COMMA) return undefined;
    i++;
  }
}

/**
 * The raw JSON text of a top-level member of an object document (see {@link findTopLevelValue}).
 * @returns the value's text, or undefined when the key is absent or the text is not an object
 */
export function extractTopLevelValue(text: string, key: string): string | undefined {
  const r = findTopLevelValue(text, key);
  return r ? text.slice(r[0], r[1]) : undefined;
}

/** One element of a top-level array: its raw text, where it starts, and its nesting depth (the element itself counts 1). */
export interface ScannedElement {
  /** The element's raw JSON text, as written. */
  text: string;
  /** Offset of the element in the scanned text. */
  start: number;
  /** Nesting depth of the element (an object or array is 1, a scalar 0). */
  depth: number;
}

/**
 * Nesting depth of a JSON text: the deepest `{`/`[` level (a scalar is 0, `{}` is 1). Stops
 * counting once `limit` is passed, so a hostile body costs one linear pass and nothing more.
 * @param text any text (need not be valid JSON)
 * @param limit the largest allowed depth
 * @returns the depth, or `limit + 1` when it is deeper than `limit`
 */
export function nestingDepth(text: string, limit: number): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = skipString(text, i);
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) {
        max = depth;
        if (max > limit) return limit + 1;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
    i++;
  }
  return max;
}

/**
 * The elements of a top-level JSON array, each with its raw text and depth, in one linear pass.
 * @param text a valid JSON array (validated by the caller with `JSON.parse`)
 * @returns the elements in order (empty for `[]`)
 */
export function arrayElements(text: string): ScannedElement[] {
  const out: ScannedElement[] = [];
  let i = skipWs(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACKET) return out;
  i = skipWs(text, i + 1);
  if (text.charCodeAt(i) === CLOSE_BRACKET) return out;
  for (;;) {
    i = skipWs(text, i);
    const start = i;
    let depth = 0;
    let max = 0;
    // One element, tracking its depth (the same walk as skipValue, with a depth counter).
    const c0 = text.charCodeAt(i);
    if (c0 === OPEN_BRACE || c0 === OPEN_BRACKET) {
      for (;;) {
        const d = text.charCodeAt(i);
        if (Number.isNaN(d)) break;
        if (d === QUOTE) {
          i = skipString(text, i);
          continue;
        }
        if (d === OPEN_BRACE || d === OPEN_BRACKET) {
          if (++depth > max) max = depth;
        } else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
          if (--depth === 0) {
            i++;
            break;
          }
        }
        i++;
      }
    } else i = skipValue(text, i);
    out.push({ text: text.slice(start, i), start, depth: max });
    i = skipWs(text, i);
    if (text.charCodeAt(i) !== COMMA) return out;
    i++;
  }
}

/** What {@link scanMembers} found in one request object. */
export interface MemberScan {
  /**
   * The first member name that occurs twice in one object (at any depth), decoded; undefined
   * when every object's names are distinct. Capped at {@link MAX_REPORTED_NAME} characters.
   */
  duplicate?: string;
  /** True when the duplicate sits in the request object itself, not inside a value. */
  topLevel?: boolean;
  /**
   * True when some number's text would not come back unchanged from `JSON.parse` then
   * `JSON.stringify` (`1.0`, `1e3`, integers beyond 2^53): the client's raw bytes and the parsed
   * value then say different things, so svc must not forward the raw bytes.
   */
  lossyNumber: boolean;
}

/** Longest member name echoed in an error, characters (names come from clients). */
export const MAX_REPORTED_NAME = 64;
/** Objects with more members than this track their names in a Set instead of an array. */
const LINEAR_KEYS = 16;

/** A member name as JSON.parse sees it: escapes decoded (only parsed when it has any). */
function keyText(s: string, start: number, end: number): string {
  const raw = s.slice(start + 1, end - 1);
  if (raw.indexOf('\\') === -1) return raw;
  try {
    return JSON.parse(s.slice(start, end)) as string;
  } catch {
    return raw;
  }
}

/** Member names of one open object: an array while small, a Set past {@link LINEAR_KEYS}. */
type Names = string[] | Set<string>;

/** Adds a name; false when it was already there. */
function addName(names: Names, name: string): boolean {
  if (Array.isArray(names)) {
    if (names.includes(name)) return false;
    names.push(name);
    return true;
  }
  if (names.has(name)) return false;
  names.add(name);
  return true;
}

/**
 * One linear pass over a request object's text (spec §4.2; "one parse, one truth"): finds a
 * member name given twice in any object, which `JSON.parse` would silently resolve to the last
 * value while a byte-level reader (svc's raw-id and raw-params scans, an upstream's parser) may
 * take the first, and numbers whose text the parsed value does not reproduce. Stops at the
 * first duplicate. Cost: one pass, memory bounded by the names of the objects currently open.
 * @param s a valid JSON object text (validated by the caller with `JSON.parse`)
 * @returns the scan's findings
 */
export function scanMembers(s: string): MemberScan {
  const stack: Array<Names | null> = [];
  let expectKey = false;
  let lossy = false;
  const n = s.length;
  for (let i = 0; i < n; ) {
    const c = s.charCodeAt(i);
    if (c === QUOTE) {
      const end = skipString(s, i);
      const top = stack[stack.length - 1];
      if (expectKey && top) {
        const name = keyText(s, i, end);
        if (Array.isArray(top) && top.length >= LINEAR_KEYS) stack[stack.length - 1] = new Set(top);
        if (!addName(stack[stack.length - 1] as Names, name)) {
          return {
            duplicate: name.length > MAX_REPORTED_NAME ? `${name.slice(0, MAX_REPORTED_NAME)}…` : name,
            topLevel: stack.length === 1,
            lossyNumber: lossy,
          };
        }
        expectKey = false;
      }
      i = end;
      continue;
    }
    if (c === OPEN_BRACE) {
      stack.push([]);
      expectKey = true;
    } else if (c === OPEN_BRACKET) {
      stack.push(null);
      expectKey = false;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      stack.pop();
      expectKey = false;
    } else if (c === COMMA) {
      expectKey = stack[stack.length - 1] !== null && stack.length > 0;
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      const end = skipValue(s, i);
      if (!lossy) {
        const tok = s.slice(i, end);
        lossy = JSON.stringify(Number(tok)) !== tok;
      }
      i = end;
      continue;
    }
    i++;
  }
  return { lossyNumber: lossy };
}

/** What {@link scanAnswer} found in one JSON-RPC answer object. */
export interface AnswerScan {
  /**
   * The first top-level member name given twice, decoded (so `"res\u0075lt"` after `"result"`
   * counts), capped at {@link MAX_REPORTED_NAME} characters; undefined when the names are distinct.
   */
  duplicate?: string;
  /** `[start, end)` of the `result` member's value (its name matched decoded), when present and not duplicated. */
  result?: [number, number];
}

/**
 * One walk over the top-level members of an upstream's answer (spec §4.2, "one parse, one
 * truth", applied to answers as {@link scanMembers} applies it to requests): a member given
 * twice (`result`, `id`, `error`, `jsonrpc`...) would let `JSON.parse` (the last value, what
 * consensus votes on) and a byte-level reader (the first value, what is spliced and cached)
 * disagree, so the caller refuses the answer. Values are skipped, not read: the cost is one
 * pass and one small array of names; member names are decoded only when they hold a backslash.
 * Only top-level members are checked: they are the ones svc reads by bytes as well as parsed.
 * @param text a valid JSON object text (validated by the caller with `JSON.parse`)
 * @returns the first duplicate name, or where `result`'s value lies
 */
export function scanAnswer(text: string): AnswerScan {
  let i = skipWs(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACE) return {};
  i++;
  let names: Names = [];
  let result: [number, number] | undefined;
  for (;;) {
    i = skipWs(text, i);
    if (text.charCodeAt(i) !== QUOTE) break;
    const keyEnd = skipString(text, i);
    const name = keyText(text, i, keyEnd);
    if (Array.isArray(names) && names.length >= LINEAR_KEYS) names = new Set(names);
    if (!addName(names, name)) return { duplicate: name.length > MAX_REPORTED_NAME ? `${name.slice(0, MAX_REPORTED_NAME)}…` : name };
    i = skipWs(text, keyEnd);
    if (text.charCodeAt(i) !== COLON) break;
    i = skipWs(text, i + 1);
    const end = skipValue(text, i);
    if (name === 'result') result = [i, end];
    i = skipWs(text, end);
    if (text.charCodeAt(i) !== COMMA) break;
    i++;
  }
  return result ? { result } : {};
}
