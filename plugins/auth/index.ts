/**
 * auth plugin (spec §5, §2.3). Owns `projects[].auth` and provides the
 * `auth` service (`AUTH_SERVICE`, contract in `svc-proxy/plugin`) through which the admin and
 * healthcheck plugins check and compile their own `auth` blocks, so every door runs the same
 * strategy schema and code. Taps `authenticate`, which core calls once per HTTP request before
 * directives and before the body is read.
 *
 * Strategies (`{type, <type>: {...}}`, schema.ts): `secret`, `network`, `jwt`
 * (jose), `siwe` (viem), `database` (API keys in memory, Redis or PostgreSQL). A request passes
 * when one accepts it; with strategies configured and none accepting, nothing is forwarded and
 * the caller gets `ErrAuthUnauthorized` (HTTP 401, -32016). No presented credential ever appears
 * in a log, a label or an error message.
 */
import { Counter } from 'prom-client';
import { type HttpRequestInfo, type Identity, definePlugin, type Plugin, type PluginHost, resolveConfigBlock, type ResolvedConfig } from 'svc-proxy/plugin';
import { ConfigError, ErrAuthUnauthorized, StorageUnavailableError } from 'svc-proxy/plugin/errors';
import { AUTH_SERVICE, type Authenticator, type AuthScope, type AuthService, type AuthStrategyType, PLUGIN_STRATEGY_TYPES } from './api.ts';
import { addressList } from 'svc-proxy/util';
import { ApiKeySpace } from './api-keys/space.ts';
import { networkCheck, secretCheck, type Check } from './basic.ts';
import { Connectors } from './connectors.ts';
import { credentialsOf, userIdHeader } from './credentials.ts';
import { jwtCheck, type JwtSettings } from './jwt.ts';
import { siweCheck, type SiweSettings } from './siwe.ts';
import { openNonceStore, type NonceStore } from './siwe-nonces.ts';
import { AuthConfigSchema, type AuthStrategyConfig, ConnectorSchema } from './schema.ts';
import type { ConnectorConfig } from './connectors.ts';
import { normalizeAuthShapes } from './erpc.ts';

export { AuthConfigSchema, AuthStrategySchema, type AuthConfig, type AuthStrategyConfig } from './schema.ts';

/** A compiled strategy with the fields every strategy carries. */
interface Compiled {
  type: AuthStrategyConfig['type'];
  check: Check;
  rateLimitBudget?: string;
  allowClientDirectives?: string;
  trustUserIdHeader: boolean;
}

/** What the rejection says when no strategy gave a reason of its own. */
const UNAUTHORIZED = 'unauthorized: no auth strategy accepted the request (send a valid secret, API key, JWT or SIWE message, or call from an allowed address)';

/** The budget ids declared in `rateLimiters.budgets[]` (owned by the rate-limit plugin). */
function budgetIdsOf(config: ResolvedConfig): Set<string> {
  const budgets = (config.settings.rateLimiters as { budgets?: Array<{ id?: unknown }> } | undefined)?.budgets ?? [];
  return new Set(budgets.map((b) => b.id).filter((id): id is string => typeof id === 'string'));
}

/**
 * Creates the auth plugin (name `auth`).
 * @returns a plugin owning `projects[].auth`, providing the `auth` service, tapping
 *   `configured`, `authenticate` and `shutdown`
 */
