/**
 * shared-state merge rules: heads only move forward per upstream across the fleet, a replica
 * never applies (or re-publishes) its own messages or what it learned from others, entries carry
 * their writer and time and expire, every number is bounded and judged by the chain state's
 * plausibility rule, and whatever fails is dropped with one of a fixed set of reasons.
 */
import { expect } from 'chai';
import {
  type DropReason,
  entryTtlMs,
  type HeadContext,
  HeadLedger,
  headsToApply,
  MAX_ENTRY_BYTES,
  MAX_ENTRY_TTL_MS,
  MAX_HEADS_PER_MESSAGE,
  MAX_ID_LENGTH,
  messagesOf,
  MIN_ENTRY_TTL_MS,
  parseMessage,
  type SharedHead,
} from '../../../../plugins/shared-state/index.ts';

const head = (latest: number, finalized: number, upstream = 'a'): SharedHead => ({ project: 'main', upstream, latest, finalized });
const NOW = 1_700_000_000_000;
const TTL = 15_000;

/** A context knowing upstream `a` at 100/90 and judging numbers above `limit` implausible. */
function ctx(
  limit = Number.MAX_SAFE_INTEGER,
  known: { latest: number; finalized: number } | null = { latest: 100, finalized: 90 },
): HeadContext & { judged: Array<[number, string]> } {
  const judged: Array<[number, string]> = [];
  return {
    judged,
    known: () => known ?? undefined,
    judge: (_h, n, kind) => {
      judged.push([n, kind]);
      return n > limit ? 'implausible' : 'plausible';
    },
  };
}

/** Collects drops. */
function drops(): { drop: (r: DropReason) => void; seen: DropReason[] } {
  const seen: DropReason[] = [];
  return { seen, drop: (r) => seen.push(r) };
}

const msg = (o: Record<string, unknown>) => JSON.stringify({ replica: 'r2', at: NOW, heads: [head(101, 95)], ...o });

