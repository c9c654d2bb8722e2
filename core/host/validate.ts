/** Whole-config validation without serving (`svc validate`, config reload): on fresh plugin instances, exactly as at start. */
import type { ResolvedConfig } from '../../config/types.ts';
import { createLogger } from '../../lib/logger.ts';
import { createProxy, type CreateProxyOptions } from './create.ts';

/**
 * Validates a raw config as a start would (schema, fragments, `config` hooks, `configured` checks), then releases what the checks opened.
 * @param opts the raw config, fresh plugin instances (a preset's factory called anew), env
 * @returns the resolved config after every `config` hook ran
 * @throws ConfigError listing every problem with its path (the messages `svc validate` prints)
 * @throws PluginContractError when the plugins break the contract
 */
export async function validateConfig(opts: Pick<CreateProxyOptions, 'config' | 'plugins' | 'env' | 'schema'>): Promise<ResolvedConfig> {
  const proxy = createProxy({ ...opts, logger: createLogger('silent') });
  try {
    return proxy.config;
  } finally {
    // Plugins may open connections while checking (a store's client): closed again here.
    await proxy.close().catch(() => undefined);
  }
}
