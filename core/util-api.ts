/**
 * `svc-proxy/util`: generic utilities svc's plugins share, so a plugin honours the same rules (linear-time globs, redaction, bounded labels,
 * breakers...) without writing its own. Nothing here knows about the request pipeline. Versioned with svc like `svc-proxy/plugin`.
 */
export { compileGlobs, type GlobTest } from '../lib/glob.ts';
export { MatcherCache, MAX_CLIENT_PATTERN_LENGTH, type Matcher } from '../lib/matcher.ts';
export { acquireController, linkedController, releaseController, sleep, type LinkedController } from '../lib/abort.ts';
export { type BreakerState, CountBreaker, type CountBreakerSettings } from '../lib/breaker.ts';
export { hedge, type HedgeOptions } from '../lib/hedge.ts';
export { backoffDelay, type Backoff } from '../lib/backoff.ts';
export { addressList, inList } from '../lib/client-address.ts';
export { readRequestBody } from './http/http-io.ts';
export { arrayElements, extractTopLevelValue, type ScannedElement } from '../lib/json-scan.ts';
export { excerptOf, redactText, redactTree, redactUrl, secretsOf, type Redactor } from '../lib/redact.ts';
export { closeRedisClient, openRedisClient, type RedisClient } from '../lib/redis.ts';
export {
  StorageBreaker,
  StorageBreakerSchema,
  type StorageBreakerOptions,
  type StorageBreakerSettings,
  type StorageBreakerState,
} from '../lib/storage-breaker.ts';
export { agentName, BoundedLabel, MAX_LABEL_LENGTH } from '../lib/labels.ts';
export { DeferredCounter, DeferredHistogram, type HistogramCell, type Sample } from '../lib/deferred-metrics.ts';
export { canonicalHash, canonicalize, compileIgnorePaths, DEFAULT_IGNORE_FIELDS, firstDifference, isEmptyResult, type IgnorePaths } from '../lib/canonical.ts';
export {
  BLOCK_PARAM,
  blockRefOf,
  classifyFinality,
  FINALIZED_METHODS,
  highestNumberOf,
  parseBlockNumber,
  REALTIME_METHODS,
  refOf,
  STATEFUL_METHODS,
  toHex,
  WRITE_METHODS,
  type BlockRef,
} from '../lib/evm/blocks.ts';
export {
  broadcastToWorkers,
  claimInPrimary,
  fleetReplicaId,
  onWorkerBroadcast,
  registerFleetRelay,
  svcWorker,
  type FleetRelay,
  type FleetRelayRegistration,
  type WorkerInfo,
} from '../lib/cluster.ts';
export { ClaimSet, type ClaimOutcome } from '../lib/claim-set.ts';
export { primaryValues, type PrimaryValues } from '../lib/primary-values.ts';
export { createMetricsServer, type MetricsSource } from '../lib/metrics-listener.ts';
