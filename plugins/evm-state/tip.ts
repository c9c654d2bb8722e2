/**
 * Tip enforcement of the evm-state plugin (spec §2.8 #7 and #9): the
 * errors that re-route a call, the block-number readers, the tip comparison and the
 * block-availability filter (pure, also used by the poller and `availability.ts`), then the taps.
 * Taps: `validate` at 0 (a null tagged block is a retryable error) and last (observe heads in
 * answers; an answer behind the head is a retryable error); `call` at TIP_ENFORCEMENT (return
 * the highest answer seen when every upstream is behind, raise `eth_blockNumber` to the known
 * head). Publishes `svc_upstream_stale_block_total`.
 */
import { Counter } from 'prom-client';
import {
  type AttemptRecord,
  type CallContext,
  type CallHandler,
  CallStage,
  type PluginHost,
  type RpcResult,
  type Upstream,
  ValidateStage,
} from 'svc-proxy/plugin';
import { ErrEndpointMissingData, type SvcError } from 'svc-proxy/plugin/errors';
import { parseBlockNumber, refOf, toHex } from 'svc-proxy/util';
import { chainStateOf, type NetworkChainState, type UpstreamChainState } from './chain.ts';
import { chainChanged, ErrUpstreamChainChanged } from './chain-id.ts';
import { ENFORCE_HIGHEST_BLOCK, ENFORCE_NON_NULL_TAGGED_BLOCKS } from './schema.ts';
import type { HeadTracker } from './state.ts';
import { FIRST_VOUCH_WAIT_MS, whenVouched } from './vouch-wait.ts';

/** Time a call keeps for its own upstream attempt after waiting for the first vouched head, ms. */
const FIRST_VOUCH_SLACK_MS = 500;

/**
 * An upstream answered `eth_blockNumber` or a `latest`/`finalized` `eth_getBlockByNumber` with a
 * block lower than the network's highest known one (spec §2.8 #7). Retryable (JSON-RPC -32014,
 * like {@link ErrEndpointMissingData}, which it extends): the sweep moves on to the next upstream.
 * Clients never see it: it is only raised for an otherwise-valid answer, and when no upstream
 * reaches the head the highest answer seen is returned instead of an error.
 */
export class ErrUpstreamBlockBehind extends ErrEndpointMissingData {}

/**
 * An upstream answered `null` to a tag-based `eth_getBlockByNumber` (spec §2.8 #9). Retryable
 * (-32014, extends {@link ErrEndpointMissingData}): the sweep moves on to the next upstream.
 * Turned off per call by the `enforce-non-null-tagged-blocks: false` directive.
 */
export class ErrUpstreamNullTaggedBlock extends ErrEndpointMissingData {}

/**
 * An upstream answered a head (`eth_blockNumber`, a `latest`/`finalized` block, a mined
 * transaction's block) that no other source confirms and the block time cannot explain (head
 * plausibility, docs/evm.md). Retryable (-32014, extends {@link ErrEndpointMissingData}): the call
 * moves on to another upstream and the head is recorded nowhere.
 */
export class ErrUpstreamImplausibleHead extends ErrEndpointMissingData {}

/**
 * The block tag of an `eth_getBlockByNumber` call's first param (`latest`, `finalized`,
 * `safe`, `pending`, `earliest`), or undefined for a concrete number, a hash or a malformed call.
 */
export function blockTagOf(params: unknown): string | undefined {
  const p0: unknown = Array.isArray(params) ? params[0] : undefined;
  const ref = refOf(p0);
  return ref?.kind === 'tag' ? ref.tag : undefined;
}

/**
 * The concrete block number of an `eth_getBlockByNumber` call's first param (hex quantity), or
 * undefined for a tag, a hash or a malformed call.
 */
export function blockNumberParamOf(params: unknown): number | undefined {
  const p0: unknown = Array.isArray(params) ? params[0] : undefined;
  const ref = refOf(p0);
  return ref?.kind === 'number' ? ref.number : undefined;
}

/** The `number` field of a block object (`eth_getBlockByNumber` result), or undefined. */
export function blockNumberOfBlock(block: unknown): number | undefined {
  if (block === null || typeof block !== 'object') return undefined;
  return parseBlockNumber((block as { number?: unknown }).number);
}

/**
 * How far an answer is behind the network's known head (spec §2.8 #7).
 * @param answer block number the upstream answered
 * @param highest the network's highest known latest (or finalized) block; 0 = unknown
 * @returns the shortfall in blocks (> 0) when the answer is behind, else undefined
 */
