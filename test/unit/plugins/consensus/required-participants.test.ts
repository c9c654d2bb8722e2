/**
 * eRPC's `consensus.requiredParticipants`: the pool quota (matching upstreams promoted to the
 * front, best effort, maxParticipants unchanged, one upstream counting for every entry it
 * matches), the winner quota (`minAgreement` hard-enforced: a short winner is a dispute whatever
 * disputeBehavior says), and the config checks (eRPC's validation).
 */
import { expect } from 'chai';
import type { SchemaFragment } from 'svc-proxy/plugin';
import { compileQuotas, decide, missedAgreement, promoteForQuotas, type Vote } from '../../../../plugins/consensus/index.ts';
import { voteOf } from '../../../../plugins/consensus/round.ts';
import { DEFAULT_CONSENSUS, type ConsensusConfig } from '../../../../plugins/consensus/schema.ts';
import { RpcResult } from '../../../../core/plugin-api.ts';
import { ErrConsensusDispute } from '../../../../core/plugin-errors.ts';
import { loadConfigObject } from '../../../../config/load.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { problemsOf } from '../../../helpers/config-problems.ts';

const cfg = (over: Partial<ConsensusConfig> = {}): ConsensusConfig => ({ ...DEFAULT_CONSENSUS, ...over });
const vote = (upstreamId: string, result: unknown): Vote => voteOf(upstreamId, { result: new RpcResult(result) }, []) as Vote;
const up = (id: string, ...tags: string[]) => ({ id, tags: new Set(tags) });

describe("consensus: eRPC's requiredParticipants pool quota", () => {
  const ups = [up('a', 'tier:cheap'), up('b', 'tier:cheap'), up('c', 'tier:cheap'), up('p1', 'tier:premium', 'vendor:x'), up('p2', 'tier:premium')];

  it('matching upstreams are promoted to the front in selection order; the others keep their order behind them', () => {
    const q = compileQuotas([{ tag: 'tier:premium', minParticipants: 1 }]);
    expect(promoteForQuotas(ups, q).map((u) => u.id)).to.deep.equal(['p1', 'a', 'b', 'c', 'p2']);
    // maxParticipants 3 then holds one premium upstream: the first three.
    expect(
      promoteForQuotas(ups, q)
        .slice(0, 3)
        .map((u) => u.id),
    ).to.deep.equal(['p1', 'a', 'b']);
  });

  it('tag is a glob; an upstream matching several entries counts for each (never promoted twice)', () => {
    const q = compileQuotas([
      { tag: 'tier:prem*', minParticipants: 1 },
      { tag: 'vendor:?', minParticipants: 1 },
    ]);
    expect(promoteForQuotas(ups, q).map((u) => u.id)).to.deep.equal(['p1', 'a', 'b', 'c', 'p2']);
    const two = compileQuotas([{ tag: 'tier:prem*', minParticipants: 2 }]);
    expect(promoteForQuotas(ups, two).map((u) => u.id)).to.deep.equal(['p1', 'p2', 'a', 'b', 'c']);
  });

  it('best effort: too few healthy matches promotes what there is; an unhealthy match is not promoted', () => {
    const q = compileQuotas([{ tag: 'tier:premium', minParticipants: 3 }]);
    expect(promoteForQuotas(ups, q).map((u) => u.id)).to.deep.equal(['p1', 'p2', 'a', 'b', 'c']);
    expect(promoteForQuotas(ups, q, (u) => u.id !== 'p1').map((u) => u.id)).to.deep.equal(['p2', 'a', 'b', 'c', 'p1']);
    expect(promoteForQuotas(ups, compileQuotas([{ tag: 'nope', minParticipants: 1 }])).map((u) => u.id)).to.deep.equal(['a', 'b', 'c', 'p1', 'p2']);
  });
});

