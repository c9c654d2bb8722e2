/**
 * evm-state plugin (spec §2.8 #7 and #9, §3.1): what svc knows
 * about each chain's head, and the request-path rules built on it.
 * Taps: `upstreamJoined` (start one state poller per upstream; cordoned upstreams are polled
 * too) and `shutdown` (stop them); `network` (count only selected, chain-verified upstreams
 * towards the network head); `directives` at RESOLVE − 50 (set `ctx.finality` before the
 * failsafe plugin matches its entries); `select` at AVAILABILITY (skip upstreams whose known
 * head is below the block a call reads); `validate` at 0 (a null tagged block is a retryable
 * error) and last (observe heads in answers; an answer behind the head is a retryable error);
 * `call` at TIP_ENFORCEMENT (return the highest answer seen when every upstream is behind,
 * raise `eth_blockNumber` to the known head) and FUTURE_BLOCK (answer `null` for a block
 * far beyond the head without a call); `directives` between INTEGRITY and PROVENANCE (a call
 * naming `safe` goes to `evm.safeBlockSource`'s upstreams, cache read skipped).
 *
 * Files: `chain.ts` (the chain state of each network, which this plugin keeps and provides as
 * the chain state service, read by every plugin through `host.chainState`), `schema.ts` (config,
 * defaults and this plugin's directives), `poller.ts` (one upstream's state poller),
 * `state.ts` (head tracking: pollers, counted upstreams, lags, gauges, accessors), `finality.ts`
 * (the `directives` tap), `availability.ts` (the `select` tap and the far-future `null`),
 * `tip.ts` (tip helpers and the `validate`/`call` taps of tip enforcement), `block-availability.ts`
 * (configured bounds), `earliest.ts` (earliest-block search), `safe-source.ts` (the `safe` tag's
 * source), `erpc.ts` (eRPC's legacy window keys and its poller debounce at load time); this file
 * wires them.
 */
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { declareDirectives } from 'svc-proxy/plugins/directives';
import { CHAIN_STATE_SERVICE, STATE_POLLERS_SERVICE } from './api.ts';
import { chainStateOf } from './chain.ts';
import { tapBlockAvailability, tapFarFutureBlocks } from './availability.ts';
import { tapServedTip } from './served-tip.ts';
import { tapBlockBounds } from './block-availability.ts';
import { tapEarliestDetection } from './earliest.ts';
import { tapFinality } from './finality.ts';
import { ENFORCE_HIGHEST_BLOCK, ENFORCE_NON_NULL_TAGGED_BLOCKS, evmStateSchema, MAX_POLL_TIMEOUT_MS } from './schema.ts';
import { tapSafeBlockSource } from './safe-source.ts';
import { tapHeadTracking } from './state.ts';
import { tapTipEnforcement } from './tip.ts';

export { chainStateOf, HASH_HEIGHTS, MAX_REORGS, NetworkChainState, NEXT_BLOCK_MARGIN, UpstreamChainState } from './chain.ts';
export { MAX_METHOD_FAILURES, NOT_SYNCING_POLLS, UpstreamPoller } from './poller.ts';
export { MAX_POLL_TIMEOUT_MS } from './schema.ts';
export type { PollerSettings, PollerSink, PollReport } from './poller.ts';
export {
  DEFAULT_FALLBACK_FINALITY_DEPTH,
  DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE,
  DEFAULT_STATE_POLLER_INTERVAL_MS,
  ENFORCE_HIGHEST_BLOCK,
  ENFORCE_NON_NULL_TAGGED_BLOCKS,
  evmStateSchema,
  networkEvmSettings,
  pollerSettingsOf,
} from './schema.ts';
export type { NetworkEvmSettings } from './schema.ts';
export {
  availabilitySpecOf,
  blockAvailabilitySchema,
  blockSpanOf,
  boundsOf,
  PROBES,
  type AvailabilitySpec,
  type BoundSpec,
  type EarliestOf,
  type Probe,
} from './block-availability.ts';
export { probeBlock, ProbeInconclusive, searchEarliest, type ProbeCall } from './earliest.ts';
export { FULL_NODE_RECENT_BLOCKS, normalizeBlockAvailability, normalizePollerDebounce } from './erpc.ts';
export { majorityHead, majorityPick, normalizeServedTip, SERVED_TIP_TAGS, servedTipFor, servedTipOf, servedTipSchema } from './served-tip.ts';
export {
  ballotOf,
  DEFAULT_MAX_REGRESSION_BLOCKS,
  MAX_GUARANTEED_METHODS,
  REGRESSION_HOLD_MS,
  RegressionGuard,
  ServedTip,
  type Ballot,
  type GuardState,
  type ServedTipSettings,
} from './served-tip-pick.ts';
export type { ServedTipAxes } from './served-tip.ts';
export { MAX_SAFE_BLOCK_SOURCE_LENGTH, namesSafeTag, SAFE_SOURCE_DIRECTIVE_STAGE, safeBlockSourceOf } from './safe-source.ts';
export { chainChanged, chainIdOf, ErrUpstreamChainChanged } from './chain-id.ts';
export { HEAD_MARGIN_BLOCKS, headAllowance, judgeHeadFacts, UNKNOWN_BLOCK_TIME_ALLOWANCE, type HeadFacts } from './plausibility.ts';
export { EvmStatePlugin, IMPLAUSIBLE_HEAD_LAG, evmStateOf, pollNow, statePollerOf } from './state.ts';
export {
  behindBy,
  blockNumberOfBlock,
  blockNumberParamOf,
  blockTagOf,
  ErrUpstreamBlockBehind,
  ErrUpstreamImplausibleHead,
  ErrUpstreamNullTaggedBlock,
  filterByAvailability,
  knownLatestOf,
  NULL_TAG_VALIDATE_STAGE,
  syncingOf,
  VALIDATE_STAGE,
} from './tip.ts';
import { networkChainState } from './api.ts';

