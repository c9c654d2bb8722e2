/**
 * admin plugin (spec §2.5, §4.4, §5.6, §7): `POST /admin`, a JSON-RPC
 * endpoint with the ten methods of methods.ts, mounted through the `routes` hook.
 *
 * In order, for every request to `/admin`:
 * 1. `admin.cors` (defaults of spec §2.5, independent of project CORS; from the cors plugin's
 *    `cors` service, so without that plugin the endpoint sends no CORS headers): CORS headers,
 *    and an OPTIONS preflight answered 204 before anything else;
 * 2. closed (401) unless `admin.auth.strategies` holds at least one strategy;
 * 3. `Content-Type: application/json` required (415 otherwise, nothing runs), so a cross-site
 *    form post cannot drive it;
 * 4. auth through the auth plugin's `auth` service, the same strategy schema and code as
 *    projects (401 on failure);
 * 5. the body (at most 1 MiB), one call or a batch, answered like the proxy answers: a single
 *    call's error takes its HTTP status, a batch is 200 with an answer per element.
 *
 * With `admin.ui.enabled`, the operator page at `/admin/ui` (ui/, docs/admin-ui.md): its data and
 * stream go through the same authenticator, its buttons are plain calls to this endpoint.
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import { definePlugin, type Plugin, type PluginHost, Strict, Type } from 'svc-proxy/plugin';
import {
  asSvcError,
  ConfigError,
  ErrAuthUnauthorized,
  ErrInvalidRequest,
  ErrJsonRpcRequestUnmarshal,
  type SvcError,
  toJsonRpcError,
} from 'svc-proxy/plugin/errors';
import { AuthBlockSchema, type Authenticator, doorAuthenticator } from 'svc-proxy/plugins/auth';
import { CORS_SERVICE, CorsBlockSchema } from 'svc-proxy/plugins/cors';
import { broadcastToWorkers, onWorkerBroadcast, readRequestBody } from 'svc-proxy/util';
import { adminMethods, replayNeeded, unsupported } from './methods.ts';
import { hostAllowed, hostRefusal, type HostGuardSettings } from './host-guard.ts';
import { adminUi, AdminUiSchema, type AdminUiSettings } from './ui/index.ts';

/** Largest admin request body, bytes. */
const MAX_ADMIN_BODY = 1024 * 1024;
/** Largest admin batch. */
const MAX_ADMIN_BATCH = 100;
/** Broadcast topic of operator changes between workers (lib/cluster.ts). */
const ADMIN_TOPIC = 'admin';
/**
 * Admin methods that change state a worker keeps in its own memory (cordons; API keys of the
 * memory driver): with several workers, each is replayed on the others so the change is the
 * service's, whichever worker took the call.
 */
const REPLAYED = new Set(['svc_cordonUpstream', 'svc_uncordonUpstream', 'svc_addApiKey', 'svc_updateApiKey', 'svc_deleteApiKey']);

/** `admin` settings as the config schema leaves them: the auth and cors services check the blocks. */
interface AdminSettings {
  auth?: { strategies?: ReadonlyArray<{ type?: unknown }> };
  cors?: unknown;
  ui?: AdminUiSettings;
  allowedHosts?: string[];
}

/** The CORS of `/admin` without the cors plugin: no CORS headers (a browser page on another origin is refused). */
const NO_CORS: Koa.Middleware = (_k, next) => next();

/** One JSON-RPC answer object. */
type Answer = { jsonrpc: '2.0'; id: unknown; result?: unknown; error?: unknown };

/**
 * Creates the admin plugin (name `admin`). It needs the auth plugin for any strategy (without
 * it the endpoint stays closed, and a configured strategy is a config error), and the cors plugin
 * for CORS headers (likewise for a configured `admin.cors`).
 * @returns a plugin owning the top-level `admin` key and tapping `configured` and `routes`
 */
