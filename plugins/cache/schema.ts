/**
 * Config of the cache plugin: `database.evmJsonRpcCache` with its
 * `connectors[]` and `policies[]`, nested as eRPC users write them, the zero-config default, and
 * the checks that cannot be said in JSON Schema (unique ids, policies naming a connector).
 */
import { compressionSchema, compressionSettingsOf, type CompressionSettings } from './compression.ts';
import type { KeyvAdapterConfig } from './connectors/adapter.ts';
import type { ConnectorDriver } from './connectors/types.ts';
import { type CacheFailsafeEntry, FailsafeEntrySchema, type RawFailsafeEntry, resolveFailsafe } from './failsafe.ts';
import { Duration, type Finality, type ResolvedConfig, Size, Strict, type TProperties, Type } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import { StorageBreakerSchema, type StorageBreakerSettings } from 'svc-proxy/util';

/** Id of the zero-config memory connector. */
export const DEFAULT_CONNECTOR_ID = 'memory-cache';
/** Zero-config memory tier: most entries. */
export const DEFAULT_MAX_ITEMS = 100_000;
/** Zero-config memory tier: most bytes of keys and values (256 MiB). */
export const DEFAULT_MAX_TOTAL_SIZE = 256 * 1024 * 1024;
/** Default PostgreSQL table. */
export const DEFAULT_PG_TABLE = 'svc_json_rpc_cache';
/**
 * Outer bound of any connector read, ms: the store gives up after this long whatever the
 * connector does (each remote connector enforces its own, shorter `readTimeout`).
 */
export const READ_TIMEOUT_MS = 1000;
/** Outer bound of any connector write, ms (each remote connector enforces its own `writeTimeout`). */
export const WRITE_TIMEOUT_MS = 5000;
/** Default `readTimeout` of a remote tier, ms: a read slower than this is a miss (a cache must be faster than the upstream it saves). */
export const DEFAULT_READ_TIMEOUT_MS = 50;
/** Default `writeTimeout` of a remote tier, ms (writes are off the request path). */
export const DEFAULT_WRITE_TIMEOUT_MS = 500;

/** Deadlines and circuit breaker of a remote tier, shared by the redis and postgresql blocks. */
const remoteTierProps = {
  readTimeout: Type.Optional(Duration({ default: '50ms', description: 'a read slower than this is a miss (counted as a get error); at most 1s' })),
  writeTimeout: Type.Optional(Duration({ default: '500ms', description: 'a write slower than this is given up (counted as a set error); at most 5s' })),
  breaker: Type.Optional(StorageBreakerSchema),
};

/** Resolved deadlines and breaker of a remote tier (ms). */
export interface RemoteTierSettings {
  /** ms */
  readTimeout: number;
  /** ms */
  writeTimeout: number;
  /** Breaker settings as configured (defaults filled in by the breaker). */
  breaker?: Partial<StorageBreakerSettings>;
}

const memoryProps = Strict({
  maxItems: Type.Optional(Type.Integer({ minimum: 1, default: DEFAULT_MAX_ITEMS, description: 'most entries held (least recently used evicted first)' })),
  maxTotalSize: Type.Optional(Size({ default: '256MiB', description: 'most bytes held, keys and values (an LRU bounded in bytes)' })),
});

const redisProps = Strict({
  uri: Type.String({ minLength: 1, description: '`redis://[user:password@]host:port[/db]` or `rediss://...`; never logged or used as a label' }),
  password: Type.Optional(Type.String({ description: 'password, when not in the URI' })),
  connectTimeout: Type.Optional(
    Duration({ default: '5s', description: 'time to (re)connect before a try fails; the client keeps reconnecting in the background' }),
  ),
  ...remoteTierProps,
});

const postgresProps = Strict({
  connectionUri: Type.String({ minLength: 1, description: '`postgres://user:password@host:port/db`; never logged or used as a label' }),
  table: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,62}$', default: DEFAULT_PG_TABLE, description: 'table, created if missing' })),
  maxConns: Type.Optional(Type.Integer({ minimum: 1, default: 16, description: 'pool size' })),
  purgeInterval: Type.Optional(Duration({ default: '5m', description: 'how often expired rows are deleted (they are ignored on read meanwhile)' })),
  ...remoteTierProps,
});

const keyvProps = Strict({
  adapter: Type.String({
    minLength: 1,
    description:
      'keyv storage adapter: a package name (`@keyv/memcache`, `@keyv/valkey`, `@keyv/sqlite`, `@keyv/mongo`, `@keyv/mysql`, `@keyv/etcd`, `@keyv/dynamo`...) resolved from the working directory, or a module path',
  }),
  uri: Type.Optional(Type.String({ minLength: 1, description: "connection URI, the adapter's first argument; never logged or used as a label" })),
  options: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description: "the adapter's own options, passed as they are (with `uri`: its second argument, or merged with `uri` for one-argument adapters)",
    }),
  ),
  ...remoteTierProps,
});

