/**
 * select plugin (spec §1.3, §2.8 #4).
 * Taps: `select` — drops upstreams whose `ignoreMethods`/`allowMethods` exclude the method,
 * then applies the `use-upstream` directive (ids, `<key>:<value>` tags, `*`, `|`, `!`).
 * Runs after any policy ordering (stage METHODS/USE_UPSTREAM), so it only filters.
 */
import type { AttemptRecord, CallContext } from '../../core/context.ts';
import { ErrInvalidRequest, ErrUpstreamMethodIgnored, ErrUpstreamsExhausted } from '../../core/errors.ts';
import { MatcherCache, MAX_CLIENT_PATTERN_LENGTH, type Matcher } from '../../core/matcher.ts';
import type { Plugin, Proxy } from '../../core/proxy.ts';
import type { Upstream } from '../../core/registry/upstream.ts';
import { SelectStage } from '../../core/stages.ts';

/**
 * Filters upstreams by a `use-upstream` selector. Positive terms match ids or tags; negated
 * terms match ids only (spec §2.8 #4).
 */
export function filterByUseUpstream(upstreams: readonly Upstream[], selector: Matcher): Upstream[] {
  return upstreams.filter((u) => selector.test(u.id, u.tags));
}

/**
 * Creates the select plugin.
 * @returns a plugin tapping `select`
 */
export function selectPlugin(): Plugin {
  return {
    name: 'select',
    apply(proxy: Proxy) {
      const matchers = new MatcherCache(256);
      proxy.hooks.select.tap({ name: 'select:methods', stage: SelectStage.METHODS }, (ups: Upstream[], ctx: CallContext) => {
        const method = ctx.request.method;
        // A plain loop: no closure per call; the list is copied only when an upstream drops out.
        let out = ups;
        for (let i = 0; i < ups.length; i++) {
          if ((ups[i] as Upstream).supportsMethod(method)) continue;
          out = ups.slice(0, i);
          for (let j = i + 1; j < ups.length; j++) if ((ups[j] as Upstream).supportsMethod(method)) out.push(ups[j] as Upstream);
          break;
        }
        if (out.length === 0 && ups.length > 0) {
          throw new ErrUpstreamsExhausted([new ErrUpstreamMethodIgnored(`method ${method} is not served by any upstream of ${ctx.network.id} (ignoreMethods/allowMethods)`)]);
        }
        return out;
      });
      // autoIgnoreUnsupportedMethods (issue #12 item 3): an upstream that says it does not support a
      // method stops getting it, for the life of the process.
      proxy.hooks.attemptDone.tap('select:auto-ignore', (a: AttemptRecord) => {
        if (a.error?.name !== 'ErrEndpointUnsupported') return;
        const u = proxy.projects.get(a.projectId)?.upstreams.get(a.upstreamId);
        if (u?.config.settings.autoIgnoreUnsupportedMethods !== true) return;
        if (u.ignoreMethod(a.method)) proxy.logger.info({ project: a.projectId, upstream: u.id, method: a.method }, `upstream ${u.id} does not support ${a.method}: ignored from now on`);
      });
      proxy.hooks.select.tap({ name: 'select:use-upstream', stage: SelectStage.USE_UPSTREAM }, (ups: Upstream[], ctx: CallContext) => {
        const sel = ctx.directives.useUpstream;
        if (sel === undefined || sel.trim() === '') return ups;
        // A client's selector is compiled and matched: bounded like every client input (issue #8 item 3).
        if (sel.length > MAX_CLIENT_PATTERN_LENGTH) throw new ErrInvalidRequest(`use-upstream selector longer than ${MAX_CLIENT_PATTERN_LENGTH} characters`);
        const out = filterByUseUpstream(ups, matchers.get(sel));
        if (out.length === 0) throw new ErrUpstreamsExhausted([], `no upstream matches use-upstream "${sel}"`);
        return out;
      });
    },
  };
}
