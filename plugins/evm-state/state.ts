/**
 * Head tracking of the evm-state plugin (spec §3.1): one state poller
 * per upstream, which upstreams make up the network head (selected, chain-verified ones), the
 * block-head and finalization lags fed into the health tracker, and the per-upstream gauges.
 * Taps: `network` (count only selected, chain-verified upstreams towards the network head),
 * `upstreamJoined` (start one state poller per upstream; cordoned upstreams are polled too) and
 * `shutdown` (stop them). The request-path taps learn heads from answers through the returned
 * {@link HeadTracker}.
 */
import { vouched } from './vouch-wait.ts';
import { Counter, Gauge } from 'prom-client';
import type { Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import type { HeadVerdict } from './api.ts';
import { SELECTION_API_SERVICE } from 'svc-proxy/plugins/selection';
import { SHADOW_UPSTREAM } from 'svc-proxy/plugins/shadow';
import { STATE_POLLERS_SERVICE, SYNCING } from './api.ts';
import { chainStateOf, type NetworkChainState } from './chain.ts';
import { chainIdCheck } from './chain-id.ts';
import { UpstreamPoller } from './poller.ts';
import { pollerSettingsOf } from './schema.ts';
import { knownLatestOf } from './tip.ts';

/** Key of this plugin's pollers (the contract in svc-proxy/plugin: the healthcheck reads which upstreams have one). */
export const POLLERS_SERVICE = STATE_POLLERS_SERVICE;

/**
 * What svc knows about a network's chain: per-upstream latest/finalized/syncing, the highest
 * latest and finalized blocks over the selected, chain-verified upstreams, and the block-time
 * estimate (`blockTimeMs`, for the healthcheck). The same object as `chainStateOf(network)`.
 */
export function evmStateOf(network: Network): NetworkChainState {
  return chainStateOf(network);
}

/** The state poller of an upstream, when the plugin runs one for it. */
export function statePollerOf(host: PluginHost, u: Upstream): UpstreamPoller | undefined {
  return host.services.get(POLLERS_SERVICE)?.get(u) as UpstreamPoller | undefined;
}

/**
 * Polls now, outside the timers (admin, tests): every upstream of the network, or of every
 * network. Joins polls already in flight. Never rejects.
 * @returns resolves when those polls finished
 */
export async function pollNow(host: PluginHost, network?: Network): Promise<void> {
  const pollers = host.services.get(POLLERS_SERVICE) as ReadonlyMap<Upstream, UpstreamPoller> | undefined;
  if (!pollers) return;
  await Promise.all([...pollers.values()].filter((p) => !p.isStopped && (!network || p.network === network)).map((p) => p.poll()));
}

/** Static accessors in the `XPlugin.getHooks(host)` style (a contract reached through the plugin that owns it). */
export const EvmStatePlugin = Object.freeze({
  stateOf: evmStateOf,
  pollerOf: statePollerOf,
  pollNow,
});

/** How long the selection plugin's exclusions are cached for the network-head computation, ms. */
const SELECTION_VIEW_TTL_MS = 250;

/**
 * Block-head lag charged to an upstream whose head is implausible, blocks: the selection score
 * weighs lag, so the upstream sinks below every honest one until its heads are plausible again.
 */
export const IMPLAUSIBLE_HEAD_LAG = 1000;

/** What the request-path taps (and the pollers) need from the head tracking. */
export interface HeadTracker {
  /**
   * Judges an upstream's latest block seen in an answer or a poll (head plausibility, docs/evm.md)
   * and, unless implausible, advances it; only counted upstreams move the network head (and its
   * block-time estimate). An implausible head is recorded nowhere, and the upstream is marked.
   * @param fromPoll the upstream's own state poll: its latest is set, even below what it said before
   * @param shared another replica's word (shared state): judged as no upstream's own report, so
   *   never a sole source, and never a witness for other reports
   * @returns the verdict
   */
  readonly observeLatest: (n: Network, u: Upstream, block: number, fromPoll?: boolean, shared?: boolean) => HeadVerdict;
  /**
   * Judges an upstream's finalized block and, unless implausible, records it (a poll sets it, an
   * answer only moves it forward); an implausible one marks the upstream.
   * @returns the verdict
   */
  readonly observeFinalized: (n: Network, u: Upstream, block: number, fromPoll?: boolean, shared?: boolean) => HeadVerdict;
}

/**
 * Starts the head tracking of a host: registers the gauges and taps `network`,
 * `upstreamJoined` and `shutdown` (in that order).
 * @param host the plugin host the evm-state plugin is applied to
 * @param maxPollTimeoutMs cap of one poll request's timeout, ms
 * @returns how answers report heads
 */
export function tapHeadTracking(host: PluginHost, maxPollTimeoutMs: number): HeadTracker {
  const hooks = host.hooks;
  const pollers = new Map<Upstream, UpstreamPoller>();
  host.services.provide(POLLERS_SERVICE, pollers);
  const selection = () => host.services.get(SELECTION_API_SERVICE);

  // ---- which upstreams make up the network head -----------------------------------
  const selViews = new WeakMap<Network, { at: number; excluded: ReadonlySet<string>; honoursCordons: boolean }>();
  const selectionView = (n: Network) => {
    const now = Date.now();
    let v = selViews.get(n);
    if (!v || now - v.at > SELECTION_VIEW_TTL_MS) {
      const st = selection()?.state(n.project.id, n.id);
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
  // Scratch lists of `counted`, reused: it runs several times per call (every read of the network
  // head), and its callers only iterate the answer at once (chain.ts `countedUpstreams`).
  const verified: Upstream[] = [];
  const chosen: Upstream[] = [];
  const counted = (n: Network): Upstream[] => {
    // Read on every call (the network head), so plain loops rather than filter closures.
    const all = n.upstreams;
    // Filled by index and cut to length at the end: `length = 0` would free the lists' storage on every call.
    let nv = 0;
    let nc = 0;
    let anyReady = false;
    for (const u of all) {
      if (u.state === 'ready') {
        anyReady = true;
        break;
      }
    }
    const sel = selectionView(n);
    const health = n.project.health;
    for (const u of all) {
      if (anyReady && u.state !== 'ready') continue;
      // A shadow upstream never serves, so its head is not the network's.
      if (SHADOW_UPSTREAM.get(u)) continue;
      verified[nv++] = u;
      if (!sel.excluded.has(u.id) && !(sel.honoursCordons && health.isCordoned(u.id, '*'))) chosen[nc++] = u;
    }
    if (verified.length !== nv) verified.length = nv;
    if (chosen.length !== nc) chosen.length = nc;
    return nc ? chosen : verified;
  };
  const track = (n: Network): NetworkChainState => {
    const st = chainStateOf(n);
    st.countedUpstreams = () => counted(n);
    return st;
  };

  /** Feeds block-head and finalization lag of every observed upstream into the health tracker. */
  const updateLags = (n: Network): void => {
    const st = chainStateOf(n);
    // Lag is behind the highest head even when the served tip is the majority one (as in eRPC).
    const hl = st.maxLatest;
    const hf = st.maxFinalized;
    for (const u of n.upstreams) {
      const s = st.peek(u);
      const latest = knownLatestOf(s);
      if (!s || latest === undefined) continue;
      const marked = s.implausible.latest || s.implausible.finalized;
      n.project.health.setLag(u.id, marked ? Math.max(IMPLAUSIBLE_HEAD_LAG, hl - latest) : hl - latest, hf - s.finalized);
    }
  };

  // ---- implausible heads (head plausibility, docs/evm.md) -------------------------------
  const implausibleHeads = new Counter({
    name: 'svc_upstream_implausible_head_total',
    help: 'Heads an upstream reported (poll or answer) that no other source confirms and the block time cannot explain: not believed',
    labelNames: ['project', 'network', 'upstream', 'kind'],
    registers: [host.metrics],
  });
  /** Marks (or clears) an upstream's implausible head of one kind: a log line when an episode starts and ends. */
  const mark = (n: Network, u: Upstream, kind: 'latest' | 'finalized', block: number, verdict: HeadVerdict): void => {
    const st = chainStateOf(n);
    const s = st.of(u);
    const fields = { project: n.project.id, network: n.id, upstream: u.id, kind };
    if (verdict === 'implausible') {
      implausibleHeads.inc(fields);
      if (s.implausible[kind]) return;
      s.implausible[kind] = true;
      host.logger.warn(
        { ...fields, reported: block, accepted: st.highestLatest },
        `upstream ${u.id} reported an implausible ${kind} block ${block} (network head ${st.highestLatest}): not believed, scored down`,
      );
      updateLags(n);
    } else if (s.implausible[kind]) {
      s.implausible[kind] = false;
      host.logger.info({ ...fields, reported: block }, `upstream ${u.id} reports a plausible ${kind} block again (${block})`);
      updateLags(n);
    }
  };

  /**
   * The network's first vouched head: heads accepted at start-up within reach of it are vouched
   * too (an honest node that was simply ahead), the rest stop counting.
   */
  const vouchOthers = (n: Network, st: NetworkChainState, u: Upstream): void => {
    for (const v of n.upstreams) {
      const s = st.peek(v);
      if (v !== u && s && !s.vouched && s.latest > 0 && st.judgeHead(s.latest, 'latest', v) !== 'implausible') s.vouched = true;
    }
  };

  const observeLatest = (n: Network, u: Upstream, block: number, fromPoll = false, shared = false): HeadVerdict => {
    const st = chainStateOf(n);
    const vouchedBefore = st.vouchedLatest;
    const verdict = st.judgeHead(block, 'latest', shared ? undefined : u, shared);
    const mine = st.of(u);
    if (!shared) mine.reported = block;
    // Another replica's word marks no upstream: one shared-state entry never moves an upstream's health.
    if (!shared && (verdict === 'implausible' || mine.implausible.latest)) mark(n, u, 'latest', block, verdict);
    if (verdict === 'implausible') return verdict;
    // Judged against a vouched head, or confirmed (witness, sole source): vouched from now on.
    const vouchesFirst = !mine.vouched && (verdict === 'confirmed' || (verdict === 'plausible' && vouchedBefore > 0));
    if (vouchesFirst) mine.vouched = true;
    const isCounted = counted(n).includes(u);
    // A head that did not move is still confirmed by a counted upstream reporting it.
    if (isCounted) st.confirmHead(block);
    if (block <= mine.latest) {
      // The poll is the upstream's truth: a resynced node moves back (resyncHead follows in `polled`).
      if (fromPoll && block < mine.latest) mine.setLatest(block);
    } else {
      const before = st.highestLatest;
      if (isCounted) st.observeLatest(u, block);
      else mine.advanceLatest(block);
      if (block > before) updateLags(n);
    }
    if (vouchesFirst && vouchedBefore === 0) {
      vouchOthers(n, st, u);
      vouched(st);
    }
    return verdict;
  };

  const observeFinalized = (n: Network, u: Upstream, block: number, fromPoll = false, shared = false): HeadVerdict => {
    const st = chainStateOf(n);
    const verdict = st.judgeHead(block, 'finalized', shared ? undefined : u, shared);
    const mine = st.of(u);
    if (!shared && (verdict === 'implausible' || mine.implausible.finalized)) mark(n, u, 'finalized', block, verdict);
    if (verdict === 'implausible') return verdict;
    if (fromPoll) {
      mine.finalized = block;
      mine.finalizedKnown = true;
    } else mine.advanceFinalized(block);
    return verdict;
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
    registers: [host.metrics],
    collect() {
      this.reset();
      eachPoller((p, s) => this.set(lbl(p), s.latest));
    },
  });
  new Gauge({
    name: 'svc_upstream_finalized_block',
    help: 'Finalized block known for an upstream (the finalized tag, or latest - fallbackFinalityDepth)',
    labelNames: labels,
    registers: [host.metrics],
    collect() {
      this.reset();
      eachPoller((p, s) => this.set(lbl(p), s.finalized));
    },
  });
  new Gauge({
    name: 'svc_upstream_block_head_lag',
    help: "Blocks an upstream's latest block is behind the network's highest latest block",
    labelNames: labels,
    registers: [host.metrics],
    collect() {
      this.reset();
      eachPoller((p, s) => this.set(lbl(p), Math.max(0, chainStateOf(p.network).maxLatest - s.latest)));
    },
  });
  new Gauge({
    name: 'svc_upstream_finalization_lag',
    help: "Blocks an upstream's finalized block is behind the network's highest finalized block",
    labelNames: labels,
    registers: [host.metrics],
    collect() {
      this.reset();
      eachPoller((p, s) => this.set(lbl(p), Math.max(0, chainStateOf(p.network).maxFinalized - s.finalized)));
    },
  });
  new Gauge({
    name: 'svc_upstream_syncing',
    help: '1 while the state poller says the upstream is syncing (excluded by the default selection policy)',
    labelNames: labels,
    registers: [host.metrics],
    collect() {
      this.reset();
      eachPoller((p) => this.set(lbl(p), SYNCING.get(p.upstream) ? 1 : 0));
    },
  });

  // ---- pollers ---------------------------------------------------------------------
  const chainIds = chainIdCheck(host);
  const sink = {
    chainId: (u: Upstream, answer: unknown): boolean => {
      const p = pollers.get(u);
      return p ? chainIds.check(p.network, u, answer) : false;
    },
    latest: (u: Upstream, n: number): HeadVerdict => {
      const p = pollers.get(u);
      return p ? observeLatest(p.network, u, n, true) : 'plausible';
    },
    finalized: (u: Upstream, n: number): HeadVerdict => {
      const p = pollers.get(u);
      return p ? observeFinalized(p.network, u, n, true) : 'plausible';
    },
    syncingChanged: (u: Upstream, syncing: boolean) => {
      const p = pollers.get(u);
      if (!p) return;
      host.logger.info(
        { project: p.network.project.id, network: p.network.id, upstream: u.id, syncing },
        `upstream ${u.id} is ${syncing ? 'syncing: excluded by the default selection policy' : 'synced again'}`,
      );
      // Apply at once rather than at the next selection tick.
      void selection()?.evaluate(p.network.project.id, p.network.id);
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
    const poller = new UpstreamPoller(host, n, u, settings, sink);
    pollers.set(u, poller);
    if (!host.isClosed) poller.start();
  });

  // Removed by a config reload (or out of service): its poller stops. A poller of a network a
  // reload replaced was already moved to the new network when the upstream rejoined it.
  hooks.upstreamLeft.tap('evm-state', (u: Upstream, n: Network) => {
    const p = pollers.get(u);
    if (!p || p.network !== n) return;
    p.stop();
    pollers.delete(u);
  });

  hooks.shutdown.tapPromise('evm-state', async () => {
    for (const p of pollers.values()) p.stop();
  });

  return { observeLatest, observeFinalized };
}