export function behindBy(answer: number, highest: number): number | undefined {
  return highest > 0 && answer < highest ? highest - answer : undefined;
}

/**
 * An upstream's known latest block, or undefined when it was never observed (a node genuinely
 * at genesis counts as known once a poll read its latest block).
 */
export function knownLatestOf(s: UpstreamChainState | undefined): number | undefined {
  if (!s) return undefined;
  return s.latest > 0 || s.lastPollAt > 0 ? s.latest : undefined;
}

/**
 * Block availability: drops the candidates whose known latest block is below
 * `block`, but only while at least one candidate is known to cover it. Upstreams never observed
 * ({@link knownLatestOf}) are kept: they may well have it. Never returns an empty list for a non-empty input:
 * when no candidate is known to cover the block, the input is returned unchanged (the poller may
 * simply not have seen the new head yet).
 * @param candidates the ordered candidates of the call
 * @param block the highest concrete block the call reads
 * @param state the network's chain state
 */
export function filterByAvailability(candidates: Upstream[], block: number, state: NetworkChainState): Upstream[] {
  let covered = false;
  let skip = 0;
  for (const u of candidates) {
    const latest = knownLatestOf(state.peek(u));
    if (latest === undefined) continue;
    if (latest >= block) covered = true;
    else skip++;
  }
  if (!covered || skip === 0) return candidates;
  return candidates.filter((u) => {
    const latest = knownLatestOf(state.peek(u));
    return latest === undefined || latest >= block;
  });
}

/**
 * Reads an `eth_syncing` answer: `false` means synced; `true` or a progress object means
 * syncing; the `{Ok: <bool>}` wrapper some clients send is unwrapped.
 * @returns true while syncing, false when synced, undefined for an answer it cannot read
 */
export function syncingOf(result: unknown): boolean | undefined {
  if (typeof result === 'boolean') return result;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return undefined;
  const o = result as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1 && (keys[0] === 'Ok' || keys[0] === 'ok') && typeof o[keys[0]] === 'boolean') return o[keys[0]] as boolean;
  // A progress object (startingBlock/currentBlock/highestBlock...) means syncing.
  return keys.length > 0 ? true : undefined;
}

// ---------------------------------------------------------------------------------------
// Taps

/** Lookups whose answer carries the `blockNumber` of a mined transaction (responses that reveal a newer head). */
const MINED_LOOKUPS: ReadonlySet<string> = new Set([
  'eth_getTransactionReceipt',
  'eth_getTransactionByHash',
  'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex',
]);

/** Stage of the head-observing, behind-the-head `validate` tap: after every other check, so only otherwise-valid answers are observed and kept as fallbacks. */
export const VALIDATE_STAGE = ValidateStage.TIP;
/** Stage of the null-tagged-block `validate` tap: the default stage 0, before lenient checks such as retry-empty (stage 100). */
export const NULL_TAG_VALIDATE_STAGE = ValidateStage.NULL_TAGGED_BLOCK;

const TAG = Symbol('svc.evm-state.tag');
const BEST = Symbol('svc.evm-state.best');

/** The highest otherwise-valid answer that was behind the known head, kept per call. */
interface BestAnswer {
  n: number;
  result: RpcResult;
  upstream: Upstream;
  attempt?: AttemptRecord;
}

/**
 * Registers the stale-answer counter and taps `validate` (null tagged blocks, then heads and
 * answers behind them) and `call` (tip enforcement), in that order.
 * @param host the plugin host the evm-state plugin is applied to
 * @param heads where heads seen in answers are reported
 */
