/**
 * eRPC's served tip (`networks[].evm.servedTip.enabledFor`, also under `networkDefaults.evm`).
 * Off by default, as in eRPC (max mode: the network's latest/finalized block is the highest any
 * counted upstream has). For each tag listed, the network advertises instead the freshest block a
 * strict majority of its counted, non-syncing upstreams already have: the floor(N/2)-th highest
 * head (eRPC's `PickServedTip`: one upstream → its head, two → the lower, three → the middle
 * one). `safe` selects the finalized axis, as in eRPC.
 *
 * That value is what interpolation, block availability and tip enforcement read as the network's
 * head (`highestLatest` / `highestFinalized`), so every client sees a tip a majority of the
 * upstreams can serve; with enforce-highest-block on, `eth_blockNumber` is pinned to it exactly
 * (an answer or cache hit above it is lowered too, as eRPC does). Upstream lag, the far-future
 * null and the lag gauges keep using the highest head (eRPC's blockHeadLag is against the max).
 *
 * Not implemented (their keys are refused): eRPC's trajectory referee and regression guard
 * (`trajectoryWindow`, `maxRegressionBlocks`), per-method floors (`guaranteedMethods`) and
 * `use-upstream`-scoped tips. `clusterDelta` is accepted and dropped: eRPC ignores it too.
 */
import { Type } from '@sinclair/typebox';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  eachNetwork,
  isConfigObject,
  type Network,
  type NormalizeReport,
  type ConfigDocument,
  type PluginHost,
  type RpcResult,
  stageBetween,
  Strict,
  type Upstream,
} from 'svc-proxy/plugin';
import { parseBlockNumber, toHex } from 'svc-proxy/util';
import type { NetworkChainState, UpstreamChainState } from './chain.ts';

/** Tags eRPC's `enabledFor` takes (`safe` selects the finalized axis). */
export const SERVED_TIP_TAGS = ['latest', 'finalized', 'safe'] as const;

/** Schema of `networks[].evm.servedTip`. */
export const servedTipSchema = Strict(
  {
    enabledFor: Type.Optional(
      Type.Array(Type.Union(SERVED_TIP_TAGS.map((t) => Type.Literal(t))), {
        description:
          'tags whose served block is the freshest one a strict majority of the non-syncing upstreams have (the floor(N/2)-th highest head; two upstreams: the lower) instead of the highest; `safe` selects `finalized`. Empty: the highest head (default)',
      }),
    ),
  },
  { description: "eRPC's served tip: which block the network advertises for `latest`/`finalized` (off by default)" },
);

/** Which axes of a network use the majority tip. */
export interface ServedTipAxes {
  /** `latest` is the majority head. */
  readonly latest: boolean;
  /** `finalized` (and `safe`) is the majority finalized block. */
  readonly finalized: boolean;
}

/**
 * The evm-state plugin's rewrite of eRPC's served-tip shapes: tags in any case become lower case,
 * and the deprecated `clusterDelta` is removed with a line saying eRPC ignores it too.
 */
export function normalizeServedTip(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const evm = n.evm;
    if (!isConfigObject(evm) || !isConfigObject(evm.servedTip)) return;
    const st = evm.servedTip;
    const at = `${path}.evm.servedTip`;
    if ('clusterDelta' in st) {
      out.rewrite(`${at}.clusterDelta`, st.clusterDelta, '(removed: deprecated in eRPC, which ignores it; the majority pick needs no tuning)');
      delete st.clusterDelta;
    }
    if (Array.isArray(st.enabledFor) && st.enabledFor.some((t) => typeof t === 'string' && t !== t.toLowerCase())) {
      const to = st.enabledFor.map((t) => (typeof t === 'string' ? t.toLowerCase() : t));
      out.rewrite(`${at}.enabledFor`, st.enabledFor, to);
      st.enabledFor = to;
    }
  });
}

/**
 * The served-tip axes a network's config turns on, or undefined when none is (max mode).
 * @param network the network (its resolved `evm.servedTip.enabledFor`)
 */
export function servedTipOf(network: Network): ServedTipAxes | undefined {
  const evm = network.config.settings.evm as { servedTip?: { enabledFor?: readonly string[] } } | undefined;
  const tags = evm?.servedTip?.enabledFor ?? [];
  const latest = tags.includes('latest');
  const finalized = tags.includes('finalized') || tags.includes('safe');
  return latest || finalized ? { latest, finalized } : undefined;
}

/**
 * The freshest block a strict majority of `values` have reached: the floor(N/2)-th highest of the
 * positive ones (0 when there is none).
 * @param values heads (0 or less = unknown, left out)
 */
export function majorityPick(values: readonly number[]): number {
  const known = values.filter((v) => v > 0).sort((a, b) => b - a);
  return known.length ? (known[Math.floor(known.length / 2)] as number) : 0;
}

/**
 * The majority head of one axis over a network's counted upstreams: syncing ones left out, and,
 * once any upstream is vouched (head plausibility), the vouched ones only, as the max mode counts.
 * @param st the network's chain state
 * @param counted the upstreams that make up the network's head
 * @param kind `latest` or `finalized`
 */
export function majorityHead(st: Pick<NetworkChainState, 'peek'>, counted: Iterable<Upstream>, kind: 'latest' | 'finalized'): number {
  const all: UpstreamChainState[] = [];
  let anyVouched = false;
  for (const u of counted) {
    const s = st.peek(u);
    if (!s || s.syncing || !(s.latest > 0)) continue;
    all.push(s);
    if (s.vouched) anyVouched = true;
  }
  return majorityPick(all.filter((s) => !anyVouched || s.vouched).map((s) => (kind === 'latest' ? s.latest : s.finalized)));
}

/**
 * Turns the served tip on for each network whose config asks for it (when the network is
 * created), and pins `eth_blockNumber` to the majority tip on those networks: a `call` tap
 * outside the cache (a hit is pinned too) that networks without `servedTip.enabledFor: [latest]`
 * never see. Internal calls and calls with `enforce-highest-block: false` pass as they are.
 * @param host the plugin host
 * @param chainStateOf the evm-state plugin's chain state of a network
 * @param enforceHighest whether a call has `enforce-highest-block` on (schema.ts imports this file, so it is passed in)
 */
export function tapServedTip(host: PluginHost, chainStateOf: (network: Network) => NetworkChainState, enforceHighest: (ctx: CallContext) => boolean): void {
  host.hooks.network.tap('evm-state:served-tip', (network: Network) => {
    chainStateOf(network).servedTip = servedTipOf(network);
  });
  const stage = stageBetween(CallStage.IDEMPOTENT_BROADCAST, CallStage.CACHE);
  host.hooks.call.tap({ name: 'evm-state:served-tip', stage }, (inner: CallHandler, network: Network): CallHandler => {
    if (!servedTipOf(network)?.latest) return inner;
    const pin = (ctx: CallContext, r: RpcResult): RpcResult => {
      const n = parseBlockNumber(r.result);
      const tip = chainStateOf(ctx.network).highestLatest;
      return n !== undefined && tip > 0 && n !== tip ? r.withResult(toHex(tip)) : r;
    };
    return (ctx) => {
      if (ctx.internal || ctx.request.method !== 'eth_blockNumber' || !enforceHighest(ctx)) return inner(ctx);
      return inner(ctx).then((r) => pin(ctx, r));
    };
  });
}
