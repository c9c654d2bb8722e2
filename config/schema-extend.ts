/**
 * The schema tree walks behind extension points (./schema-kinds.ts `Extensible`): finding the
 * points a fragment declares and copying a tree with the keys other plugins add to them. Used by
 * the assembly and the collision check in ./schema.ts.
 */
import { Type, type TProperties, type TSchema } from '@sinclair/typebox';
import { EXTEND_MARK } from './schema-kinds.ts';

/** The extension point an object schema declares, if any. */
function pointOf(node: TSchema): string | undefined {
  const p = (node as Record<string, unknown>)[EXTEND_MARK];
  return typeof p === 'string' ? p : undefined;
}

/** Keywords whose value is one sub-schema, a list of them, or a map of them. */
const ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains'] as const;
const LIST = ['anyOf', 'allOf', 'oneOf'] as const;
const MAP = ['properties', 'patternProperties'] as const;

/**
 * Walks a schema tree and calls `visit` on every object schema that declares an extension point
 * (the fragments' own sub-schemas, before any extension).
 */
export function eachPoint(node: unknown, visit: (point: string, node: TSchema) => void): void {
  if (!node || typeof node !== 'object') return;
  const s = node as Record<string, unknown>;
  const point = pointOf(s as TSchema);
  if (point !== undefined) visit(point, s as TSchema);
  for (const k of ONE) eachPoint(s[k], visit);
  for (const k of LIST) if (Array.isArray(s[k])) for (const c of s[k] as unknown[]) eachPoint(c, visit);
  for (const k of MAP) if (s[k] && typeof s[k] === 'object') for (const c of Object.values(s[k] as object)) eachPoint(c, visit);
}

/**
 * A copy of a schema tree with every extension point's added keys in place and the marks
 * removed; nodes without a mark below them are shared, never mutated (fragments are reused).
 */
export function extendTree(node: TSchema, points: ReadonlyMap<string, TProperties>): TSchema {
  if (!node || typeof node !== 'object') return node;
  let out: Record<string, unknown> | undefined;
  const own = (): Record<string, unknown> => (out ??= { ...node });
  const point = pointOf(node);
  if (point !== undefined) {
    const o = own();
    delete o[EXTEND_MARK];
    const add = points.get(point);
    if (add) o.properties = { ...(node as { properties?: TProperties }).properties, ...optionalAll(add) };
  }
  const cur = (out ?? node) as Record<string, unknown>;
  for (const k of ONE) {
    const c = cur[k];
    if (c && typeof c === 'object') {
      const n = extendTree(c as TSchema, points);
      if (n !== c) own()[k] = n;
    }
  }
  for (const k of LIST) {
    const list = cur[k];
    if (!Array.isArray(list)) continue;
    const mapped = list.map((c: TSchema) => extendTree(c, points));
    if (mapped.some((c, i) => c !== list[i])) own()[k] = mapped;
  }
  for (const k of MAP) {
    const m = cur[k] as Record<string, TSchema> | undefined;
    if (!m || typeof m !== 'object') continue;
    let copy: Record<string, TSchema> | undefined;
    for (const [name, c] of Object.entries(m)) {
      const n = extendTree(c, points);
      if (n !== c) (copy ??= { ...m })[name] = n;
    }
    if (copy) own()[k] = copy;
  }
  return (out ?? node) as TSchema;
}

/** A copy of a property map with every property made optional (`undefined` gives an empty map). */
export function optionalAll(p: TProperties | undefined): TProperties {
  const out: TProperties = {};
  if (!p) return out;
  for (const [k, v] of Object.entries(p)) out[k] = Type.Optional(v);
  return out;
}
