/**
 * cache plugin (spec §2.8 #3, §4.5): JSON-RPC answers kept in a
 * memory, Redis or PostgreSQL tier, so most reads never reach an upstream and a fleet of
 * replicas shares one cache. Written against the public plugin API only (`svc-proxy/plugin`).
 *
 * Taps `call` at `CallStage.CACHE`: inside multiplexing (identical in-flight calls read once),
 * outside tip enforcement and interpolation (a hit skips all upstream work; the key is the
 * client's own params, block tags included). `configured` resolves `database.evmJsonRpcCache`
 * (the zero-config memory cache when absent); `project` opens the tiers, `shutdown` closes them.
 *
 * - Key: `<network>:<block ref>` + `<method>:<params hash>`; lookups by hash go through a
 *   reverse index to the block the answer named (files: `keys.ts`).
 * - Policies (`policy.ts`): reads by finality class (finalized ← finalized|unfinalized,
 *   realtime ← realtime, unknown ← any), writes of exactly the call's class.
 * - Reads and writes (`store.ts`): tiers read in parallel, first acceptable hit wins; writes after
 *   the answer, never awaited by the call; a tier that is slow or down is a miss.
 * - Provenance: a call whose directives change where or how its answer is obtained
 *   (`provenanceKey`: `use-upstream`, `skip-consensus`, another integrity level) skips the cache.
 * - `skip-cache-read`: `true` skips every read, `false`/empty reads all, anything else is a glob
 *   on connector ids not to read. Writes happen regardless.
 * - Headers: writes the `cache.outcome` (HIT/MISS) and `cache.attempts` record slots the headers
 *   plugin turns into `X-SVC-Cache` and `X-SVC-Cache-Attempts`.
 * - Metrics `svc_cache_{get_hit,get_miss,get_error,set_success,set_error}_total{project,network,category,connector,policy}`.
 */
import {
  type CallContext,
  type CallHandler,
  type ExecutionRecord,
  CallStage,
  FINALITY,
  Type,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  RpcResult,
  serviceKey,
} from 'svc-proxy/plugin';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import { CACHE_ATTEMPTS, CACHE_OUTCOME } from './api.ts';
import { callParamsHash, provenanceKey } from 'svc-proxy/plugins/multiplex';
import { compileGlobs, DeferredCounter, type GlobTest } from 'svc-proxy/util';
import { Gauge } from 'prom-client';
import { MemoryConnector } from './connectors/memory.ts';
import type { Connector } from './connectors/types.ts';
import { callKey, neverCached, type CallKey } from './keys.ts';
import { Policy } from './policy.ts';
import { ValueCodec } from './compression.ts';
import { cacheConfigOf, cacheSchema, type CacheConfig, type ConnectorConfig } from './schema.ts';
import { normalizeCacheShapes } from './erpc.ts';

/**
 * Directive `skip-cache-read` (spec §2.8 #3): `true` skips every tier, a glob (`|`-separated)
 * the connectors it names; the answer is still written. evm-methods and integrity declare it
 * the same way (this plugin owns its `directiveDefaults` key).
 */
export const SKIP_CACHE_READ = new Directive<string | undefined>({
  field: 'skipCacheRead',
  query: 'skip-cache-read',
  header: 'X-SVC-Skip-Cache-Read',
  type: 'string',
  fallback: undefined,
  spec: '#3',
  defaultsSchema: Type.Union([Type.String(), Type.Boolean()], {
    description: '#3 `true`, `false`, or a glob over cache connector ids (YAML booleans become strings)',
  }),
});
import { readEntry, type SkipReason, writeEntry, WriteQueue, type Reader, type StoreSink } from './store.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

