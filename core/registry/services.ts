/**
 * Typed service keys and the service registry contract (docs/plugins.md, "Services"): how plugins
 * publish services to each other by key instead of module-level state, and the error a plugin
 * that breaks the contract gets. The lowest part of the plugin contract: the registry, the
 * pipeline and the host all use it, and it uses nothing of theirs.
 */

/** A plugin broke the contract: a missing dependency, a duplicate name, a version mismatch, a config read too early. */
export class PluginContractError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PluginContractError';
  }
}

/**
 * The typed key of a service: its name and, at compile time only, its type.
 * Make one with {@link serviceKey}; `host.services.provide(KEY, impl)` then checks `impl`
 * against the type, and `get(KEY)` / `require(KEY)` return it without a cast.
 *
 * At run time services meet by {@link ServiceKey.name}, so a plugin built against another
 * installed copy of svc (with its own key object of the same name) reaches the same service.
 * A key other plugins consume is declared once, next to its service interface, where they can
 * import it: the providing plugin's contract entry (`svc/plugins/<name>` for a built-in), the providing package
 * for an in-house one.
 */
export class ServiceKey<T> {
  /** Type marker only, never set: makes `ServiceKey<A>` and `ServiceKey<B>` incompatible. */
  declare protected readonly serviceType: (value: T) => T;

  /** @param name a dotted name unique in the process (convention: the providing plugin's name, then `.<what>`) */
  protected constructor(readonly name: string) {}

  /**
   * Declares a key; the one constructor behind {@link serviceKey}.
   * @throws PluginContractError when a key of that name was declared already in this copy of svc
   */
  static create<T>(name: string): ServiceKey<T> {
    if (typeof name !== 'string' || name === '') throw new PluginContractError('a service key needs a non-empty name');
    if (declaredKeys.has(name))
      throw new PluginContractError(
        `service key "${name}" is declared twice (declare a key once and import it; built-in contract keys are exported from svc/plugin)`,
      );
    declaredKeys.add(name);
    return new ServiceKey<T>(name);
  }

  /** The key's name, as in messages. */
  toString(): string {
    return this.name;
  }
}

/**
 * A key of any service, as a plugin lists it in `provides` and `needs`: {@link ServiceKey} is
 * invariant in its service type (so `provide` and `get` stay typed), hence a list of keys of
 * different services is typed by what they share, the name services meet by.
 */
export type AnyServiceKey = Pick<ServiceKey<unknown>, 'name'>;

/** Names of the service keys declared in this copy of svc (each once). */
const declaredKeys = new Set<string>();

/**
 * Declares the typed key of a service, once per name (module level, next to the service's
 * interface): `export const ACME_SERVICE = serviceKey<AcmeService>('acme')`.
 * @param name unique name (convention: the providing plugin's name)
 * @throws PluginContractError when a key of that name is declared already (two declarations
 *   could disagree on the type, which is what typed keys rule out)
 */
export function serviceKey<T>(name: string): ServiceKey<T> {
  return ServiceKey.create<T>(name);
}

/** Services plugins publish to each other, by typed key (not module-level state). */
export interface ServiceRegistry {
  /**
   * Publishes a service under its key (in `apply`, so consumers find it from `configured` on).
   * @throws PluginContractError when the key is provided already, naming both plugins
   */
  provide<T>(key: ServiceKey<T>, service: T): void;
  /** The service published under a key, or undefined (its plugin is not in the preset). */
  get<T>(key: ServiceKey<T>): T | undefined;
  /**
   * The service published under a key.
   * @throws PluginContractError when nothing is published under it
   */
  require<T>(key: ServiceKey<T>): T;
}
