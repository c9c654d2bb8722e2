/**
 * `svc-proxy/presets`: the built-in presets, every built-in plugin factory, and the
 * preset lookup (`--preset NAME` or config `preset`). A preset is a function returning the
 * plugins to apply; platform teams extend `defaultPreset()` in their own package and point
 * `--preset` at it: a package name (`@acme/svc-preset`, `@acme/svc-plugins/preset`), resolved
 * with Node's resolution from the working directory, or a module path; or they register it
 * with {@link registerPreset}.
 */
import { statSync } from 'node:fs';
import { isAbsolute, join, resolve as resolvePath } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolve as resolveModule } from 'import-meta-resolve';
import type { Preset } from '../core/host/define.ts';
import type { Plugin } from '../core/host/host.ts';
import { VERSION } from '../core/wire/version.ts';
import { defaultPreset as defaultPlugins } from './default.ts';
import { minimalPreset as minimalPlugins } from './minimal.ts';

export type { Preset };
export { batchingPlugin } from '../plugins/batching/index.ts';
export { bdsPlugin, BDS_SCHEMES } from '../plugins/bds/index.ts';
export { directivesPlugin } from '../plugins/directives/index.ts';
export { healthcheckPlugin } from '../plugins/healthcheck/index.ts';
export { tracingPlugin, type TracingPluginOptions } from '../plugins/tracing/index.ts';
export { providersPlugin } from '../plugins/providers/index.ts';
export { repositoryVendorPlugin, type RepositoryVendorOptions } from '../plugins/vendor-repository/index.ts';
export { hyperVendorPlugin, type HyperVendorOptions } from '../plugins/vendor-hyper/index.ts';
export { costPlugin, COST_SERVICE, type CostService, type PriceTable } from '../plugins/cost/index.ts';
export { evmGetLogsPlugin } from '../plugins/evm-getlogs/index.ts';
export { evmInterpolationPlugin, type EvmInterpolationOptions } from '../plugins/evm-interpolation/index.ts';
export { evmMethodsPlugin, type EvmMethodsPluginOptions } from '../plugins/evm-methods/index.ts';
export { evmNoncePlugin } from '../plugins/evm-nonce/index.ts';
export { filtersPlugin, ErrFilterNotFound, ErrFilterLimitExceeded, ErrFilterInvalidParams } from '../plugins/filters/index.ts';
export { broadcastPlugin, DEFAULT_BROADCAST_METHODS } from '../plugins/broadcast/index.ts';
export { contractRulesPlugin, ErrContractRuleRefused } from '../plugins/contract-rules/index.ts';
export { forwardHeadersPlugin } from '../plugins/forward-headers/index.ts';
export { evmErrorsPlugin } from '../plugins/evm-errors/index.ts';
export { outboundPlugin } from '../plugins/outbound/index.ts';
export { compressionPlugin } from '../plugins/compression/index.ts';
export { tlsPlugin, TlsFileError } from '../plugins/tls/index.ts';
export { evmRetriesPlugin } from '../plugins/evm-retries/index.ts';
export { evmAnswerSanityPlugin } from '../plugins/evm-answer-sanity/index.ts';
export { evmStatePlugin, type EvmStatePluginOptions } from '../plugins/evm-state/index.ts';
export { failsafePlugin, type FailsafePluginOptions } from '../plugins/failsafe/index.ts';
export { forwardPlugin } from '../plugins/forward/index.ts';
export { headersPlugin } from '../plugins/headers/index.ts';
export { healthPlugin } from '../plugins/health/index.ts';
export { metricsPlugin, type MetricsPluginOptions } from '../plugins/metrics/index.ts';
export { multiplexPlugin } from '../plugins/multiplex/index.ts';
export { staticResponsesPlugin } from '../plugins/static-responses/index.ts';
export {
  cachePlugin,
  CACHE_SERVICE,
  type CacheService,
  type CacheConfig,
  type CompressionSettings,
  type CacheEntry,
  type Connector,
  type ConnectorConfig,
  type ConnectorDriver,
  type PolicyConfig,
  type EmptyRule,
  type RemoteTierSettings,
  type CacheFailsafeEntry,
  type EntryBreakerSettings,
  type KeyvAdapterConfig,
} from '../plugins/cache/index.ts';
export { consensusPlugin, type ConsensusPluginOptions, type PunishClock } from '../plugins/consensus/index.ts';
export { integrityPlugin } from '../plugins/integrity/index.ts';
export { shadowPlugin, type ShadowPluginOptions } from '../plugins/shadow/index.ts';
export { selectPlugin, type SelectPluginOptions } from '../plugins/select/index.ts';
export { selectionPlugin, type SelectionPluginOptions } from '../plugins/selection/index.ts';
export { websocketPlugin } from '../plugins/websocket/index.ts';

/**
 * Gives every plugin that declares no version svc's own: built-in plugins ship with svc, so the
 * start-up log and boot errors name the version they came with.
 */
function stamped(plugins: Plugin[]): Plugin[] {
  for (const p of plugins) if (p.version === undefined && Object.isExtensible(p)) (p as { version?: string }).version = VERSION;
  return plugins;
}

/** Plugins of the full server, in apply order; each built-in one carries svc's version. */
export function defaultPreset(): Plugin[] {
  return stamped(defaultPlugins());
}

/** Plugins of the forwarding-only server (select, forward); each carries svc's version. */
export function minimalPreset(): Plugin[] {
  return stamped(minimalPlugins());
}

