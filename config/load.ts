/**
 * Config loading (docs/architecture.md): read YAML, JSON or a TypeScript
 * module, expand `${ENV}`, validate against the assembled schema with ajv, then resolve:
 * merge `networkDefaults`/`upstreamDefaults`, apply schema defaults, convert durations/sizes.
 */
import { readFile } from 'node:fs/promises';
import { extname, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import { problemsOf } from './problems.ts';
import type { TObject } from '@sinclair/typebox';
import { parse as parseYaml, YAMLError } from 'yaml';
import { buildConfigSchema, type SchemaFragment } from './schema.ts';
import { validatorFor } from './validator.ts';
import { forbiddenKeys, semanticProblems } from './checks.ts';
import { overrideProblems } from './overrides.ts';
import { normalizeDocument, type NormalizeRewrite } from './normalize.ts';

export type { NormalizeRewrite } from './normalize.ts';
import { CORE_NORMALIZERS } from './erpc.ts';
import { explainErpcKeys } from './erpc-keys.ts';
import { isPlainObject, resolveConfig } from './resolve.ts';

export {
  cloneConfig,
  convertKinds,
  directiveDefaultsOf,
  mergeDefaults,
  parseDuration,
  parseSize,
  resolveConfig,
  resolveNetwork,
  resolveUpstream,
} from './resolve.ts';

export { FORBIDDEN_KEYS, forbiddenKeys, RESERVED_PROJECT_IDS } from './checks.ts';
export type { AliasRule, ConfigProblem, DurationInput, NetworkInput, ProjectInput, ResolvedMetrics, SvcConfigInput } from './types.ts';
import type { ConfigProblem, ResolvedConfig, SvcConfigInput } from './types.ts';

/** Thrown when a config does not validate; carries every problem. */
export class ConfigError extends Error {
  /**
   * @param problems every problem found, each with its path
   * @param warnings what loading noticed before it failed (an unset `${VAR}` read as an empty
   *   string is often the cause of a problem reported elsewhere), printed with the problems
   */
  constructor(
    readonly problems: ConfigProblem[],
    readonly warnings: readonly string[] = [],
  ) {
    const lines = problems.map((p) => `  ${p.path || '(root)'}: ${p.message}`);
    super(`invalid config:\n${lines.join('\n')}${warnings.length ? `\nwarnings:\n${warnings.map((w) => `  ${w}`).join('\n')}` : ''}`);
    this.name = 'ConfigError';
  }
}

/**
 * Identity helper for TypeScript configs: `export default defineConfig({...})` gets types.
 * @param config the raw config
 */
export function defineConfig<T extends SvcConfigInput>(config: T): T {
  return config;
}

/**
 * Reads a config file. `.yaml`/`.yml` through `yaml`, `.json` through JSON.parse, `.ts`/`.mts`/`.js`/`.mjs`
 * as a module whose default export (or `config` export) is the config object.
 * @param opts `fresh`: import a module config anew rather than from the module cache (config reload)
 * @throws ConfigError when the file cannot be read or parsed
 */
export async function readConfigFile(file: string, opts: { fresh?: boolean } = {}): Promise<unknown> {
  const abs = resolvePath(file);
  const ext = extname(abs).toLowerCase();
  try {
    if (['.ts', '.mts', '.js', '.mjs', '.cts', '.cjs'].includes(ext)) {
      // A reload must see the file as it is now: the module cache would hand back the first
      // import (each reload of a module config keeps one more module in memory).
      const href = pathToFileURL(abs).href + (opts.fresh ? `?reload=${Date.now()}` : '');
      const mod = (await import(href)) as { default?: unknown; config?: unknown };
      const cfg = mod.default ?? mod.config;
      return typeof cfg === 'function' ? await (cfg as () => unknown)() : cfg;
    }
    const text = await readFile(abs, 'utf8');
    if (ext === '.json') return JSON.parse(text);
    // Warnings are not logged: the library's warning prints the offending line, which may hold a secret.
    return parseYaml(text, { logLevel: 'error' }) ?? {};
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    const where = syntaxErrorPlace(e);
    if (where) throw new ConfigError([{ path: '', message: `cannot load ${file}: ${where}` }]);
    throw new ConfigError([{ path: '', message: `cannot load ${file}: ${(e as Error).message}` }]);
  }
}

/**
 * Where a YAML or JSON syntax error lies, with nothing of the text (the parsers' own messages
 * quote the offending line, which may hold a secret: no credential in any output, as `svc_config`
 * redacts them, spec §4.4).
 * @param e what the parser threw
 * @returns `YAML syntax error at line L, column C (CODE)`, `JSON syntax error at ...`, or undefined for other errors
 */
export function syntaxErrorPlace(e: unknown): string | undefined {
  if (e instanceof YAMLError) {
    const at = e.linePos?.[0];
    return `YAML syntax error${at ? ` at line ${at.line}, column ${at.col}` : ''} (${e.code})`;
  }
  if (e instanceof SyntaxError) {
    // V8 names a position ("at position 16", or "(line 2 column 9)") and may quote the text around it.
    const lc = /line (\d+) column (\d+)/.exec(e.message);
    const pos = /position (\d+)/.exec(e.message);
    return `JSON syntax error${lc ? ` at line ${lc[1]}, column ${lc[2]}` : pos ? ` at offset ${pos[1]}` : ''}`;
  }
  return undefined;
}

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Expands `${VAR}` in every string of a raw config. An unset variable becomes empty with a
 * warning; numbers and booleans are coerced afterwards by validation.
 * @param doc raw config (not mutated)
 * @param warnings collects one line per unset variable
 * @param env environment to read (default `process.env`)
 */
export function expandEnv(doc: unknown, warnings: string[], env: NodeJS.ProcessEnv = process.env): unknown {
  if (typeof doc === 'string') {
    if (!doc.includes('${')) return doc;
    return doc.replace(ENV_REF, (_, name: string) => {
      const v = env[name];
      if (v === undefined) {
        warnings.push(`environment variable ${name} is not set; using an empty string`);
        return '';
      }
      return v;
    });
  }
  if (Array.isArray(doc)) return doc.map((d) => expandEnv(d, warnings, env));
  if (doc && typeof doc === 'object' && Object.getPrototypeOf(doc) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(doc)) out[k] = expandEnv(v, warnings, env);
    return out;
  }
  return doc;
}

