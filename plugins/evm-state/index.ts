/**
 * evm-state plugin (issue #4 items 1, 2, 4 and 5; spec §2.8 #7 and #9, §3.1): what svc knows
 * about each chain's head, and the request-path rules built on it.
 * Taps: `upstreamJoined` (start one state poller per upstream; cordoned upstreams are polled
 * too) and `shutdown` (stop them); `network` (count only selected, chain-verified upstreams
 * towards the network head); `directives` at RESOLVE − 50 (set `ctx.finality` before the
 * failsafe plugin matches its entries); `select` at AVAILABILITY (skip upstreams whose known
 * head is below the block a call reads); `validate` at 0 (a null tagged block is a retryable
 * error) and last (observe heads in answers; an answer behind the head is a retryable error);
 * `call` at TIP_ENFORCEMENT (return the highest answer seen when every upstream is behind,
 * raise `eth_blockNumber` to the known head) and TIP_ENFORCEMENT + 10 (answer `null` for a block
 * far beyond the head without a call).
 */
import { Type } from '@sinclair/typebox';
import { Counter, Gauge } from 'prom-client';
import type { AttemptRecord, CallContext, Directives } from '../../core/context.ts';
import { Duration } from '../../core/config/schema.ts';
import type { SchemaFragment } from '../../core/config/schema.ts';
import type { SvcError } from '../../core/errors.ts';
import { BLOCK_PARAM, blockRefOf, classifyFinality, highestNumberOf, parseBlockNumber, toHex } from '../../core/evm/blocks.ts';
import { chainStateOf, type NetworkChainState } from '../../core/evm/state.ts';
import type { CallHandler } from '../../core/hooks.ts';
import { RpcResult } from '../../core/jsonrpc.ts';
import type { Plugin, Proxy } from '../../core/proxy.ts';
import type { Network } from '../../core/registry/network.ts';
import type { Upstream } from '../../core/registry/upstream.ts';
import { CallStage, DirectiveStage, SelectStage } from '../../core/stages.ts';
import { evaluateSelection, selectionState } from '../selection/index.ts';
import { MAX_POLL_TIMEOUT_MS, UpstreamPoller, type PollerSettings } from './poller.ts';
import { behindBy, blockNumberOfBlock, blockNumberParamOf, blockTagOf, ErrUpstreamBlockBehind, ErrUpstreamNullTaggedBlock, filterByAvailability, knownLatestOf } from './tip.ts';


/** Lookups whose answer carries the `blockNumber` of a mined transaction (issue #4 item 1: responses that reveal a newer head). */
const MINED_LOOKUPS: ReadonlySet<string> = new Set([
  'eth_getTransactionReceipt',
  'eth_getTransactionByHash',
  'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex',
]);
export { MAX_METHOD_FAILURES, MAX_POLL_TIMEOUT_MS, NOT_SYNCING_POLLS, UpstreamPoller } from './poller.ts';
export type { PollerSettings, PollerSink, PollReport } from './poller.ts';
export { behindBy, blockNumberOfBlock, blockNumberParamOf, blockTagOf, ErrUpstreamBlockBehind, ErrUpstreamNullTaggedBlock, filterByAvailability, knownLatestOf, syncingOf } from './tip.ts';

// ---------------------------------------------------------------------------------------
// Config

/** Default `upstreams[].evm.statePollerInterval`, ms. */
export const DEFAULT_STATE_POLLER_INTERVAL_MS = 30_000;
/** Default `networks[].evm.fallbackFinalityDepth`, blocks. */
export const DEFAULT_FALLBACK_FINALITY_DEPTH = 1024;
/** Default `networks[].evm.maxRetryableBlockDistance`, blocks. */
export const DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE = 128;

/**
 * The config keys this plugin owns: `upstreams[].evm.statePollerInterval` (also under
 * `upstreamDefaults.evm`) and `networks[].evm.fallbackFinalityDepth` /
 * `networks[].evm.maxRetryableBlockDistance` (also under `networkDefaults.evm`).
 */
export const evmStateSchema: SchemaFragment = {
  upstreamEvm: {
    statePollerInterval: Duration({
      default: '30s',
      description: 'how often the state poller reads latest/finalized blocks and eth_syncing from this upstream, through its own failsafe chain (issue #4 item 1); 0 disables the poller for this upstream (its head is then only learnt from answers)',
    }),
  },
  networkEvm: {
    fallbackFinalityDepth: Type.Integer({
      minimum: 0,
      default: DEFAULT_FALLBACK_FINALITY_DEPTH,
      description: 'blocks: an upstream without a usable `finalized` tag is taken as finalized at latest minus this (floored at 0)',
    }),
    maxRetryableBlockDistance: Type.Integer({
      minimum: 0,
      default: DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE,
      description: 'blocks: eth_getBlockByNumber for a block more than this beyond the highest known head answers null without an upstream call',
    }),
  },
};

