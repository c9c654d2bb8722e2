/**
 * `svc-proxy/plugins/cors`: what the cors plugin offers other plugins (spec §2.5): the CORS of a door
 * other than a project (the admin endpoint, an in-house route), and the project origin check the
 * WebSocket endpoint applies to upgrades.
 */
import { serviceKey, Type, type ServiceKey } from 'svc-proxy/plugin';
import type { TObject } from '@sinclair/typebox';
import type { Middleware } from 'koa';

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
