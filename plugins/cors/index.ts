/**
 * cors plugin: `projects[].cors`, with the fields of `admin.cors` (spec §2.5).
 * - Omitted: no CORS headers, and OPTIONS gets 204 (core).
 * - Present: the admin defaults, except that `allowedHeaders` also holds the ten `X-SVC-*`
 *   directive headers and `exposedHeaders` defaults to the spec §4.5 diagnostic headers, so a
 *   dapp in a browser can send directives and read diagnostics. A preflight is answered 204
 *   before auth runs.
 * The project is the first path segment (`/<project>/…`); requests on alias domains without it
 * get no CORS headers. Routes are mounted only when some project has `cors`, so a svc without it
 * pays nothing per request.
 *
 * Provides the `cors` service (`CORS_SERVICE`, contract in `svc-proxy/plugin`): the CORS of another
 * door (the admin endpoint), its block checked against the same schema with the admin defaults,
 * and a project's allowed origins for doors that are not HTTP routes (the WebSocket upgrade).
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import { definePlugin, type Plugin, type PluginHost, resolveConfigBlock } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import { CORS_SERVICE, type CorsSettings } from './api.ts';
import { ADMIN_CORS_DEFAULTS, type CorsInput, corsMiddleware, corsProblem, CorsSchema, corsSettings, originMatcher } from './cors.ts';

export { ADMIN_CORS_DEFAULTS, corsMiddleware, corsProblem, CorsSchema, corsSettings, type CorsInput } from './cors.ts';

/** The ten directive headers of spec §2.8, plus force-trace and the user id header. */
export const DIRECTIVE_HEADERS = [
  'x-svc-retry-empty',
  'x-svc-retry-pending',
  'x-svc-skip-cache-read',
  'x-svc-use-upstream',
  'x-svc-skip-interpolation',
  'x-svc-skip-consensus',
  'x-svc-enforce-highest-block',
  'x-svc-enforce-getlogs-range',
  'x-svc-enforce-non-null-tagged-blocks',
  'x-svc-integrity',
  'x-svc-force-trace',
  'x-svc-user-id',
] as const;

/** The spec §4.5 response headers a page may read by default. */
export const DIAGNOSTIC_HEADERS = [
  'X-SVC-Version',
  'X-SVC-Commit',
  'X-SVC-Attempts',
  'X-SVC-Upstream-Attempts',
  'X-SVC-Upstream-Retries',
  'X-SVC-Upstream-Hedges',
  'X-SVC-Network-Attempts',
  'X-SVC-Network-Retries',
  'X-SVC-Network-Hedges',
  'X-SVC-Cache-Attempts',
  'X-SVC-Cache-Retries',
  'X-SVC-Cache-Hedges',
  'X-SVC-Consensus-Slots',
  'X-SVC-Consensus-Disputes',
  'X-SVC-Consensus-Low-Participants',
  'X-SVC-Integrity',
  'X-SVC-Cache',
  'X-SVC-Upstream',
  'X-SVC-Upstream-Lag',
  'X-SVC-Duration',
  'X-SVC-Upstreams',
  'X-SVC-Upstreams-Truncated',
  'X-SVC-Calls',
  'X-SVC-Billable',
  'X-SVC-Methods',
  'X-SVC-Credits',
  'X-SVC-Credits-Total',
  'X-SVC-Credits-Version',
] as const;

/** Project CORS defaults: the admin's, widened for directives and diagnostics, and any origin (a dapp's page). */
export const PROJECT_CORS_DEFAULTS: CorsSettings = Object.freeze({
  ...ADMIN_CORS_DEFAULTS,
  allowedOrigins: ['*'],
  allowedHeaders: [...ADMIN_CORS_DEFAULTS.allowedHeaders, ...DIRECTIVE_HEADERS],
  exposedHeaders: [...DIAGNOSTIC_HEADERS],
});

/**
 * Creates the cors plugin (name `cors`).
 * @returns a plugin owning `projects[].cors`, providing the `cors` service, tapping `configured` and `routes`
 */
export function corsPlugin(): Plugin {
  return definePlugin({
    name: 'cors',
    provides: [CORS_SERVICE],
    schema: { project: { cors: CorsSchema } },
    apply(host: PluginHost) {
      const byProject = new Map<string, Koa.Middleware>();
      let origins = new Map<string, (origin: string) => boolean>();
      host.services.provide(CORS_SERVICE, {
        allowsOrigin: (projectId, origin) => origins.get(projectId)?.(origin) ?? false,
        door(block, path) {
          const settings = corsSettings(resolveConfigBlock(CorsSchema, block ?? {}, path), ADMIN_CORS_DEFAULTS);
          const problem = corsProblem(settings, path);
          if (problem) throw new ConfigError([problem]);
          return { settings, middleware: corsMiddleware(settings) };
        },
      });
      host.hooks.configured.tap('cors', (c) => {
        const next = new Map<string, (origin: string) => boolean>();
        c.projects.forEach((p, i) => {
          const input = p.settings.cors as CorsInput | undefined;
          if (!input) return;
          const s = corsSettings(input, PROJECT_CORS_DEFAULTS);
          const problem = corsProblem(s, `projects[${i}].cors`);
          if (problem) throw new ConfigError([problem]);
          byProject.set(p.id, corsMiddleware(s));
          next.set(p.id, originMatcher(s));
        });
        origins = next;
      });

      host.hooks.routes.tap('cors', (router: Router) => {
        if (byProject.size === 0) return;
        const apply: Koa.Middleware = (k, next) => {
          const slash = k.path.indexOf('/', 1);
          const first = k.path.slice(1, slash === -1 ? undefined : slash);
          const mw = first ? byProject.get(first) : undefined;
          return mw ? mw(k, next) : next();
        };
        router.post('/{*rest}', apply);
        router.options('/{*rest}', apply);
      });
    },
  });
}