export function authPlugin(): Plugin {
  return definePlugin({
    name: 'auth',
    provides: [AUTH_SERVICE],
    schema: { project: { auth: AuthConfigSchema }, normalize: normalizeAuthShapes },
    apply(host: PluginHost) {
      const secretRequests = new Counter({
        name: 'svc_auth_secret_requests_total',
        help: 'Requests accepted by a secret strategy, by secret id (never the value)',
        labelNames: ['secret_id'],
        registers: [host.metrics],
      });
      const connectors = new Connectors(host.logger, host.metrics);
      const spaces = new Map<string, ApiKeySpace>();
      const pluginStrategies = new Map<string, AuthStrategyType>();
      /** SIWE nonce stores by connector settings: strategies on the same settings share one. */
      const nonceStores = new Map<string, NonceStore>();
      let budgets = new Set<string>();
      const budgetExists = (id: string) => budgets.has(id);

      const compileOne = (s: AuthStrategyConfig, i: number, scope: AuthScope, all: readonly AuthStrategyConfig[]): Check => {
        const path = `${scope.path}.strategies[${i}]`;
        switch (s.type) {
          case 'secret': {
            const id = s.secret.id ?? `strategy-${i}`;
            const labels = { secret_id: id };
            return secretCheck(s.secret.value, id, () => secretRequests.inc(labels));
          }
          case 'network': {
            const list = (() => {
              try {
                return addressList(
                  [...(s.network.allowedCIDRs ?? []), ...(s.network.allowedIPs ?? []), ...(s.network.allowLocalhost ? ['127.0.0.0/8', '::1'] : [])],
                  `${path}.network`,
                );
              } catch (e) {
                throw new ConfigError([{ path: `${path}.network`, message: (e as Error).message.replace(/^[^:]+: /, '') }]);
              }
            })();
            return networkCheck(list);
          }
          case 'jwt':
            return jwtCheck(s.jwt as JwtSettings, path, budgetExists);
          case 'siwe':
            return siweCheck(
              s.siwe as SiweSettings,
              nonceStoreFor((s.siwe as SiweSettings).nonces, all, `${path}.siwe`, 'siwe: used messages'),
              scope.projectId !== undefined,
            );
          case 'x402': {
            // It accepts every caller the strategies before it did not (and asks them to pay): one after it would never run.
            if (i !== all.length - 1)
              throw new ConfigError([
                { path, message: `list the ${s.type} strategy last: it accepts every caller the strategies before it did not, so none after it would run` },
              ]);
            const provided = pluginStrategies.get(s.type);
            if (!provided) throw new ConfigError([{ path, message: `strategy type "${s.type}" needs the ${s.type} plugin (it is in the default preset)` }]);
            const check = provided.compile(s.x402, {
              path: `${path}.${s.type}`,
              scope,
              claims: (connector) =>
                nonceStoreFor(
                  connector === undefined ? undefined : resolveConfigBlock(ConnectorSchema, connector, `${path}.${s.type}.nonces`),
                  all,
                  `${path}.${s.type}`,
                  `${s.type}: claims`,
                ),
            });
            return (_creds, http) => check(http);
          }
          case 'database': {
            if (scope.projectId === undefined) throw new ConfigError([{ path, message: 'a database (API key) strategy is only for project auth' }]);
            const space = spaceFor(scope.projectId, s, path);
            const open = s.failOpen?.enabled ? s.failOpen : undefined;
            let lastFailOpenLog = 0;
            if (open && open.userId === undefined)
              throw new ConfigError([{ path: `${path}.failOpen.userId`, message: 'is required when failOpen.enabled is true' }]);
            return async (creds) => {
              for (const key of creds.secrets) {
                let record: Awaited<ReturnType<typeof space.lookup>>;
                try {
                  record = await space.lookup(key);
                } catch (e) {
                  // The store failed (not "unknown key"): fail open to the emergency user when configured, else refuse (fail closed).
                  if (!open) throw e;
                  // Logged at most once a minute per strategy: an outage must not flood the log with one line per request.
                  const now = Date.now();
                  if (now - lastFailOpenLog >= 60_000) {
                    lastFailOpenLog = now;
                    host.logger.warn(
                      { err: e instanceof Error ? e.message : String(e), userId: open.userId, strategy: path },
                      'API-key store failed: serving the fail-open user',
                    );
                  }
                  return { userId: open.userId as string, rateLimitBudget: open.rateLimitBudget };
                }
                if (record?.enabled) return { userId: record.userId, rateLimitBudget: record.rateLimitBudget };
              }
              return undefined;
            };
          }
        }
      };

      // Used SIWE messages and other claims (x402 authorizations) live in the tier of the API keys: the block's own connector, else
      // the block's first database connector, else one memory store per replica (siwe-nonces.ts).
      const nonceStoreFor = (own: ConnectorConfig | undefined, all: readonly AuthStrategyConfig[], path: string, what: string): NonceStore => {
        const db = all.find((x): x is Extract<AuthStrategyConfig, { type: 'database' }> => x.type === 'database');
        const c = own ?? db?.connector ?? { id: 'auth-memory', driver: 'memory' as const };
        const name = JSON.stringify(c);
        let store = nonceStores.get(name);
        if (!store) {
          if (c.driver === 'memory')
            host.logger.info(
              { strategy: path },
              `${what} are recorded in memory, per replica (its workers share the primary's record): behind several replicas one can be used once on each; set a redis or postgresql connector, or a database strategy on one`,
            );
          nonceStores.set(name, (store = openNonceStore(connectors, c, `${path}.nonces`)));
        }
        return store;
      };

      const spaceFor = (projectId: string, s: Extract<AuthStrategyConfig, { type: 'database' }>, path: string): ApiKeySpace => {
        const name = `${projectId}\u0000${s.connector.id}`;
        let space = spaces.get(name);
        if (!space) {
          const store = connectors.storeFor(projectId, s.connector, `${path}.connector`);
          space = new ApiKeySpace(store, Number(s.cache?.ttl ?? 60_000), budgetExists, undefined, s.connector.driver !== 'memory');
          spaces.set(name, space);
        }
        return space;
      };

      /** Compiles validated strategies (durations in ms): project auth, and every door's block. */
      const compileStrategies = (strategies: readonly AuthStrategyConfig[], scope: AuthScope): Authenticator => {
        const compiled: Compiled[] = strategies.map((s, i) => ({
          type: s.type,
          check: compileOne(s, i, scope, strategies),
          rateLimitBudget: s.rateLimitBudget,
          allowClientDirectives: s.allowClientDirectives,
          trustUserIdHeader: s.trustUserIdHeader === true,
        }));
        return {
          async authenticate(http: HttpRequestInfo): Promise<Identity> {
            const creds = credentialsOf(http);
            let reason: string | undefined;
            let storeFailed = false;
            for (const c of compiled) {
              // A caller whose key could not be looked up is refused as such, never asked to pay instead (an outage must not charge key holders).
              if (storeFailed && c.type === 'x402') continue;
              let accepted;
              try {
                accepted = await c.check(creds, http);
              } catch (e) {
                // A strategy refusing a presented credential says why (a replayed SIWE message).
                if (e instanceof ErrAuthUnauthorized) {
                  reason = e.message;
                  continue;
                }
                // A store that fails or holds a corrupt record rejects (fail closed), saying why.
                storeFailed = true;
                reason =
                  e instanceof Error && e.message === 'missing or invalid userId in current data'
                    ? e.message
                    : 'unauthorized: the API key store could not be read';
                // A store skipped by its open breaker is not logged per request: the breaker logged its edge.
                if (!(e instanceof StorageUnavailableError && e.reason === 'open'))
                  host.logger.warn(
                    { scope: scope.path, strategy: c.type, err: e instanceof Error ? e.message.slice(0, 200) : String(e) },
                    'auth strategy failed',
                  );
                continue;
              }
              if (!accepted) continue;
              const claimed = c.trustUserIdHeader ? userIdHeader(http) : undefined;
              return {
                userId: claimed ?? accepted.userId,
                strategy: c.type,
                // A caller naming itself by header gets no directive grant.
                allowClientDirectives: claimed !== undefined ? undefined : c.allowClientDirectives,
                rateLimitBudget: accepted.rateLimitBudget ?? c.rateLimitBudget,
              };
            }
            throw new ErrAuthUnauthorized(reason ?? UNAUTHORIZED);
          },
        };
      };

      const service: AuthService = {
        compile(block, scope) {
          if (block === undefined || block === null) return undefined;
          // The schema a project's `auth` gets from the config schema, with the same paths and messages.
          const { strategies } = resolveConfigBlock(AuthConfigSchema, block, scope.path);
          return strategies.length === 0 ? undefined : compileStrategies(strategies, scope);
        },
        apiKeys(projectId, connectorId) {
          return spaces.get(`${projectId}\u0000${connectorId}`);
        },
        registerStrategy(type, strategy) {
          if (!(PLUGIN_STRATEGY_TYPES as readonly string[]).includes(type))
            throw new TypeError(`auth: "${type}" is not a strategy type the auth schema accepts`);
          if (pluginStrategies.has(type)) throw new TypeError(`auth: strategy type "${type}" is provided twice`);
          pluginStrategies.set(type, strategy);
        },
      };
      host.services.provide(AUTH_SERVICE, service);

      const byProject = new Map<string, Authenticator>();
      let tapped = false;
      host.hooks.configured.tap('auth', (c) => {
        budgets = budgetIdsOf(c);
        c.projects.forEach((p, i) => {
          const auth = p.settings.auth as { strategies: AuthStrategyConfig[] } | undefined;
          if (auth && auth.strategies.length > 0) byProject.set(p.id, compileStrategies(auth.strategies, { path: `projects[${i}].auth`, projectId: p.id }));
        });
        // Tapped only when some project has auth: core skips the hook (and its promise) per
        // request while nothing taps it, so a svc without project auth pays nothing here.
        if (byProject.size > 0 && !tapped) {
          tapped = true;
          host.hooks.authenticate.tapPromise('auth', (http, project) => byProject.get(project.id)?.authenticate(http) ?? Promise.resolve(undefined));
        }
      });
      // Remote nonce stores connect once svc listens, off the request path: a cold connect is not part of a login's deadline.
      host.hooks.listening.tapPromise('auth', async () => {
        for (const store of nonceStores.values()) void store.warm?.();
      });
      host.hooks.shutdown.tapPromise('auth', () => connectors.close());
    },
  });
}
