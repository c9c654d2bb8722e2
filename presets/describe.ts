/**
 * What the start-up log says about the running preset: its name, where it was found, and every
 * plugin with its version and the config keys it owns (from its schema fragment), so an
 * operator reading one log line knows which code serves and which keys it reads.
 */
import type { SchemaFragment } from '../config/schema.ts';
import type { Plugin } from '../core/host/host.ts';
import type { ResolvedPreset } from './index.ts';

/** Where each fragment slot sits in the config file, as the config reference writes paths. */
const SLOT_PATHS: Readonly<Record<Exclude<keyof SchemaFragment, 'extend' | 'normalize' | 'endpointSchemes'>, string>> = {
  root: '',
  server: 'server.',
  project: 'projects[].',
  network: 'projects[].networks[].',
  networkEvm: 'projects[].networks[].evm.',
  upstream: 'projects[].upstreams[].',
  upstreamEvm: 'projects[].upstreams[].evm.',
  directiveDefaults: 'projects[].networks[].directiveDefaults.',
};

/**
 * The config keys a schema fragment adds, as config paths (`server.costHeaders`,
 * `projects[].upstreams[].failsafe`, `admin`): the top-level key of each property, not what is
 * nested under it.
 * @param fragment a plugin's schema fragment, or undefined
 */
export function configKeysOf(fragment: SchemaFragment | undefined): string[] {
  if (!fragment) return [];
  const out: string[] = [];
  for (const slot of Object.keys(SLOT_PATHS) as (keyof typeof SLOT_PATHS)[]) {
    for (const k of Object.keys(fragment[slot] ?? {})) out.push(`${SLOT_PATHS[slot]}${k}`);
  }
  // Keys added to another plugin's object: `<extension point>.<key>` (points are named by their place in the file).
  for (const [point, props] of Object.entries(fragment.extend ?? {})) for (const k of Object.keys(props)) out.push(`${point}.${k}`);
  return out;
}

/** One plugin in the start-up log. */
export interface PluginSummary {
  /** The plugin's name. */
  name: string;
  /** Its declared version; built-in plugins carry svc's; `null` when the plugin declares none. */
  version: string | null;
  /** Config keys it owns (see {@link configKeysOf}). */
  config: string[];
}

/** Fields of the start-up log line naming the preset (see {@link presetLogLine}). */
export interface PresetLog {
  /** The preset's name, where it was found, and its module file (package or path). */
  preset: { name: string; source: ResolvedPreset['source']; file?: string };
  /** Every applied plugin, in apply order. */
  plugins: PluginSummary[];
}

/**
 * The fields and message of the one info line svc logs at start-up about its preset.
 * @param resolved the preset as resolved
 * @param plugins the plugins it returned (and svc applied)
 * @returns pino fields and a message such as `preset @acme/svc-preset (package /app/node_modules/@acme/svc-preset/dist/index.js): 30 plugins`
 */
export function presetLogLine(resolved: Pick<ResolvedPreset, 'name' | 'source' | 'file'>, plugins: readonly Plugin[]): { fields: PresetLog; message: string } {
  const summaries = plugins.map((p) => ({ name: p.name, version: p.version ?? null, config: configKeysOf(p.schema) }));
  const where = resolved.file ? `${resolved.source} ${resolved.file}` : resolved.source;
  return {
    fields: { preset: { name: resolved.name, source: resolved.source, ...(resolved.file ? { file: resolved.file } : {}) }, plugins: summaries },
    message: `preset ${resolved.name} (${where}): ${plugins.length} plugins: ${summaries.map((s) => `${s.name}@${s.version ?? 'unversioned'}`).join(', ')}`,
  };
}
