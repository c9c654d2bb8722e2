/**
 * `networks[].evm.safeBlockSource` (eRPC's key of the same name): calls naming the `safe` block tag
 * go to the upstreams an upstream selector names, and never read the cache.
 *
 * Why: `safe` is node-relative (an op-stack verifier picks its own L1 confirmation depth), so
 * upstreams of one pool may honestly answer different blocks for it. The tag is left as it is
 * (svc's interpolation never rewrites `safe`), so the chosen upstreams define both the height and
 * the hash. The selector is written into the call's `use-upstream` directive, over any value the
 * client sent (operator routing wins), and `skip-cache-read` is set to `true`: a cached answer may
 * come from before the source was configured and cannot prove the source still calls it safe.
 * Retries, hedges and consensus still run, inside the selected pool. The select plugin then marks
 * the call's provenance, so the cache and multiplexing keep its answer apart from the pool's.
 */
import { Type } from '@sinclair/typebox';
import { type CallContext, type Directives, DirectiveStage, type Network, type PluginHost, stageBetween } from 'svc-proxy/plugin';
import { declareDirectives, Directive } from 'svc-proxy/plugins/directives';
import { blockRefOf, refOf } from 'svc-proxy/util';

/** Longest selector accepted, characters (as long as a client's `use-upstream`). */
export const MAX_SAFE_BLOCK_SOURCE_LENGTH = 256;

/** Schema of `networks[].evm.safeBlockSource` (also under `networkDefaults.evm`). */
export const safeBlockSourceSchema = Type.String({
  minLength: 1,
  maxLength: MAX_SAFE_BLOCK_SOURCE_LENGTH,
  description:
    "upstream selector (the `use-upstream` syntax: ids, `<key>:<value>` tags, `*`, `|`, leading `!`) that alone serves calls naming the `safe` block tag, whatever `use-upstream` the client sent; those calls skip cache reads (eRPC's evm.safeBlockSource)",
});

/** Directive `use-upstream`, declared exactly as the select plugin declares it (spec §2.8 #4). */
const USE_UPSTREAM = new Directive<string | undefined>({
  field: 'useUpstream',
  query: 'use-upstream',
  header: 'X-SVC-Use-Upstream',
  type: 'string',
  fallback: undefined,
  spec: '#4',
  description: 'upstream selector: ids, `<key>:<value>` tags, `*`, `|`, leading `!`',
});

/** Directive `skip-cache-read`, declared as the cache plugin declares it (spec §2.8 #3). */
const SKIP_CACHE_READ = new Directive<string | undefined>({
  field: 'skipCacheRead',
  query: 'skip-cache-read',
  header: 'X-SVC-Skip-Cache-Read',
  type: 'string',
  fallback: undefined,
  spec: '#3',
});

/**
 * Stage of the directives tap: after the resolved defaults, headers, query and integrity level
 * (so it overrides a client's `use-upstream`), before provenance is marked (130).
 */
export const SAFE_SOURCE_DIRECTIVE_STAGE = stageBetween(DirectiveStage.INTEGRITY, DirectiveStage.PROVENANCE);

/** Methods whose `safe` tag sits where the block table (`blockRefOf`) does not look. */
const EXTRA_REFS: Readonly<Record<string, (params: unknown[]) => unknown[]>> = {
  eth_createAccessList: (p) => [p[1]],
  eth_newFilter: (p) => {
    const f = p[0] as { fromBlock?: unknown; toBlock?: unknown } | undefined;
    return f && typeof f === 'object' ? [f.fromBlock, f.toBlock] : [];
  },
};

/**
 * Whether a call names the `safe` block tag at its block parameter (either end of a range).
 * @param method JSON-RPC method
 * @param params the call's params as the client sent them
 */
export function namesSafeTag(method: string, params: unknown): boolean {
  const extra = EXTRA_REFS[method];
  if (extra) return Array.isArray(params) && extra(params).some((v) => isSafe(refOf(v)));
  const ref = blockRefOf(method, params);
  if (!ref) return false;
  return ref.kind === 'range' ? isSafe(ref.from) || isSafe(ref.to) : isSafe(ref);
}

function isSafe(ref: ReturnType<typeof refOf>): boolean {
  return ref?.kind === 'tag' && ref.tag === 'safe';
}

/** `networks[].evm.safeBlockSource` of a network, undefined when unset. */
export function safeBlockSourceOf(network: Network): string | undefined {
  const evm = network.config.settings.evm as { safeBlockSource?: unknown } | undefined;
  const v = evm?.safeBlockSource;
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/**
 * Taps `directives` to route `safe`-tagged calls of networks with `evm.safeBlockSource`, once a loaded config sets it on some network
 * (or its `networkDefaults`): other configs pay nothing per call. A network without it then pays one memoised lookup per call.
 * @param host the plugin host
 */
export function tapSafeBlockSource(host: PluginHost): void {
  declareDirectives(host, 'evm-state', USE_UPSTREAM, SKIP_CACHE_READ);
  // Per network object: a config reload builds new networks, so a stale entry is never read.
  const sources = new WeakMap<Network, string | null>();
  let tapped = false;
  const sets = (settings: unknown): boolean => {
    const v = (settings as { evm?: { safeBlockSource?: unknown } } | undefined)?.evm?.safeBlockSource;
    return typeof v === 'string' && v !== '';
  };
  host.hooks.configured.tap('evm-state:safe-source', (c) => {
    if (tapped || !c.projects.some((p) => sets(p.networkDefaults) || p.networks.some((n) => sets(n.settings)))) return;
    tapped = true;
    host.hooks.directives.tap({ name: 'evm-state:safe-source', stage: SAFE_SOURCE_DIRECTIVE_STAGE }, (d: Directives, ctx: CallContext) => {
      let source = sources.get(ctx.network);
      if (source === undefined) {
        source = safeBlockSourceOf(ctx.network) ?? null;
        sources.set(ctx.network, source);
      }
      if (source === null || !namesSafeTag(ctx.request.method, ctx.request.params)) return d;
      return { ...d, [USE_UPSTREAM.field]: source, [SKIP_CACHE_READ.field]: 'true' };
    });
  });
}