/** Options of {@link evmStatePlugin}. */
export interface EvmStatePluginOptions {
  /** Cap of one poll request's timeout, ms (default 10 000); the timeout is min(interval, cap). */
  maxPollTimeoutMs?: number;
}

/**
 * Creates the evm-state plugin (name `evm-state`): state pollers, finality classification,
 * tip enforcement (the `enforce-highest-block` and `enforce-non-null-tagged-blocks` directives,
 * which it declares) and block availability.
 * @param opts poll timeout cap
 * @returns a plugin owning `upstreams[].evm.statePollerInterval`, `upstreams[].evm.blockAvailability`, `networks[].evm.fallbackFinalityDepth`, `networks[].evm.maxRetryableBlockDistance` and `networks[].evm.safeBlockSource` (calls naming `safe` go to its upstreams, safe-source.ts)
 * @throws RangeError when `maxPollTimeoutMs` is not a positive number
 */
export function evmStatePlugin(opts: EvmStatePluginOptions = {}): Plugin {
  const maxPollTimeoutMs = opts.maxPollTimeoutMs ?? MAX_POLL_TIMEOUT_MS;
  if (!(typeof maxPollTimeoutMs === 'number' && maxPollTimeoutMs > 0))
    throw new RangeError(`evmStatePlugin: maxPollTimeoutMs must be a positive number of ms, got ${String(maxPollTimeoutMs)}`);
  return definePlugin({
    name: 'evm-state',
    // Counts only the upstreams the selection plugin keeps (selectionState) and re-evaluates on syncing changes.
    dependsOn: ['selection'],
    provides: [CHAIN_STATE_SERVICE, STATE_POLLERS_SERVICE],
    schema: evmStateSchema,
    apply(host: PluginHost) {
      declareDirectives(host, 'evm-state', ENFORCE_HIGHEST_BLOCK, ENFORCE_NON_NULL_TAGGED_BLOCKS);
      // In this order: tapable runs same-stage taps of one hook in registration order.
      const heads = tapHeadTracking(host, maxPollTimeoutMs);
      // Every other plugin reads the chain state this plugin keeps through networkChainState(host, network).
      host.services.provide(CHAIN_STATE_SERVICE, {
        of: (network) => chainStateOf(network),
        // Heads another replica saw (shared-state plugin): forward-only, judged by the same
        // plausibility rule as a poll's (an implausible one is recorded nowhere and marks the upstream).
        observeShared: (network, u, latest, finalized) => {
          if (latest > 0) heads.observeLatest(network, u, latest, false, true);
          if (finalized > 0) heads.observeFinalized(network, u, finalized, false, true);
        },
      });
      // A reload's successor network starts with this process's own accepted heads of each upstream
      // that stayed (judged as that upstream's own report, not as another replica's word).
      host.hooks.networkReplaced.tap('evm-state', (from, to) => {
        for (const u of to.upstreams) {
          const old = chainStateOf(from).peek(u);
          if (!old) continue;
          const mine = chainStateOf(to).of(u);
          mine.vouched ||= old.vouched;
          mine.linked = Math.max(mine.linked, old.linked);
          if (old.latest > 0) heads.observeLatest(to, u, old.latest);
          if (old.finalized > 0) heads.observeFinalized(to, u, old.finalized);
        }
      });
      tapFinality(host);
      // Configured bounds first (hard), then the head-based filter (soft), at the same stage.
      tapBlockBounds(host, tapEarliestDetection(host, maxPollTimeoutMs));
      tapBlockAvailability(host);
      tapTipEnforcement(host, heads);
      tapFarFutureBlocks(host);
      tapServedTip(host, chainStateOf, (ctx) => Boolean(ENFORCE_HIGHEST_BLOCK.get(ctx.directives)));
      tapSafeBlockSource(host);
    },
  });
}
