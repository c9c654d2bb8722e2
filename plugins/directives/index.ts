/**
 * directives plugin (spec §2.8).
 * Taps: `directives` — resolves each call's directives from its network's `directiveDefaults`
 * (networkDefaults merged), then HTTP headers, then query parameters, filtered by
 * `allowClientDirectives` (strategy grant, else network, else project). Per call because one
 * batch may span networks; the HTTP part is parsed once per HTTP request.
 */
import { type CallContext, type Directives, DIRECTIVES_SERVICE, DirectiveStage, type HttpRequestInfo, MatcherCache, type Plugin, PluginContractError, type PluginHost } from 'svc/plugin';

/** One directive of the spec §2.8 table. */
export interface DirectiveSpec {
  /** Query parameter name, also the name `allowClientDirectives` matches. */
  query: string;
  /** Header name, lower-cased. */
  header: string;
  /** Field of {@link Directives} (a plugin's own directive adds a field). */
  field: keyof Directives & string;
  /** Value type. */
  type: 'bool' | 'string';
  /** Whether a request may set it (`enforce-getlogs-range` may not, §2.8 #8). */
  fromRequest: boolean;
}

/** The ten directives of spec §2.8, in table order. */
export const DIRECTIVES: readonly DirectiveSpec[] = [
  { query: 'retry-empty', header: 'x-svc-retry-empty', field: 'retryEmpty', type: 'bool', fromRequest: true },
  { query: 'retry-pending', header: 'x-svc-retry-pending', field: 'retryPending', type: 'bool', fromRequest: true },
  { query: 'skip-cache-read', header: 'x-svc-skip-cache-read', field: 'skipCacheRead', type: 'string', fromRequest: true },
  { query: 'use-upstream', header: 'x-svc-use-upstream', field: 'useUpstream', type: 'string', fromRequest: true },
  { query: 'skip-interpolation', header: 'x-svc-skip-interpolation', field: 'skipInterpolation', type: 'bool', fromRequest: true },
  { query: 'skip-consensus', header: 'x-svc-skip-consensus', field: 'skipConsensus', type: 'bool', fromRequest: true },
  { query: 'enforce-highest-block', header: 'x-svc-enforce-highest-block', field: 'enforceHighestBlock', type: 'bool', fromRequest: true },
  // §2.8 #8: the effective value comes from network config, never from a request.
  { query: 'enforce-getlogs-range', header: 'x-svc-enforce-getlogs-range', field: 'enforceGetLogsBlockRange', type: 'bool', fromRequest: false },
  { query: 'enforce-non-null-tagged-blocks', header: 'x-svc-enforce-non-null-tagged-blocks', field: 'enforceNonNullTaggedBlocks', type: 'bool', fromRequest: true },
  { query: 'integrity', header: 'x-svc-integrity', field: 'integrity', type: 'string', fromRequest: true },
];

/** Directive boolean: only `true` (case-insensitive, whitespace stripped) is truthy; `1`/`yes` are false. */
export function parseDirectiveBool(v: string): boolean {
  return v.replace(/\s+/g, '').toLowerCase() === 'true';
}

/** `force-trace` truthiness: `true`, `1`, `yes`. */
export function parseForceTrace(v: string | undefined): boolean {
  if (v === undefined) return false;
  return ['true', '1', 'yes'].includes(v.trim().toLowerCase());
}

/** One directive value supplied over HTTP, with the query name it is filtered by. */
interface HttpDirective {
  spec: DirectiveSpec;
  value: boolean | string;
}

/** Directives read from one HTTP request, header then query (query wins). */
export interface HttpDirectives {
  values: HttpDirective[];
  forceTrace: boolean;
}

/**
 * Reads the directives of one HTTP request (spec §2.8 precedence: header, then query).
 * Header string values are not trimmed; query string values are.
 */
export function readHttpDirectives(http: HttpRequestInfo, specs: readonly DirectiveSpec[] = DIRECTIVES): HttpDirectives {
  const values: HttpDirective[] = [];
  for (const spec of specs) {
    if (!spec.fromRequest) continue;
    const q = http.query[spec.query];
    const h = http.headers[spec.header];
    const header = Array.isArray(h) ? h[0] : h;
    let value: boolean | string | undefined;
    if (q !== undefined) value = spec.type === 'bool' ? parseDirectiveBool(q) : q.trim();
    else if (header !== undefined) value = spec.type === 'bool' ? parseDirectiveBool(header) : header;
    if (value !== undefined) values.push({ spec, value });
  }
  const ftHeader = http.headers['x-svc-force-trace'];
  const forceTrace = parseForceTrace(http.query['force-trace'] ?? (Array.isArray(ftHeader) ? ftHeader[0] : ftHeader));
  return { values, forceTrace };
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
 * @param allow the effective `allowClientDirectives` expression
 */
export function resolveDirectives(defaults: Directives, http: HttpDirectives, allow: string | undefined, cache: MatcherCache): Directives {
  const out: Directives = { ...defaults };
  for (const { spec, value } of http.values) {
    if (!isAllowed(allow, spec.query, cache)) continue;
    (out as Record<string, unknown>)[spec.field] = value;
  }
  // §2.8 rule b: force-trace is never filtered.
  if (http.forceTrace) out.forceTrace = true;
  return out;
}

// The service's key and types are the contract in svc/plugin (plugins declaring directives import them there).
export { DIRECTIVES_SERVICE, type DirectiveDeclaration, type DirectivesService } from 'svc/plugin';

/**
 * Creates the directives plugin.
 * @returns a plugin tapping `directives` and providing the `directives` service
 */
export function directivesPlugin(): Plugin {
  return {
    name: 'directives',
    apply(proxy: PluginHost) {
      const specs: DirectiveSpec[] = [...DIRECTIVES];
      proxy.services.provide(DIRECTIVES_SERVICE, {
        declare(d) {
          const header = d.header.toLowerCase();
          if (!/^[a-z][a-z0-9-]{0,63}$/.test(d.query) || !/^x-[a-z0-9-]{1,64}$/.test(header) || !/^[A-Za-z][A-Za-z0-9]{0,63}$/.test(d.field) || (d.type !== 'bool' && d.type !== 'string')) {
            throw new PluginContractError(`directive ${JSON.stringify(d)}: query must match [a-z][a-z0-9-]*, header x-[a-z0-9-]+, field an identifier, type bool or string`);
          }
          if (specs.some((s) => s.query === d.query || s.header === header || s.field === d.field || d.field === 'forceTrace')) {
            throw new PluginContractError(`directive ${d.query} (${header}, field ${d.field}) collides with a declared one`);
          }
          specs.push({ query: d.query, header, field: d.field, type: d.type, fromRequest: true });
        },
      });
      const perRequest = new WeakMap<HttpRequestInfo, HttpDirectives>();
      const matchers = new MatcherCache(128);
      proxy.hooks.directives.tap({ name: 'directives', stage: DirectiveStage.RESOLVE }, (_d: Directives, ctx: CallContext) => {
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
  };
}
