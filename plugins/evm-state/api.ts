/**
 * `svc-proxy/plugins/evm-state`: what the evm-state plugin offers other plugins: the chain state of
 * each network (heads, finality, block time, what each upstream last reported), which upstreams
 * it polls, and each upstream's syncing flag. Plugins read chain state with
 * {@link networkChainState}, which is the evm-state plugin's view, or {@link NO_CHAIN_STATE}
 * (nothing known: no head, no block time) in a preset without that plugin. Read-only: only the
 * evm-state plugin writes chain state.
 */
import { serviceKey, Slot, type Network, type PluginHost, type ServiceKey, type Upstream } from 'svc-proxy/plugin';

/**
 * Key of the upstreams a state poller runs for (the evm-state plugin; an upstream with
 * `evm.statePollerInterval: 0` has none). The healthcheck counts such an upstream initialised
 * only once its first poll came in; the values are the evm-state plugin's own.
 */
export const STATE_POLLERS_SERVICE: ServiceKey<ReadonlyMap<Upstream, unknown>> = serviceKey<ReadonlyMap<Upstream, unknown>>('evm-state.pollers');

/**
 * Upstream slot `evm.syncing`: the upstream's syncing flag, written by the evm-state poller, read
 * by the default selection policy, which excludes a syncing upstream.
 */
export const SYNCING = new Slot<boolean>('evm.syncing', false);

/** One upstream's view of the chain, as last polled or seen in its answers. */
export interface UpstreamChainState {
  /**
   * Latest block accepted from this upstream (answers move it forward; its state poll sets it, down
   * too: a resynced node); 0 when unknown. An implausible report (head plausibility, docs/evm.md) never lands here.
   */
  readonly latest: number;
  /** Finalized block accepted from this upstream (answers move it forward, its poll sets it); 0 when unknown. */
  readonly finalized: number;
  /** The last `eth_syncing` answers said syncing. */
  readonly syncing: boolean;
  /** Time of the last successful state poll, ms; 0 when never. */
  readonly lastPollAt: number;
}

/**
 * How a block number reported as a head (latest or finalized) by one source compares with what
 * the network has confirmed (head plausibility, docs/evm.md):
 * - `confirmed`: another source reported at least as high, or the reporter's block at that height
 *   links by parent hash to a known block (or it is the only source the network has);
 * - `plausible`: within what the block time allows since the last confirmed head, plus a margin
 *   (or nothing is known yet to judge against);
 * - `implausible`: neither: the report must not move the network's view.
 */
export type HeadVerdict = 'confirmed' | 'plausible' | 'implausible';