export { acceptable, readEntry, writeEntry } from './store.ts';
export { answeredBlock, callKey, isEmptyJson, neverCached, type CallKey } from './keys.ts';
export { Policy } from './policy.ts';
export {
  cacheConfigOf,
  cacheSchema,
  defaultCacheConfig,
  DEFAULT_CONNECTOR_ID,
  READ_TIMEOUT_MS,
  WRITE_TIMEOUT_MS,
  type CacheConfig,
  type PolicyConfig,
  type ConnectorConfig,
  type EmptyRule,
  type RemoteTierSettings,
} from './schema.ts';
export {
  COMPRESSED_PREFIX,
  compressionSchema,
  compressionSettingsOf,
  DEFAULT_COMPRESSION_THRESHOLD,
  DEFAULT_MAX_DECOMPRESSED_SIZE,
  frameContentSize,
  ValueCodec,
  ZSTD_LEVELS,
  type CompressionSettings,
} from './compression.ts';
export type { CacheFailsafeEntry } from './failsafe.ts';
export type { EntryBreakerSettings } from './failsafe-run.ts';
export type { KeyvAdapterConfig } from './connectors/adapter.ts';
export { MemoryConnector } from './connectors/memory.ts';
export type { RedisConnector } from './connectors/redis.ts';
export type { PostgresConnector } from './connectors/postgres.ts';
export type { KeyvConnector } from './connectors/keyv.ts';
export { decodeEntry, encodeEntry, type CacheEntry, type Connector, type ConnectorDriver } from './connectors/types.ts';

/** What the cache plugin shows other plugins, the admin API and tests. */
export interface CacheService {
  /** The resolved config (after `configured`). */
  config(): CacheConfig;
  /** A tier by connector id. */
  connector(id: string): Connector | undefined;
}

/** Key of {@link CacheService}. */
export const CACHE_SERVICE = serviceKey<CacheService>('cache');

/** Longest `skip-cache-read` glob accepted from a client, characters; longer skips every read. */
export const MAX_SKIP_PATTERN_LENGTH = 256;
/** Distinct methods (or skip patterns) whose matching is remembered per network. */
const MEMO_LIMIT = 1024;

/** A connector's failsafe entries, for the remote tiers (a memory read is synchronous: nothing to bound or retry). */
function failsafeOf(c: ConnectorConfig): Pick<ConnectorConfig, 'failsafeForGets' | 'failsafeForSets'> {
  return { failsafeForGets: c.failsafeForGets, failsafeForSets: c.failsafeForSets };
}

/**
 * Creates a tier. The Redis and PostgreSQL drivers are imported only when a tier of theirs is
 * configured: the two clients hold about 25 MiB of RSS that a memory-only svc never uses
 *.
 */
async function openConnector(c: ConnectorConfig, host: PluginHost, codec?: ValueCodec): Promise<Connector> {
  switch (c.driver) {
    case 'memory':
      return new MemoryConnector(c.id, c.memory);
    case 'redis': {
      const { RedisConnector } = await import('./connectors/redis.ts');
      return new RedisConnector(c.id, { ...(c.redis as NonNullable<ConnectorConfig['redis']>), ...failsafeOf(c), codec }, host.logger, host.metrics);
    }
    case 'postgresql': {
      const { PostgresConnector } = await import('./connectors/postgres.ts');
      return new PostgresConnector(
        c.id,
        { ...(c.postgresql as NonNullable<ConnectorConfig['postgresql']>), ...failsafeOf(c), codec },
        host.logger,
        host.metrics,
      );
    }
    case 'keyv': {
      const [{ createAdapter }, { KeyvConnector }, { TierReporter }] = await Promise.all([
        import('./connectors/adapter.ts'),
        import('./connectors/keyv.ts'),
        import('./connectors/types.ts'),
      ]);
      const k = c.keyv as NonNullable<ConnectorConfig['keyv']>;
      const password = typeof k.options?.password === 'string' ? k.options.password : undefined;
      const reporter = new TierReporter(c.id, `keyv (${k.adapter})`, host.logger, k.uri ?? '', password);
      return new KeyvConnector(c.id, 'keyv', await createAdapter(k), { ...k, ...failsafeOf(c), codec }, reporter, host.logger, host.metrics);
    }
  }
}

/**
 * Creates the cache plugin (name `cache`).
 * @returns a plugin owning `database.evmJsonRpcCache`, tapping `configured`, `project`, `call` and `shutdown`, providing the `cache` service
 */
