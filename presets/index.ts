/**
 * `svc/presets` (issue #9 item 1): the built-in presets, every built-in plugin factory, and the
 * preset registry (`--preset NAME` or config `preset`). A preset is a function returning the
 * plugins to apply; platform teams extend `defaultPreset()` in their own package and point
 * `--preset` at it (a module path or package exporting `default` or `preset`), or register it
 * with {@link registerPreset}.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { Plugin } from '../core/proxy.ts';
import { defaultPreset } from './default.ts';
import { minimalPreset } from './minimal.ts';

export { defaultPreset, minimalPreset };
export { batchingPlugin } from '../plugins/batching/index.ts';
export { directivesPlugin } from '../plugins/directives/index.ts';
export { healthcheckPlugin } from '../plugins/healthcheck/index.ts';
export { tracingPlugin } from '../plugins/tracing/index.ts';
export { providersPlugin } from '../plugins/providers/index.ts';
export { repositoryVendorPlugin } from '../plugins/vendor-repository/index.ts';
export { hyperVendorPlugin } from '../plugins/vendor-hyper/index.ts';
export { costPlugin } from '../plugins/cost/index.ts';
export { evmGetLogsPlugin } from '../plugins/evm-getlogs/index.ts';
export { evmInterpolationPlugin } from '../plugins/evm-interpolation/index.ts';
export { evmMethodsPlugin } from '../plugins/evm-methods/index.ts';
export { evmRetriesPlugin } from '../plugins/evm-retries/index.ts';
export { evmStatePlugin } from '../plugins/evm-state/index.ts';
export { failsafePlugin } from '../plugins/failsafe/index.ts';
export { forwardPlugin } from '../plugins/forward/index.ts';
export { headersPlugin } from '../plugins/headers/index.ts';
export { healthPlugin } from '../plugins/health/index.ts';
export { metricsPlugin } from '../plugins/metrics/index.ts';
export { multiplexPlugin } from '../plugins/multiplex/index.ts';
export { cachePlugin, CACHE_SERVICE, type CacheService } from '../plugins/cache/index.ts';
export { consensusPlugin } from '../plugins/consensus/index.ts';
export { integrityPlugin } from '../plugins/integrity/index.ts';
export { shadowPlugin } from '../plugins/shadow/index.ts';
export { selectPlugin } from '../plugins/select/index.ts';
export { selectionPlugin } from '../plugins/selection/index.ts';

/** A preset: the plugins of one server flavour. */
export type Preset = () => Plugin[];

const presets = new Map<string, Preset>([
  ['default', defaultPreset],
  ['minimal', minimalPreset],
]);

/** Registers a named preset (in-house presets per environment). */
export function registerPreset(name: string, preset: Preset): void {
  presets.set(name, preset);
}

/** Names of the registered presets. */
export function presetNames(): string[] {
  return [...presets.keys()];
}

/**
 * Resolves a preset by name, or by module path (`./presets/staging.ts`) exporting `default` or `preset`.
 * @throws Error naming the known presets when it is unknown
 */
export async function loadPreset(name = 'default'): Promise<Preset> {
  const known = presets.get(name);
  if (known) return known;
  if (/[./\\]/.test(name)) {
    const mod = (await import(pathToFileURL(resolve(name)).href)) as { default?: Preset; preset?: Preset };
    const p = mod.default ?? mod.preset;
    if (typeof p === 'function') return p;
    throw new Error(`preset module ${name} exports no default or preset function`);
  }
  throw new Error(`unknown preset "${name}" (known: ${presetNames().join(', ')})`);
}
