/**
 * select plugin (spec §1.3, §2.8 #4).
 * Taps: `select` — refuses node-administration methods the network and its upstreams do not
 * allow (method-guard.ts), drops upstreams whose `ignoreMethods`/`allowMethods` exclude the
 * method, then applies the `use-upstream` directive (ids, `<key>:<value>` tags, `*`, `|`, `!`).
 * Runs after any policy ordering (stage METHODS/USE_UPSTREAM), so it only filters.
 * `callDone` — a pinned call answered by an upstream behind the network's head records the lag
 * (slot `select.upstreamLag`), which the headers plugin writes as `X-SVC-Upstream-Lag`.
 */
import {
  type AttemptRecord,
  type CallContext,
  type Directives,
  DirectiveStage,
  definePlugin,
  type Plugin,
  type PluginHost,
  SelectStage,
  type Upstream,
} from 'svc-proxy/plugin';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import { ErrInvalidRequest, ErrUpstreamMethodIgnored, ErrUpstreamsExhausted } from 'svc-proxy/plugin/errors';
import { markProvenance } from 'svc-proxy/plugins/multiplex';
import { UPSTREAM_LAG } from './api.ts';
import { CACHE_OUTCOME } from 'svc-proxy/plugins/cache';
import { type Matcher, MatcherCache, MAX_CLIENT_PATTERN_LENGTH } from 'svc-proxy/util'; // UPSTREAM_LAG: blocks a pinned call's upstream was behind the head (X-SVC-Upstream-Lag)
import { DEFAULT_DENIED_METHODS, MethodGuard, methodGuardSchema } from './method-guard.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';
import { SHADOW_UPSTREAM } from 'svc-proxy/plugins/shadow';

/** The tag of an upstream held back while others serve (the selection policy's `preferNonFallback` default). */
const FALLBACK_TAG = 'tier:fallback';

export { compileDenyList, DEFAULT_DENIED_METHODS, explicitAllowOf, MethodGuard } from './method-guard.ts';

/** Options of {@link selectPlugin}. */
export interface SelectPluginOptions {
  /**
   * Methods refused with `ErrUpstreamMethodIgnored` unless the network's or an upstream's
   * `allowMethods` names them (globs; `!glob` entries take names back out). Default
   * {@link DEFAULT_DENIED_METHODS}; `[]` turns the deny list off.
   */
  deniedMethods?: readonly string[];
}

/**
 * Filters upstreams by a `use-upstream` selector. Positive terms match ids or tags; negated
 * terms match ids only (spec §2.8 #4).
 */
export function filterByUseUpstream(upstreams: readonly Upstream[], selector: Matcher): Upstream[] {
  return upstreams.filter((u) => selector.test(u.id, u.tags));
}

/**
 * How far an upstream is behind its network's highest latest block, in blocks.
 * @param host the plugin host (chain state)
 * @param ctx the call (its network)
 * @param u the upstream
 * @returns blocks behind (> 0), or 0 when level, ahead or unknown (never polled or observed)
 */
export function upstreamLagOf(host: PluginHost, ctx: Pick<CallContext, 'network'>, u: Upstream): number {
  const st = networkChainState(host, ctx.network);
  const s = st.peek(u);
  if (!s || (s.latest === 0 && s.lastPollAt === 0)) return 0;
  const lag = st.highestLatest - s.latest;
  return lag > 0 ? lag : 0;
}

/** Directive `use-upstream` (spec §2.8 #4): only the upstreams a selector names serve the call. */
export const USE_UPSTREAM = new Directive<string | undefined>({
  field: 'useUpstream',
  query: 'use-upstream',
  header: 'X-SVC-Use-Upstream',
  type: 'string',
  fallback: undefined,
  spec: '#4',
  description: 'upstream selector: ids, `<key>:<value>` tags, `*`, `|`, leading `!`',
});

/**
 * Creates the select plugin.
 *
 * - Node-administration methods ({@link SelectPluginOptions.deniedMethods}) fail with
 *   `ErrUpstreamMethodIgnored` (-32601, HTTP 200) before any upstream is dialled, unless
 *   `networks[].allowMethods` names them (then every upstream may serve them, as its own
 *   `ignoreMethods`/`allowMethods` say) or some upstream's `allowMethods` names them (then only
 *   those upstreams serve them).
 * - A call pinned with `use-upstream` and answered by an upstream behind the network's head
 *   records the lag for `X-SVC-Upstream-Lag`.
 * @param opts the deny list
 * @returns a plugin owning `networks[].allowMethods`, tapping `select`, `attemptDone` and `callDone`
 * @throws TypeError when `deniedMethods` is not an array of strings
 */