const connector = Strict({
  id: Type.Optional(
    Type.String({
      pattern: '^[A-Za-z0-9_.:-]{1,64}$',
      description: 'connector id, used by policies, the skip-cache-read directive and metric labels (default `<driver>-cache`)',
    }),
  ),
  driver: Type.Union([Type.Literal('memory'), Type.Literal('redis'), Type.Literal('postgresql'), Type.Literal('keyv')], {
    description: 'storage tier (`redis` and `postgresql` run on keyv too; `keyv` takes any keyv adapter)',
  }),
  memory: Type.Optional(memoryProps),
  redis: Type.Optional(redisProps),
  postgresql: Type.Optional(postgresProps),
  keyv: Type.Optional(keyvProps),
  failsafeForGets: Type.Optional(
    Type.Array(FailsafeEntrySchema, {
      description:
        "eRPC's failsafeForGets: per method/finality, the per-try deadline, retries, hedge and circuit breaker of this connector's reads (most specific matching entry)",
    }),
  ),
  failsafeForSets: Type.Optional(
    Type.Array(FailsafeEntrySchema, {
      description:
        "eRPC's failsafeForSets: per method/finality, the per-try deadline, retries, hedge and circuit breaker of this connector's writes and deletes (most specific matching entry)",
    }),
  ),
});

const policy = Strict({
  id: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,64}$', description: 'used in metric labels (default: the policy index)' })),
  connector: Type.String({ description: 'id of the connector this policy reads and writes' }),
  network: Type.Optional(Type.String({ default: '*', description: 'glob on network ids (`evm:1`, `evm:*`, `a|b`)' })),
  method: Type.Optional(Type.String({ default: '*', description: 'glob on methods (`eth_getBlock*|eth_call`)' })),
  params: Type.Optional(
    Type.Array(Type.Unknown(), {
      description:
        'per-position matchers: a string is a glob on the param (its JSON text when not a string), an object or array matches key by key; missing positions match anything',
    }),
  ),
  finality: Type.Optional(
    Type.Union([Type.Literal('finalized'), Type.Literal('unfinalized'), Type.Literal('realtime'), Type.Literal('unknown')], {
      default: 'finalized',
      description: 'finality class cached by this policy',
    }),
  ),
  empty: Type.Optional(
    Type.Union([Type.Literal('ignore'), Type.Literal('allow'), Type.Literal('only')], {
      default: 'ignore',
      description: 'empty results (`null`, `""`, `"0x"`, `"0x0"`, `[]`, `{}`): not cached, cached too, or only those',
    }),
  ),
  appliesTo: Type.Optional(
    Type.Union([Type.Literal('both'), Type.Literal('get'), Type.Literal('set')], { default: 'both', description: 'reads, writes or both' }),
  ),
  ttl: Type.Optional(Duration({ default: '0', description: 'entry lifetime; 0 = forever' })),
  minItemSize: Type.Optional(Size({ description: 'smallest result cached (bytes of its JSON)' })),
  maxItemSize: Type.Optional(Size({ description: 'largest result cached (bytes of its JSON)' })),
});

/** The plugin's schema fragment: it owns the top-level `database` key. */
export const cacheSchema: { root: TProperties } = {
  root: {
    database: Strict(
      {
        evmJsonRpcCache: Type.Optional(
          Strict(
            {
              connectors: Type.Optional(Type.Array(connector, { default: [], description: 'storage tiers' })),
              policies: Type.Optional(Type.Array(policy, { default: [], description: 'what is cached where, in order; no policies = no caching' })),
              compression: Type.Optional(compressionSchema),
            },
            { description: 'JSON-RPC response cache; unset = a 256 MiB in-memory cache of finalized (forever), unfinalized (10s) and realtime (2s) answers' },
          ),
        ),
      },
      { description: 'storage used by svc' },
    ),
  },
};

/** A resolved connector (defaults applied, sizes in bytes, durations in ms). */
export interface ConnectorConfig {
  id: string;
  driver: ConnectorDriver;
  memory: { maxItems: number; maxTotalSize: number };
  redis?: { uri: string; password?: string; connectTimeout: number } & RemoteTierSettings;
  postgresql?: { connectionUri: string; table: string; maxConns: number; purgeInterval: number } & RemoteTierSettings;
  keyv?: KeyvAdapterConfig & RemoteTierSettings;
  /** eRPC's `failsafeForGets`, resolved (none: one try under the tier's `readTimeout`). */
  failsafeForGets?: CacheFailsafeEntry[];
  /** eRPC's `failsafeForSets`, resolved (none: one try under the tier's `writeTimeout`). */
  failsafeForSets?: CacheFailsafeEntry[];
}

/** Empty-result rule of a policy. */
export type EmptyRule = 'ignore' | 'allow' | 'only';

/** A resolved policy. */
export interface PolicyConfig {
  /** Metric label: the configured id, else the index as a string. */
  id: string;
  connector: string;
  network: string;
  method: string;
  params?: unknown[];
  finality: Finality;
  empty: EmptyRule;
  appliesTo: 'both' | 'get' | 'set';
  /** ms; 0 = forever. */
  ttl: number;
  /** bytes */
  minItemSize?: number;
  /** bytes */
  maxItemSize?: number;
}