/** Where a preset came from: svc itself, {@link registerPreset}, an installed package, or a module path. */
export type PresetSource = 'built-in' | 'registered' | 'package' | 'file';

/** A preset found by {@link resolvePreset}, with where it was found (for the start-up log). */
export interface ResolvedPreset {
  /** The name as given: `default`, `@acme/svc-preset`, `./presets/staging.js`. */
  readonly name: string;
  /** Where it was found. */
  readonly source: PresetSource;
  /** The module file it was loaded from (absolute path), for `package` and `file`. */
  readonly file?: string;
  /** The preset function. */
  readonly preset: Preset;
}

/** Where {@link resolvePreset} looks for a package or a file. */
export interface PresetLookup {
  /**
   * Folders a package name is resolved from, in order (Node's resolution: `node_modules` up
   * from each folder, the package's `exports` honoured); the first one also anchors a relative
   * path. Default: the working directory. The CLI passes the working directory for `--preset`,
   * and the config file's folder then the working directory for `preset:` in a config file.
   */
  readonly from?: string | readonly string[];
}

const presets = new Map<string, { preset: Preset; source: PresetSource }>([
  ['default', { preset: defaultPreset, source: 'built-in' }],
  ['minimal', { preset: minimalPreset, source: 'built-in' }],
]);

/** Registers a named preset (in-house presets per environment); a name already taken is replaced. */
export function registerPreset(name: string, preset: Preset): void {
  presets.set(name, { preset, source: 'registered' });
}

/** Names of the built-in and registered presets. */
export function presetNames(): string[] {
  return [...presets.keys()];
}

/** A name that is a path, never a package: `./x`, `../x`, `/abs/x`, `C:\\x`. */
function isPath(name: string): boolean {
  return (
    name.startsWith('./') || name.startsWith('../') || name.startsWith('.\\') || name.startsWith('..\\') || name === '.' || name === '..' || isAbsolute(name)
  );
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Imports a preset module and returns its `default` (or named `preset`) function. */
async function importPreset(name: string, file: string): Promise<Preset> {
  let mod: { default?: unknown; preset?: unknown };
  try {
    mod = (await import(pathToFileURL(file).href)) as typeof mod;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ERR_UNKNOWN_FILE_EXTENSION' && /\.[mc]?ts$/i.test(file)) {
      throw new Error(`preset "${name}" (${file}) is TypeScript: install tsx in your project (npm i -D tsx) or compile it to JavaScript`);
    }
    throw new Error(`preset "${name}" (${file}) could not be loaded: ${err.message}`, { cause: e });
  }
  const p = typeof mod.default === 'function' ? mod.default : mod.preset;
  if (typeof p === 'function') return p as Preset;
  throw new Error(`preset "${name}" (${file}) exports no default or preset function`);
}

/**
 * Finds a preset by name, in order: a built-in (`default`, `minimal`) or registered name; an
 * installed package (`@acme/svc-preset`, `svc-preset-acme`, or a subpath such as
 * `@acme/svc-plugins/preset`), resolved with Node's ESM resolution from each `from` folder,
 * honouring the package's `exports`; a module path (`./x.js`, `../x.ts`, `/abs/x.js`), relative
 * to the first `from` folder. The module's default export (or its named `preset` export) is the
 * preset function.
 * @param name preset name, package name or path; default `default`
 * @param lookup folders to resolve from; default the working directory
 * @throws Error naming everything tried, when the name resolves nowhere; Error naming the file when the module fails to load or exports no function
 */
export async function resolvePreset(name = 'default', lookup: PresetLookup = {}): Promise<ResolvedPreset> {
  const known = presets.get(name);
  if (known) return { name, source: known.source, preset: known.preset };
  const from = lookup.from === undefined ? [process.cwd()] : typeof lookup.from === 'string' ? [lookup.from] : [...lookup.from];
  const dirs = [...new Set((from.length ? from : [process.cwd()]).map((d) => resolvePath(d)))];
  const tried = [`a built-in or registered preset: ${presetNames().join(', ')}`];
  if (!isPath(name)) {
    for (const dir of dirs) {
      let url: string;
      try {
        url = resolveModule(name, pathToFileURL(join(dir, 'package.json')).href);
      } catch (e) {
        tried.push(`the package "${name}" from ${dir}: ${(e as Error).message}`);
        continue;
      }
      const file = url.startsWith('file:') ? fileURLToPath(url) : undefined;
      if (file && isFile(file)) return { name, source: 'package', file, preset: await importPreset(name, file) };
      tried.push(`the package "${name}" from ${dir}: it resolves to ${file ?? url}, which is not a file`);
    }
  }
  const file = resolvePath(dirs[0]!, name);
  if (isFile(file)) return { name, source: 'file', file, preset: await importPreset(name, file) };
  tried.push(`the file ${file}: no such file`);
  throw new Error(`preset "${name}" not found; tried:\n${tried.map((t) => `  - ${t}`).join('\n')}`);
}

/**
 * Resolves a preset to its function (see {@link resolvePreset} for the order and the errors).
 * @param name preset name, package name or path; default `default`
 * @param lookup folders to resolve from; default the working directory
 */
export async function loadPreset(name = 'default', lookup: PresetLookup = {}): Promise<Preset> {
  return (await resolvePreset(name, lookup)).preset;
}
