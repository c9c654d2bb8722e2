/**
 * `svc/plugin/errors`: svc's named errors and the helpers that map them to JSON-RPC errors.
 *
 * Every class here is recognised across installed copies of svc by brand and name (see
 * {@link SvcError}); a plugin throws them to fail a call with a stable JSON-RPC code, and reads
 * them with `instanceof` or their `is` helpers. Versioned with svc like `svc/plugin`.
 */
export * from './wire/errors.ts';
export { isPassThrough, toJsonRpcError, wireError, type JsonRpcErrorObject } from './wire/errors-wire.ts';
export { PluginContractError, PluginDependencyError } from './host/host.ts';
export { ConfigError, type ConfigProblem } from '../config/load.ts';
export { StorageUnavailableError } from '../lib/storage-breaker.ts';
