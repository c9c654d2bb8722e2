/**
 * The contracts of the services built-in plugins publish to each other and to in-house plugins
 *: each typed key with its interface, a few lines each. The implementations
 * live in the providing plugins (plugins/auth, plugins/cors, ...); a consumer imports the key
 * from `svc/plugin` and gets the service typed, `host.services.get(AUTH_SERVICE)`, without
 * importing the provider. A key only one plugin uses stays in that plugin.
 *
 * Services meet by key name at run time (see {@link ServiceKey}), so the names below are part of
 * the contract too: a plugin built against another installed copy of svc reaches the same service.
 */
import { Type, type TObject } from '@sinclair/typebox';
import type { Middleware } from 'koa';
import type { SyncHook } from 'tapable';
import { ConfigError } from '../config/load.ts';
import type { UpstreamInput } from '../config/types.ts';
import type { HttpRequestInfo, Identity } from './context.ts';
import { serviceKey, type ServiceKey, type ServiceRegistry } from './host.ts';
import type { DirectiveDeclaration } from './directive.ts';
import type { Logger } from '../lib/logger.ts';
import type { Network } from './registry/network.ts';
import type { Project } from './registry/project.ts';
import type { Upstream } from './registry/upstream.ts';

// ---- auth (provided by the auth plugin; used by admin, healthcheck, in-house routes) ----------

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

// ---- cors (provided by the cors plugin; used by admin) ---------------------------------------

/** A `cors` block with every field filled (spec §2.5). */
export interface CorsSettings {
  /** Origins allowed: exact, `*`, or a glob such as `https://*.example.com`. */
  readonly allowedOrigins: readonly string[];
  /** Access-Control-Allow-Methods. */
  readonly allowedMethods: readonly string[];
  /** Access-Control-Allow-Headers. */
  readonly allowedHeaders: readonly string[];
  /** Access-Control-Expose-Headers. */
  readonly exposedHeaders: readonly string[];
  /** Access-Control-Allow-Credentials (never with a `*` origin). */
  readonly allowCredentials: boolean;
  /** Preflight cache time, seconds. */
  readonly maxAge: number;
}

/** The CORS of one door: its settings and its Koa middleware. */
export interface CorsPolicy {
  /** The settings in effect, defaults filled. */
  readonly settings: CorsSettings;
  /** CORS headers for listed origins; a preflight (OPTIONS with `Access-Control-Request-Method`) answered 204 without calling `next`. */
  readonly middleware: Middleware;
}

/** What the cors plugin offers other plugins. */
export interface CorsService {
  /**
   * The CORS of a door other than a project (the admin endpoint, an in-house route): a `cors`
   * block as written, with the fields of `projects[].cors`, validated, with the spec §2.5 admin
   * defaults for what it leaves out. Call it from `configured`.
   * @param block the raw block (undefined: every default), declared with {@link CorsBlockSchema}
   * @param path config path of the block, e.g. `admin.cors`
   * @throws ConfigError with each problem's path, as `svc validate` reports any config key, and
   *   `<path>.allowCredentials: must be false when allowedOrigins contains "*"`
   */
  door(block: unknown, path: string): CorsPolicy;
  /**
   * Whether a browser page from `origin` may use a project's doors (spec §2.5): the project's
   * `cors.allowedOrigins` (exact, `*`, globs) as the HTTP door applies them. A project without
   * `cors` allows no foreign origin (its HTTP answers carry no CORS headers, so no page reads
   * them). The websocket plugin refuses an upgrade whose `Origin` this refuses.
   * @param projectId the project's id
   * @param origin the request's `Origin` header (an overlong one is refused)
   */
  allowsOrigin(projectId: string, origin: string): boolean;
}

/** What the rate-limit plugin offers doors whose traffic is not calls (WebSocket subscriptions). */
export interface RateLimitService {
  /**
   * Charges one unit of work that is not a pipeline call (an `eth_subscribe`: each subscription,
   * each `logs` filter) to the budgets a call of `method` to `network` by this caller is charged
   * to: its auth strategy's or API key's, the project's, the network's (the call pipeline's order; spec §5, §8).
   * @param network the network the work is for
   * @param method the method counted against the budgets' rules (`eth_subscribe`)
   * @param caller the client's address and identity, as the call pipeline sees them
   * @throws ErrAuthRateLimitRuleExceeded, ErrProjectRateLimitRuleExceeded or
   *   ErrNetworkRateLimitRuleExceeded (HTTP 429, -32005) over one; nothing when none applies
   */
  charge(network: Network, method: string, caller: { clientAddress: string; identity?: Identity }): Promise<void>;
}

