/**
 * `svc-proxy/plugin/errors`: svc's named errors, recognised across installed copies of svc by brand and name (see {@link SvcError}), and the
 * helpers that map them to JSON-RPC errors: a plugin throws them to fail a call with a stable code. Versioned with svc like `svc-proxy/plugin`.
 */
export * from './wire/errors.ts';
export { isPassThrough, toJsonRpcError, wireError, type JsonRpcErrorObject } from './wire/errors-wire.ts';
export { PluginContractError, PluginDependencyError } from './host/host.ts';
export { ConfigError, type ConfigProblem } from '../config/load.ts';
export { StorageUnavailableError } from '../lib/storage-breaker.ts';
