/**
 * forward-headers plugin: client request headers passed on to an upstream, by allowlist.
 * A provider may bill or route by a header only the client knows (a tenant id, a routing hint
 * such as `x-qn-height`); `upstreams[].forwardHeaders` (or `upstreamDefaults.forwardHeaders`, or
 * eRPC's project-level `forwardHeaders`, rewritten into `upstreamDefaults`) names the headers a
 * call's request carries on to that upstream.
 *
 * - Never forwarded, whatever the list says (a config naming one does not load): credentials
 *   (`authorization`, `proxy-authorization`, `cookie`, svc's own `x-svc-*` headers, which carry
 *   API keys and directives, SIWE and x402 payment headers), hop-by-hop and framing headers
 *   (`connection`, `keep-alive`, `te`, `trailer`, `transfer-encoding`, `upgrade`, `host`,
 *   `content-length`, `content-type`, `content-encoding`, `accept-encoding`, `expect`) and
 *   `sec-websocket-*`.
 * - Bounded: at most 32 names per upstream; a value over 1 KiB is not forwarded. The upstream's
 *   own configured headers (`jsonRpc.headers`) win on a clash.
 * - The `upstream` tap (at `UpstreamStage.FORWARD_HEADERS`, outermost: every retry and hedge of
 *   the call carries them) sets `UpstreamCall.headers` only when the client sent a listed header;
 *   an upstream with no list gets its sender back unchanged. Internal calls (state polls) have no
 *   client headers. A call carrying forwarded headers is sent alone, not in an outbound batch.
 * - A call carrying a header its network's upstreams forward is marked with its provenance (the
 *   headers and their values, `DirectiveStage.PROVENANCE`): a header may change which backend
 *   answers (a routing hint) or who is billed, so such a call neither joins another caller's
 *   request in flight nor reads or writes the shared cache. Calls carrying none are untouched.
 */
import { createHash } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import {
  type ConfigDocument,
  definePlugin,
  eachProject,
  eachUpstream,
  isConfigObject,
  type NormalizeReport,
  pathOf,
  type Plugin,
  type PluginHost,
  type CallContext,
  DirectiveStage,
  type Directives,
  type Network,
  type Upstream,
  type UpstreamCall,
  type UpstreamSender,
  UpstreamStage,
} from 'svc-proxy/plugin';
import { markProvenance } from 'svc-proxy/plugins/multiplex';

/** Most header names one upstream forwards. */
export const MAX_FORWARDED_HEADERS = 32;
/** Longest value forwarded, characters; a longer one is left out. */
export const MAX_FORWARDED_VALUE = 1024;

/** Header names never forwarded (lower-cased), and the prefixes of such names. */
export const NEVER_FORWARDED: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-payment',
  'payment-signature',
  'x-siwe-message',
  'x-siwe-signature',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'accept-encoding',
  'expect',
]);
const NEVER_FORWARDED_PREFIXES = ['x-svc-', 'sec-websocket-', 'proxy-'];

/**
 * Why a header name cannot be forwarded, or undefined when it can.
 * @param name a header name as configured
 */
export function refusedHeader(name: string): string | undefined {
  const n = name.toLowerCase();
  if (NEVER_FORWARDED.has(n)) return `${name} is a credential or a hop-by-hop header and is never forwarded`;
  const p = NEVER_FORWARDED_PREFIXES.find((x) => n.startsWith(x));
  return p ? `${name}: ${p}* headers are svc's own, credentials or hop-by-hop, and are never forwarded` : undefined;
}

/** An HTTP header name (RFC 9110 token), at most 64 characters. */
const HEADER_NAME = "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$";

const upstreamSchema = {
  forwardHeaders: Type.Optional(
    Type.Array(Type.String({ pattern: HEADER_NAME }), {
      maxItems: MAX_FORWARDED_HEADERS,
      description:
        'client request headers forwarded to this upstream (case-insensitive names; credentials, x-svc-* and hop-by-hop headers are refused); a value over 1 KiB is not forwarded',
    }),
  ),
};

/**
 * The plugin's `normalize`: eRPC's project-level `forwardHeaders` becomes the project's
 * `upstreamDefaults.forwardHeaders` (unless that is set), and every list naming a header that is
 * never forwarded is refused.
 */
