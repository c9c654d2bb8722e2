/**
 * eRPC's shared-state keys rewritten into svc's top-level `sharedState` at load time (the
 * plugin's `SchemaFragment.normalize`), as eRPC's common/config.go and common/defaults.go read
 * them (`Config.ClusterKey`, `DatabaseConfig.SharedState`, `SharedStateConfig`):
 *
 * - `database.sharedState` with a Redis connector (`connector.driver: redis`, or a
 *   `connector.redis` block, which selects Redis in eRPC too) → `sharedState.redis.uri`: eRPC's
 *   `addr`/`username`/`db`/`tls.enabled` become the URI (`normalizeRedisBlock`, which also drops
 *   a `redis://` prefix on `addr`, as eRPC does), `password` goes into the URI's user part
 *   (as eRPC builds its own URI), go-redis URL options (`?pool_size=10`) are dropped (node-redis
 *   ignores them); `clusterKey` → `sharedState.clusterKey`. `connector.id` is a name only: dropped.
 * - The top-level `clusterKey` is eRPC's default for `database.sharedState.clusterKey` (eRPC
 *   reads it for nothing else): it becomes `sharedState.clusterKey` when the shared-state block
 *   has none, and is dropped otherwise.
 * - `connector.driver: memory` (also eRPC's default when `connector` is absent) shares nothing
 *   between instances, which is svc without `sharedState`: the block is dropped.
 * - Refused, naming what to do: PostgreSQL, DynamoDB and gRPC connectors (svc shares state
 *   through Redis only); `fallbackTimeout`, `lockTtl`, `lockMaxWait`, `updateMaxWait` (svc takes
 *   no locks and never waits for shared state on the request path); the connector's Redis
 *   timeouts and pool size; any other key.
 *
 * Every change is one rewrite line (`svc validate --print`); a `database` block left empty is
 * removed. A password is never part of a rewrite line.
 */
import { isConfigObject, normalizeRedisBlock, pathOf, type ConfigDocument, type ConfigObject, type NormalizeReport } from 'svc-proxy/plugin';

const BASE = 'database.sharedState';

/** What svc does instead, for each connector driver it does not share state through. */
const OTHER_DRIVERS: Readonly<Record<string, string>> = {
  postgresql: "eRPC's shared state on PostgreSQL",
  dynamodb: "eRPC's shared state on DynamoDB",
  grpc: "eRPC's gRPC connector (it cannot hold shared state in eRPC either)",
};

/** eRPC's shared-state tuning keys svc has no counterpart for, and why. */
const REFUSED_BLOCK_KEYS: Readonly<Record<string, string>> = {
  fallbackTimeout:
    "eRPC's timeout of shared-state Redis operations: svc's shared state never waits for Redis on the request path (its commands have a fixed deadline, and an unanswered PING every second marks Redis unreachable); remove fallbackTimeout",
  lockTtl: "eRPC's distributed lock of shared counters: svc takes no Redis locks (heads only move forward, merged per upstream); remove lockTtl",
  lockMaxWait: "eRPC's wait for the distributed lock of shared counters: svc takes no Redis locks; remove lockMaxWait",
  updateMaxWait:
    "eRPC's foreground wait for a head refresh: svc never refreshes heads on the request path (its pollers run in the background); remove updateMaxWait",
};

/** The connector's Redis keys refused here with shared-state wording (the rest: `normalizeRedisBlock`). */
const REFUSED_REDIS_KEYS: Readonly<Record<string, string>> = {
  initTimeout:
    "eRPC's Redis connect timeout: svc's shared-state connection has a fixed connect timeout (2 s) and reconnects with a capped backoff; remove initTimeout",
  getTimeout: "eRPC's Redis read timeout: svc's shared state reads Redis off the request path with a fixed deadline; remove getTimeout",
  setTimeout: "eRPC's Redis write timeout: svc's shared state writes Redis off the request path with a fixed deadline; remove setTimeout",
};

