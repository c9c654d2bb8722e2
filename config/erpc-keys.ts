/**
 * eRPC's EVM config keys and what svc does with each (the migration page, docs/migrating-from-erpc.md,
 * is generated from these tables). svc never accepts a key it does not honour: a key eRPC has and
 * svc does not implement fails validation like any unknown key, and {@link explainErpcKeys} turns
 * that "unknown key" into a message naming the eRPC feature and svc's alternative.
 *
 * Paths are canonical: list items as `[]`, and `networkDefaults` / `upstreamDefaults` written as
 * `networks[]` / `upstreams[]` (they take the same keys).
 */
import type { ConfigProblem } from './types.ts';
import { ERPC_KEY_PATHS } from './erpc-key-list.ts';

export { ERPC_KEY_PATHS };

/** A key eRPC has that svc refuses: the eRPC feature and what to do instead. */
export interface ErpcRefusal {
  /** The eRPC feature, in a few words. */
  feature: string;
  /** svc's alternative (or why there is none). */
  instead: string;
}

/**
 * eRPC keys svc does not implement, by canonical path. A path covers every key below it.
 * (Keys other parts of svc add later are accepted by the schema first and never reach this table.)
 */
export const ERPC_REFUSED: Readonly<Record<string, ErpcRefusal>> = {
  'server.listenV6': {
    feature: 'a second, IPv6 listener',
    instead: 'svc has one listener: set `server.httpHost: "::"` to listen on IPv6 (and IPv4 on dual-stack hosts)',
  },
  'server.httpHostV6': { feature: 'a second, IPv6 listener', instead: 'svc has one listener: set `server.httpHost: "::"`' },
  'server.httpPortV6': { feature: 'a second, IPv6 listener', instead: 'svc has one listener: `server.httpPort`' },
  'server.grpcEnabled': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcHostV4': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcPortV4': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcHostV6': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcPortV6': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcMaxRecvMsgSize': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcMaxSendMsgSize': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.grpcReflection': { feature: 'the gRPC server', instead: 'svc serves JSON-RPC over HTTP only' },
  'server.writeTimeout': {
    feature: 'the HTTP write timeout',
    instead: 'a call is bounded by `server.maxTimeout` (and its failsafe timeouts); slow readers by `server.keepAliveTimeout`',
  },
  'admin.allowMethods': { feature: 'admin method allow/deny lists', instead: 'the admin endpoint serves only its own methods; guard it with `admin.auth`' },
  'admin.denyMethods': { feature: 'admin method allow/deny lists', instead: 'the admin endpoint serves only its own methods; guard it with `admin.auth`' },
  'database.evmJsonRpcCache.connectors[].memory.emitMetrics': {
    feature: 'per-connector memory metrics',
    instead: 'the cache metrics (`svc_cache_*`) cover every connector',
  },
  'database.evmJsonRpcCache.connectors[].postgresql.minConns': {
    feature: 'a minimum PostgreSQL pool size',
    instead: 'svc opens connections on demand, up to `maxConns`',
  },
  'database.evmJsonRpcCache.connectors[].postgresql.initTimeout': {
    feature: 'the PostgreSQL connect timeout',
    instead: 'each operation is bounded by `readTimeout`/`writeTimeout`',
  },
  'database.evmJsonRpcCache.connectors[].postgresql.iamAuth': { feature: 'AWS IAM authentication for RDS', instead: 'put a password in `connectionUri`' },
  'database.evmJsonRpcCache.connectors[].postgresql.skipSchemaSetup': {
    feature: 'skipping table creation',
    instead: 'svc creates its table when missing; create it beforehand if the user may not',
  },
  'projects[].networks[].evm.integrity': {
    feature: 'the legacy evm.integrity switches',
    instead: 'the `enforce-highest-block` / `enforce-non-null-tagged-blocks` / `enforce-getlogs-range` directive defaults',
  },
  'projects[].upstreams[].evm.integrity': {
    feature: 'per-upstream receipt integrity checks',
    instead: "the network `integrity` block checks every upstream's answers",
  },
  'database.evmJsonRpcCache.connectors[].grpc': { feature: 'the gRPC cache connector', instead: 'use a memory, redis, postgresql or keyv connector' },
  'database.svmJsonRpcCache': { feature: 'the Solana cache', instead: 'svc serves EVM chains only' },
  'rateLimiters.budgets[].rules[].waitTime': {
    feature: 'waiting for a rate-limit permit',
    instead:
      'svc answers a limited call at once with ErrProjectRateLimitRuleExceeded (HTTP 429) and clients retry; `waitTime: 0` (that behaviour) is accepted, and eRPC 0.1 ignores any other value as deprecated: drop the key',
  },
  'metrics.counterDropLabels': {
    feature: 'dropping counter labels',
    instead: 'counters keep their labels; drop histogram labels with `metrics.histogramDropLabels`, or relabel in Prometheus (`metric_relabel_configs`)',
  },
  'metrics.counterLabelOverrides': {
    feature: 'counter label overrides',
    instead: 'relabel in Prometheus (`metric_relabel_configs`); histograms take `metrics.histogramLabelOverrides`',
  },
  'metrics.counterIdleEvictionAfter': {
    feature: 'evicting idle counter series',
    instead: "not needed: svc's label values are bounded (networks, upstreams, methods from a bounded list)",
  },
  'projects[].auth.strategies[].ignoreMethods': {
    feature: 'per-strategy method lists',
    instead: 'use upstream `ignoreMethods`/`allowMethods`, or a separate project per audience',
  },
  'projects[].auth.strategies[].allowMethods': {
    feature: 'per-strategy method lists',
    instead: 'use upstream `ignoreMethods`/`allowMethods`, or a separate project per audience',
  },
  'projects[].auth.strategies[].network.ipAsUser': {
    feature: 'the client address as user id',
    instead: "rate-limit per address with a budget rule's `perIP: true`",
  },
  'projects[].auth.strategies[].database': {
    feature: "the database auth strategy's `database` block",
    instead:
      'svc rewrites it into its own `database` strategy (`connector: {id, driver: memory | redis | postgresql}`, `cache.ttl`; docs/access.md "API keys"); give `database.connector` as an object; keys are created through the admin API (`svc_createApiKey`)',
  },

  'projects[].auth.strategies[].jwt.claimMatchers': { feature: 'JWT claim matchers', instead: 'use `jwt.requiredClaims`' },
  'projects[].auth.strategies[].jwt.verificationJwksRefreshInterval': { feature: 'JWKS key fetching', instead: 'list the keys in `jwt.verificationKeys`' },
  'projects[].auth.strategies[].jwt.verificationJwksTlsInsecureSkipVerify': {
    feature: 'JWKS key fetching',
    instead: 'list the keys in `jwt.verificationKeys`',
  },
  'projects[].userAgentMode': { feature: 'user-agent tracking modes', instead: 'svc records no user agent; identify clients with auth strategies' },
  'projects[].trustUserIdHeader': {
    feature: 'the project-wide trusted user-id header',
    instead: 'set `trustUserIdHeader: true` on the auth strategy whose callers may name their user (`X-SVC-User-Id`)',
  },
  'projects[].ignoreMethods': { feature: 'project-wide method lists', instead: 'set `ignoreMethods`/`allowMethods` in `upstreamDefaults`' },
  'projects[].allowMethods': { feature: 'project-wide method lists', instead: 'set `ignoreMethods`/`allowMethods` in `upstreamDefaults`' },
  'projects[].networks[].failsafe[].matchRequestKind': {
    feature: 'failsafe entries scoped to internal requests',
    instead: "svc's own polls go through the upstream failsafe chain; match entries by `matchMethod`",
  },
  'projects[].upstreams[].failsafe[].matchRequestKind': { feature: 'failsafe entries scoped to internal requests', instead: 'match entries by `matchMethod`' },
  'projects[].networks[].failsafe[].retry.emptyResultAccept': {
    feature: 'per-method acceptance of empty results',
    instead: 'empty answers are retried only for the retry-empty methods; turn it off per call or network with the `retry-empty` directive default',
  },
  'projects[].upstreams[].failsafe[].retry.emptyResultAccept': {
    feature: 'per-method acceptance of empty results',
    instead: 'empty answers are retried only for the retry-empty methods; turn it off per call or network with the `retry-empty` directive default',
  },
  'projects[].networks[].failsafe[].retry.emptyResultIgnore': {
    feature: 'per-method acceptance of empty results (deprecated name)',
    instead: 'the `retry-empty` directive default',
  },
  'projects[].networks[].failsafe[].consensus.misbehaviorsDestination.s3': {
    feature: 'exporting misbehaviours to S3',
    instead: 'svc writes them to a directory (`type: file`, `path`); ship that directory with your log pipeline',
  },
  'projects[].networks[].failsafe[].consensus.maxWaitOnResult': {
    feature: 'consensus wait bounds',
    instead: 'bound the round with the network failsafe `timeout`',
  },
  'projects[].networks[].failsafe[].consensus.maxWaitOnEmpty': {
    feature: 'consensus wait bounds',
    instead: 'bound the round with the network failsafe `timeout`',
  },
  'projects[].networks[].evm.enforceBlockAvailability': {
    feature: 'the network switch for block-availability enforcement',
    instead: 'svc always skips an upstream that lacks the block',
  },
  'projects[].networks[].evm.markEmptyAsErrorMethods': {
    feature: 'the list of methods whose empty answer is retried',
    instead: "svc's retry-empty method list is built in; switch it per call or network with the `retry-empty` directive",
  },
  'projects[].networks[].evm.dynamicBlockTimeDebounceMultiplier': {
    feature: 'block-time-based poll debounce',
    instead: 'set `upstreams[].evm.statePollerInterval`',
  },
  'projects[].networks[].evm.blockUnavailableDelayMultiplier': {
    feature: 'block-time-based retry delay multiplier',
    instead: 'svc waits one estimated block time (or `retry.emptyResultDelay` before it is known)',
  },
  'projects[].networks[].selectionPolicy.evalPerBoundary': {
    feature: 'per-boundary selection',
    instead: 'svc evaluates per `evalScope` (network, method, finality) and skips, per call, an upstream that lacks the block',
  },
  'projects[].networks[].selectionPolicy.evalFunction': {
    feature: 'the legacy selection function name',
    instead: "`evalFunc` (eRPC 0.1's `(upstreams, ctx) => upstreams`, as JavaScript source in YAML or a function in svc.config.ts)",
  },
  'projects[].networks[].selectionPolicy.resampleExcluded': {
    feature: 'resampling excluded upstreams',
    instead:
      "end the `evalFunc` with `.readmitExcluded({ reAdmitAfter: '5m', maxConcurrent: 1 })` (eRPC's own translation, spelled `probeExcluded`); a cordoned upstream is re-admitted through its health checks",
  },
  'projects[].networks[].selectionPolicy.resampleInterval': {
    feature: 'resampling excluded upstreams',
    instead:
      "end the `evalFunc` with `.readmitExcluded({ reAdmitAfter: '5m', maxConcurrent: 1 })` (eRPC's own translation, spelled `probeExcluded`); a cordoned upstream is re-admitted through its health checks",
  },
  'projects[].networks[].selectionPolicy.resampleCount': {
    feature: 'resampling excluded upstreams',
    instead:
      "end the `evalFunc` with `.readmitExcluded({ reAdmitAfter: '5m', maxConcurrent: 1 })` (eRPC's own translation, spelled `probeExcluded`); a cordoned upstream is re-admitted through its health checks",
  },
  'projects[].networks[].directiveDefaults.validateTransactionsRoot': { feature: 'validation directives', instead: 'use the network `integrity` checks' },
  'projects[].networks[].directiveDefaults.receiptsCountExact': { feature: 'validation directives', instead: 'use the network `integrity` checks' },
  'projects[].networks[].methods': {
    feature: 'custom method definitions (finality, cache refs)',
    instead: "svc's method table is built in; ask for a method to be added",
  },
  'projects[].networks[].svm': { feature: 'Solana networks', instead: 'svc serves EVM chains only' },
  'projects[].upstreams[].rateLimitCountMode': { feature: 'credit-based rate counting', instead: 'budgets count requests' },
  'projects[].upstreams[].creditUnits': {
    feature: 'credit units per method',
    instead: "budgets count requests; svc's cost plugin reports credits in `X-SVC-Credits`",
  },
  'projects[].upstreams[].routing.scoreLatencyQuantile': {
    feature: 'a per-upstream latency quantile for the score',
    instead: 'the score uses the p70 latency (eRPC documents this key as not wired into its scoring either)',
  },
  'projects[].upstreams[].svm': { feature: 'Solana upstreams', instead: 'svc serves EVM chains only' },
  // Accepted with the bds plugin (the default preset); named when a preset lacks it.
  'projects[].upstreams[].grpc': {
    feature: "gRPC upstreams (eRPC's Blockchain Data Standards protobuf API)",
    instead: "apply the bds plugin (bdsPlugin(), in the default preset), or write the node's http(s) JSON-RPC URL",
  },
  'projects[].upstreams[].evm.statePollerDebounce': { feature: 'the state poller debounce', instead: '`upstreams[].evm.statePollerInterval`' },
  'projects[].upstreams[].evm.skipWhenSyncing': {
    feature: 'skipping syncing upstreams (switch)',
    instead: 'svc always skips an upstream that reports eth_syncing',
  },
  'projects[].upstreams[].evm.skipSyncingCheck': {
    feature: 'turning the syncing check off',
    instead: 'set `statePollerInterval: 0` to stop polling that upstream',
  },

  'projects[].upstreams[].evm.queryShim': { feature: 'the eth_query* shim', instead: 'svc serves the standard JSON-RPC methods only' },
};