export function cachePlugin(): Plugin {
  return definePlugin({
    name: 'cache',
    provides: [CACHE_SERVICE],
    schema: { ...cacheSchema, directiveDefaults: directiveDefaultsSchema(SKIP_CACHE_READ), normalize: normalizeCacheShapes },
    apply(host: PluginHost) {
      declareDirectives(host, 'cache', SKIP_CACHE_READ);
      let config: CacheConfig = { connectors: [], policies: [] };
      let policies: Policy[] = [];
      const connectors = new Map<string, Connector>();
      let opened: Promise<void> | undefined;

      host.hooks.configured.tap('cache', (c) => {
        config = cacheConfigOf(c);
        policies = config.policies.map((p) => new Policy(p));
      });
      // Tiers are created and opened before the first project serves (the `project` hook runs at start-up).
      host.hooks.project.tapPromise('cache', async () => {
        opened ??= (async () => {
          // The zstd module is loaded only when compression is on and a shared tier uses it.
          const shared = config.connectors.some((cc) => cc.driver !== 'memory');
          const codec = config.compression && shared ? await ValueCodec.create(config.compression) : undefined;
          for (const cc of config.connectors) connectors.set(cc.id, await openConnector(cc, host, codec));
          await Promise.all([...connectors.values()].map((c) => c.open()));
        })();
        await opened;
      });
      host.hooks.shutdown.tapPromise('cache', async () => {
        await Promise.all([...connectors.values()].map((c) => c.close()));
      });
      host.services.provide(CACHE_SERVICE, { config: () => config, connector: (id) => connectors.get(id) });

      const sink = metricsSink(host);
      memoryTierGauges(host, connectors);
      const writes = new WriteQueue((w) =>
        writeEntry(w.ctx, w.key, w.finality, { wire: w.result.wire(), value: () => w.result.result }, w.policies, connectors, w.chain, sink, w.params),
      );
      const skipMemo = new Map<string, GlobTest>();
      /** The readers of a call after `skip-cache-read` (spec §2.8 #3). */
      const readersOf = (candidates: readonly Policy[], ctx: CallContext): Reader[] => {
        const skip = SKIP_CACHE_READ.get(ctx.directives);
        if (skip === 'true') return [];
        let skipped: GlobTest | undefined;
        if (skip !== undefined && skip !== '' && skip !== 'false') {
          if (skip.length > MAX_SKIP_PATTERN_LENGTH) return [];
          skipped = skipMemo.get(skip);
          if (!skipped) {
            skipped = compileGlobs(skip.split('|'));
            if (skipMemo.size < MEMO_LIMIT) skipMemo.set(skip, skipped);
          }
        }
        const finality = FINALITY.get(ctx);
        const out: Reader[] = [];
        for (const p of candidates) {
          if (!p.readable(finality) || (skipped && skipped(p.connector)) || out.some((r) => r.policy.connector === p.connector)) continue;
          const connector = connectors.get(p.connector);
          if (connector && p.coversParams(ctx.request.params)) out.push({ connector, policy: p });
        }
        return out;
      };

      host.hooks.call.tap({ name: 'cache', stage: CallStage.CACHE }, (inner: CallHandler, network: Network): CallHandler => {
        const mine = policies.filter((p) => p.coversNetwork(network.id));
        if (mine.length === 0) return inner;
        const byMethod = new Map<string, Policy[]>();
        const candidatesOf = (method: string): Policy[] => {
          let c = byMethod.get(method);
          if (!c) {
            c = neverCached(method) ? [] : mine.filter((p) => p.coversMethod(method));
            if (byMethod.size < MEMO_LIMIT) byMethod.set(method, c);
          }
          return c;
        };
        const chain = networkChainState(host, network);
        // The key's scope, built once per network rather than per call.
        const scope = `${network.project.id}/${network.id}`;

        /** A miss: the call runs, and its answer is queued for the write-back once it is on its way (a write never delays the call). */
        const miss = async (ctx: CallContext, key: CallKey, candidates: Policy[], params: unknown): Promise<RpcResult> => {
          CACHE_OUTCOME.set(ctx.record, 'MISS');
          const finality = FINALITY.get(ctx);
          const r = await inner(ctx);
          if (!r.fromCache) writes.push({ ctx, key, finality, result: r, policies: candidates, chain, params });
          return r;
        };

        /** A cacheable method's call that no tier may read or store: counted, then forwarded. */
        const skip = (ctx: CallContext, reason: SkipReason): Promise<RpcResult> => {
          sink.skipped(ctx, reason);
          return inner(ctx);
        };

        return (ctx: CallContext) => {
          // Only answers obtained under the network's own rules are shared (spec §2.8): a pinned,
          // consensus-skipping or differently checked call neither reads nor writes any tier.
          if (ctx.internal) return inner(ctx);
          const candidates = candidatesOf(ctx.request.method);
          if (candidates.length === 0) return inner(ctx);
          if (provenanceKey(ctx) !== '') return skip(ctx, 'not_shared');
          const hash = callParamsHash(ctx);
          if (hash === undefined) return skip(ctx, 'params_uncacheable');
          const key = callKey(scope, ctx.request.method, ctx.request.params, hash);
          if (key === undefined) return skip(ctx, 'params_uncacheable');
          const readers = readersOf(candidates, ctx);
          const record = ctx.record;
          // Interpolation (inside) may replace `ctx.request`: writes match the params reads matched.
          const params = ctx.request.params;
          if (readers.length === 0) return miss(ctx, key, candidates, params);
          CACHE_ATTEMPTS.set(record, CACHE_ATTEMPTS.get(record) + readers.length);
          const got = readEntry(ctx, key, readers, chain, sink);
          if (got instanceof Promise) return got.then((hit) => (hit ? served(record, hit.entry) : miss(ctx, key, candidates, params)));
          return got ? Promise.resolve(served(record, got.entry)) : miss(ctx, key, candidates, params);
        };
      });
    },
  });
}