const REDIS_ONLY =
  "svc shares state through Redis only (heads over pub/sub, operator changes in a stream): point the connector at a Redis (`driver: redis` with `redis.uri`), or write svc's top-level `sharedState: {redis: {uri}}`; without shared state each svc instance keeps its own heads";

/** The driver eRPC ends up with: `driver`, overridden by the last connector block present (eRPC's SetDefaults order). */
function driverOf(connector: ConfigObject): string | undefined {
  let d = typeof connector.driver === 'string' ? connector.driver.trim().toLowerCase() : undefined;
  for (const k of ['memory', 'redis', 'postgresql', 'dynamodb', 'grpc']) if (isConfigObject(connector[k])) d = k;
  return d;
}

/**
 * `password` into the URI's user part and go-redis URL options dropped.
 * @returns the URI svc reads, or undefined after a problem
 */
function finalUri(redis: ConfigObject, rp: string, out: NormalizeReport): string | undefined {
  const uri = redis.uri;
  if (typeof uri !== 'string' || uri === '') {
    out.problem(rp, 'a Redis connector for shared state needs `uri` (redis://[user:password@]host:port[/db]) or `addr`');
    return undefined;
  }
  let url: URL | undefined;
  try {
    url = new URL(uri);
  } catch {
    url = undefined; // `${ENV}` left unexpanded (`svc validate --print`), or not a URL: the plugin reports it at start
  }
  const password = redis.password;
  if (password !== undefined) {
    if (typeof password !== 'string' || !url) {
      out.problem(pathOf(rp, 'password'), 'cannot put `password` into this `uri`: write it in the URI (redis://user:password@host:port)');
      return undefined;
    }
    if (url.password) {
      out.problem(pathOf(rp, 'password'), '`password` and a password in `uri` are both set: keep the one in the URI');
      return undefined;
    }
    if (password !== '') url.password = password;
    out.rewrite(pathOf(rp, 'password'), 'password', 'the password in uri');
  }
  if (url && url.search) {
    out.rewrite(pathOf(rp, 'uri'), `options ${url.search}`, '(removed: go-redis options; svc keeps its own connections)');
    url.search = '';
  }
  // Serialised again only when changed (a password added, options dropped): the URI stays as written otherwise.
  return url && (password || uri.includes('?')) ? url.toString().replace(/\/$/, '') : uri;
}

/**
 * The Redis connector of eRPC's block as svc's `sharedState.redis.uri`.
 * @returns the URI, or undefined after a problem
 */
function redisUri(connector: ConfigObject, cp: string, out: NormalizeReport): string | undefined {
  let ok = true;
  for (const k of Object.keys(connector)) {
    if (k === 'driver' || k === 'redis' || k === 'id') continue;
    out.problem(pathOf(cp, k), `eRPC's connector.${k} has no meaning for svc's shared state: remove it`);
    ok = false;
  }
  const redis = connector.redis;
  const rp = pathOf(cp, 'redis');
  if (!isConfigObject(redis)) {
    out.problem(rp, "a Redis connector for shared state needs `redis: {uri}` (or eRPC's `addr`)");
    return undefined;
  }
  for (const [k, message] of Object.entries(REFUSED_REDIS_KEYS)) {
    if (!(k in redis)) continue;
    out.problem(pathOf(rp, k), message);
    delete redis[k];
    ok = false;
  }
  const problems: string[] = [];
  normalizeRedisBlock(redis, rp, { rewrite: (p, f, t) => out.rewrite(p, f, t), problem: (p, m) => (problems.push(p), out.problem(p, m)) });
  if (problems.length) ok = false;
  for (const k of Object.keys(redis)) {
    if (k === 'uri' || k === 'password' || problems.includes(pathOf(rp, k)) || ((k === 'username' || k === 'db') && problems.includes(rp))) continue;
    out.problem(
      pathOf(rp, k),
      k === 'tls' ? "eRPC's Redis `tls` goes with `addr`; with `uri`, write rediss:// for TLS" : `unknown key "${k}" in eRPC's shared-state Redis connector`,
    );
    ok = false;
  }
  const uri = finalUri(redis, rp, out);
  return ok ? uri : undefined;
}

