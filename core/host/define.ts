/**
 * Typed identity helpers for plugin and preset authors (the match of `defineConfig`): TypeScript checks the object where it is written, and
 * in plain JavaScript an editor (or `tsc --checkJs`) infers `host` and hook handler arguments from them, with no `.d.ts` and no JSDoc.
 */
import type { Plugin } from './host.ts';

/** A preset: the plugins of one server flavour, in apply order; called once per start, `svc validate` or `svc config schema`, so new objects each time. */
export type Preset = () => Plugin[];

/** Returns its argument unchanged, typed as a {@link Plugin}: its own type is kept (`schema` precise, for `settingsOf`), `host` typed in `apply`. */
export function definePlugin<const P extends Plugin>(plugin: P): P {
  return plugin;
}

/** Returns its argument unchanged, typed as a {@link Preset}: the default export of a preset module (`svc start --preset @acme/svc-preset`). */
export function definePreset<P extends Preset>(preset: P): P {
  return preset;
}
