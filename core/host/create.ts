/** `createProxy`: the one way the CLI, the bench and the tests build svc (the config validated before any plugin applies). */
import { fragmentCollisions, type SchemaFragment } from '../../config/schema.ts';
import { loadConfigObject } from '../../config/load.ts';
import { PluginContractError, type Plugin } from './host.ts';
import { Proxy, type ProxyOptions } from './proxy.ts';

/** Options of {@link createProxy}. */
export interface CreateProxyOptions extends ProxyOptions {
  /** Raw config object (YAML/JSON/TS already read). */
  config?: unknown;
  /** Plugins (usually a preset's). Their schema fragments join the config schema. */
  plugins: Plugin[];
  /** Environment for `${ENV}` expansion. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Validates a raw config against the core schema plus the plugins' fragments, builds the proxy and applies the plugins; does not start it.
 * @throws ConfigError listing every problem with its path
 * @throws PluginContractError when two owners define one config key, or a plugin breaks the contract
 */
export function createProxy(opts: CreateProxyOptions): Proxy {
  const collisions = fragmentCollisions(opts.plugins.filter((p) => p.schema).map((p) => ({ owner: p.name, fragment: p.schema as SchemaFragment })));
  if (collisions.length) throw new PluginContractError(collisions.join('; '));
  const { config, schema } = loadConfigObject(opts.config ?? {}, {
    fragments: opts.plugins.map((p) => p.schema).filter((s): s is SchemaFragment => !!s),
    env: opts.env,
  });
  const proxy = new Proxy(config, { ...opts, schema });
  proxy.use(...opts.plugins);
  proxy.configure();
  return proxy;
}