/** Key of the rate-limit plugin's {@link RateLimitService}. */
export const RATE_LIMIT_SERVICE: ServiceKey<RateLimitService> = serviceKey<RateLimitService>('rate-limit');

/** Key of the cors plugin's {@link CorsService}. */
export const CORS_SERVICE: ServiceKey<CorsService> = serviceKey<CorsService>('cors');

/**
 * The schema of a `cors` block a plugin other than cors owns (`admin.cors`): an object, checked
 * in full by {@link CorsService.door} when the plugin reads its config.
 * @param description the key's line in the config reference
 */
export function CorsBlockSchema(description = 'CORS, with the fields of `projects[].cors` (checked by the cors plugin at start-up)'): TObject {
  return Type.Object({}, { additionalProperties: true, description });
}

// ---- cost (provided by the cost plugin; used by pricing plugins) -----------------------------

/**
 * A vendor's price table: the units of one request to that vendor for a method, or undefined
 * when the table does not price it (the provider's `creditUnits`, then the flat 1, apply).
 * Optionally versioned: `version` is what `X-SVC-Credits-Version` carries for the credits this
 * table priced (an in-house table names its own revision), else svc's version. Build one with
 * `Object.assign((method) => ..., { version: '2025-06' })`.
 */
export interface PriceTable {
  /**
   * Units of one request for a method, or undefined when not priced here.
   * @param method the JSON-RPC method sent upstream
   */
  (method: string): number | undefined;
  /** The table's version: 1-64 characters of `A-Z a-z 0-9 . _ ~ : + @ / -` (it goes into a header). */
  readonly version?: string;
}

/** What pricing plugins use (a plugin that registers tables declares `dependsOn: ['cost']`). */
export interface CostService {
  /**
   * Registers (or replaces) the price table of a vendor (`vendorName` / provider vendor); its
   * `version` is read once, here.
   * @throws TypeError when the table is not a function or its version is not a valid header token (see {@link PriceTable.version})
   */
  registerPriceTable(vendor: string, table: PriceTable): void;
}

/** Key of the cost plugin's {@link CostService}: `host.services.require(COST_SERVICE)`, with `dependsOn: ['cost']`. */
export const COST_SERVICE: ServiceKey<CostService> = serviceKey<CostService>('cost');

// ---- providers (provided by the providers plugin; used by vendor plugins) --------------------

/** One upstream a vendor offers for a chain. */
export interface VendorUpstream {
  /** http(s) JSON-RPC URL. */
  endpoint: string;
  /** Appended to the provider's id template (e.g. the repository vendor's redacted endpoint). */
  idSuffix?: string;
  /** Further upstream settings (ignoreMethods, allowMethods, autoIgnoreUnsupportedMethods...). */
  entry?: Partial<UpstreamInput>;
}

/**
 * A vendor (spec §2.10): a plugin registers one with the providers service so teams can add
 * vendors without touching svc.
 */
export interface Vendor {
  /** The `vendor` value of `providers[]` it serves. */
  readonly name: string;
  /**
   * The upstreams of one chain; `[]` when the vendor does not serve it.
   * @param settings the provider's `settings`
   * @throws anything on a bootstrap failure (retried with backoff)
   */
  upstreamsFor(chainId: number, settings: Record<string, unknown>, provider: { id: string; logger: Logger }): Promise<VendorUpstream[]>;
  /**
   * Optional: what the vendor will contact with these settings, in a few words (e.g. the
   * repository vendor's catalog URL, redacted), for the zero-config start-up log line.
   */
  describe?(settings: Record<string, unknown>): string;
}

/** What vendor plugins use (declare `dependsOn: ['providers']`). */
export interface ProvidersService {
  /**
   * Registers a vendor; call in `apply`.
   * @throws PluginContractError when a vendor of that name is registered already
   */
  registerVendor(vendor: Vendor): void;
}

/** Key of the providers plugin's {@link ProvidersService}. */
export const PROVIDERS_SERVICE: ServiceKey<ProvidersService> = serviceKey<ProvidersService>('providers');

// ---- directives (provided by the directives plugin; used by plugins declaring their own) -----

/**
 * What the directives plugin offers the plugins that honour directives (every directive is a
 * plugin's: core/directive.ts; `declareDirectives` calls this).
 */