/** A hit: the stored answer, served lazily from its bytes. */
function served(record: ExecutionRecord, entry: { wire: string | Buffer }): RpcResult {
  CACHE_OUTCOME.set(record, 'HIT');
  const r = RpcResult.lazy(entry.wire);
  r.fromCache = true;
  return r;
}

/**
 * `svc_cache_memory_bytes` and `svc_cache_memory_entries` per memory tier, read at each scrape
 * (nothing is counted per call): what the tier holds against its `maxTotalSize` and `maxItems`
 * bounds, so an operator sizing a container sees the tier's share of the process's memory.
 */
function memoryTierGauges(host: PluginHost, connectors: ReadonlyMap<string, Connector>): void {
  const gauge = (name: string, help: string, read: (c: MemoryConnector) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['connector'] as const,
      registers: [host.metrics],
      collect() {
        this.reset();
        for (const c of connectors.values()) if (c instanceof MemoryConnector) this.set({ connector: c.id }, read(c));
      },
    });
  gauge(
    'svc_cache_memory_bytes',
    'Bytes a memory cache tier holds, as charged against its maxTotalSize (keys, answers and per-entry overhead)',
    (c) => c.totalSize,
  );
  gauge('svc_cache_memory_entries', 'Entries a memory cache tier holds (answers and reverse-index pointers), against its maxItems', (c) => c.size);
}

/** The plugin's metrics, counted as plain numbers and published on each registry read. */
function metricsSink(host: PluginHost): StoreSink {
  const labelNames = ['project', 'network', 'category', 'connector', 'policy'] as const;
  const counter = (name: string, help: string) => new DeferredCounter(host.metrics, { name, help, labelNames });
  const hit = counter('svc_cache_get_hit_total', 'Cache reads that found an acceptable entry, per tier and policy');
  const miss = counter('svc_cache_get_miss_total', 'Cache reads that found nothing (or an entry no longer acceptable)');
  const getError = counter('svc_cache_get_error_total', 'Cache reads that failed or timed out (treated as a miss)');
  const setOk = counter('svc_cache_set_success_total', 'Cache writes stored');
  const setError = counter('svc_cache_set_error_total', 'Cache writes that failed or timed out');
  const skipped = new DeferredCounter(host.metrics, {
    name: 'svc_cache_skipped_total',
    help: 'Calls of a cached method whose answer no tier stored, by reason (finality_unknown, head_unknown, beyond_head, non_canonical, no_matching_policy, not_shared, params_uncacheable)',
    labelNames: ['project', 'network', 'category', 'reason'] as const,
  });
  const inc = (c: DeferredCounter, ctx: CallContext, connector: string, policy: string) =>
    c.inc([ctx.project.id, ctx.network.id, host.methodLabel.value(ctx.request.method), connector, policy]);
  return {
    read(ctx, r, event) {
      inc(event === 'hit' ? hit : event === 'miss' ? miss : getError, ctx, r.connector.id, r.policy.id);
    },
    wrote(ctx, c, p, ok, err) {
      inc(ok ? setOk : setError, ctx, c.id, p.id);
      if (!ok) (c as { report?: (what: string, e: unknown) => void }).report?.('write', err);
    },
    skipped(ctx, reason) {
      skipped.inc([ctx.project.id, ctx.network.id, host.methodLabel.value(ctx.request.method), reason]);
    },
  };
}