export function selectPlugin(opts: SelectPluginOptions = {}): Plugin {
  const guard = new MethodGuard(opts.deniedMethods ?? DEFAULT_DENIED_METHODS);
  return definePlugin({
    name: 'select',
    schema: { ...methodGuardSchema, directiveDefaults: directiveDefaultsSchema(USE_UPSTREAM) },
    apply(host: PluginHost) {
      declareDirectives(host, 'select', USE_UPSTREAM);
      const matchers = new MatcherCache(256);
      // A pinned call's answer comes from the upstreams it names (possibly lagging or lying), not
      // the network's rules: the cache and multiplexing keep it apart (spec §2.8).
      host.hooks.directives.tap({ name: 'select', stage: DirectiveStage.PROVENANCE }, (d: Directives, ctx: CallContext) => {
        const pin = USE_UPSTREAM.get(d);
        if (pin !== undefined && pin !== '' && pin !== USE_UPSTREAM.get(ctx.network.config.directiveDefaults)) markProvenance(ctx, 'use-upstream', pin);
        return d;
      });
      host.hooks.select.tap({ name: 'select:methods', stage: SelectStage.METHODS }, (ups: Upstream[], ctx: CallContext) => {
        const method = ctx.request.method;
        // Node administration methods: only where the network or an upstream allows them, never dialled otherwise.
        if (guard.restricted(ctx.network, method)) return guard.filter(ups, ctx.network, method);
        // A plain loop: no closure per call; the list is copied only when an upstream drops out.
        let out = ups;
        for (let i = 0; i < ups.length; i++) {
          if ((ups[i] as Upstream).supportsMethod(method)) continue;
          out = ups.slice(0, i);
          for (let j = i + 1; j < ups.length; j++) if ((ups[j] as Upstream).supportsMethod(method)) out.push(ups[j] as Upstream);
          break;
        }
        if (out.length === 0 && ups.length > 0) {
          throw new ErrUpstreamsExhausted([
            new ErrUpstreamMethodIgnored(`method ${method} is not served by any upstream of ${ctx.network.id} (ignoreMethods/allowMethods)`),
          ]);
        }
        return out;
      });
      // autoIgnoreUnsupportedMethods: an upstream that says it does not support a
      // method stops getting it, for the life of the process.
      host.hooks.attemptDone.tap('select:auto-ignore', (a: AttemptRecord) => {
        if (a.error?.name !== 'ErrEndpointUnsupported') return;
        const u = host.projects.get(a.projectId)?.upstreams.get(a.upstreamId);
        if (u?.config.settings.autoIgnoreUnsupportedMethods !== true) return;
        if (u.ignoreMethod(a.method))
          host.logger.info({ project: a.projectId, upstream: u.id, method: a.method }, `upstream ${u.id} does not support ${a.method}: ignored from now on`);
      });
      host.hooks.select.tap({ name: 'select:use-upstream', stage: SelectStage.USE_UPSTREAM }, (ups: Upstream[], ctx: CallContext) => {
        const sel = USE_UPSTREAM.get(ctx.directives);
        if (sel === undefined || sel.trim() === '') return ups;
        // A client's selector is compiled and matched: bounded like every client input.
        if (sel.length > MAX_CLIENT_PATTERN_LENGTH) throw new ErrInvalidRequest(`use-upstream selector longer than ${MAX_CLIENT_PATTERN_LENGTH} characters`);
        const matcher = matchers.get(sel);
        const out = filterByUseUpstream(ups, matcher);
        if (out.length > 0) return out;
        // The selection policy left the pinned upstreams out of this call's order. A ready
        // `tier:fallback` upstream is held back only as a preference while others serve, and a pin
        // names it explicitly, so it serves. Any other reason (a cordon, not ready, a shadow) is not
        // lifted by a client and is named rather than reported as "no match".
        const method = ctx.request.method;
        const health = ctx.network.project.health;
        const held = filterByUseUpstream(ctx.network.upstreams, matcher).filter((u) => u.supportsMethod(method) && !SHADOW_UPSTREAM.get(u));
        const pinnable = held.filter((u) => u.tags.has(FALLBACK_TAG) && u.state === 'ready' && health.cordonOf(u.id, method) === undefined);
        if (pinnable.length > 0) return pinnable;
        if (held.length > 0) {
          const why = held.map(
            (u) =>
              `${u.id} (${health.cordonOf(u.id, method) !== undefined ? `cordoned: ${health.cordonOf(u.id, method)}` : u.state !== 'ready' ? u.state : 'excluded by the selection policy'})`,
          );
          throw new ErrUpstreamsExhausted([], `use-upstream "${sel}" matches only upstreams left out of this call: ${why.join(', ')}`);
        }
        throw new ErrUpstreamsExhausted([], `no upstream matches use-upstream "${sel}"`);
      });
      // A pinned call cannot be re-routed to a fresher upstream: say how far behind its answer was.
      host.hooks.callDone.tap('select:pinned-lag', (ctx: CallContext) => {
        const sel = USE_UPSTREAM.get(ctx.directives);
        if (ctx.internal || sel === undefined || sel.trim() === '') return;
        const id = ctx.record.upstream;
        if (id === undefined || CACHE_OUTCOME.get(ctx.record) === 'HIT') return;
        const u = ctx.project.upstreams.get(id);
        const lag = u ? upstreamLagOf(host, ctx, u) : 0;
        if (lag > 0) UPSTREAM_LAG.set(ctx.record, lag);
      });
    },
  });
}
