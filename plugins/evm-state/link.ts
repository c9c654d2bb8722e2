/**
 * Parent-hash link confirmation (head plausibility, docs/evm.md): a head one upstream reports
 * beyond what the block time allows is still believed when that upstream's blocks from it down to
 * a block the network recorded as canonical form one chain, each block's `parentHash` being the
 * hash of the block below. An honest node that was simply far ahead (a devnet mined in a burst, a
 * chain faster than its estimate) proves itself; a number from the future, or a node on another
 * chain, cannot. The walk reads headers only, in small concurrent rounds from the top down, stops
 * at the first gap, and runs off the request path at most once per {@link LINK_COOLDOWN_MS} per
 * upstream, so a liar costs a few reads a minute.
 */

/** Most blocks a walk covers (reported head minus the highest recorded canonical block). */
export const LINK_MAX_BLOCKS = 2048;
/** Headers read concurrently in one round of a walk. */
export const LINK_ROUND = 32;
/**
 * Deadline of one header read of a walk, ms (at least; the poll's own deadline when longer): a
 * poll every 100 ms must not make a walk of a busy node fail on reads that take 150 ms.
 */
export const LINK_HEADER_TIMEOUT_MS = 5000;
/** Least time between two walks for one upstream, ms. */
export const LINK_COOLDOWN_MS = 60_000;

/** A block header's identity as read from the reporting upstream. */
export interface LinkHeader {
  /** The block's hash (0x-prefixed). */
  hash: string;
  /** Its parent's hash (0x-prefixed). */
  parentHash: string;
}

/** What a walk needs: the reporter's headers and the network's recorded canonical hashes. */
export interface LinkSource {
  /** The reporter's header at height `n`, undefined when it has none or answered badly. Never rejects. */
  header(n: number): Promise<LinkHeader | undefined>;
  /** The network's recorded canonical hash at height `n`, if any (reorg records of the state poller). */
  hashAt(n: number): string | undefined;
  /** Highest height below `n` with a recorded canonical hash, if any. */
  recordedBelow(n: number): number | undefined;
}

/**
 * Whether the reporter's block `top` links by parent hash to a block the network recorded.
 * @param top the reported head's number
 * @param head the reported head's header (as the poll read it)
 * @param src the reporter's headers and the recorded hashes
 * @returns true when every block from `top` down to a recorded height chains by parent hash and
 *   meets the recorded hash; false when anything is missing, out of reach ({@link LINK_MAX_BLOCKS}),
 *   or does not link. Never rejects.
 */
export async function linksToKnown(top: number, head: LinkHeader, src: LinkSource): Promise<boolean> {
  const base = src.recordedBelow(top);
  if (base === undefined || top - base > LINK_MAX_BLOCKS) return false;
  let expected = head.parentHash.toLowerCase();
  for (let hi = top - 1; hi > base; hi -= LINK_ROUND) {
    const lo = Math.max(base + 1, hi - LINK_ROUND + 1);
    const heights: number[] = [];
    for (let k = hi; k >= lo; k--) heights.push(k);
    const headers = await Promise.all(heights.map((k) => src.header(k)));
    for (const h of headers) {
      if (!h || h.hash.toLowerCase() !== expected) return false;
      expected = h.parentHash.toLowerCase();
    }
  }
  return src.hashAt(base)?.toLowerCase() === expected;
}
