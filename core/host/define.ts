/**
 * `definePlugin` and `definePreset`: typed identity helpers for plugin and preset authors, the
 * plugin-side match of `defineConfig` (svc/config). In TypeScript they check the object against
 * the contract where it is written; in plain JavaScript an editor (or `tsc --checkJs`) infers
 * `host`, hook handler arguments and the preset's return type from them, with no hand-written
 * `.d.ts` and no JSDoc.
 */
import type { Plugin } from './host.ts';

/**
 * A preset: the plugins of one server flavour, in apply order. Called once per start (and once
 * per `svc validate` / `svc config schema`), so it returns new plugin objects each time.
 */
export type Preset = () => Plugin[];

/**
 * Returns its argument unchanged, typed as a {@link Plugin}: the literal's own type is kept (its
 * `schema` properties stay precise, for `settingsOf`), and `apply(host)` gets `host` typed.
 * @param plugin the plugin object
 * @returns the same object
 */
export function definePlugin<const P extends Plugin>(plugin: P): P {
  return plugin;
}

/**
 * Returns its argument unchanged, typed as a {@link Preset}: the default export of a preset
 * module or package (`svc start --preset @acme/svc-preset`).
 * @param preset the preset function
 * @returns the same function
 */
export function definePreset<P extends Preset>(preset: P): P {
  return preset;
}
