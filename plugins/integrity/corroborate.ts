/**
 * The corroborated and authoritative levels (spec §2.8 #10): the blocks an answer rests on
 * ({@link Anchors}) confirmed by other upstreams of the network with
 * `eth_getBlockByNumber(n, false)`. A confirming block is itself checked (its hash recomputed from
 * its header) before its hash or logsBloom is trusted.
 *
 * Bounds: at most {@link MAX_ANCHORS} distinct blocks per answer (more fails the check: narrow
 * the request), at most {@link MAX_IN_FLIGHT} blocks confirmed at once.
 */
import type { Anchor, Anchors } from './anchors.ts';
import { checkLogInBloom, parseBloom } from './bloom.ts';
import { headerHash } from './checks/block.ts';
import { CheckFailure, isObject, sameHex, toQuantity } from './hex.ts';
import type { Viem } from './libs.ts';

/** Most distinct blocks one answer may rest on under `corroborated` or `authoritative`. */
export const MAX_ANCHORS = 32;
/** Most blocks being confirmed at once for one answer. */
export const MAX_IN_FLIGHT = 4;

/** Another upstream of the network, as the confirmation sees it. */
export interface Peer {
  /** Upstream id (for messages). */
  id: string;
  /**
   * `eth_getBlockByNumber(number, false)` on that upstream.
   * @returns the parsed result (null when the upstream lacks the block)
   * @throws anything on a transport or JSON-RPC error (the peer is then skipped)
   */
  getBlock(number: string): Promise<unknown>;
}

/** The consensus settings `authoritative` uses (a network failsafe entry's `consensus`, else `DEFAULT_CONSENSUS`). */
export interface AuthoritativeSettings {
  /** Upstreams voting, the answering one included (so `maxParticipants - 1` are asked). */
  maxParticipants: number;
  /** Votes the answer's hash needs, its own included. */
  agreementThreshold: number;
}

/** Runs `fn` over `items` with at most `limit` at once; stops starting new ones after the first failure, which it rethrows. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { e: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failure) {
      const item = items[next++] as T;
      try {
        await fn(item);
      } catch (e) {
        failure ??= { e };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.e;
}

/**
 * A peer's block, or undefined when it has none usable (error, null, or a block whose hash does
 * not match its own header: such a peer is no witness).
 */
async function peerBlock(viem: Viem, peer: Peer, n: bigint): Promise<{ hash: string; logsBloom: unknown } | undefined> {
  let b: unknown;
  try {
    b = await peer.getBlock(toQuantity(n));
  } catch {
    return undefined;
  }
  if (!isObject(b) || typeof b.hash !== 'string') return undefined;
  try {
    if (!sameHex(headerHash(viem, b), b.hash)) return undefined;
  } catch {
    return undefined;
  }
  return { hash: b.hash.toLowerCase(), logsBloom: b.logsBloom };
}

/** Checks the answer's logs in one block against that block's confirmed logsBloom. */
function checkAnchorLogs(viem: Viem, a: Anchor, logsBloom: unknown, check: string, peer: string): void {
  if (a.logs.length === 0 || a.isBlock) return;
  const bloom = parseBloom(viem, logsBloom, check);
  for (const l of a.logs) checkLogInBloom(bloom, l, check, `block ${a.number} (as ${peer} has it)`);
}

function bounded(anchors: Anchors, level: string): Anchor[] {
  if (anchors.size > MAX_ANCHORS) {
    throw new CheckFailure(
      `${level}.tooManyBlocks`,
      `the answer spans ${anchors.size} blocks; ${level} confirms at most ${MAX_ANCHORS} per answer (narrow the request)`,
    );
  }
  return anchors.list();
}