describe('shared-state merge rules', () => {
  it('applies only heads above what this replica knows (monotonic)', () => {
    const d = drops();
    expect(headsToApply({ replica: 'r2', at: NOW, heads: [head(101, 90)] }, 'r1', ctx(), d.drop)).to.deep.equal([head(101, 0)]);
    expect(headsToApply({ replica: 'r2', at: NOW, heads: [head(99, 95)] }, 'r1', ctx(), d.drop)).to.deep.equal([head(0, 95)]);
    expect(headsToApply({ replica: 'r2', at: NOW, heads: [head(100, 90), head(50, 10)] }, 'r1', ctx(), d.drop)).to.deep.equal([]);
    expect(d.seen).to.deep.equal([]);
  });

  it('ignores its own messages; an unknown upstream is dropped as `unknown`', () => {
    const d = drops();
    expect(headsToApply({ replica: 'r1', at: NOW, heads: [head(500, 400)] }, 'r1', ctx(), d.drop)).to.deep.equal([]);
    expect(headsToApply({ replica: 'r2', at: NOW, heads: [head(500, 400)] }, 'r1', ctx(undefined, null), d.drop)).to.deep.equal([]);
    expect(d.seen).to.deep.equal(['unknown']);
  });

  it('a head the chain state judges implausible is not applied and is counted; only forward numbers are judged', () => {
    const d = drops();
    const c = ctx(1000);
    expect(headsToApply({ replica: 'r2', at: NOW, heads: [head(900_000_000, 95)] }, 'r1', c, d.drop)).to.deep.equal([head(0, 95)]);
    expect(headsToApply({ replica: 'r2', at: NOW, heads: [head(900_000_000, 900_000_000)] }, 'r1', c, d.drop)).to.deep.equal([]);
    expect(d.seen).to.deep.equal(['implausible', 'implausible', 'implausible']);
    expect(c.judged).to.deep.equal([
      [900_000_000, 'latest'],
      [95, 'finalized'],
      [900_000_000, 'latest'],
      [900_000_000, 'finalized'],
    ]);
  });

  it('publishes only heads it observed that moved, never what was learned from another replica (no echo)', () => {
    const ledger = new HeadLedger();
    expect(ledger.changed([head(10, 5)])).to.deep.equal([head(10, 5)]);
    expect(ledger.changed([head(10, 5)])).to.deep.equal([]);
    ledger.learned(head(20, 15));
    // The local view now holds the applied head: nothing to publish.
    expect(ledger.changed([head(20, 15)])).to.deep.equal([]);
    // Only the number that moved is said.
    expect(ledger.changed([head(21, 15)])).to.deep.equal([head(21, 0)]);
    // A lower local number never publishes a step back.
    expect(ledger.changed([head(3, 1)])).to.deep.equal([]);
  });

  it("a replica's snapshot entry holds only the heads it observed itself, never above its view now", () => {
    const ledger = new HeadLedger();
    ledger.changed([head(10, 5), head(7, 0, 'b')]);
    // Learned from another replica (and applied): not this replica's to confirm.
    ledger.learned(head(900, 800));
    ledger.learned(head(50, 40, 'c'));
    expect(ledger.ownHeads([head(900, 800), head(7, 0, 'b'), head(50, 40, 'c')])).to.deep.equal([head(10, 5), head(7, 0, 'b')]);
    // Its chain state moved back (a resynced node): the entry follows.
    expect(ledger.ownHeads([head(8, 5), head(7, 0, 'b')])).to.deep.equal([head(8, 5), head(7, 0, 'b')]);
  });

  it('the TTL is three snapshot intervals, between 3 s and 10 min', () => {
    expect(entryTtlMs(5000)).to.equal(15_000);
    expect(entryTtlMs(100)).to.equal(MIN_ENTRY_TTL_MS);
    expect(entryTtlMs(3_600_000)).to.equal(MAX_ENTRY_TTL_MS);
  });

  it('an entry older than the TTL is stale; one dated beyond the TTL in the future is out of range', () => {
    const d = drops();
    expect(parseMessage(msg({ at: NOW - TTL }), NOW, TTL, d.drop)).to.deep.equal({ replica: 'r2', at: NOW - TTL, heads: [head(101, 95)] });
    expect(parseMessage(msg({ at: NOW - TTL - 1 }), NOW, TTL, d.drop)).to.equal(undefined);
    expect(parseMessage(msg({ at: NOW + TTL + 1 }), NOW, TTL, d.drop)).to.equal(undefined);
    expect(d.seen).to.deep.equal(['stale', 'out_of_range']);
  });

  it('drops malformed entries whole: not JSON, no replica or timestamp (the earlier format), wrong types', () => {
    const d = drops();
    for (const text of [
      'not json',
      '[]',
      'null',
      '{"heads":[]}',
      JSON.stringify({ replica: 'x', heads: [head(5, 1)] }),
      msg({ at: '1' }),
      msg({ heads: {} }),
      msg({ replica: 7 }),
    ]) {
      expect(parseMessage(text, NOW, TTL, d.drop), text).to.equal(undefined);
    }
    expect(d.seen).to.deep.equal(Array(8).fill('malformed'));
  });

  it('drops oversized entries whole: text, replica id or head list over its bound', () => {
    const d = drops();
    expect(parseMessage('x'.repeat(MAX_ENTRY_BYTES + 1), NOW, TTL, d.drop)).to.equal(undefined);
    expect(parseMessage(msg({ replica: 'r'.repeat(MAX_ID_LENGTH + 1) }), NOW, TTL, d.drop)).to.equal(undefined);
    expect(parseMessage(msg({ heads: Array(MAX_HEADS_PER_MESSAGE + 1).fill(head(1, 1)) }), NOW, TTL, d.drop)).to.equal(undefined);
    expect(d.seen).to.deep.equal(['oversized', 'oversized', 'oversized']);
  });

  it('drops each bad head of a good entry with its reason and keeps the rest', () => {
    const d = drops();
    const heads = [
      head(101, 95),
      { project: 'main', upstream: 'a', latest: -1, finalized: 1 },
      { project: 'main', upstream: 'a', latest: 1.5, finalized: 1 },
      { project: 'main', upstream: 'a', latest: 2 ** 53, finalized: 1 },
      { project: 'main', upstream: 'a', latest: '7', finalized: 1 },
      { project: 1, upstream: 'a', latest: 1, finalized: 1 },
      { project: 'main', upstream: 'u'.repeat(MAX_ID_LENGTH + 1), latest: 1, finalized: 1 },
      null,
      head(0, 0),
    ];
    expect(parseMessage(msg({ heads }), NOW, TTL, d.drop)).to.deep.equal({ replica: 'r2', at: NOW, heads: [head(101, 95)] });
    expect(d.seen).to.deep.equal(['out_of_range', 'out_of_range', 'out_of_range', 'malformed', 'malformed', 'oversized', 'malformed']);
  });

  it('what a replica publishes reads back whole, split into messages within the bound', () => {
    const heads = Array.from({ length: MAX_HEADS_PER_MESSAGE + 1 }, (_, i) => head(i + 1, 0, `u${i}`));
    const texts = messagesOf('r1', heads, NOW);
    expect(texts).to.have.length(2);
    const d = drops();
    const back = texts.map((t) => parseMessage(t, NOW, TTL, d.drop));
    expect(back.flatMap((m) => m?.heads ?? [])).to.deep.equal(heads);
    expect(back.map((m) => m?.replica)).to.deep.equal(['r1', 'r1']);
    expect(d.seen).to.deep.equal([]);
  });
});
