/**
 * Typed plugin settings: a plugin reads the keys its schema fragment declares with their
 * TypeBox static types, instead of casting `config.server.settings.x as ...`.
 *
 * Plugin-owned keys are carried, validated, defaulted and converted, in each resolved node's
 * `settings` (config/types.ts): the whole config (`root` keys), `config.server`
 * (`server` keys), each resolved project, network and upstream. {@link settingsOf} gives a
 * typed view of one node for the properties of one fragment slot; {@link Resolved} is the type
 * of a value after resolution: durations in milliseconds and sizes in bytes (numbers), objects
 * and arrays walked, everything else TypeBox's `Static`.
 */
import type { Static, TArray, TObject, TOptional, TProperties, TSchema } from '@sinclair/typebox';

/**
 * The value type of properties after resolution (see {@link Resolved}): keys declared with
 * `Type.Optional` stay optional, even when they have a schema default (the default is applied at
 * run time, so such a key is always present; the type follows the declaration).
 */
export type ResolvedProperties<P extends TProperties> = {
  [K in keyof P as P[K] extends TOptional<TSchema> ? never : K]: Resolved<P[K]>;
} & {
  [K in keyof P as P[K] extends TOptional<TSchema> ? K : never]?: Resolved<P[K]>;
};

/**
 * The value type of one schema after config resolution: `Duration()` fields are numbers of
 * milliseconds and `Size()` fields numbers of bytes (the loader converts them); objects and
 * arrays are walked so nested durations and sizes are numbers too; any other schema is
 * TypeBox's `Static`.
 */
export type Resolved<T extends TSchema> = T extends { readonly 'x-svc-kind': 'duration' | 'size' }
  ? number
  : T extends TObject<infer P>
    ? ResolvedProperties<P>
    : T extends TArray<infer I>
      ? Resolved<I>[]
      : Static<T>;

/** A resolved config node that carries plugin-owned keys: the config, `config.server`, a project, network or upstream. */
export interface SettingsHolder {
  /** The node's keys, validated, defaulted and converted (durations in ms, sizes in bytes). */
  readonly settings: Readonly<Record<string, unknown>>;
}

/**
 * The typed view {@link settingsOf} returns: every key of a fragment slot is optional, since the
 * config may leave out any plugin key (keys with a schema default are filled in at run time, so
 * those are always present); what is under a key follows its declaration ({@link Resolved}).
 */
export type FragmentSettings<P extends TProperties> = { [K in keyof P]?: Resolved<P[K]> };

/**
 * A typed view of a resolved node's plugin-owned keys. No copy is made: the view is the node's
 * own `settings` object, typed by the properties the plugin declared, so it costs nothing and
 * may be read on the hot path. Call it from the `configured` hook on (config is not final in
 * `apply`).
 *
 * Which node goes with which fragment slot: `root` → the config, `server` → `config.server`,
 * `project` → a resolved project, `network` → a resolved network, `upstream` → a resolved
 * upstream. For `networkEvm` / `upstreamEvm` keys, read the node's `settings.evm` with the same
 * types ({@link ResolvedProperties}).
 *
 * @example
 * ```ts
 * const schema = { server: { acmePricing: Type.Optional(Type.Object({ unitPrice: Type.Number() })) } } satisfies SchemaFragment;
 * host.hooks.configured.tap('acme-pricing', (config) => {
 *   const price = settingsOf(config.server, schema.server).acmePricing?.unitPrice; // number | undefined
 * });
 * ```
 * @param node the resolved node holding the keys
 * @param props the plugin's properties for that node (the fragment slot it declared), used for the type only
 * @returns the node's settings, typed as the resolved values of `props` (see {@link FragmentSettings})
 */
export function settingsOf<P extends TProperties>(node: SettingsHolder, props: P): FragmentSettings<P> {
  void props;
  return node.settings as FragmentSettings<P>;
}
