/**
 * Discriminated unions for the config validator. TypeBox writes a union as `anyOf`, and Ajv
 * validates every branch of an `anyOf` and reports every branch's errors: an auth strategy with
 * one mistake printed about ten lines (`type must be "secret"`, `network is required`, ...), one
 * per strategy type, with the real error somewhere among them. A union whose object branches all
 * require the same property with a distinct string `const` (`type`, `driver`...) is a
 * discriminated union: rewritten as Ajv's `discriminator` + `oneOf`, only the branch the value's
 * tag names is validated, so only its errors are reported, and an unknown tag is one line
 * listing the valid ones.
 */

/** Keywords whose values are data, not sub-schemas: never walked into. */
const DATA_KEYWORDS = new Set(['default', 'const', 'enum', 'examples', 'description']);

/** Schema key holding a rewritten union's tag values in branch order (read back for messages). */
export const TAG_VALUES_KEY = 'x-svc-tags';

type Json = unknown;
type Obj = Record<string, Json>;

const isObj = (v: Json): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The property every branch requires with a distinct string `const`, and those values in branch order. */
function discriminatorOf(branches: readonly Json[]): { tag: string; values: string[] } | undefined {
  if (branches.length < 2 || !branches.every((b) => isObj(b) && b.type === 'object' && isObj(b.properties))) return undefined;
  const first = branches[0] as Obj;
  const required = Array.isArray(first.required) ? (first.required as string[]) : [];
  for (const tag of required) {
    const values: string[] = [];
    for (const b of branches as Obj[]) {
      const p = (b.properties as Obj)[tag];
      const c = isObj(p) ? p.const : undefined;
      if (typeof c !== 'string' || !Array.isArray(b.required) || !b.required.includes(tag) || values.includes(c)) break;
      values.push(c);
    }
    if (values.length === branches.length) return { tag, values };
  }
  return undefined;
}

/**
 * The same JSON schema with every discriminated `anyOf` rewritten as
 * `{type: 'object', discriminator: {propertyName}, oneOf}` (Ajv's `discriminator` option must be
 * on). Other unions are left as they are.
 * @param schema a JSON schema (TypeBox output)
 * @returns a new schema; the input is not modified
 */
export function discriminateUnions<T>(schema: T): T {
  const walk = (s: Json): Json => {
    if (Array.isArray(s)) return s.map(walk);
    if (!isObj(s)) return s;
    const out: Obj = {};
    for (const [k, v] of Object.entries(s))
      out[k] = DATA_KEYWORDS.has(k) ? v : k === 'properties' && isObj(v) ? Object.fromEntries(Object.entries(v).map(([n, sub]) => [n, walk(sub)])) : walk(v);
    const branches = out.anyOf;
    if (Array.isArray(branches)) {
      const d = discriminatorOf(branches);
      if (d) {
        delete out.anyOf;
        out.type = 'object';
        out.discriminator = { propertyName: d.tag };
        out.oneOf = branches;
        out[TAG_VALUES_KEY] = d.values;
      }
    }
    return out;
  };
  return walk(schema) as T;
}

/**
 * The tag values of the rewritten union an Ajv `discriminator` error points at.
 * @param root the schema Ajv compiled (after {@link discriminateUnions} and hoisting)
 * @param schemaPath the error's `schemaPath` (`#/.../discriminator`)
 * @returns the valid tag values, or undefined when the path does not resolve
 */
export function tagValuesAt(root: Json, schemaPath: string): string[] | undefined {
  const parts = schemaPath.replace(/^#\/?/, '').split('/').filter(Boolean);
  if (parts.pop() !== 'discriminator') return undefined;
  let cur: Json = root;
  for (const p of parts) {
    if (!isObj(cur) && !Array.isArray(cur)) return undefined;
    cur = (cur as Obj)[p.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  const values = isObj(cur) ? cur[TAG_VALUES_KEY] : undefined;
  return Array.isArray(values) ? (values as string[]) : undefined;
}
