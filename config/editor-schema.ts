/**
 * The config's JSON Schema as editors read it (`svc config schema`): the schema `svc validate`
 * assembles (core plus the preset's plugin fragments, {@link buildConfigSchema}) written out as a
 * standalone draft-07 document, so a `svc.yaml` starting with
 * `# yaml-language-server: $schema=./svc.schema.json` gets completion, hover text and the same
 * unknown-key errors as `svc validate`.
 *
 * Two differences from the validator's schema, both because an editor sees the file before
 * `${ENV}` expansion and without the loader's type coercion:
 * - a number, integer or boolean field, and a string field with a `pattern` (such as an upstream
 *   `endpoint`), also accepts a string holding a `${VAR}` reference, which svc expands at load
 *   time (e.g. `httpPort: ${PORT}`, `endpoint: ${RPC_URL}`);
 * - repeated sub-schemas are moved under `definitions` ({@link hoistRepeatedSubschemas}) so the
 *   document stays small.
 * A TypeScript-only field (`x-svc-kind: function`, such as `selectionPolicy.evalFunc`) keeps an
 * open schema: it never appears in YAML.
 */
import type { TObject } from '@sinclair/typebox';
import { buildConfigSchema, type SchemaFragment } from './schema.ts';
import { hoistRepeatedSubschemas } from './hoist.ts';

/** A string holding at least one `${VAR}` reference: expanded by the loader before validation. */
export const ENV_REF_SCHEMA = { type: 'string', pattern: '\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}' } as const;

/** Keywords whose values are data, not sub-schemas: copied as they are. */
const DATA_KEYWORDS = new Set(['default', 'const', 'enum', 'examples', 'description', 'required', 'pattern', 'type']);

type Json = unknown;

/** True for a leaf schema whose raw YAML value may be a `${VAR}` string instead. */
function acceptsEnvRef(s: Record<string, Json>): boolean {
  const t = s.type;
  if (t === 'number' || t === 'integer' || t === 'boolean') return true;
  return t === 'string' && typeof s.pattern === 'string';
}

/** Copies a schema node, widening env-expandable leaves (see the module comment). */
function widen(node: Json): Json {
  if (Array.isArray(node)) return node.map(widen);
  if (!node || typeof node !== 'object') return node;
  const s = node as Record<string, Json>;
  // A union of leaves (durations, sizes): widen the union once, not each branch.
  if (Array.isArray(s.anyOf) && s.anyOf.every((b) => b && typeof b === 'object' && acceptsEnvRef(b as Record<string, Json>))) {
    return { ...s, anyOf: [...(s.anyOf as Json[]), ENV_REF_SCHEMA] };
  }
  if (acceptsEnvRef(s)) {
    const { description, default: def, ...inner } = s;
    const out: Record<string, Json> = { anyOf: [inner, ENV_REF_SCHEMA] };
    if (description !== undefined) out.description = description;
    if (def !== undefined) out.default = def;
    return out;
  }
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(s)) {
    if (DATA_KEYWORDS.has(k)) out[k] = v;
    else if (k === 'properties' || k === 'patternProperties') {
      const m: Record<string, Json> = {};
      for (const [name, sub] of Object.entries(v as Record<string, Json>)) m[name] = widen(sub);
      out[k] = m;
    } else out[k] = widen(v);
  }
  return out;
}

/**
 * The editor schema of the config for a set of plugin fragments.
 * @param fragments the preset's plugin fragments, in plugin order (as `svc validate` passes them)
 * @returns a plain JSON document (draft-07), ready for `JSON.stringify`
 */
export function editorConfigSchema(fragments: readonly SchemaFragment[]): Record<string, unknown> {
  const schema: TObject = buildConfigSchema(fragments);
  // JSON round trip: drops TypeBox's symbol keys and any function-valued default.
  const plain = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  const widened = hoistRepeatedSubschemas(widen(plain) as Record<string, unknown>);
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'svc configuration (svc.yaml)',
    ...widened,
  };
}