/**
 * The `corroborated` level: each block the answer rests on is confirmed by one other upstream.
 * Peers are asked in order until one has the block with the answer's hash (usually the first:
 * one extra request per block). A peer that errs, lacks the block or answers a block whose hash
 * does not match its header is skipped; a peer with another hash at that height is noted and the
 * next one asked, so one peer on a fork neither confirms a forked answer nor blocks an honest
 * one. The answer's logs in a confirmed block must be in that block's logsBloom.
 * @param viem viem's namespace
 * @param anchors the blocks of the answer (from the intrinsic checks)
 * @param peers the network's other usable upstreams, in preference order
 * @throws CheckFailure: `corroborated.noPeer` (no second upstream), `corroborated.tooManyBlocks`,
 *   `corroborated.fork` (no peer confirmed and some have another block at that height),
 *   `corroborated.unconfirmed` (no peer has the block), `corroborated.bloom` (a log is not in the
 *   confirmed block's bloom)
 */
export async function corroborate(viem: Viem, anchors: Anchors, peers: readonly Peer[]): Promise<void> {
  if (anchors.size === 0) return;
  const list = bounded(anchors, 'corroborated');
  if (peers.length === 0) throw new CheckFailure('corroborated.noPeer', 'corroborated needs a second upstream of the network and none is available');
  await eachLimited(list, MAX_IN_FLIGHT, async (a) => {
    const others: string[] = [];
    for (const peer of peers) {
      const b = await peerBlock(viem, peer, a.number);
      if (!b) continue;
      if (b.hash !== a.hash) {
        others.push(`${peer.id} has ${b.hash}`);
        continue;
      }
      checkAnchorLogs(viem, a, b.logsBloom, 'corroborated.bloom', peer.id);
      return;
    }
    if (others.length > 0) throw new CheckFailure('corroborated.fork', `no other upstream confirmed block ${a.number} ${a.hash}: ${others.join(', ')}`);
    throw new CheckFailure('corroborated.unconfirmed', `no other upstream confirmed block ${a.number} ${a.hash} (asked ${peers.map((p) => p.id).join(', ')})`);
  });
}

/**
 * The `authoritative` level: a vote over each block's hash. Up to `maxParticipants - 1` peers are
 * asked at once; each peer with a usable block votes for its hash (errors and nulls do not vote),
 * the answer's own hash has one vote. The answer passes when its hash has at least
 * `agreementThreshold` votes and no other hash has more.
 * @param viem viem's namespace
 * @param anchors the blocks of the answer
 * @param peers the network's other usable upstreams, in preference order
 * @param settings participants and threshold
 * @throws CheckFailure: `authoritative.tooManyBlocks`, `authoritative.consensus` (with the votes),
 *   `authoritative.bloom`
 */
export async function authoritative(viem: Viem, anchors: Anchors, peers: readonly Peer[], settings: AuthoritativeSettings): Promise<void> {
  if (anchors.size === 0) return;
  const list = bounded(anchors, 'authoritative');
  const voters = peers.slice(0, Math.max(0, settings.maxParticipants - 1));
  await eachLimited(list, MAX_IN_FLIGHT, async (a) => {
    const blocks = await Promise.all(voters.map((p) => peerBlock(viem, p, a.number)));
    const votes = new Map<string, string[]>([[a.hash, ['answer']]]);
    let witness: { peer: string; logsBloom: unknown } | undefined;
    blocks.forEach((b, i) => {
      if (!b) return;
      const id = (voters[i] as Peer).id;
      const v = votes.get(b.hash) ?? [];
      v.push(id);
      votes.set(b.hash, v);
      if (b.hash === a.hash) witness ??= { peer: id, logsBloom: b.logsBloom };
    });
    const mine = (votes.get(a.hash) as string[]).length;
    const rival = [...votes.entries()].find(([h, v]) => h !== a.hash && v.length > mine);
    if (mine < settings.agreementThreshold || rival) {
      const summary = [...votes.entries()].map(([h, v]) => `${h.slice(0, 18)}: ${v.join('+')}`).join('; ');
      throw new CheckFailure(
        'authoritative.consensus',
        `block ${a.number}: the answer's hash has ${mine} of ${settings.agreementThreshold} needed votes${rival ? ', another hash has more' : ''} (${summary})`,
      );
    }
    if (witness) checkAnchorLogs(viem, a, witness.logsBloom, 'authoritative.bloom', witness.peer);
  });
}
