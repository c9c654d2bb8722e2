/**
 * evm-interpolation plugin (spec §2.8 #5): block-tag interpolation.
 * Taps: `call` at `CallStage.INTERPOLATION`, below the cache and tip enforcement (they see the
 * client's own tags) and above the getLogs limits (which then see numbers). Before forwarding,
 * `latest`/`finalized` in a call's block-reference param become the network's highest known
 * latest/finalized block in hex, while that head is fresh, so every upstream the call reaches
 * (sweep, hedge, retry, consensus) answers about the same block. Directive `skip-interpolation`
 * turns it off per call.
 */
import { type CallContext, type CallHandler, CallStage, type Network, definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import type { NetworkChainState } from 'svc-proxy/plugins/evm-state';
import { BLOCK_PARAM, toHex } from 'svc-proxy/util';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

/** The network's known heads an interpolation substitutes; 0 means unknown (never substituted). */
export interface KnownHeads {
  /** Highest known latest block number, 0 when unknown. */
  latest: number;
  /** Highest known finalized block number, 0 when unknown. */
  finalized: number;
}

/**
 * Methods never interpolated by default: `eth_getBlockByNumber` (tip enforcement,
 * re-routes its tagged answers instead; eRPC ships it with `translateLatestTag: false`).
 */
export const DEFAULT_SKIP_METHODS: readonly string[] = ['eth_getBlockByNumber'];

/** Options of {@link evmInterpolationPlugin}. */
export interface EvmInterpolationOptions {
  /**
   * Methods whose block tags always pass through, even though `BLOCK_PARAM`
   * (lib/evm/blocks.ts) lists them. Default {@link DEFAULT_SKIP_METHODS}. Replaces the default.
   */
  skipMethods?: readonly string[];
  /**
   * Freshness window in milliseconds used while the network has no block-time estimate yet
   * (passed to `NetworkChainState.isHeadFresh`). Default: that method's own default (2000 ms).
   * Once the estimate exists the window is about two block times.
   */
  fallbackFreshnessMs?: number;
}

/** Substitution for one block-reference value: only the exact string tags `latest`/`finalized`. */
function substitute(v: unknown, heads: KnownHeads): string | undefined {
  if (v === 'latest') return heads.latest > 0 ? toHex(heads.latest) : undefined;
  if (v === 'finalized') return heads.finalized > 0 ? toHex(heads.finalized) : undefined;
  return undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Numeric value of a hex quantity (`0x..`) already present in a filter, or undefined. */
function hexNumber(v: unknown): number | undefined {
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]+$/.test(v)) return undefined;
  const n = Number.parseInt(v, 16);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Rewrites the block tags of one call's params (spec §2.8 #5), without touching the input.
 *
 * Only the string tags `latest` and `finalized` at the method's block position (`BLOCK_PARAM`
 * in lib/evm/blocks.ts; `fromBlock`/`toBlock` for filter methods) are replaced, each only when
 * the corresponding head is known (> 0). `safe`, `pending`, `earliest`, hex numbers and EIP-1898
 * block objects pass through; a missing optional block param is not added; a filter with
 * `blockHash` is left alone. A filter whose substitution would put `fromBlock` above `toBlock`
 * (e.g. `{fromBlock: head + 1, toBlock: 'latest'}`, an indexer's "anything new?" poll, which a
 * node answers with `[]`) is left alone too, since a node answers the concrete inverted range
 * with an "invalid block range" error; for the same reason `toBlock` is not pinned while
 * `fromBlock` is missing (the node reads that as its own latest, which may be past the pin).
 *
 * @param method JSON-RPC method
 * @param params the call's params as sent (an array for every method with a block param)
 * @param heads the network's known heads
 * @returns new params (a shallow copy, the filter object copied too), or `undefined` when nothing changes
 */