/**
 * The canonical form of a concrete path: indexes become `[]`, `networkDefaults`/`upstreamDefaults`
 * and a provider's `overrides[<glob>]` (upstream settings) become `networks[]`/`upstreams[]`.
 */
export function canonicalPath(path: string): string {
  return path
    .replace(/\[\d+\]/g, '[]')
    .replace(/\.providers\[\]\.overrides\[[^\]]*\](?=\.|$)/g, '.upstreams[]')
    .replace(/\.networkDefaults(?=\.|$)/g, '.networks[]')
    .replace(/\.upstreamDefaults(?=\.|$)/g, '.upstreams[]');
}

/** The refusal of an eRPC key at a concrete path (itself or a parent listed), if any. */
export function erpcRefusal(path: string): (ErpcRefusal & { key: string }) | undefined {
  const parts = canonicalPath(path).split('.');
  for (let n = parts.length; n > 0; n--) {
    const key = parts.slice(0, n).join('.');
    const r = ERPC_REFUSED[key];
    if (r) return { ...r, key };
  }
  return undefined;
}

/**
 * Rewrites each "unknown key" problem whose key is an eRPC key svc does not implement into a
 * message naming the eRPC feature and svc's alternative.
 */
export function explainErpcKeys(problems: ConfigProblem[]): ConfigProblem[] {
  return problems.map((p) => {
    if (!p.message.startsWith('unknown key')) return p;
    const r = erpcRefusal(p.path);
    if (!r) return p;
    return { path: p.path, message: `eRPC's \`${r.key}\` (${r.feature}) is not supported by svc: ${r.instead}` };
  });
}
