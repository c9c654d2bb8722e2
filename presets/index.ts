/**
 * Preset registry: `--preset NAME` or config `preset`. A preset is a function returning the
 * plugins to apply; platform teams add theirs with {@link registerPreset} or point `--preset`
 * at a module path exporting `default` or `preset`.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { Plugin } from '../core/proxy.ts';
import { defaultPreset } from './default.ts';
import { minimalPreset } from './minimal.ts';

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
