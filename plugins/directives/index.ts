/**
 * directives plugin (spec §2.8).
 * Taps: `directives` — resolves each call's directives from its network's `directiveDefaults`
 * (networkDefaults merged), then HTTP headers, then query parameters, filtered by
 * `allowClientDirectives` (strategy grant, else network, else project). Per call because one
 * batch may span networks; the HTTP part is parsed once per HTTP request.
 *
 * It knows no directive of its own: every directive is declared by the plugin that honours it
 * (a `Directive` from svc-proxy/plugin, registered through the `directives` service this plugin
 * provides), e.g. `retry-empty` by evm-retries, `use-upstream` by select, `force-trace` by
 * tracing. A declared directive is read like any other: header, then query (query wins).
 */
import { type CallContext, type Directives, DirectiveStage, type HttpRequestInfo, definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import type { DirectiveDeclaration } from './api.ts';
import { PluginContractError } from 'svc-proxy/plugin/errors';
import { DIRECTIVES_SERVICE } from './api.ts';
import { MatcherCache } from 'svc-proxy/util';

/** One declared directive, as this plugin parses it (a {@link DirectiveDeclaration}, header lower-cased). */
export interface DirectiveSpec {
  /** Query parameter name, also the name `allowClientDirectives` matches. */
  readonly query: string;
  /** Header name, lower-cased. */
  readonly header: string;
  /** Field of {@link Directives}. */
  readonly field: string;
  /** Value type. */
  readonly type: DirectiveDeclaration['type'];
  /** Whether a request may set it (`enforce-getlogs-range` may not, §2.8 #8). */
  readonly fromRequest: boolean;
  /** Whether `allowClientDirectives` governs it (`force-trace` is never filtered, §2.8 rule b). */
  readonly filtered: boolean;
}

/** Directive boolean: only `true` (case-insensitive, whitespace stripped) is truthy; `1`/`yes` are false. */
export function parseDirectiveBool(v: string): boolean {
  return v.replace(/\s+/g, '').toLowerCase() === 'true';
}

/** Flag truthiness (`force-trace`): `true`, `1`, `yes`. */
export function parseDirectiveFlag(v: string | undefined): boolean {
  if (v === undefined) return false;
  return ['true', '1', 'yes'].includes(v.trim().toLowerCase());
}

/** One directive value supplied over HTTP, with the declaration it was read by. */
interface HttpDirective {
  spec: DirectiveSpec;
  value: boolean | string;
}

/** Directives read from one HTTP request, header then query (query wins). */
export interface HttpDirectives {
  values: HttpDirective[];
}

/**
 * Reads the directives of one HTTP request (spec §2.8 precedence: header, then query).
 * Header string values are not trimmed; query string values are.
 * @param specs the declared directives
 */
export function readHttpDirectives(http: HttpRequestInfo, specs: readonly DirectiveSpec[]): HttpDirectives {
  const values: HttpDirective[] = [];
  for (const spec of specs) {
    if (!spec.fromRequest) continue;
    const q = http.query[spec.query];
    const h = http.headers[spec.header];
    const header = Array.isArray(h) ? h[0] : h;
    const raw = q ?? header;
    if (raw === undefined) continue;
    const value = spec.type === 'bool' ? parseDirectiveBool(raw) : spec.type === 'flag' ? parseDirectiveFlag(raw) : q !== undefined ? q.trim() : raw;
    values.push({ spec, value });
  }
  return { values };
}

/** `allowClientDirectives` decision for a query name: unset = all, "" = none, "*" = all, else a matcher. */
export function isAllowed(expr: string | undefined, name: string, cache: MatcherCache): boolean {
  if (expr === undefined) return true;
  const t = expr.trim();
  if (t === '') return false;
  if (t === '*') return true;
  return cache.get(t).test(name);
}

/**
 * Resolves the directives of one call.
 * @param defaults the network's config `directiveDefaults` (always applied, §2.8 rule a)
 * @param http directives read from the HTTP request
 * @param allow the effective `allowClientDirectives` expression (not applied to `filtered: false` directives, §2.8 rule b)
 */
export function resolveDirectives(defaults: Directives, http: HttpDirectives, allow: string | undefined, cache: MatcherCache): Directives {
  const out: Directives = { ...defaults };
  for (const { spec, value } of http.values) {
    if (spec.filtered && !isAllowed(allow, spec.query, cache)) continue;
    out[spec.field] = value;
  }
  return out;
}

const QUERY = /^[a-z][a-z0-9-]{0,63}$/;
const HEADER = /^x-[a-z0-9-]{1,64}$/;
const FIELD = /^[A-Za-z][A-Za-z0-9]{0,63}$/;
const TYPES: ReadonlySet<string> = new Set(['bool', 'flag', 'string']);

/**
 * Adds a declaration to the declared directives: an identical one again is a no-op (two plugins
 * honouring one directive), a malformed one or one reusing a query, header or field differently
 * is refused.
 * @param specs the declared directives (mutated)
 * @throws PluginContractError naming the directive and what is wrong
 */
export function declareDirective(specs: DirectiveSpec[], d: DirectiveDeclaration): void {
  const spec: DirectiveSpec = {
    query: d.query,
    header: String(d.header).toLowerCase(),
    field: d.field,
    type: d.type,
    fromRequest: d.fromRequest ?? true,
    filtered: d.filtered ?? true,
  };
  if (!QUERY.test(spec.query) || !HEADER.test(spec.header) || !FIELD.test(spec.field) || !TYPES.has(spec.type)) {
    throw new PluginContractError(
      `directive ${JSON.stringify(d)}: query must match [a-z][a-z0-9-]*, header x-[a-z0-9-]+, field an identifier, type bool, flag or string`,
    );
  }
  const same = (s: DirectiveSpec) =>
    s.query === spec.query &&
    s.header === spec.header &&
    s.field === spec.field &&
    s.type === spec.type &&
    s.fromRequest === spec.fromRequest &&
    s.filtered === spec.filtered;
  const clash = specs.find((s) => s.query === spec.query || s.header === spec.header || s.field === spec.field);
  if (!clash) specs.push(spec);
  else if (!same(clash))
    throw new PluginContractError(
      `directive ${spec.query} (${spec.header}, field ${spec.field}) collides with a declared one: ${clash.query} (${clash.header}, field ${clash.field}, ${clash.type})`,
    );
}

// The service's key and types are the contract in svc-proxy/plugin (plugins declaring directives import them there).
export type { DirectiveDeclaration } from './api.ts';
export { DIRECTIVES_SERVICE, type DirectivesService } from './api.ts';

/**
 * Creates the directives plugin.
 * @returns a plugin tapping `directives` and providing the `directives` service
 */
export function directivesPlugin(): Plugin {
  return definePlugin({
    name: 'directives',
    provides: [DIRECTIVES_SERVICE],
    apply(host: PluginHost) {
      const specs: DirectiveSpec[] = [];
      host.services.provide(DIRECTIVES_SERVICE, { declare: (d) => declareDirective(specs, d) });
      const perRequest = new WeakMap<HttpRequestInfo, HttpDirectives>();
      const matchers = new MatcherCache(128);
      host.hooks.directives.tap({ name: 'directives', stage: DirectiveStage.RESOLVE }, (_d: Directives, ctx: CallContext) => {
        let http = perRequest.get(ctx.http);
        if (!http) {
          http = readHttpDirectives(ctx.http, specs);
          perRequest.set(ctx.http, http);
        }
        // §2.8 rule c: a strategy grant applies to the user it authenticated; otherwise the
        // network's value, else the project's.
        const allow = ctx.identity?.allowClientDirectives ?? ctx.network.config.allowClientDirectives ?? ctx.project.config.allowClientDirectives;
        return resolveDirectives(ctx.network.config.directiveDefaults, http, allow, matchers);
      });
    },
  });
}