/**
 * Validates an (env-expanded) raw config against a schema; coerces numeric/boolean strings
 * in place. Returns every problem, deduplicated, plus providers' overrides checked as upstream
 * settings (config/overrides.ts) and semantic checks (duplicate ids...).
 */
export function validateConfig(doc: unknown, schema: TObject): ConfigProblem[] {
  const problems = schemaProblems(doc, schema);
  if (problems.length === 0) problems.push(...overrideProblems(doc, schema), ...semanticProblems(doc as SvcConfigInput));
  return problems;
}

/**
 * The schema problems of a value (no semantic checks), with paths relative to it; coerces
 * numeric/boolean strings in place. Also used for one block a plugin checks itself (config/block.ts).
 */
export function schemaProblems(doc: unknown, schema: TObject): ConfigProblem[] {
  const { validate, compiled } = validatorFor(schema);
  return validate(doc) ? [] : problemsOf(validate.errors ?? [], compiled(), doc);
}

/** Everything needed to load a config: the plugins' fragments and the environment. */
export interface LoadOptions {
  fragments?: readonly SchemaFragment[];
  env?: NodeJS.ProcessEnv;
}

/** What {@link loadConfigObject} returns. */
export interface LoadedConfig {
  /** The resolved config. */
  config: ResolvedConfig;
  /** The assembled schema it was validated against. */
  schema: TObject;
  /** The document after `${ENV}` expansion and normalisation, as validated (`svc validate --print`). */
  document: Record<string, unknown>;
  /** Every load-time rewrite of another shape into svc's own (eRPC's, mostly), in order. */
  rewrites: NormalizeRewrite[];
}

/**
 * Expands, normalises (config/normalize.ts: eRPC's shapes into svc's), validates and resolves a
 * raw config object. An unknown key eRPC has but svc does not implement is reported with the
 * eRPC feature's name and svc's alternative (config/erpc-keys.ts).
 * @throws ConfigError with every problem when it does not validate
 */
export function loadConfigObject(raw: unknown, opts: LoadOptions = {}): LoadedConfig {
  const warnings: string[] = [];
  // Before anything copies the document: `__proto__` assigned on a plain object rewrites its prototype.
  const forbidden = forbiddenKeys(raw ?? {});
  if (forbidden.length) throw new ConfigError(forbidden);
  const doc = expandEnv(raw ?? {}, warnings, opts.env);
  const schema = buildConfigSchema(opts.fragments ?? []);
  if (!isPlainObject(doc)) throw new ConfigError([{ path: '', message: 'config must be an object' }]);
  // eRPC's shapes (and other accepted forms) become svc's own before validation (config/normalize.ts).
  const { rewrites, problems: refused } = normalizeDocument(doc, CORE_NORMALIZERS, opts.fragments ?? []);
  // A path a normaliser refused already has its message: the schema's line about it would repeat it.
  const covered = (path: string) => refused.some((r) => path === r.path || path.startsWith(`${r.path}.`) || path.startsWith(`${r.path}[`));
  const problems = [...refused, ...explainErpcKeys(validateConfig(doc, schema)).filter((p) => !covered(p.path))];
  if (problems.length) throw new ConfigError(problems, warnings);
  return { config: resolveConfig(doc as SvcConfigInput, schema, warnings), schema, document: doc, rewrites };
}