/** The resolved cache config. */
export interface CacheConfig {
  connectors: ConnectorConfig[];
  policies: PolicyConfig[];
  /** Shared-tier compression, undefined when off. */
  compression?: CompressionSettings;
}

/** The zero-config cache: one memory tier, finalized forever, unfinalized 10 s, realtime 2 s, unknown not cached. */
export function defaultCacheConfig(): CacheConfig {
  const base = { connector: DEFAULT_CONNECTOR_ID, network: '*', method: '*', empty: 'ignore', appliesTo: 'both' } as const;
  return {
    connectors: [{ id: DEFAULT_CONNECTOR_ID, driver: 'memory', memory: { maxItems: DEFAULT_MAX_ITEMS, maxTotalSize: DEFAULT_MAX_TOTAL_SIZE } }],
    policies: [
      { ...base, id: 'finalized', finality: 'finalized', ttl: 0 },
      { ...base, id: 'unfinalized', finality: 'unfinalized', ttl: 10_000 },
      { ...base, id: 'realtime', finality: 'realtime', ttl: 2_000 },
    ],
  };
}

type RawConnector = Omit<Partial<ConnectorConfig>, 'failsafeForGets' | 'failsafeForSets'> & {
  driver: ConnectorConfig['driver'];
  memory?: Partial<ConnectorConfig['memory']>;
  failsafeForGets?: RawFailsafeEntry[];
  failsafeForSets?: RawFailsafeEntry[];
};
type RawPolicy = Omit<PolicyConfig, 'id'> & { id?: string };

/**
 * The cache config of a resolved svc config: the zero-config default when `database.evmJsonRpcCache`
 * is absent, else the configured tiers and policies.
 * @param config the final config (`configured` hook)
 * @throws ConfigError naming the path of a duplicate connector id, a driver without its settings
 *   block, or a policy whose connector does not exist
 */
export function cacheConfigOf(config: ResolvedConfig): CacheConfig {
  const db = config.settings.database as { evmJsonRpcCache?: { connectors: RawConnector[]; policies: RawPolicy[]; compression?: unknown } } | undefined;
  const raw = db?.evmJsonRpcCache;
  if (!raw) return defaultCacheConfig();
  const problems: Array<{ path: string; message: string }> = [];
  const ids = new Set<string>();
  const connectors = raw.connectors.map((c, i): ConnectorConfig => {
    const id = c.id ?? `${c.driver}-cache`;
    const path = `database.evmJsonRpcCache.connectors[${i}]`;
    if (ids.has(id)) problems.push({ path: `${path}.id`, message: `duplicate connector id "${id}"` });
    ids.add(id);
    if (c.driver === 'redis' && !c.redis) problems.push({ path, message: 'driver redis needs a `redis: {uri}` block' });
    if (c.driver === 'postgresql' && !c.postgresql) problems.push({ path, message: 'driver postgresql needs a `postgresql: {connectionUri}` block' });
    if (c.driver === 'keyv' && !c.keyv) problems.push({ path, message: 'driver keyv needs a `keyv: {adapter, uri?, options?}` block' });
    for (const [block, t] of [
      ['redis', c.redis],
      ['postgresql', c.postgresql],
      ['keyv', c.keyv],
    ] as const) {
      if (t && t.readTimeout > READ_TIMEOUT_MS)
        problems.push({ path: `${path}.${block}.readTimeout`, message: `at most ${READ_TIMEOUT_MS} ms (a slower cache read costs more than it saves)` });
      if (t && t.writeTimeout > WRITE_TIMEOUT_MS) problems.push({ path: `${path}.${block}.writeTimeout`, message: `at most ${WRITE_TIMEOUT_MS} ms` });
    }
    const memory = { maxItems: c.memory?.maxItems ?? DEFAULT_MAX_ITEMS, maxTotalSize: c.memory?.maxTotalSize ?? DEFAULT_MAX_TOTAL_SIZE };
    const failsafeForGets = resolveFailsafe(c.failsafeForGets, `${path}.failsafeForGets`, problems, READ_TIMEOUT_MS);
    const failsafeForSets = resolveFailsafe(c.failsafeForSets, `${path}.failsafeForSets`, problems, WRITE_TIMEOUT_MS);
    return { id, driver: c.driver, memory, redis: c.redis, postgresql: c.postgresql, keyv: c.keyv, failsafeForGets, failsafeForSets };
  });
  const policies = raw.policies.map((p, i): PolicyConfig => {
    if (!ids.has(p.connector))
      problems.push({
        path: `database.evmJsonRpcCache.policies[${i}].connector`,
        message: `no connector with id "${p.connector}" (have: ${[...ids].join(', ') || 'none'})`,
      });
    return { ...p, id: p.id ?? String(i) };
  });
  if (problems.length > 0) throw new ConfigError(problems);
  const compression = compressionSettingsOf(raw.compression);
  return compression ? { connectors, policies, compression } : { connectors, policies };
}