export function adminPlugin(): Plugin {
  return definePlugin({
    name: 'admin',
    schema: {
      root: {
        admin: Strict(
          {
            auth: Type.Optional(
              AuthBlockSchema('auth strategies of POST /admin, as in `projects[].auth` (checked by the auth plugin at start-up); none: closed'),
            ),
            cors: Type.Optional(
              CorsBlockSchema(
                'CORS of /admin, the fields of `projects[].cors` with the spec §2.5 admin defaults except `allowedOrigins`, which allows no origin unless listed (checked by the cors plugin at start-up)',
              ),
            ),
            ui: Type.Optional(AdminUiSchema),
            allowedHosts: Type.Optional(
              Type.Array(Type.String({ minLength: 1, maxLength: 253, pattern: '^(\\*\\.)?[A-Za-z0-9.-]+$' }), {
                maxItems: 100,
                description:
                  'Host names (no port; `*.example.com` for subdomains) under which /admin and /admin/ui answer. Unset: any Host, except that an admin guarded only by network strategies answers only under an IP address or localhost (a DNS-rebinding guard); set it to reach such an admin by name',
              }),
            ),
          },
          { description: 'spec §2.5: POST /admin, closed unless auth.strategies has a strategy' },
        ),
      },
    },
    apply(host: PluginHost) {
      let authenticator: Authenticator | undefined;
      let cors: Koa.Middleware = NO_CORS;
      const methods = adminMethods(host);
      // The operator page (ui/): its data and streams go through the same authenticator.
      let guard: HostGuardSettings = { allowedHosts: [], ambientOnly: false };
      /** The DNS-rebinding guard (host-guard.ts): the refusal of this request's Host, if any. */
      const hostCheck = (k: Koa.Context): SvcError | undefined => (hostAllowed(k.get('Host'), guard) ? undefined : hostRefusal(k.get('Host')));
      const ui = adminUi(host, () => authenticator, hostCheck);
      // Another worker's (or, with shared state, replica's) operator change, replayed here.
      const unsubscribe = onWorkerBroadcast(ADMIN_TOPIC, (payload) => {
        const { method, params } = payload as { method: string; params: unknown };
        const m = REPLAYED.has(method) ? methods.get(method) : undefined;
        m?.(params).catch(() => undefined);
      });
      host.hooks.closing.tap('admin', () => {
        ui.close();
        unsubscribe();
      });

      host.hooks.configured.tap('admin', (c) => {
        const admin = (c.settings.admin ?? {}) as AdminSettings;
        const corsService = host.services.get(CORS_SERVICE);
        if (!corsService && admin.cors !== undefined)
          throw new ConfigError([{ path: 'admin.cors', message: 'needs the cors plugin (it is in the default preset)' }]);
        const policy = corsService?.door(admin.cors, 'admin.cors');
        cors = policy?.middleware ?? NO_CORS;
        authenticator = doorAuthenticator(host.services, admin.auth, 'admin.auth');
        ui.configure(admin.ui);
        // Read once the auth service accepted the block, so `strategies` is a valid list.
        const strategies = admin.auth?.strategies ?? [];
        guard = { allowedHosts: admin.allowedHosts ?? [], ambientOnly: strategies.length > 0 && strategies.every((s) => s.type === 'network') };
        if (authenticator && strategies.every((s) => s.type === 'network') && policy?.settings.allowedOrigins.includes('*')) {
          host.logger.warn(
            'admin is guarded only by a network strategy while admin.cors.allowedOrigins contains "*": a page in a browser on an allowed network can drive it; add a secret or jwt strategy, or list origins',
          );
        }
      });

      const handle = async (k: Koa.Context): Promise<void> => {
        k.type = 'application/json';
        if (!authenticator) {
          k.status = 401;
          k.body = errorText(null, new ErrAuthUnauthorized('admin is not enabled: admin.auth.strategies has no strategy'));
          return;
        }
        const refused = hostCheck(k);
        if (refused) {
          k.status = refused.httpStatus;
          k.body = errorText(null, refused);
          return;
        }
        const type = (k.get('Content-Type').split(';')[0] ?? '').trim().toLowerCase();
        if (type !== 'application/json') {
          k.status = 415;
          k.body = errorText(null, new ErrInvalidRequest('admin requests need Content-Type: application/json'));
          return;
        }
        try {
          await authenticator.authenticate(host.requestInfo(k));
        } catch (e) {
          const err = asSvcError(e);
          k.status = err.httpStatus;
          k.body = errorText(null, err);
          return;
        }
        let doc: unknown;
        try {
          doc = JSON.parse((await readRequestBody(k, MAX_ADMIN_BODY)).text) as unknown;
        } catch (e) {
          const err = e instanceof SyntaxError ? new ErrJsonRpcRequestUnmarshal('failed to parse admin json-rpc request') : asSvcError(e);
          k.status = err.httpStatus;
          k.body = errorText(null, err);
          return;
        }
        if (Array.isArray(doc)) {
          if (doc.length === 0 || doc.length > MAX_ADMIN_BATCH) {
            k.status = 400;
            k.body = errorText(null, new ErrInvalidRequest(`an admin batch holds 1 to ${MAX_ADMIN_BATCH} calls`));
            return;
          }
          const answers: Answer[] = [];
          for (const el of doc) answers.push((await call(el)).answer);
          k.status = 200;
          k.body = JSON.stringify(answers);
          return;
        }
        const { answer, status } = await call(doc);
        k.status = status;
        k.body = JSON.stringify(answer);
      };

      /** One admin call: its answer and the HTTP status a single call would get. */
      const call = async (el: unknown): Promise<{ answer: Answer; status: number }> => {
        const req = (el && typeof el === 'object' && !Array.isArray(el) ? el : {}) as { id?: unknown; method?: unknown; params?: unknown };
        const id = typeof req.id === 'string' || typeof req.id === 'number' ? req.id : null;
        try {
          if (typeof req.method !== 'string') throw new ErrInvalidRequest('InvalidRequest: an admin call needs a method');
          const m = methods.get(req.method);
          if (!m) throw unsupported(req.method);
          const result = await m(req.params);
          // Several workers (server.workers) or replicas (shared state): the others apply the same
          // operator change, unless a shared key store holds it already.
          if (REPLAYED.has(req.method) && replayNeeded(host, req.method, req.params))
            broadcastToWorkers(ADMIN_TOPIC, { method: req.method, params: req.params });
          return { answer: { jsonrpc: '2.0', id, result }, status: 200 };
        } catch (e) {
          const err = asSvcError(e);
          return { answer: { jsonrpc: '2.0', id, error: toJsonRpcError(err, undefined, false) }, status: err.httpStatus };
        }
      };

      host.hooks.routes.tap('admin', (router: Router) => {
        const guarded: Koa.Middleware = (k, next) => cors(k, next);
        router.options('/admin', guarded, (k) => {
          k.status = 204;
        });
        router.post('/admin', guarded, handle);
        ui.mount(router);
        router.get('/admin', guarded, (k) => {
          k.status = 405;
          k.set('Allow', 'POST, OPTIONS');
          k.type = 'application/json';
          k.body = errorText(null, new ErrInvalidRequest('the admin endpoint takes POST with a JSON-RPC body'));
        });
      });
    },
  });
}

/** A JSON-RPC error answer as text. */
function errorText(id: unknown, err: ReturnType<typeof asSvcError>): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: toJsonRpcError(err, undefined, false) });
}