/** A network's view of its chain. */
export interface NetworkChainState {
  /**
   * Highest accepted latest block over the network's counted upstreams (the vouched ones once any
   * is: head plausibility, docs/evm.md); 0 when unknown.
   */
  readonly highestLatest: number;
  /**
   * Highest accepted finalized block over the counted upstreams (vouched ones once any is); 0 when
   * unknown or when the chain has finalized only its genesis ({@link finalizedKnown} tells which).
   */
  readonly highestFinalized: number;
  /**
   * An upstream reported its finalized block, 0 included: on a young chain (a fresh dev node)
   * block 0 is finalized and every later block unfinalized, so calls by number are classified
   * and cached (docs/caching.md) instead of staying `unknown`.
   */
  readonly finalizedKnown: boolean;
  /** Estimated block time, ms; undefined while observations accumulate. */
  readonly blockTimeMs: number | undefined;
  /** When the block after the current head is due at the latest, ms; undefined while the block time is unknown. */
  readonly nextBlockDueAt: number | undefined;
  /** An upstream's state, if it was ever observed. */
  peek(u: Upstream): UpstreamChainState | undefined;
  /** The hash of block `n` on the chain as last polled, if recorded (recent heights only). */
  hashAt(n: number): string | undefined;
  /**
   * When this process first recorded a canonical block hash, ms; 0 while it never has (a reorg
   * before then could not have been seen here).
   */
  readonly watchingSince: number;
  /** Whether a reorg seen at or after `writtenAt` (ms) may have replaced block `n`. */
  reorgedSince(writtenAt: number, n: number): boolean;
  /**
   * Whether the known head is fresh enough to interpolate `latest` with: confirmed within about
   * two poll intervals or two block times.
   * @param fallbackMs window when neither is known, ms (default 2000)
   */
  isHeadFresh(fallbackMs?: number): boolean;
  /**
   * Judges a block number one source reports as a head, without recording it (the one
   * plausibility rule: state polls, answers, shared state and the WebSocket follower all use it).
   * @param n the reported block number
   * @param kind `latest` or `finalized`
   * @param source the upstream that reported it, when one did (its own report is no witness)
   * @param hearsay another replica's word (shared state): never a sole source, and not believed
   *   at start-up before an upstream of this network has reported here
   */
  judgeHead(n: number, kind: 'latest' | 'finalized', source?: Upstream, hearsay?: boolean): HeadVerdict;
  /**
   * Records a block svc's own pipeline fetched as canonical (the state poller; the WebSocket
   * plugin's head follower as it emits a head). Another hash at a recorded height, or a parent
   * hash that differs from the block recorded below, is a reorg: unfinalized cache entries at and
   * above it stop serving before any client hears of the new head (reorg-aware caching, docs/caching.md).
   * @param n block number
   * @param hash the block's hash (0x-prefixed, 32 bytes)
   * @param parentHash its parent's hash, when known
   */
  observeBlockHash(n: number, hash: string, parentHash?: string): void;
}

/** What the evm-state plugin offers: the chain state of each network. */
export interface ChainStateService {
  /** The chain state of a network (the same object for the network's life). */
  of(network: Network): NetworkChainState;
  /**
   * Records heads another replica saw (the shared-state plugin): forward-only, so a lower or equal
   * number changes nothing, and judged by the same plausibility rule as a poll (docs/evm.md): an
   * implausible head is recorded nowhere. Optional: a chain-state provider may not take them.
   * @param network the upstream's network
   * @param u the upstream
   * @param latest its latest block (0 = unknown)
   * @param finalized its finalized block (0 = unknown)
   */
  observeShared?(network: Network, u: Upstream, latest: number, finalized: number): void;
}

/** Key of the evm-state plugin's {@link ChainStateService} (read it with {@link networkChainState}). */
export const CHAIN_STATE_SERVICE: ServiceKey<ChainStateService> = serviceKey<ChainStateService>('evm-state.chain');

/** The chain state of a network nothing tracks (no evm-state plugin): no head, no block time, never fresh. */
export const NO_CHAIN_STATE: NetworkChainState = Object.freeze({
  highestLatest: 0,
  highestFinalized: 0,
  finalizedKnown: false,
  blockTimeMs: undefined,
  nextBlockDueAt: undefined,
  watchingSince: 0,
  peek: () => undefined,
  hashAt: () => undefined,
  reorgedSince: () => false,
  isHeadFresh: () => false,
  judgeHead: () => 'plausible',
  observeBlockHash: () => undefined,
});

/** The chain state service of each host, once found (the evm-state plugin provides it in its `apply`). */
const found = new WeakMap<PluginHost, ChainStateService>();

/**
 * The chain state of a network: the evm-state plugin's (one object per network), else
 * {@link NO_CHAIN_STATE}. Cheap enough for every call (one WeakMap read once the service is found).
 * @param host the plugin's host
 * @param network the network
 */
export function networkChainState(host: PluginHost, network: Network): NetworkChainState {
  let s = found.get(host);
  if (!s) {
    s = host.services.get(CHAIN_STATE_SERVICE);
    if (!s) return NO_CHAIN_STATE;
    found.set(host, s);
  }
  return s.of(network);
}