export function tapTipEnforcement(host: PluginHost, heads: HeadTracker): void {
  const hooks = host.hooks;
  const observeLatest = heads.observeLatest;
  const observeFinalized = heads.observeFinalized;
  const implausible = (u: Upstream, what: string, n: number): SvcError =>
    new ErrUpstreamImplausibleHead(`upstream ${u.id} answered ${what} ${n}, beyond what the network's head and block time allow`, {
      details: { upstream: u.id, answered: n },
    });
  const stale = new Counter({
    name: 'svc_upstream_stale_block_total',
    help: 'Answers behind the network head (eth_blockNumber, latest/finalized eth_getBlockByNumber) re-routed by enforce-highest-block',
    labelNames: ['project', 'network', 'upstream', 'category'],
    registers: [host.metrics],
  });
  const lagging = new LaggingWarnings(host.logger);
  const remember = (ctx: CallContext, n: number, result: RpcResult, u: Upstream): void => {
    const best = ctx.state.get(BEST) as BestAnswer | undefined;
    if (best && best.n >= n) return;
    let attempt: AttemptRecord | undefined;
    const list = ctx.record.attempts;
    for (let i = list.length - 1; i >= 0; i--) {
      const a = list[i] as AttemptRecord;
      if (a.upstreamId === u.id && a.outcome === 'pending') {
        attempt = a;
        break;
      }
    }
    ctx.state.set(BEST, { n, result, upstream: u, attempt } satisfies BestAnswer);
  };
  const behind = (
    ctx: CallContext,
    u: Upstream,
    r: RpcResult,
    n: number,
    highest: number,
    what: string,
    kind: 'latest' | 'finalized',
  ): SvcError | undefined => {
    const by = behindBy(n, highest);
    if (by === undefined) return undefined;
    remember(ctx, n, r, u);
    stale.inc({ project: ctx.project.id, network: ctx.network.id, upstream: u.id, category: host.methodLabel.value(ctx.request.method) });
    // Re-routing needs an upstream that has the block and answers. When every upstream ahead of
    // this answer got no answer on its last attempt (refused, frozen, HTTP 5xx), waiting on them
    // ends in a timeout: this answer is the freshest one svc can give now, and is served.
    if (!aheadAndAnswering(ctx, u, n, kind)) {
      lagging.warn(ctx, u, n, highest);
      return undefined;
    }
    return new ErrUpstreamBlockBehind(`upstream ${u.id} answered ${what} ${n}, ${by} behind the highest known ${highest}`, {
      details: { upstream: u.id, answered: n, highest },
    });
  };

  // A null tagged block (§2.8 #9) at the default stage: a strict check, so it bails before
  // lenient ones (retry-empty would otherwise keep the null as a fallback answer).
  hooks.validate.tap({ name: 'evm-state:non-null', stage: NULL_TAG_VALIDATE_STAGE }, (ctx: CallContext, r: RpcResult, u: Upstream) => {
    // Taken out of service (its chain id changed) while this call was in flight: never served or cached.
    if (!r.fromCache && chainChanged(u))
      return new ErrUpstreamChainChanged(`upstream ${u.id} was taken out of service (its chain id changed)`, { details: { upstream: u.id } });
    if (ctx.internal || r.fromCache || ctx.request.method !== 'eth_getBlockByNumber') return undefined;
    if (r.result !== null && r.result !== undefined) return undefined;
    if (!ENFORCE_NON_NULL_TAGGED_BLOCKS.get(ctx.directives)) return undefined;
    const tag = (ctx.state.get(TAG) as string | undefined) ?? blockTagOf(ctx.request.params);
    if (tag === undefined) return undefined;
    return new ErrUpstreamNullTaggedBlock(`upstream ${u.id} answered null for eth_getBlockByNumber(${tag})`, { details: { upstream: u.id, tag } });
  });

  // Heads in answers (eth_blockNumber, tagged blocks, mined receipts/transactions), and
  // answers behind the known head (§2.8 #7), last: only answers every
  // other check accepted are observed or kept as the fallback.
  hooks.validate.tap({ name: 'evm-state:tip', stage: VALIDATE_STAGE }, (ctx: CallContext, r: RpcResult, u: Upstream) => {
    if (ctx.internal || r.fromCache) return undefined;
    const method = ctx.request.method;
    if (method === 'eth_blockNumber') {
      const n = parseBlockNumber(r.result);
      if (n === undefined) return undefined;
      if (observeLatest(ctx.network, u, n) === 'implausible') return implausible(u, 'eth_blockNumber', n);
      if (!ENFORCE_HIGHEST_BLOCK.get(ctx.directives)) return undefined;
      return behind(ctx, u, r, n, chainStateOf(ctx.network).highestLatest, 'eth_blockNumber', 'latest');
    }
    if (MINED_LOOKUPS.has(method)) {
      // A mined transaction or receipt proves its upstream has that block: advance the head
      // at once, so a read right after a confirmed write is not interpolated to an older block.
      const mined = r.result !== null && typeof r.result === 'object' ? parseBlockNumber((r.result as { blockNumber?: unknown }).blockNumber) : undefined;
      if (mined !== undefined && observeLatest(ctx.network, u, mined) === 'implausible') return implausible(u, `a ${method} in block`, mined);
      return undefined;
    }
    if (method !== 'eth_getBlockByNumber') return undefined;
    const tag = (ctx.state.get(TAG) as string | undefined) ?? blockTagOf(ctx.request.params);
    if (tag !== 'latest' && tag !== 'finalized') return undefined;
    const n = blockNumberOfBlock(r.result);
    if (n === undefined) return undefined;
    const st = chainStateOf(ctx.network);
    if ((tag === 'latest' ? observeLatest(ctx.network, u, n) : observeFinalized(ctx.network, u, n)) === 'implausible') return implausible(u, `${tag} block`, n);
    if (!ENFORCE_HIGHEST_BLOCK.get(ctx.directives)) return undefined;
    return tag === 'latest'
      ? behind(ctx, u, r, n, st.highestLatest, 'latest block', 'latest')
      : behind(ctx, u, r, n, st.highestFinalized, 'finalized block', 'finalized');
  });

  /** `eth_blockNumber` never answers below the highest known latest block. */
  const raise = (ctx: CallContext, r: RpcResult): RpcResult => {
    const n = parseBlockNumber(r.result);
    const head = chainStateOf(ctx.network).highestLatest;
    return n !== undefined && head > n ? r.withResult(toHex(head)) : r;
  };

  /** Tip enforcement for `eth_blockNumber` and tagged `eth_getBlockByNumber` (the `call` tap below). */
  const enforceTip = async (inner: CallHandler, ctx: CallContext, method: string): Promise<RpcResult> => {
    if (method === 'eth_getBlockByNumber') {
      // Keep the tag as the client sent it (interpolation, inside, may rewrite the params).
      const tag = blockTagOf(ctx.request.params);
      if (tag === undefined) return inner(ctx);
      ctx.state.set(TAG, tag);
    }
    // Start-up: no head vouched for yet, so the first upstream to answer would decide what this client is served. Wait (bounded)
    // for the state polls to corroborate one; a network of one upstream has nothing to wait for.
    const st = chainStateOf(ctx.network);
    if (ctx.network.upstreams.length > 1 && !st.anyVouched)
      await whenVouched(st, Math.min(FIRST_VOUCH_WAIT_MS, ctx.deadline - Date.now() - FIRST_VOUCH_SLACK_MS));
    const enforce = ENFORCE_HIGHEST_BLOCK.get(ctx.directives);
    let r: RpcResult;
    try {
      r = await inner(ctx);
    } catch (e) {
      // Every upstream was behind (or failed): the highest answer seen, never an error.
      const best = ctx.state.get(BEST) as BestAnswer | undefined;
      if (!best) throw e;
      if (best.attempt) {
        best.attempt.won = true;
        best.attempt.outcome = 'success';
        best.attempt.error = undefined;
      }
      ctx.record.upstream = best.upstream.id;
      best.result.upstreamId ??= best.upstream.id;
      r = best.result;
    }
    return method === 'eth_blockNumber' && enforce && !r.fromCache ? raise(ctx, r) : r;
  };

  hooks.call.tap({ name: 'evm-state:tip', stage: CallStage.TIP_ENFORCEMENT }, (inner: CallHandler): CallHandler => {
    // Other methods pass straight through, without an extra promise layer.
    return (ctx) => {
      const method = ctx.request.method;
      return ctx.internal || (method !== 'eth_blockNumber' && method !== 'eth_getBlockByNumber') ? inner(ctx) : enforceTip(inner, ctx, method);
    };
  });
}

