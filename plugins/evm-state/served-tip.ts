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
 * eRPC's regression guard (`maxRegressionBlocks`) and guaranteed-method floor
 * (`guaranteedMethods`) apply to the pick (./served-tip-pick.ts). Not implemented: eRPC's
 * trajectory referee (`trajectoryWindow: 0`, eRPC's "referee off", is accepted and dropped; any
 * other value is refused) and `use-upstream`-scoped tips. `clusterDelta` is accepted and
 * dropped: eRPC ignores it too.
 */
import { Type } from '@sinclair/typebox';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  eachNetwork,
  isConfigObject,
  type Network,
  parseDuration,
  pathOf,
  type NormalizeReport,
  type ConfigDocument,
  type PluginHost,
  type RpcResult,
  stageBetween,
  Strict,
  type Upstream,
} from 'svc-proxy/plugin';
import { parseBlockNumber, toHex } from 'svc-proxy/util';
import type { NetworkChainState } from './chain.ts';
import { ballotOf, eligibleOf, MAX_GUARANTEED_METHODS, ServedTip } from './served-tip-pick.ts';

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
    guaranteedMethods: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
        maxItems: MAX_GUARANTEED_METHODS,
        description:
          'method globs (`trace_*`): for each, the majority pick over only the upstreams that support it (`ignoreMethods`/`allowMethods` of the pattern, as eRPC) floors the served tip, so `latest` is always a block those upstreams have; a pattern no upstream supports sets no floor',
      }),
    ),
    maxRegressionBlocks: Type.Optional(
      Type.Integer({
        minimum: -1,
        description:
          "blocks the majority pick may fall below the corroborated head (the second-highest head, or the last corroborated pick) before the last corroborated pick is served instead, for at most one minute, then the pick as computed; unset or 0: 1024 (eRPC's default); -1: no guard",
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
    if ('trajectoryWindow' in st) normalizeTrajectoryWindow(st, at, out);
    if (Array.isArray(st.enabledFor) && st.enabledFor.some((t) => typeof t === 'string' && t !== t.toLowerCase())) {
      const to = st.enabledFor.map((t) => (typeof t === 'string' ? t.toLowerCase() : t));
      out.rewrite(`${at}.enabledFor`, st.enabledFor, to);
      st.enabledFor = to;
    }
  });
}

/** Why eRPC's `trajectoryWindow: 0` changes nothing in svc, as the rewrite line says it. */
const TRAJECTORY_OFF_REASON = "(removed: 0 turns eRPC's trajectory referee off, and svc has none: it serves the plain majority pick)";

/**
 * eRPC's `servedTip.trajectoryWindow`: `0` (a duration of 0, eRPC's "referee off") is what svc
 * does and is removed with a line saying so; any other value asks for the trajectory referee,
 * which svc does not have, and is a problem naming it.
 */
function normalizeTrajectoryWindow(st: Record<string, unknown>, at: string, out: NormalizeReport): void {
  const v = st.trajectoryWindow;
  const key = pathOf(at, 'trajectoryWindow');
  let ms: number | undefined;
  try {
    ms = typeof v === 'string' || typeof v === 'number' ? parseDuration(v) : undefined;
  } catch {
    ms = undefined;
  }
  if (ms !== 0) {
    out.problem(
      key,
      "eRPC's trajectoryWindow turns on the served tip's trajectory referee, which svc does not have: svc serves the plain majority pick (eRPC's trajectoryWindow: 0); set 0 or remove the key",
    );
    return;
  }
  out.rewrite(key, v, TRAJECTORY_OFF_REASON);
  delete st.trajectoryWindow;
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
 * A network's served tip (its axes, guaranteed methods and regression guards), or undefined in max mode.
 * @param network the network (its resolved `evm.servedTip`)
 * @param onGuard called when an axis' regression guard starts holding, fails open or recovers
 */
export function servedTipFor(network: Network, onGuard?: ConstructorParameters<typeof ServedTip>[2]): ServedTip | undefined {
  const axes = servedTipOf(network);
  if (!axes) return undefined;
  const st = (network.config.settings.evm as { servedTip?: { guaranteedMethods?: readonly string[]; maxRegressionBlocks?: number } }).servedTip;
  return new ServedTip({ ...axes, guaranteedMethods: st?.guaranteedMethods ?? [], maxRegressionBlocks: st?.maxRegressionBlocks ?? 0 }, Date.now, onGuard);
}

/**
 * The freshest block a strict majority of `values` have reached: the floor(N/2)-th highest of the
 * positive ones (0 when there is none).
 * @param values heads (0 or less = unknown, left out)
 */
export function majorityPick(values: readonly number[]): number {
  return ballotOf(values).pick;
}

/**
 * The majority head of one axis over a network's counted upstreams: syncing ones left out, and,
 * once any upstream is vouched (head plausibility), the vouched ones only, as the max mode counts.
 * @param st the network's chain state
 * @param counted the upstreams that make up the network's head
 * @param kind `latest` or `finalized`
 */
export function majorityHead(st: Pick<NetworkChainState, 'peek'>, counted: Iterable<Upstream>, kind: 'latest' | 'finalized'): number {
  return majorityPick(eligibleOf((u) => st.peek(u), counted).map(({ s }) => (kind === 'latest' ? s.latest : s.finalized)));
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
    chainStateOf(network).servedTip = servedTipFor(network, (axis, state, served, pick, reference) => {
      const fields = { project: network.project.id, network: network.id, axis, served, pick, reference };
      if (state === 'holding')
        host.logger.error(
          fields,
          `served tip ${axis}: the majority pick ${pick} fell far below the corroborated head ${reference}; serving the last corroborated tip ${served}`,
        );
      else if (state === 'failed-open')
        host.logger.error(fields, `served tip ${axis}: the regression outlasted the guard's minute; failing open and serving the pick ${pick}`);
      else host.logger.warn(fields, `served tip ${axis}: recovered; the regression guard no longer holds`);
    });
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