export function interpolateParams(method: string, params: unknown, heads: KnownHeads): unknown[] | undefined {
  const pos = BLOCK_PARAM[method];
  if (pos === undefined || !Array.isArray(params)) return undefined;
  if (pos === 'filter') {
    const f: unknown = params[0];
    if (!isPlainObject(f) || (f.blockHash !== undefined && f.blockHash !== null)) return undefined;
    const from = substitute(f.fromBlock, heads);
    // A missing fromBlock means the node's own latest, which may be past the pinned toBlock.
    const to = f.fromBlock === undefined || f.fromBlock === null ? undefined : substitute(f.toBlock, heads);
    if (from === undefined && to === undefined) return undefined;
    const fromN = hexNumber(from ?? f.fromBlock);
    const toN = hexNumber(to ?? f.toBlock);
    if (fromN !== undefined && toN !== undefined && fromN > toN) return undefined;
    const filter: Record<string, unknown> = { ...f };
    if (from !== undefined) filter.fromBlock = from;
    if (to !== undefined) filter.toBlock = to;
    const out = params.slice();
    out[0] = filter;
    return out;
  }
  if (pos >= params.length) return undefined;
  const v = substitute(params[pos], heads);
  if (v === undefined) return undefined;
  const out = params.slice();
  out[pos] = v;
  return out;
}

/**
 * The network's heads read on demand: a head is only computed (a pass over the counted
 * upstreams) when the params carry its tag. A class, so no getter closures per call.
 */
class LazyHeads implements KnownHeads {
  /**
   * @param state the network's chain state
   * @param fresh whether the latest head may be used (confirmed recently); finalized is not gated
   */
  constructor(
    private readonly state: NetworkChainState,
    private readonly fresh: boolean,
  ) {}
  get latest(): number {
    return this.fresh ? this.state.highestLatest : 0;
  }
  get finalized(): number {
    return this.state.highestFinalized;
  }
}

/** Directive `skip-interpolation` (spec §2.8 #5): send block tags as the client wrote them. */
export const SKIP_INTERPOLATION = new Directive<boolean>({
  field: 'skipInterpolation',
  query: 'skip-interpolation',
  header: 'X-SVC-Skip-Interpolation',
  type: 'bool',
  fallback: false,
  spec: '#5',
  description: 'stop block-tag to hex substitution (default false)',
});

/**
 * Creates the block-tag interpolation plugin (name `evm-interpolation`), which declares the
 * `skip-interpolation` directive ({@link SKIP_INTERPOLATION}).
 *
 * Per call, unless the call's `skip-interpolation` is true, replaces `ctx.request` with a copy
 * whose params went through {@link interpolateParams}: `latest` only while the network head is
 * fresh (`isHeadFresh()`: confirmed by a poll or an answer within about two poll intervals or two
 * block times), `finalized` whenever a successful poll produced a finalized block. The client's
 * own request object and params are never mutated. The call's finality was classified from the
 * tag before this runs (tags are `realtime`), which is intended.
 *
 * @param opts methods to skip, freshness window before a block-time estimate exists
 * @throws TypeError when `fallbackFreshnessMs` is negative or not finite
 */
export function evmInterpolationPlugin(opts: EvmInterpolationOptions = {}): Plugin {
  const fallback = opts.fallbackFreshnessMs;
  if (fallback !== undefined && !(Number.isFinite(fallback) && fallback >= 0)) {
    throw new TypeError(`evm-interpolation: fallbackFreshnessMs must be a finite number >= 0, got ${String(fallback)}`);
  }
  const skip: ReadonlySet<string> = new Set(opts.skipMethods ?? DEFAULT_SKIP_METHODS);
  return definePlugin({
    name: 'evm-interpolation',
    schema: { directiveDefaults: directiveDefaultsSchema(SKIP_INTERPOLATION) },
    apply(host: PluginHost) {
      declareDirectives(host, 'evm-interpolation', SKIP_INTERPOLATION);
      host.hooks.call.tap({ name: 'evm-interpolation', stage: CallStage.INTERPOLATION }, (inner: CallHandler, network: Network): CallHandler => {
        return (ctx: CallContext) => {
          const method = ctx.request.method;
          if (SKIP_INTERPOLATION.get(ctx.directives) || skip.has(method) || BLOCK_PARAM[method] === undefined) return inner(ctx);
          // Looked up per call (a WeakMap hit), so whichever plugin creates the state first picks its clock.
          const state = networkChainState(host, network);
          // `latest` only while the head is fresh; `finalized` whenever a poll produced one.
          const params = interpolateParams(method, ctx.request.params, new LazyHeads(state, state.isHeadFresh(fallback)));
          if (params !== undefined) ctx.request = { ...ctx.request, params };
          return inner(ctx);
        };
      });
    },
  });
}
