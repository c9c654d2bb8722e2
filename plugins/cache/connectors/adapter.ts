/**
 * `driver: keyv`: a keyv storage adapter named by its package, loaded the way
 * presets are (from the working directory, honouring the package's `exports`, then from svc's own
 * installation), so a team runs the cache on the store it already has: `npm install
 * @keyv/memcache` next to its svc config and name it.
 */
import { createRequire } from 'node:module';
import { join, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import { resolve as resolveModule } from 'import-meta-resolve';
import type { KeyvStoreAdapter } from 'keyv';

/** The `keyv` block of a connector (resolved). */
export interface KeyvAdapterConfig {
  /** Package name (`@keyv/memcache`) or module path of the adapter. */
  adapter: string;
  /** Connection URI, passed as the adapter's first argument (never logged). */
  uri?: string;
  /** The adapter's options (its own documented shape). */
  options?: Record<string, unknown>;
}

type AdapterClass = new (...args: unknown[]) => KeyvStoreAdapter;

/** memjs's logger, silenced: it logs `MemJS: Server <host:port> failed...` to the console, address included. */
const SILENT_MEMJS_LOGGER = Object.freeze({ log: (): void => undefined });

/**
 * Options svc sets on known adapters unless the config sets them (the config's own `options`
 * win key by key):
 * - `@keyv/memcache`: memjs's `logger` silenced (svc's tier reporter logs failures, rate-limited
 *   and with the address redacted);
 * - `@keyv/valkey`: `useRedisSets: false` (with sets, every key is also added to one namespace
 *   set that only `clear()` ever empties: it grows without bound) and `enableOfflineQueue: false`
 *   (while disconnected, iovalkey would queue every command in memory until it reconnects;
 *   refused at once, a read is a miss and the breaker sees the failure).
 */
export const ADAPTER_DEFAULTS: Readonly<Record<string, Readonly<Record<string, unknown>>>> = Object.freeze({
  '@keyv/memcache': { logger: SILENT_MEMJS_LOGGER },
  '@keyv/valkey': { useRedisSets: false, enableOfflineQueue: false },
});

/**
 * Turns @keyv/memcache's miss (`{value: undefined, expires: 0}`, which keyv takes for an expired
 * entry and answers with a `delete` round trip) into a plain `undefined`: a miss costs one
 * memcached round trip, not two. Any adapter answering that shape gets the same treatment.
 */
function withPlainMisses(store: KeyvStoreAdapter): KeyvStoreAdapter {
  const get = store.get.bind(store) as (key: string) => Promise<unknown>;
  (store as { get: (key: string) => Promise<unknown> }).get = async (key: string) => {
    const v = await get(key);
    if (v !== null && typeof v === 'object' && (v as { value?: unknown }).value === undefined && (v as { expires?: unknown }).expires === 0) return undefined;
    return v;
  };
  return store;
}

/** Whether a value is a class or function that builds an adapter. */
function isCtor(v: unknown): v is AdapterClass {
  return typeof v === 'function';
}

/**
 * The URL of the adapter module: from the working directory first, then from svc itself.
 * @throws Error naming the package and each place tried
 */
export function resolveAdapter(name: string, from: string = process.cwd()): string {
  if (name.startsWith('.') || name.startsWith('/')) return pathToFileURL(resolvePath(from, name)).href;
  const tried: string[] = [];
  for (const base of [pathToFileURL(join(resolvePath(from), 'package.json')).href, import.meta.url]) {
    try {
      return resolveModule(name, base);
    } catch (e) {
      tried.push((e as Error).message.split('\n')[0] ?? String(e));
    }
    // A CommonJS-only package without `exports` for import conditions: ask require.
    try {
      return pathToFileURL(createRequire(base).resolve(name)).href;
    } catch {
      /* tried above */
    }
  }
  throw new Error(`keyv adapter "${name}" is not installed (run \`npm install ${name}\` where svc runs); tried: ${tried.join('; ')}`);
}

/**
 * Loads and builds the adapter. The class is the module's default export, else its first
 * export named `Keyv<Something>`. Arguments follow keyv adapters' conventions: with `uri` and
 * `options`, `new A(uri, options)` when the constructor declares two parameters (@keyv/memcache,
 * @keyv/valkey, @keyv/etcd) and `new A({...options, uri})` otherwise (@keyv/sqlite,
 * @keyv/postgres, @keyv/mysql); with one of them, that one. Known adapters get
 * {@link ADAPTER_DEFAULTS} under the config's options, and every adapter's get answers a miss as
 * `undefined` (see withPlainMisses).
 * @throws Error when the package is missing or exports no adapter class
 */
export async function createAdapter(cfg: KeyvAdapterConfig, from?: string): Promise<KeyvStoreAdapter> {
  const url = resolveAdapter(cfg.adapter, from);
  const mod = (await import(url)) as Record<string, unknown>;
  const def = mod.default as unknown;
  const named = Object.entries(mod).find(([k, v]) => /^Keyv[A-Z]\w+$/.test(k) && isCtor(v))?.[1];
  const Ctor = isCtor(named)
    ? named
    : isCtor(def) && def.name !== 'Keyv'
      ? def
      : isCtor((def as { default?: unknown } | undefined)?.default)
        ? (def as { default: AdapterClass }).default
        : undefined;
  if (!Ctor) throw new Error(`keyv adapter "${cfg.adapter}" exports no adapter class (expected a default export or a Keyv<Name> export)`);
  const { uri } = cfg;
  const defaults = ADAPTER_DEFAULTS[cfg.adapter];
  const options = defaults ? { ...defaults, ...cfg.options } : cfg.options;
  let store: KeyvStoreAdapter;
  if (uri !== undefined && options !== undefined) store = Ctor.length >= 2 ? new Ctor(uri, options) : new Ctor({ ...options, uri });
  else if (uri !== undefined) store = new Ctor(uri);
  else store = options !== undefined ? new Ctor(options) : new Ctor();
  return withPlainMisses(store);
}