/**
 * Whether another upstream of the call's network is known to have a block past `n` (its latest,
 * or finalized, block) and answered its last attempt (the health tracker's reachability).
 */
function aheadAndAnswering(ctx: CallContext, u: Upstream, n: number, kind: 'latest' | 'finalized'): boolean {
  const st = chainStateOf(ctx.network);
  const health = ctx.network.project.health;
  for (const o of ctx.network.upstreams) {
    if (o === u) continue;
    const s = st.peek(o);
    if (!s || (kind === 'latest' ? s.latest : s.finalized) <= n) continue;
    if (health.reachability(o.id)?.up !== false) return true;
  }
  return false;
}

/** At most one warning per network and minute that a lagging answer was served (the upstreams ahead are down). */
class LaggingWarnings {
  private readonly last = new Map<string, number>();
  constructor(private readonly logger: PluginHost['logger']) {}

  warn(ctx: CallContext, u: Upstream, n: number, highest: number): void {
    const key = `${ctx.project.id}/${ctx.network.id}`;
    const now = Date.now();
    if (now - (this.last.get(key) ?? 0) < 60_000) return;
    this.last.set(key, now);
    this.logger.warn(
      { project: ctx.project.id, network: ctx.network.id, upstream: u.id, answered: n, highest },
      `serving block ${n} from ${u.id}, ${highest - n} behind the highest known ${highest}: every upstream ahead got no answer on its last attempt`,
    );
  }
}