/**
 * eRPC's `database.sharedState` block as svc's `sharedState`.
 * @returns svc's block; `null` when the block shares nothing (memory) and is dropped; undefined after a problem
 */
function mapBlock(block: ConfigObject, topClusterKey: unknown, out: NormalizeReport): ConfigObject | null | undefined {
  const connector = block.connector;
  const cp = pathOf(BASE, 'connector');
  if (connector !== undefined && !isConfigObject(connector)) {
    out.problem(cp, "eRPC's shared-state connector must be an object ({driver: redis, redis: {uri}})");
    return undefined;
  }
  const driver = connector ? driverOf(connector) : 'memory';
  if (driver === 'memory') return null;
  let ok = true;
  for (const k of Object.keys(block)) {
    if (k === 'connector' || k === 'clusterKey') continue;
    out.problem(pathOf(BASE, k), REFUSED_BLOCK_KEYS[k] ?? `unknown key "${k}" in eRPC's database.sharedState`);
    ok = false;
  }
  if (driver === undefined) {
    out.problem(pathOf(cp, 'driver'), `eRPC's shared-state connector needs a driver: ${REDIS_ONLY}`);
    return undefined;
  }
  if (driver !== 'redis') {
    const what = OTHER_DRIVERS[driver];
    out.problem(
      pathOf(cp, 'driver'),
      what ? `${what} is not supported by svc: ${REDIS_ONLY}` : `unknown shared-state connector driver "${driver}": ${REDIS_ONLY}`,
    );
    return undefined;
  }
  const uri = redisUri(connector!, cp, out);
  if (!ok || uri === undefined) return undefined;
  if (connector!.id !== undefined) out.rewrite(pathOf(cp, 'id'), connector!.id, undefined);
  const clusterKey = block.clusterKey ?? topClusterKey;
  return { redis: { uri }, ...(clusterKey !== undefined ? { clusterKey } : {}) };
}

/** The shared-state plugin's `normalize` (see the module comment). */
export function normalizeSharedStateShapes(doc: ConfigDocument, out: NormalizeReport): void {
  const db = doc.database;
  const hasBlock = isConfigObject(db) && 'sharedState' in db;
  const top = doc.clusterKey;
  if (hasBlock) {
    const block = db.sharedState;
    let mapped: ConfigObject | null | undefined;
    if (!isConfigObject(block)) out.problem(BASE, "eRPC's database.sharedState must be an object ({clusterKey, connector: {driver: redis, redis: {uri}}})");
    else if (doc.sharedState !== undefined) out.problem(BASE, "eRPC's database.sharedState and svc's sharedState are both set: keep sharedState");
    else mapped = mapBlock(block, top, out);
    if (mapped === null) out.rewrite(BASE, block, undefined);
    else if (mapped) {
      doc.sharedState = mapped;
      out.rewrite(BASE, BASE, 'sharedState');
      if (top !== undefined && (block as ConfigObject).clusterKey === undefined) {
        out.rewrite('clusterKey', top, 'sharedState.clusterKey');
        delete doc.clusterKey;
      }
    }
    // Refused or moved: either way no longer under `database` (a refusal is reported once, by name).
    delete db.sharedState;
    if (Object.keys(db).length === 0) {
      out.rewrite('database', {}, undefined);
      delete doc.database;
    }
  }
  if (!('clusterKey' in doc)) return;
  const svc = doc.sharedState;
  if (!hasBlock && isConfigObject(svc) && svc.clusterKey === undefined) {
    out.rewrite('clusterKey', top, 'sharedState.clusterKey');
    svc.clusterKey = top;
  } else out.rewrite('clusterKey', top, undefined);
  delete doc.clusterKey;
}
