/**
 * `svc-proxy/plugins/auth`: what the auth plugin offers other plugins (spec §5): the auth service, its
 * key, and the helpers a door other than a project (admin, healthcheck, an in-house route) uses to
 * run the same strategy code. Services meet by key name at run time, so the names are contract too.
 */
import { serviceKey, Type, type HttpRequestInfo, type Identity, type ServiceKey, type ServiceRegistry } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import type { TObject } from '@sinclair/typebox';

/** Where an `auth` block is configured: names config paths in errors, scopes API keys and metrics. */
export interface AuthScope {
  /** Config path of the `auth` block, e.g. `projects[0].auth`, `admin.auth`. */
  path: string;
  /** Project id for project auth (API keys are stored per project and connector). */
  projectId?: string;
}

/** A compiled strategy list (spec §5.1). */
export interface Authenticator {
  /**
   * Lets a request in or not (spec §5): the first strategy that accepts it gives the identity.
   * @param http the request's headers, query and resolved client address
   * @returns the caller's identity
   * @throws ErrAuthUnauthorized (HTTP 401, -32016) when no strategy accepts; the message never
   *   holds a presented credential
   */
  authenticate(http: HttpRequestInfo): Promise<Identity>;
}

/** A stored API key (spec §2.3). */
export interface ApiKeyRecord {
  /** The secret clients present (at least 32 random bytes encoded are recommended). */
  key: string;
  /** The user the key maps to: per-user metrics and `perUser` budgets. */
  userId: string;
  /** A disabled key is rejected like an unknown one. */
  enabled: boolean;
  /** Budget id from `rateLimiters.budgets[]`; beats the strategy's own budget. */
  rateLimitBudget?: string;
  /** ISO 8601. */
  createdAt: string;
  /** ISO 8601. */
  updatedAt: string;
}

/**
 * The API keys of one (projectId, connectorId) (spec §2.3, §3.3, §4.4), as the admin methods
 * manage them. Every change evicts the key from this replica's lookup cache at once; other
 * replicas follow within their `cache.ttl`.
 */
export interface ApiKeyManager {
  /**
   * True when the keys live in a store every process reads (redis, postgresql): a change made
   * through one process needs no replay on the others (they follow within their cache TTL).
   * False for the memory driver, whose keys each process holds itself.
   */
  readonly shared: boolean;
  /**
   * Adds a key (spec §4.4 rule 1: one per call, `enabled` defaults to true).
   * @throws Error `api key already exists` when the key is taken; a driver error when the store fails
   */
  add(input: { apiKey: string; userId: string; rateLimitBudget?: string; enabled?: boolean }): Promise<ApiKeyRecord>;
  /**
   * A page of keys in key order (spec §4.4 rule 2).
   * @param limit page size (1..1000)
   * @param paginationToken '' or blank for the first page, then the previous `nextToken`
   * @throws Error when the token is not one svc wrote
   */
  list(limit: number, paginationToken: string | undefined): Promise<{ apiKeys: ApiKeyRecord[]; nextToken: string; hasMore: boolean; totalReturned: number }>;
  /**
   * Merges `updates` into the record (spec §4.4 rule 3): values overwrite, `null` deletes a field.
   * Only `userId`, `enabled` and `rateLimitBudget` can change.
   * @throws Error `api key not found`, or on an update that would leave no valid userId
   */
  update(apiKey: string, updates: Record<string, unknown>): Promise<ApiKeyRecord>;
  /**
   * Deletes a key and its reverse index entry (spec §4.4 rule 4).
   * @throws Error `api key not found`
   */
  delete(apiKey: string): Promise<ApiKeyRecord>;
}

/**
 * A record of ids each accepted once across every worker and replica sharing its store (the tier of the block's API keys, as SIWE's used
 * messages): memory per replica, Redis `SET NX PX`, or a PostgreSQL row; every remote claim under its connector's breaker with a 500 ms
 * deadline.
 */
export interface ClaimStore {
  /**
   * Records `id` until `ttlMs` from now unless it is recorded and unexpired already.
   * @param id a bounded key the caller derives (a hash), never a client's raw value
   * @param ttlMs how long it must be remembered, ms (at least 1)
   * @returns true on first use, false when already recorded
   * @throws Error when the store fails or (memory) is full: callers refuse (fail closed)
   */
  claim(id: string, ttlMs: number): Promise<boolean>;
}

/** What a strategy type provided by another plugin gets to compile one strategy (see {@link AuthService.registerStrategy}). */
export interface StrategyCompileContext {
  /** Config path of the strategy's own block, e.g. `projects[0].auth.strategies[1].x402`. */
  path: string;
  /** Where the `auth` block is configured (a project's, or a door's when `projectId` is undefined). */
  scope: AuthScope;
  /**
   * The claim store for this block: the connector given (the shape of a `database` strategy's `connector`), else the connector of the
   * block's first `database` strategy, else memory per replica.
   * @param connector a connector block as written, or undefined for the default
   */
  claims(connector?: unknown): ClaimStore;
}