describe("consensus: eRPC's requiredParticipants winner quota (minAgreement)", () => {
  const tags: Record<string, Set<string>> = { a: new Set(['tier:cheap']), b: new Set(['tier:cheap']), p: new Set(['tier:premium']) };
  const q = compileQuotas([{ tag: 'tier:premium', minParticipants: 1, minAgreement: 1 }]);
  const shortfall = (winners: readonly string[]) => {
    const m = missedAgreement(winners, q, (id) => tags[id]);
    return m && `has ${m.had} upstreams tagged ${m.quota.tag}`;
  };

  it('missedAgreement counts distinct matching upstreams of the winning group', () => {
    expect(missedAgreement(['a', 'b'], q, (id) => tags[id])?.had).to.equal(0);
    expect(missedAgreement(['a', 'p'], q, (id) => tags[id])).to.equal(undefined);
    const two = compileQuotas([{ tag: 'tier:premium', minParticipants: 2, minAgreement: 2 }]);
    expect(missedAgreement(['p', 'p'], two, (id) => tags[id])?.had).to.equal(1);
  });

  it('a winner at the threshold without a matching upstream is a dispute (ErrConsensusDispute); with one it wins', () => {
    const votes = [vote('a', '0x1'), vote('b', '0x1'), vote('p', '0x2')];
    const d = decide({ votes, infraErrors: [], cfg: cfg(), participants: 3, agreementShortfall: shortfall });
    expect(d.outcome).to.equal('dispute');
    expect(d.error).to.be.instanceOf(ErrConsensusDispute);
    expect(d.error!.message).to.match(/minAgreement/);
    expect(d.winner).to.equal(undefined);
    const ok = decide({
      votes: [vote('a', '0x1'), vote('p', '0x1'), vote('b', '0x2')],
      infraErrors: [],
      cfg: cfg(),
      participants: 3,
      agreementShortfall: shortfall,
    });
    expect(ok.outcome).to.equal('agreement');
    expect(ok.winningGroup!.votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'p']);
  });

  it('disputeBehavior and lowParticipantsBehavior cannot bypass it', () => {
    const votes = [vote('a', '0x1'), vote('b', '0x1'), vote('p', '0x2')];
    const accept = cfg({ agreementThreshold: 3, disputeBehavior: 'acceptMostCommonValidResult' });
    expect(decide({ votes, infraErrors: [], cfg: accept, participants: 3 }).winner!.upstreamId).to.be.oneOf(['a', 'b']);
    const d = decide({ votes, infraErrors: [], cfg: accept, participants: 3, agreementShortfall: shortfall });
    expect(d.outcome).to.equal('dispute');
    expect(d.error).to.be.instanceOf(ErrConsensusDispute);
    const low = decide({ votes: [vote('a', '0x1')], infraErrors: [], cfg: cfg(), participants: 3, agreementShortfall: shortfall });
    expect(low.outcome).to.equal('dispute');
  });

  it('a round ending in an error (no winner) keeps its error', () => {
    const d = decide({
      votes: [vote('a', '0x1'), vote('b', '0x2'), vote('p', '0x3')],
      infraErrors: [],
      cfg: cfg(),
      participants: 3,
      agreementShortfall: shortfall,
    });
    expect(d.outcome).to.equal('dispute');
    expect(d.error!.message).to.not.match(/minAgreement/);
  });
});

describe("config: eRPC's requiredParticipants", () => {
  const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
  const doc = (consensus: Record<string, unknown>) => ({
    projects: [
      { id: 'p', networks: [{ evm: { chainId: 1 }, failsafe: [{ matchMethod: '*', consensus }] }], upstreams: [{ endpoint: 'http://127.0.0.1:8545' }] },
    ],
  });
  const load = (consensus: Record<string, unknown>) => loadConfigObject(doc(consensus), { fragments: FRAGMENTS, env: {} });

  it('is taken as eRPC writes it', () => {
    const { config } = load({ maxParticipants: 3, requiredParticipants: [{ tag: 'tier:premium', minParticipants: 1, minAgreement: 1 }] });
    const fs = config.projects[0]?.networks[0]?.settings.failsafe as Array<{ consensus: ConsensusConfig }>;
    expect(fs[0]?.consensus.requiredParticipants).to.deep.equal([{ tag: 'tier:premium', minParticipants: 1, minAgreement: 1 }]);
  });

  it('refuses what eRPC refuses: no tag, minParticipants 0 or above maxParticipants, minAgreement above minParticipants or negative', () => {
    const at = 'projects[0].networks[0].failsafe[0].consensus.requiredParticipants[0]';
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ minParticipants: 1 }, `${at}.tag`],
      [{ tag: '', minParticipants: 1 }, `${at}.tag`],
      [{ tag: 'x', minParticipants: 0 }, `${at}.minParticipants`],
      [{ tag: 'x', minParticipants: 6 }, `${at}.minParticipants`],
      [{ tag: 'x', minParticipants: 1, minAgreement: 2 }, `${at}.minAgreement`],
      [{ tag: 'x', minParticipants: 1, minAgreement: -1 }, `${at}.minAgreement`],
    ];
    for (const [entry, path] of cases) {
      const p = problemsOf(() => load({ requiredParticipants: [entry] }));
      expect(
        p.some((x) => x.path === path),
        `${JSON.stringify(entry)}: ${JSON.stringify(p)}`,
      ).to.equal(true);
    }
  });
});