export interface DirectivesService {
  /**
   * Declares a directive: read from its header and query parameter, governed by
   * `allowClientDirectives` (unless `filtered: false`), defaulted from `directiveDefaults.<field>`
   * (a key the plugin's schema fragment declares). Declare in `apply`. An identical declaration
   * again (a second plugin honouring the same directive) is accepted.
   * @throws PluginContractError for a malformed declaration, or a name another declaration uses differently
   */
  declare(d: DirectiveDeclaration): void;
}

/** Key of the directives plugin's {@link DirectivesService}. */
export const DIRECTIVES_SERVICE: ServiceKey<DirectivesService> = serviceKey<DirectivesService>('directives');

// ---- state polling (provided by evm-state; read by the healthcheck) -----------------------

/**
 * Key of the upstreams a state poller runs for (the evm-state plugin; an upstream with
 * `evm.statePollerInterval: 0` has none). The healthcheck counts such an upstream initialised
 * only once its first poll came in; the values are the evm-state plugin's own.
 */
export const STATE_POLLERS_SERVICE: ServiceKey<ReadonlyMap<Upstream, unknown>> = serviceKey<ReadonlyMap<Upstream, unknown>>('evm-state.pollers');

// ---- websocket (provided by the websocket plugin; tapped by in-house plugins) -----------------

/** The subscription types of the geth pub-sub API (`eth_subscribe`) svc serves. */
export type SubscriptionType = 'newHeads' | 'logs' | 'newPendingTransactions';

/** One WebSocket connection as the lifecycle hooks see it (read-only: observe, never change). */
export interface WsConnectionInfo {
  /** Connection id, unique in the process (`ws-<n>`). */
  readonly id: string;
  /** The project the upgrade path routed to. */
  readonly project: Project;
  /** The network the path names; undefined when each call names it with the body field `networkId`. */
  readonly network?: Network;
  /** The upgrade request's headers, query and client address (what auth and directives read). */
  readonly http: HttpRequestInfo;
  /** Who the upgrade was authenticated as, when the project has auth strategies. */
  readonly identity?: Identity;
}

/**
 * The WebSocket endpoint's lifecycle hooks (tapable `SyncHook`s, observation only): a throwing tap
 * is logged and counted in `svc_plugin_errors_total{plugin,hook}` and never breaks the
 * connection. Taps run on the connection's hot path: keep them cheap.
 */
export interface WebSocketHooks {
  /** A connection opened (after routing, auth and the upgrade). */
  readonly open: SyncHook<[WsConnectionInfo]>;
  /** A message arrived (its UTF-8 text, a call or a batch, at most `server.maxBodySize` bytes), before it is served. */
  readonly message: SyncHook<[WsConnectionInfo, string]>;
  /** A subscription was accepted: its type and its filter (`eth_subscribe` params[1], e.g. the `logs` filter; undefined when none). */
  readonly subscribe: SyncHook<[WsConnectionInfo, SubscriptionType, unknown]>;
  /** A connection closed: the close code (1000 normal, 1001 shutdown, 1008 too slow or policy, 1009 too big, 1006 cut) and reason. */
  readonly close: SyncHook<[WsConnectionInfo, number, string]>;
}

/**
 * What the websocket plugin offers other plugins: its lifecycle hooks and the open connection
 * count. Tap from your plugin's `apply` when it is applied after `websocket` (declare
 * `dependsOn: ['websocket']`), else from `configured`.
 */
export interface WebSocketService {
  /** The lifecycle hooks. */
  readonly hooks: WebSocketHooks;
  /** Connections open now (upgraded and not yet closed). */
  connections(): number;
}

/** Key of the websocket plugin's {@link WebSocketService}. */
export const WEBSOCKET_SERVICE: ServiceKey<WebSocketService> = serviceKey<WebSocketService>('websocket');

/**
 * One upstream circuit breaker as other plugins see it (failsafe `circuitBreaker`, upstream
 * scope; spec §2.3): the operator page shows it, nothing outside the failsafe plugin changes it.
 */
export interface CircuitBreakerView {
  /** `closed` (calls pass), `open` (refused until `halfOpenAfter`), `half-open` (trial calls). */
  readonly state: 'closed' | 'open' | 'half-open';
}

/**
 * Key of the failsafe plugin's upstream circuit breakers: upstream → its breakers, one per
 * failsafe entry with a `circuitBreaker` (empty or absent: none). Read by the operator page
 * (`/admin/ui`) and tests.
 */
export const BREAKERS_SERVICE: ServiceKey<ReadonlyMap<Upstream, readonly CircuitBreakerView[]>> = serviceKey<ReadonlyMap<Upstream, readonly CircuitBreakerView[]>>('failsafe.breakers');
