/**
 * The config validator: the assembled schema (core's plus every plugin's fragment) compiled by
 * Ajv, or the same validator compiled ahead of time by the build.
 *
 * Compiling the default preset's schema at start-up costs about 0.3 s and leaves the process
 * about 25 MiB larger for good (Ajv builds the 0.8 MB validator as source text, then V8 compiles
 * it; the freed pages stay with the heap). `npm run build` therefore compiles the schemas of the
 * built-in presets once, as standalone CommonJS modules under `dist/config/validators/`, named by
 * the SHA-256 of the schema. A schema with such a module loads it (about 20 ms, 2 MiB); any other
 * (a third-party plugin or preset, or svc run from its TypeScript sources) is compiled here as
 * before. The module is keyed by the schema's exact JSON, so it can never validate another schema.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import type { TObject } from '@sinclair/typebox';
import { discriminateUnions } from './discriminate.ts';
import { hoistRepeatedSubschemas } from './hoist.ts';

/** A compiled config validator and the schema its error paths point into (for the error messages). */
export interface ConfigValidator {
  /** Validates a value, coercing numeric and boolean strings in place; `errors` holds Ajv's errors after a failure. */
  validate: ValidateFunction;
  /** The schema as compiled (hoisted and discriminated): what `schemaPath` of an error refers to. Built on first use. */
  compiled(): unknown;
}

/** Folder of the validators compiled ahead of time (next to this module: dist/config/validators/ once built). */
export const PRECOMPILED_DIR = fileURLToPath(new URL('./validators/', import.meta.url));

const requireHere = createRequire(import.meta.url);
// Schemas are rebuilt per proxy (a reload, a worker): compile or load each one once, keyed by the
// file its precompiled validator would be (the folder and the schema's hash).
const validators = new Map<string, ConfigValidator>();

/**
 * The file name a schema's precompiled validator has: the SHA-256 (hex) of its JSON, `.cjs`.
 * @param json `JSON.stringify` of the schema
 */
export function precompiledName(json: string): string {
  return `${createHash('sha256').update(json).digest('hex')}.cjs`;
}

/** The schema in the form Ajv compiles: repeated sub-schemas hoisted, discriminated unions tagged. */
function compiledForm(schema: TObject): unknown {
  return hoistRepeatedSubschemas(discriminateUnions(schema));
}

/** One Ajv instance with svc's options; `source` keeps the generated code for a standalone module. */
function newAjv(source: boolean): Ajv {
  // inlineRefs off: each shared sub-schema is one function, not a copy per use (config/hoist.ts);
  // discriminated unions validate only the branch their tag names (config/discriminate.ts).
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes: true,
    strict: false,
    useDefaults: false,
    inlineRefs: false,
    discriminator: true,
    ...(source ? { code: { source: true } } : {}),
  });
  ajv.addKeyword('x-svc-kind');
  return ajv;
}

/**
 * The validator of a schema: from memory, else the precompiled module of the same schema in
 * `dir`, else compiled now.
 * @param schema the assembled config schema (or one block of it)
 * @param dir where precompiled validators are looked up (default {@link PRECOMPILED_DIR})
 */
export function validatorFor(schema: TObject, dir: string = PRECOMPILED_DIR): ConfigValidator {
  const file = join(dir, precompiledName(JSON.stringify(schema)));
  const known = validators.get(file);
  if (known) return known;
  let form: unknown;
  const compiled = () => (form ??= compiledForm(schema));
  const validate = existsSync(file) ? (requireHere(file) as { default: ValidateFunction }).default : newAjv(false).compile(compiled() as object);
  const v: ConfigValidator = { validate, compiled };
  validators.set(file, v);
  return v;
}

/**
 * The source of a standalone CommonJS module exporting a schema's validator (its `default`), for
 * `npm run build` to write as {@link precompiledName} under {@link PRECOMPILED_DIR}. It requires
 * only Ajv's runtime helpers (`ajv/dist/runtime/*`), a dependency of svc.
 * @param schema the assembled config schema
 */
export async function precompiledSource(schema: TObject): Promise<string> {
  const { default: standalone } = (await import('ajv/dist/standalone/index.js')) as unknown as {
    default: { default: (ajv: Ajv, v: ValidateFunction) => string };
  };
  const ajv = newAjv(true);
  return standalone.default(ajv, ajv.compile(compiledForm(schema) as object));
}
