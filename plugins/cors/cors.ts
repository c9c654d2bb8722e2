/**
 * CORS for svc's doors (spec §2.5): one schema and one middleware for
 * `projects[].cors` (this plugin's key) and every other door's `cors` block (`admin.cors`, which
 * the admin plugin gets through the `cors` service), on @koa/cors. Origins are exact strings,
 * `*`, or linear-time globs (`https://*.example.com`); a request from an origin not listed gets
 * no CORS headers (the browser then blocks it), and a preflight is answered before any auth runs.
 */
import koaCors from '@koa/cors';
import type Koa from 'koa';
import { type Static, Strict, Type } from 'svc-proxy/plugin';
import type { CorsSettings } from './api.ts';
import { compileGlobs } from 'svc-proxy/util';

/** `cors` block of `admin` or a project (spec §2.5). */
export const CorsSchema = Strict({
  allowedOrigins: Type.Optional(Type.Array(Type.String(), { description: 'origins allowed: exact, `*`, or a glob such as `https://*.example.com`' })),
  allowedMethods: Type.Optional(Type.Array(Type.String(), { description: 'Access-Control-Allow-Methods; include OPTIONS for preflight' })),
  allowedHeaders: Type.Optional(Type.Array(Type.String(), { description: 'Access-Control-Allow-Headers' })),
  exposedHeaders: Type.Optional(Type.Array(Type.String(), { description: 'Access-Control-Expose-Headers: response headers a page may read' })),
  allowCredentials: Type.Optional(Type.Boolean({ description: 'Access-Control-Allow-Credentials; must be false when origins contain `*`' })),
  maxAge: Type.Optional(Type.Integer({ minimum: 0, description: 'preflight cache time, seconds' })),
});

/** A `cors` block as written. */
export type CorsInput = Static<typeof CorsSchema>;

/**
 * Defaults of `admin.cors` (spec §2.5), also the base of project CORS. No origin is allowed by
 * default, a deliberate deviation from the spec's `*`: with `*` any page a browser on an allowed
 * network opens could drive a network-guarded admin; an operator lists origins to allow them.
 */
export const ADMIN_CORS_DEFAULTS: CorsSettings = Object.freeze({
  allowedOrigins: [],
  allowedMethods: ['GET', 'POST', 'OPTIONS'],
  allowedHeaders: ['content-type', 'authorization', 'x-svc-secret-token'],
  exposedHeaders: [],
  allowCredentials: false,
  maxAge: 3600,
});

/** Longest `Origin` header matched, characters (client input is bounded). */
const MAX_ORIGIN_CHARS = 512;

/**
 * A `cors` block with its defaults filled.
 * @param input the block as written, or undefined
 * @param defaults what an omitted field takes
 */
export function corsSettings(input: CorsInput | undefined, defaults: CorsSettings): CorsSettings {
  return { ...defaults, ...Object.fromEntries(Object.entries(input ?? {}).filter(([, v]) => v !== undefined)) } as CorsSettings;
}

/**
 * The config problem of a block, if any: credentials with a `*` origin would let any site read
 * answers with the user's cookies (spec §2.5).
 * @param path config path of the block
 */
export function corsProblem(s: CorsSettings, path: string): { path: string; message: string } | undefined {
  return s.allowCredentials && s.allowedOrigins.includes('*')
    ? { path: `${path}.allowCredentials`, message: 'must be false when allowedOrigins contains "*"' }
    : undefined;
}

/**
 * The origin matcher of a block: whether a page from an origin may read this door's answers.
 * @returns a predicate; an empty or overlong origin (over 512 characters) is refused
 */
export function originMatcher(s: CorsSettings): (origin: string) => boolean {
  const any = s.allowedOrigins.includes('*');
  const matches = compileGlobs(
    s.allowedOrigins.filter((o) => o !== '*'),
    { nocase: true },
  );
  return (origin) => origin.length > 0 && origin.length <= MAX_ORIGIN_CHARS && (any || matches(origin));
}

/**
 * The middleware of a block: CORS headers for listed origins, preflights (OPTIONS with
 * `Access-Control-Request-Method`) answered 204 without calling `next`.
 */
export function corsMiddleware(s: CorsSettings): Koa.Middleware {
  const any = s.allowedOrigins.includes('*');
  const allowed = originMatcher(s);
  return koaCors({
    origin: (k: Koa.Context) => {
      const origin = k.get('Origin');
      if (!allowed(origin)) return '';
      return any && !s.allowCredentials ? '*' : origin;
    },
    allowMethods: [...s.allowedMethods],
    allowHeaders: [...s.allowedHeaders],
    exposeHeaders: [...s.exposedHeaders],
    credentials: s.allowCredentials,
    maxAge: s.maxAge,
    keepHeadersOnError: true,
  });
}
