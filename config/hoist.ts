/**
 * Shared sub-schemas for the config validator. The assembled config schema repeats large object
 * schemas (the upstream schema under `upstreamDefaults` and `projects[].upstreams[]`, failsafe
 * entries under networks, network defaults and upstreams…), and Ajv inlines every copy into one
 * generated function: about 720 KiB of JavaScript for a 57 KiB schema with the default preset.
 * Compiling that took about 220 ms and grew the heap by tens of MiB at start
 * (peak RSS). Moving each repeated object schema under `definitions` and pointing at it with
 * `$ref` lets Ajv compile it once (with `inlineRefs: false`): the main function drops to about
 * 220 KiB and the compile time halves. Errors still carry the same `instancePath`.
 */

/** JSON text length under which a repeated sub-schema stays inline: small ones cost little. */
const MIN_HOISTED_CHARS = 300;

/** Keywords whose values are data, not sub-schemas: never hoisted from or walked into. */
const DATA_KEYWORDS = new Set(['default', 'const', 'enum', 'examples', 'description']);
/** Keywords whose values are maps of name → sub-schema. */
const MAP_KEYWORDS = new Set(['properties', 'patternProperties', 'definitions', '$defs']);

type Json = unknown;

/** Counts every object sub-schema by its JSON text (schema positions only). */
function countSubschemas(schema: Json, counts: Map<string, number>): void {
  if (Array.isArray(schema)) {
    for (const s of schema) countSubschemas(s, counts);
    return;
  }
  if (!schema || typeof schema !== 'object') return;
  const text = JSON.stringify(schema);
  if (text.length >= MIN_HOISTED_CHARS) counts.set(text, (counts.get(text) ?? 0) + 1);
  for (const [k, v] of Object.entries(schema)) {
    if (DATA_KEYWORDS.has(k)) continue;
    if (MAP_KEYWORDS.has(k) && v && typeof v === 'object') for (const sub of Object.values(v)) countSubschemas(sub, counts);
    else countSubschemas(v, counts);
  }
}

/**
 * The same JSON schema with every object sub-schema that occurs more than once (and is at least
 * {@link MIN_HOISTED_CHARS} of JSON) moved to root `definitions` and referenced by `$ref`.
 * @param schema a JSON schema object whose root has no `definitions` of its own
 * @returns a new schema (the input is not modified); the input itself when nothing repeats
 * @throws Error when the root already has `definitions` (they would be overwritten)
 */
export function hoistRepeatedSubschemas<T extends object>(schema: T): T {
  if ('definitions' in schema) throw new Error('hoistRepeatedSubschemas: the root schema already has definitions');
  const counts = new Map<string, number>();
  countSubschemas(schema, counts);
  const repeated = new Set([...counts].filter(([, n]) => n > 1).map(([text]) => text));
  if (repeated.size === 0) return schema;
  const definitions: Record<string, Json> = {};
  const ids = new Map<string, string>();
  const rewrite = (s: Json, isRoot: boolean): Json => {
    if (Array.isArray(s)) return s.map((x) => rewrite(x, false));
    if (!s || typeof s !== 'object') return s;
    if (!isRoot && (s as { type?: unknown }).type === 'object') {
      const text = JSON.stringify(s);
      if (repeated.has(text)) {
        let id = ids.get(text);
        if (id === undefined) {
          id = `shared${ids.size}`;
          ids.set(text, id);
          definitions[id] = rewrite(JSON.parse(text) as Json, true);
        }
        return { $ref: `#/definitions/${id}` };
      }
    }
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(s)) {
      if (DATA_KEYWORDS.has(k)) out[k] = v;
      else if (MAP_KEYWORDS.has(k) && v && typeof v === 'object' && !Array.isArray(v))
        out[k] = Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, rewrite(sub, false)]));
      else out[k] = rewrite(v, false);
    }
    return out;
  };
  const root = rewrite(schema, true) as Record<string, Json>;
  root.definitions = definitions;
  return root as T;
}