export function normalizeForwardHeaders(doc: ConfigDocument, out: NormalizeReport): void {
  eachProject(doc, (p, path) => {
    if (p.forwardHeaders === undefined) return;
    const defaults = isConfigObject(p.upstreamDefaults) ? p.upstreamDefaults : {};
    if (defaults.forwardHeaders === undefined) defaults.forwardHeaders = p.forwardHeaders;
    p.upstreamDefaults = defaults;
    out.rewrite(pathOf(path, 'forwardHeaders'), 'forwardHeaders', 'upstreamDefaults.forwardHeaders');
    delete p.forwardHeaders;
  });
  eachUpstream(doc, (u, path) => {
    if (!Array.isArray(u.forwardHeaders)) return;
    u.forwardHeaders.forEach((h, i) => {
      const why = typeof h === 'string' ? refusedHeader(h) : undefined;
      if (why) out.problem(`${pathOf(path, 'forwardHeaders')}[${i}]`, why);
    });
  });
}

/** The lower-cased names an upstream forwards (empty when none). */
function forwardedOf(u: Upstream): string[] {
  const list = (u.config.settings as { forwardHeaders?: unknown }).forwardHeaders;
  if (!Array.isArray(list)) return [];
  const names = new Set<string>();
  for (const h of list) if (typeof h === 'string' && !refusedHeader(h)) names.add(h.toLowerCase());
  return [...names].slice(0, MAX_FORWARDED_HEADERS);
}

/**
 * Creates the forward-headers plugin (name `forward-headers`).
 * @returns the plugin: key `upstreams[].forwardHeaders`, eRPC's `projects[].forwardHeaders` rewritten, one `upstream` tap
 */
export function forwardHeadersPlugin(): Plugin {
  return definePlugin({
    name: 'forward-headers',
    schema: { upstream: upstreamSchema, normalize: normalizeForwardHeaders },
    apply(host: PluginHost) {
      // The names any upstream of a network forwards, once per network (empty: the tap does nothing).
      // Recomputed when the network's upstream list changes (providers add upstreams as they resolve).
      const byNetwork = new WeakMap<Network, { ups: readonly Upstream[]; size: number; names: readonly string[] }>();
      const namesOf = (n: Network): readonly string[] => {
        const known = byNetwork.get(n);
        if (known && known.ups === n.upstreams && known.size === n.upstreams.length) return known.names;
        const names = [...new Set(n.upstreams.flatMap(forwardedOf))].sort();
        byNetwork.set(n, { ups: n.upstreams, size: n.upstreams.length, names });
        return names;
      };
      const markForwarded = (d: Directives, ctx: CallContext): Directives => {
        const names = namesOf(ctx.network);
        if (names.length === 0 || ctx.internal) return d;
        const sent = ctx.http?.headers;
        let mark: string | undefined;
        for (const n of names) {
          const v = sent?.[n];
          if (typeof v === 'string' && v.length <= MAX_FORWARDED_VALUE) mark = `${mark === undefined ? '' : `${mark}\n`}${n}:${v}`;
        }
        // A long mark is hashed: the provenance keeps 256 characters, and two tenants must never share by truncation.
        if (mark !== undefined) markProvenance(ctx, 'forward-headers', mark.length > 200 ? createHash('sha256').update(mark).digest('hex') : mark);
        return d;
      };
      // Tapped only when some upstream forwards headers: a config without any pays nothing per call.
      host.hooks.configured.tap('forward-headers', (c) => {
        const forwards = (settings: unknown) => Array.isArray((settings as { forwardHeaders?: unknown } | undefined)?.forwardHeaders);
        if (c.projects.some((p) => forwards(p.upstreamDefaults) || p.upstreams.some((u) => forwards(u.settings))))
          host.hooks.directives.tap({ name: 'forward-headers', stage: DirectiveStage.PROVENANCE }, markForwarded);
      });
      host.hooks.upstream.tap({ name: 'forward-headers', stage: UpstreamStage.FORWARD_HEADERS }, (inner: UpstreamSender, u: Upstream): UpstreamSender => {
        const names = forwardedOf(u);
        if (names.length === 0) return inner;
        return (call: UpstreamCall) => {
          const sent = call.ctx.internal ? undefined : call.ctx.http?.headers;
          if (!sent) return inner(call);
          let picked: Record<string, string> | undefined;
          for (const n of names) {
            const v = sent[n];
            if (typeof v === 'string' && v.length <= MAX_FORWARDED_VALUE) (picked ??= {})[n] = v;
          }
          if (picked) call.headers = picked;
          return inner(call);
        };
      });
    },
  });
}
