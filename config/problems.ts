/**
 * One validator error as a config problem a person reads: the config path in dotted form
 * (`projects[0].upstreams[1].tags[0]`), and a message that says what is expected rather than
 * the JSON-schema keyword or the raw pattern that failed.
 */
import type { ErrorObject } from 'ajv';
import { tagValuesAt } from './discriminate.ts';
import { DURATION_PATTERN } from './schema.ts';
import type { ConfigProblem } from './types.ts';

/** Patterns of the config schema with what they mean; any other pattern is quoted as it is. */
const PATTERN_HINTS: ReadonlyMap<string, string> = new Map([
  ['^[^:]+:.+$', 'must be "<key>:<value>", such as "tier:fallback" or "region:eu"'],
  [DURATION_PATTERN, 'must be a duration such as "500ms", "15s", "2m" or "1h" (a bare number is milliseconds)'],
  ['^\\s*\\d+(\\.\\d+)?\\s*([kKmMgGtT]i?[bB]|[bB])?\\s*$', 'must be a size such as "512KiB", "10MB" or a number of bytes'],
  ['^https?://', 'must be an http:// or https:// URL'],
  ['^wss?://', 'must be a ws:// or wss:// URL'],
  ['^[A-Za-z0-9_.:-]+$', 'may hold only letters, digits, "_", ".", ":" and "-"'],
  ['^[A-Za-z0-9_.:-]{1,64}$', 'must be 1 to 64 letters, digits, "_", ".", ":" or "-"'],
  ['^[A-Za-z0-9_.-]+$', 'may hold only letters, digits, "_", "." and "-"'],
]);

/** The message of an endpoint pattern widened by plugin schemes (config/schema-core.ts `endpointPattern`): the schemes named, not the regex. */
function endpointHint(pattern: string): string | undefined {
  const m = /^\^\(https\?\|(.+)\):\/\/$/.exec(pattern);
  if (!m) return undefined;
  const schemes = (m[1] as string).split('|').map((s) => `${s.replace(/\\/g, '')}://`);
  return `must be an http:// or https:// URL, or ${schemes.join(', ')} (the schemes this preset's plugins serve)`;
}

/** The value at a JSON pointer of a document, if any. */
function valueAt(doc: unknown, pointer: string): unknown {
  let cur = doc;
  for (const seg of pointer.split('/').slice(1)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[seg.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return cur;
}

/** `/projects/0/upstreams/1` → `projects[0].upstreams[1]`. */
function jsonPointerToPath(p: string): string {
  if (!p) return '';
  return p
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, s) => (/^\d+$/.test(s) ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '');
}

/**
 * The config problem of one Ajv error.
 * @param e the error (`allErrors` mode)
 * @param root the schema Ajv compiled, to name a discriminated union's valid tags
 * @returns its dotted path and a message
 */
function describeError(e: ErrorObject, root: unknown): ConfigProblem {
  const base = jsonPointerToPath(e.instancePath);
  if (e.keyword === 'discriminator') {
    // A discriminated union (config/discriminate.ts): only the tag is wrong, name the valid ones.
    const { tag, tagValue } = e.params as { tag: string; tagValue: unknown };
    const path = base ? `${base}.${tag}` : tag;
    if (tagValue === undefined) return { path, message: 'is required' };
    const values = tagValuesAt(root, e.schemaPath);
    return { path, message: values ? `must be one of ${values.map((x) => JSON.stringify(x)).join(', ')}` : (e.message ?? 'is not valid') };
  }
  if (e.keyword === 'additionalProperties') {
    const key = (e.params as { additionalProperty: string }).additionalProperty;
    return { path: base ? `${base}.${key}` : key, message: `unknown key "${key}"` };
  }
  if (e.keyword === 'required') {
    const key = (e.params as { missingProperty: string }).missingProperty;
    return { path: base ? `${base}.${key}` : key, message: 'is required' };
  }
  if (e.keyword === 'const') return { path: base, message: `must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}` };
  if (e.keyword === 'pattern' && typeof (e as { propertyName?: unknown }).propertyName === 'string') {
    // A key refused by the object's `propertyNames` (a metadata name, say): named, not the pattern.
    const name = ((e as { propertyName?: string }).propertyName as string).slice(0, 64);
    return { path: base, message: `key ${JSON.stringify(name)} is not allowed here` };
  }
  if (e.keyword === 'pattern') {
    const pattern = (e.params as { pattern: string }).pattern;
    return { path: base, message: PATTERN_HINTS.get(pattern) ?? endpointHint(pattern) ?? `must match ${pattern}` };
  }
  return { path: base, message: e.message ?? e.keyword };
}

/**
 * The problems of one failed validation, one line per path and message. A union's branches each
 * report their own type mismatch: at a path with a more specific problem (a duration string that
 * does not parse) the bare "must be number" of the other branch is noise and is dropped; at a
 * path with type mismatches only, they become one line (`must be string or number`), and a union
 * of literals is one line naming them all (`must be one of "a", "b"`). A type mismatch at a path
 * with a problem below it (a list branch's item) is dropped too: the value has the other branch's
 * shape, and the problem inside is the real one.
 * @param errors Ajv's errors (`allErrors` mode)
 * @param root the schema Ajv compiled
 * @param doc the validated document, to name an endpoint's scheme
 */
export function problemsOf(errors: readonly ErrorObject[], root: unknown, doc?: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const types = new Map<string, string[]>();
  const consts = new Map<string, string[]>();
  const specific = new Set<string>();
  const seen = new Set<string>();
  for (const e of errors) {
    // `propertyNames` says only "property name must be valid": its own error below names the key.
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf' || e.keyword === 'propertyNames') continue;
    const p = describeError(e, root);
    // An upstream endpoint of a scheme no plugin of the preset serves: the scheme named (never the URL, which may hold a key).
    if (e.keyword === 'pattern' && /\.endpoint$/.test(p.path)) {
      const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(String(valueAt(doc, e.instancePath) ?? ''))?.[1];
      if (scheme && !/^https?$/i.test(scheme)) p.message = `"${scheme.slice(0, 32)}://" is served by no plugin of this preset: ${p.message}`;
    }
    if (e.keyword === 'type') {
      const list = types.get(p.path) ?? [];
      const t = String((e.params as { type: unknown }).type);
      if (!list.includes(t)) list.push(t);
      types.set(p.path, list);
      continue;
    }
    if (e.keyword === 'const') {
      // A union of literals ("returnError" | "acceptMostCommonValidResult" | ...): one line.
      const list = consts.get(p.path) ?? [];
      list.push(JSON.stringify((e.params as { allowedValue: unknown }).allowedValue));
      consts.set(p.path, list);
      continue;
    }
    specific.add(p.path);
    const key = `${p.path}\u0000${p.message}`;
    if (!seen.has(key)) {
      seen.add(key);
      problems.push(p);
    }
  }
  for (const [path, list] of consts) {
    specific.add(path);
    problems.push({ path, message: list.length === 1 ? `must be ${list[0]}` : `must be one of ${list.join(', ')}` });
  }
  // A union whose list branch reported problems inside the value (`failsafe[0].retry.x`) was
  // written as a list: the object branch's "must be object" at the parent is noise.
  const inside = (path: string) => [...specific].some((s) => s !== path && (path === '' || s.startsWith(`${path}.`) || s.startsWith(`${path}[`)));
  for (const [path, list] of types) if (!specific.has(path) && !inside(path)) problems.push({ path, message: `must be ${list.join(' or ')}` });
  return problems;
}
