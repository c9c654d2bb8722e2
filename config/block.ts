/**
 * One config block a plugin checks itself, at boot, against a schema the config schema does not
 * carry: an `auth` or `cors` block under a key another plugin owns (`admin.auth`, `admin.cors`,
 * `healthCheck.auth`), whose schema lives in the plugin behind the service that reads it. The
 * block gets what the loader gives every key: the same problem messages and paths as
 * `svc validate`, schema defaults, durations in ms and sizes in bytes.
 */
import { Value } from '@sinclair/typebox/value';
import type { Static, TObject } from '@sinclair/typebox';
import { cloneConfig, ConfigError, convertKinds, schemaProblems } from './load.ts';

/**
 * Validates and resolves one block of config.
 * @param schema the block's schema (a closed object, as a fragment would declare it)
 * @param raw the block as written (after `${ENV}` expansion, which the loader did); not mutated
 * @param path the block's config path, e.g. `admin.auth`: each problem is reported under it
 * @returns a copy with schema defaults filled, durations in ms and sizes in bytes (the static
 *   type is the schema's as written; read durations as numbers)
 * @throws ConfigError listing every problem with its full path
 *   (`admin.auth.strategies[0].secret.value: is required`)
 */
export function resolveConfigBlock<T extends TObject>(schema: T, raw: unknown, path: string): Static<T> {
  const doc = cloneConfig(raw);
  const problems = schemaProblems(doc, schema);
  if (problems.length > 0) throw new ConfigError(problems.map((p) => ({ path: joinPath(path, p.path), message: p.message })));
  return convertKinds(schema, Value.Default(schema, doc)) as Static<T>;
}

/** `admin.auth` + `strategies[0].type` → `admin.auth.strategies[0].type`. */
function joinPath(base: string, rest: string): string {
  if (!rest) return base;
  if (!base) return rest;
  return rest.startsWith('[') ? `${base}${rest}` : `${base}.${rest}`;
}