/** A network's resolved `evm` settings read by this plugin. */
export interface NetworkEvmSettings {
  /** `fallbackFinalityDepth`, blocks (default 1024). */
  fallbackFinalityDepth: number;
  /** `maxRetryableBlockDistance`, blocks (default 128). */
  maxRetryableBlockDistance: number;
}

function intSetting(obj: unknown, key: string, def: number): number {
  if (obj === null || typeof obj !== 'object') return def;
  const v = (obj as Record<string, unknown>)[key];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : def;
}

/** Reads `networks[].evm.{fallbackFinalityDepth,maxRetryableBlockDistance}` with their defaults. */
export function networkEvmSettings(network: Network): NetworkEvmSettings {
  const evm = network.config.settings.evm;
  return {
    fallbackFinalityDepth: intSetting(evm, 'fallbackFinalityDepth', DEFAULT_FALLBACK_FINALITY_DEPTH),
    maxRetryableBlockDistance: intSetting(evm, 'maxRetryableBlockDistance', DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE),
  };
}

/**
 * The poller settings of one upstream on its network.
 * @param maxTimeoutMs cap of one poll request, ms (default 10 000)
 */
export function pollerSettingsOf(u: Upstream, network: Network, maxTimeoutMs = MAX_POLL_TIMEOUT_MS): PollerSettings {
  const intervalMs = intSetting(u.config.settings.evm, 'statePollerInterval', DEFAULT_STATE_POLLER_INTERVAL_MS);
  return {
    intervalMs,
    timeoutMs: intervalMs > 0 ? Math.min(intervalMs, maxTimeoutMs) : maxTimeoutMs,
    fallbackFinalityDepth: networkEvmSettings(network).fallbackFinalityDepth,
  };
}

// ---------------------------------------------------------------------------------------
// Accessors

const pollersByProxy = new WeakMap<Proxy, Map<Upstream, UpstreamPoller>>();

/**
 * What svc knows about a network's chain: per-upstream latest/finalized/syncing, the highest
 * latest and finalized blocks over the selected, chain-verified upstreams, and the block-time
 * estimate (`blockTimeMs`, for the healthcheck). The same object as `chainStateOf(network)`.
 */
export function evmStateOf(network: Network): NetworkChainState {
  return chainStateOf(network);
}

/** The state poller of an upstream, when the plugin runs one for it. */
export function statePollerOf(proxy: Proxy, u: Upstream): UpstreamPoller | undefined {
  return pollersByProxy.get(proxy)?.get(u);
}

/**
 * Polls now, outside the timers (admin, tests): every upstream of the network, or of every
 * network. Joins polls already in flight. Never rejects.
 * @returns resolves when those polls finished
 */
export async function pollNow(proxy: Proxy, network?: Network): Promise<void> {
  const pollers = pollersByProxy.get(proxy);
  if (!pollers) return;
  await Promise.all([...pollers.values()].filter((p) => !p.isStopped && (!network || p.network === network)).map((p) => p.poll()));
}

/** Static accessors in the DESIGN's `XPlugin.getHooks(proxy)` style. */
export const EvmStatePlugin = Object.freeze({
  stateOf: evmStateOf,
  pollerOf: statePollerOf,
  pollNow,
});

// ---------------------------------------------------------------------------------------
// Plugin

/** Stage of the head-observing, behind-the-head `validate` tap: after every other check, so only otherwise-valid answers are observed and kept as fallbacks. */
export const VALIDATE_STAGE = 1000;
/** Stage of the null-tagged-block `validate` tap: the default stage 0, before lenient checks such as retry-empty (stage 100). */
export const NULL_TAG_VALIDATE_STAGE = 0;
/** How long the selection plugin's exclusions are cached for the network-head computation, ms. */
const SELECTION_VIEW_TTL_MS = 250;

const TAG = Symbol('svc.evm-state.tag');
const BEST = Symbol('svc.evm-state.best');

/** The highest otherwise-valid answer that was behind the known head, kept per call. */
interface BestAnswer {
  n: number;
  result: RpcResult;
  upstream: Upstream;
  attempt?: AttemptRecord;
}

/** Options of {@link evmStatePlugin}. */
export interface EvmStatePluginOptions {
  /** Cap of one poll request's timeout, ms (default 10 000); the timeout is min(interval, cap). */
  maxPollTimeoutMs?: number;
}