/**
 * Accepts a request (an identity's user id and budget) or not (undefined), from its headers and query only: the body is not read yet.
 * @throws ErrAuthUnauthorized to refuse with a reason of its own (the next strategy is still tried)
 */
export type StrategyCheck = (http: HttpRequestInfo) => Promise<{ userId: string; rateLimitBudget?: string } | undefined>;

/** An auth strategy type another plugin provides (spec §5 item 1: the pay-per-request strategy), written `{type, <type>: {...}}`. */
export interface AuthStrategyType {
  /**
   * Validates and compiles one strategy's block, once, when the auth plugin compiles its `auth` block (`configured`).
   * @param block the strategy's own block as written (`x402: {...}`), validated here (e.g. with `resolveConfigBlock`)
   * @throws ConfigError naming `ctx.path` for a block that is invalid or cannot work where it is configured
   */
  compile(block: unknown, ctx: StrategyCompileContext): StrategyCheck;
}

/** Strategy types the auth schema accepts as `{type, <type>: {...}}` blocks whose fields another plugin checks (spec §5 item 8). */
export const PLUGIN_STRATEGY_TYPES = ['x402'] as const;

/** What the auth plugin offers other plugins (spec §5.1: every door runs the same strategy code). */
export interface AuthService {
  /**
   * Validates an `auth` block as written in config (`{strategies: [...]}`, the strategy schema of
   * `projects[].auth`), fills its defaults, converts its durations and compiles it, once, at boot
   * (call it from `configured`).
   * @param block the raw block, declared in the door's own schema with {@link AuthBlockSchema}
   * @param scope where it is configured: every problem is reported under `scope.path`
   * @returns undefined when the block is absent or lists no strategy
   * @throws ConfigError with each problem's path and message, as `svc validate` reports any config
   *   key (`admin.auth.strategies[0].secret.value: is required`), or naming a strategy that cannot
   *   work (a CIDR or key that does not parse, a `database` strategy outside project auth)
   */
  compile(block: unknown, scope: AuthScope): Authenticator | undefined;
  /**
   * The API keys of a project's `database` strategy whose connector has this id.
   * @returns undefined when the pair does not resolve (the admin's `failed to find the service`)
   */
  apiKeys(projectId: string, connectorId: string): ApiKeyManager | undefined;
  /**
   * Provides a strategy type of {@link PLUGIN_STRATEGY_TYPES}; call it from the providing plugin's `apply` (it declares
   * `dependsOn: ['auth']`), before any block is compiled.
   * @throws TypeError when the type is not one the schema accepts, or is provided twice
   */
  registerStrategy(type: (typeof PLUGIN_STRATEGY_TYPES)[number], strategy: AuthStrategyType): void;
}

/** Key of the auth plugin's {@link AuthService}. */
export const AUTH_SERVICE: ServiceKey<AuthService> = serviceKey<AuthService>('auth');

/**
 * The schema of an `auth` block a plugin other than auth owns (`admin.auth`, `healthCheck.auth`,
 * an in-house route's): an object, checked in full by {@link AuthService.compile} when the
 * plugin reads its config, so the strategy schema stays in the auth plugin.
 * @param description the key's line in the config reference
 */
export function AuthBlockSchema(description = 'auth strategies, as in `projects[].auth` (checked by the auth plugin at start-up)'): TObject {
  return Type.Object({}, { additionalProperties: true, description });
}

/**
 * The authenticator of a door other than a project (admin, healthcheck, an in-house route): its
 * `auth` block compiled through the {@link AuthService}.
 * @param services the host's service registry
 * @param block the door's raw `auth` block (none: the door has no auth)
 * @param path config path of the block, e.g. `admin.auth`
 * @returns undefined when there is no block or it lists no strategy
 * @throws ConfigError when strategies are configured but no plugin provides the auth service,
 *   or when the block is invalid (see {@link AuthService.compile})
 */
export function doorAuthenticator(services: ServiceRegistry, block: unknown, path: string): Authenticator | undefined {
  if (block === undefined || block === null) return undefined;
  const auth = services.get(AUTH_SERVICE);
  if (auth) return auth.compile(block, { path });
  const strategies = (block as { strategies?: unknown }).strategies;
  if (Array.isArray(strategies) && strategies.length === 0) return undefined;
  throw new ConfigError([{ path, message: 'needs the auth plugin (it is in the default preset)' }]);
}
