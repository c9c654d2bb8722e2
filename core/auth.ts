/**
 * The `auth` service contract (issue #13 item 1): the auth plugin provides it; the admin and
 * healthcheck plugins (and any in-house plugin guarding its own route) compile their
 * `auth.strategies` through it, so every door of svc runs the same strategy code (spec §5.1).
 * Types only: the behaviour lives in plugins/auth.
 */
import type { HttpRequestInfo, Identity } from './context.ts';
import type { AuthStrategyConfig } from './config/auth-schema.ts';
import { ConfigError } from './config/load.ts';

/** Service name of the auth plugin in `host.services`. */
export const AUTH_SERVICE = 'auth';

/** Where a strategy list is configured: names config paths in errors, scopes API keys and metrics. */
export interface AuthScope {
  /** Config path of the `auth` block, e.g. `projects[0].auth`, `admin.auth`. */
  path: string;
  /** Project id for project auth (API keys are stored per project and connector). */
  projectId?: string;
}

/** A compiled strategy list. */
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

/** What the auth plugin offers other plugins. */
export interface AuthService {
  /**
   * Compiles a strategy list once (keys parsed, CIDR lists built, connectors opened lazily).
   * @param strategies validated strategies (`AuthStrategySchema`, durations in ms)
   * @param scope where they are configured
   * @throws ConfigError when a strategy cannot work (a CIDR or key that does not parse, a
   *   `database` strategy outside project auth)
   */
  compile(strategies: readonly AuthStrategyConfig[], scope: AuthScope): Authenticator;
  /**
   * The API keys of a project's `database` strategy whose connector has this id.
   * @returns undefined when the pair does not resolve (the admin's `failed to find the service`)
   */
  apiKeys(projectId: string, connectorId: string): ApiKeyManager | undefined;
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
 * The authenticator of a door other than a project (admin, healthcheck, an in-house route):
 * its strategies compiled through the `auth` service.
 * @param services the host's service registry
 * @param strategies the door's `auth.strategies` (none: the door has no auth)
 * @param path config path of the `auth` block, e.g. `admin.auth`
 * @returns undefined when there are no strategies
 * @throws ConfigError when strategies are configured but no plugin provides the `auth` service,
 *   or when one cannot work
 */
export function doorAuthenticator(services: { get<T>(name: string): T | undefined }, strategies: readonly AuthStrategyConfig[] | undefined, path: string): Authenticator | undefined {
  if (!strategies || strategies.length === 0) return undefined;
  const auth = services.get<AuthService>(AUTH_SERVICE);
  if (!auth) throw new ConfigError([{ path, message: 'needs the auth plugin (it is in the default preset)' }]);
  return auth.compile(strategies, { path });
}