/**
 * Creates the evm-state plugin (name `evm-state`): state pollers, finality classification,
 * tip enforcement (`enforce-highest-block`, `enforce-non-null-tagged-blocks`) and block
 * availability.
 * @param opts poll timeout cap
 * @returns a plugin owning `upstreams[].evm.statePollerInterval`, `networks[].evm.fallbackFinalityDepth` and `networks[].evm.maxRetryableBlockDistance`
 * @throws RangeError when `maxPollTimeoutMs` is not a positive number
 */
export function evmStatePlugin(opts: EvmStatePluginOptions = {}): Plugin {
  const maxPollTimeoutMs = opts.maxPollTimeoutMs ?? MAX_POLL_TIMEOUT_MS;
  if (!(typeof maxPollTimeoutMs === 'number' && maxPollTimeoutMs > 0)) throw new RangeError(`evmStatePlugin: maxPollTimeoutMs must be a positive number of ms, got ${String(maxPollTimeoutMs)}`);
  return {
    name: 'evm-state',
    schema: evmStateSchema,
    apply(proxy: Proxy) {
      const hooks = proxy.hooks;
      const pollers = new Map<Upstream, UpstreamPoller>();
      pollersByProxy.set(proxy, pollers);
      const settingsByNetwork = new WeakMap<Network, NetworkEvmSettings>();
      const netSettings = (n: Network): NetworkEvmSettings => {
        let s = settingsByNetwork.get(n);
        if (!s) {
          s = networkEvmSettings(n);
          settingsByNetwork.set(n, s);
        }
        return s;
      };

      // ---- which upstreams make up the network head -----------------------------------
      const selViews = new WeakMap<Network, { at: number; excluded: ReadonlySet<string>; honoursCordons: boolean }>();
      const selectionView = (n: Network) => {
        const now = Date.now();
        let v = selViews.get(n);
        if (!v || now - v.at > SELECTION_VIEW_TTL_MS) {
          const st = selectionState(proxy, n.project.id, n.id);
          v = { at: now, excluded: new Set(Object.keys(st?.excluded ?? {})), honoursCordons: st?.honoursCordons ?? false };
          selViews.set(n, v);
        }
        return v;
      };
      /**
       * Selected, chain-verified upstreams of a network: in the network, verified by their
       * `eth_chainId` probe (all of them while none is yet), not excluded by the selection
       * policy nor cordoned for every method when the policy honours cordons (all verified
       * ones when that leaves none).
       */
      const counted = (n: Network): Upstream[] => {
        // Read on every call (the network head), so plain loops rather than filter closures.
        const all = n.upstreams;
        let anyReady = false;
        for (const u of all) {
          if (u.state === 'ready') {
            anyReady = true;
            break;
          }
        }
        const sel = selectionView(n);
        const health = n.project.health;
        const verified: Upstream[] = [];
        const chosen: Upstream[] = [];
        for (const u of all) {
          if (anyReady && u.state !== 'ready') continue;
          verified.push(u);
          if (!sel.excluded.has(u.id) && !(sel.honoursCordons && health.isCordoned(u.id, '*'))) chosen.push(u);
        }
        return chosen.length ? chosen : verified;
      };
      const track = (n: Network): NetworkChainState => {
        const st = chainStateOf(n);
        st.countedUpstreams = () => counted(n);
        return st;
      };

      /** Feeds block-head and finalization lag of every observed upstream into the health tracker. */
      const updateLags = (n: Network): void => {
        const st = chainStateOf(n);
        const hl = st.highestLatest;
        const hf = st.highestFinalized;
        for (const u of n.upstreams) {
          const s = st.peek(u);
          const latest = knownLatestOf(s);
          if (!s || latest === undefined) continue;
          n.project.health.setLag(u.id, hl - latest, hf - s.finalized);
        }
      };

      /** Advances an upstream's latest block; only counted upstreams move the network head (and its block-time estimate). */
      const observeLatest = (n: Network, u: Upstream, block: number): void => {
        const st = chainStateOf(n);
        const isCounted = counted(n).includes(u);
        // A head that did not move is still confirmed by a counted upstream reporting it.
        if (isCounted) st.confirmHead(block);
        const mine = st.peek(u);
        if (mine && block <= mine.latest) return;
        const before = st.highestLatest;
        if (isCounted) st.observeLatest(u, block);
        else st.of(u).advanceLatest(block);
        if (block > before) updateLags(n);
      };

      // ---- metrics ---------------------------------------------------------------------
      const labels = ['project', 'network', 'upstream'] as const;
      const eachPoller = (fn: (p: UpstreamPoller, s: ReturnType<NetworkChainState['of']>) => void) => {
        for (const p of pollers.values()) {
          if (p.isStopped) continue;
          const s = chainStateOf(p.network).peek(p.upstream);
          if (s) fn(p, s);
        }
      };
      const lbl = (p: UpstreamPoller) => ({ project: p.network.project.id, network: p.network.id, upstream: p.upstream.id });
      new Gauge({
        name: 'svc_upstream_latest_block',
        help: 'Latest block known for an upstream (state poller and answers)',
        labelNames: labels,
        registers: [proxy.metrics],
        collect() {
          this.reset();
          eachPoller((p, s) => this.set(lbl(p), s.latest));
        },
      });
      new Gauge({
        name: 'svc_upstream_finalized_block',
        help: 'Finalized block known for an upstream (the finalized tag, or latest - fallbackFinalityDepth)',
        labelNames: labels,
        registers: [proxy.metrics],
        collect() {
          this.reset();
          eachPoller((p, s) => this.set(lbl(p), s.finalized));
        },
      });
      new Gauge({
        name: 'svc_upstream_block_head_lag',
        help: "Blocks an upstream's latest block is behind the network's highest latest block",
        labelNames: labels,
        registers: [proxy.metrics],
        collect() {
          this.reset();
          eachPoller((p, s) => this.set(lbl(p), Math.max(0, chainStateOf(p.network).highestLatest - s.latest)));
        },
      });
      new Gauge({
        name: 'svc_upstream_finalization_lag',
        help: "Blocks an upstream's finalized block is behind the network's highest finalized block",
        labelNames: labels,
        registers: [proxy.metrics],
        collect() {
          this.reset();
          eachPoller((p, s) => this.set(lbl(p), Math.max(0, chainStateOf(p.network).highestFinalized - s.finalized)));
        },
      });
      new Gauge({
        name: 'svc_upstream_syncing',
        help: '1 while the state poller says the upstream is syncing (excluded by the default selection policy)',
        labelNames: labels,
        registers: [proxy.metrics],
        collect() {
          this.reset();
          eachPoller((p) => this.set(lbl(p), p.upstream.syncing ? 1 : 0));
        },
      });
      const stale = new Counter({
        name: 'svc_upstream_stale_block_total',
        help: 'Answers behind the network head (eth_blockNumber, latest/finalized eth_getBlockByNumber) re-routed by enforce-highest-block',
        labelNames: ['project', 'network', 'upstream', 'category'],
        registers: [proxy.metrics],
      });

      // ---- pollers ---------------------------------------------------------------------
      const sink = {
        latest: (u: Upstream, n: number) => {
          const p = pollers.get(u);
          if (p) observeLatest(p.network, u, n);
        },
        syncingChanged: (u: Upstream, syncing: boolean) => {
          const p = pollers.get(u);
          if (!p) return;
          proxy.logger.info({ project: p.network.project.id, network: p.network.id, upstream: u.id, syncing }, `upstream ${u.id} is ${syncing ? 'syncing: excluded by the default selection policy' : 'synced again'}`);
          // Apply at once rather than at the next selection tick.
          void evaluateSelection(proxy, p.network.project.id, p.network.id);
        },
        polled: (u: Upstream) => {
          const p = pollers.get(u);
          if (!p) return;
          // A head reported by an upstream that no longer counts must not stall the block-time estimate.
          chainStateOf(p.network).resyncHead();
          updateLags(p.network);
        },
      };

      hooks.network.tap('evm-state', (n: Network) => {
        track(n);
      });

      hooks.upstreamJoined.tap('evm-state', (u: Upstream, n: Network) => {
        track(n);
        const existing = pollers.get(u);
        if (existing && !existing.isStopped && existing.network === n) return;
        existing?.stop();
        const settings = pollerSettingsOf(u, n, maxPollTimeoutMs);
        if (settings.intervalMs === 0) {
          pollers.delete(u);
          return;
        }
        const st = chainStateOf(n);
        st.pollIntervalMs = st.pollIntervalMs > 0 ? Math.min(st.pollIntervalMs, settings.intervalMs) : settings.intervalMs;
        const poller = new UpstreamPoller(proxy, n, u, settings, sink);
        pollers.set(u, poller);
        if (!proxy.isClosed) poller.start();
      });

      hooks.shutdown.tapPromise('evm-state', async () => {
        for (const p of pollers.values()) p.stop();
      });

      // ---- finality (issue #4 item 2), before the failsafe plugin matches its entries --
      hooks.directives.tap({ name: 'evm-state', stage: DirectiveStage.RESOLVE - 50 }, (d: Directives, ctx: CallContext) => {
        // The finalized head (a pass over the counted upstreams) only matters for a method with a block parameter.
        const method = ctx.request.method;
        ctx.finality = classifyFinality(method, ctx.request.params, BLOCK_PARAM[method] === undefined ? undefined : chainStateOf(ctx.network).highestFinalized);
        return d;
      });

      // ---- block availability (issue #4 item 5) ---------------------------------------
      hooks.select.tap({ name: 'evm-state:availability', stage: SelectStage.AVAILABILITY }, (ups: Upstream[], ctx: CallContext) => {
        if (ups.length < 2) return ups;
        const block = highestNumberOf(blockRefOf(ctx.request.method, ctx.request.params));
        if (block === undefined) return ups;
        return filterByAvailability(ups, block, chainStateOf(ctx.network));
      });

      // ---- tip enforcement (spec §2.8 #7, #9) -----------------------------------------
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
      const behind = (ctx: CallContext, u: Upstream, r: RpcResult, n: number, highest: number, what: string): SvcError | undefined => {
        const by = behindBy(n, highest);
        if (by === undefined) return undefined;
        remember(ctx, n, r, u);
        stale.inc({ project: ctx.project.id, network: ctx.network.id, upstream: u.id, category: proxy.methodLabel.value(ctx.request.method) });
        return new ErrUpstreamBlockBehind(`upstream ${u.id} answered ${what} ${n}, ${by} behind the highest known ${highest}`, {
          details: { upstream: u.id, answered: n, highest },
        });
      };

      // A null tagged block (§2.8 #9) at the default stage: a strict check, so it bails before
      // lenient ones (retry-empty would otherwise keep the null as a fallback answer).
      hooks.validate.tap({ name: 'evm-state:non-null', stage: NULL_TAG_VALIDATE_STAGE }, (ctx: CallContext, r: RpcResult, u: Upstream) => {
        if (ctx.internal || r.fromCache || ctx.request.method !== 'eth_getBlockByNumber') return undefined;
        if (r.result !== null && r.result !== undefined) return undefined;
        if (ctx.directives.enforceNonNullTaggedBlocks === false) return undefined;
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
          observeLatest(ctx.network, u, n);
          if (ctx.directives.enforceHighestBlock === false) return undefined;
          return behind(ctx, u, r, n, chainStateOf(ctx.network).highestLatest, 'eth_blockNumber');
        }
        if (MINED_LOOKUPS.has(method)) {
          // A mined transaction or receipt proves its upstream has that block: advance the head
          // at once, so a read right after a confirmed write is not interpolated to an older block.
          const mined = r.result !== null && typeof r.result === 'object' ? parseBlockNumber((r.result as { blockNumber?: unknown }).blockNumber) : undefined;
          if (mined !== undefined) observeLatest(ctx.network, u, mined);
          return undefined;
        }
        if (method !== 'eth_getBlockByNumber') return undefined;
        const tag = (ctx.state.get(TAG) as string | undefined) ?? blockTagOf(ctx.request.params);
        if (tag !== 'latest' && tag !== 'finalized') return undefined;
        const n = blockNumberOfBlock(r.result);
        if (n === undefined) return undefined;
        const st = chainStateOf(ctx.network);
        if (tag === 'latest') observeLatest(ctx.network, u, n);
        else st.observeFinalized(u, n);
        if (ctx.directives.enforceHighestBlock === false) return undefined;
        return tag === 'latest' ? behind(ctx, u, r, n, st.highestLatest, 'latest block') : behind(ctx, u, r, n, st.highestFinalized, 'finalized block');
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
        const enforce = ctx.directives.enforceHighestBlock !== false;
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

      // ---- far-future blocks (issue #4 item 5) ----------------------------------------
      hooks.call.tap({ name: 'evm-state:future-block', stage: CallStage.TIP_ENFORCEMENT + 10 }, (inner: CallHandler, network: Network): CallHandler => (ctx) => {
        if (ctx.request.method !== 'eth_getBlockByNumber' || ctx.internal) return inner(ctx);
        const n = blockNumberParamOf(ctx.request.params);
        if (n === undefined) return inner(ctx);
        const head = chainStateOf(network).highestLatest;
        if (head > 0 && n > head + netSettings(network).maxRetryableBlockDistance) return Promise.resolve(new RpcResult(null));
        return inner(ctx);
      });
    },
  };
}

