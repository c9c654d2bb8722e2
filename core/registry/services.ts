/**
 * Typed service keys and the service registry contract (docs/plugins.md, "Services"), plugins publishing services by key instead of
 * module-level state. The lowest part of the plugin contract: registry, pipeline and host use it, and it uses nothing of theirs.
 */

/** A plugin broke the contract: a missing dependency, a duplicate name, a version mismatch, a config read too early. */
export class PluginContractError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PluginContractError';
  }
}

/**
 * The typed key of a service (made with {@link serviceKey}): `provide(KEY, impl)` checks `impl` against its type, `get`/`require` need
 * no cast. At run time services meet by {@link ServiceKey.name}, so a plugin built against another installed copy of svc reaches the
 * same service. Declare a shared key once, next to its service interface (`svc-proxy/plugins/<name>` for a built-in).
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
        `service key "${name}" is declared twice (declare a key once and import it; built-in contract keys are exported from svc-proxy/plugin)`,
      );
    declaredKeys.add(name);
    return new ServiceKey<T>(name);
  }

  /** The key's name, as in messages. */
  toString(): string {
    return this.name;
  }
}

/** A key of any service, as in `provides` and `needs`: {@link ServiceKey} is invariant in its type, so a mixed list is typed by the name alone. */
export type AnyServiceKey = Pick<ServiceKey<unknown>, 'name'>;

const declaredKeys = new Set<string>();

/**
 * Declares a service's typed key, once per name, at module level: `export const ACME_SERVICE = serviceKey<AcmeService>('acme')`.
 * @param name unique name (convention: the providing plugin's name)
 * @throws PluginContractError when a key of that name is declared already (two declarations could disagree on the type)
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
