/**
 * The decision rules of a consensus round (as eRPC does), on votes built by
 * hand: the threshold, preferNonEmpty, preferLargerResponses, each dispute and low-participants
 * behaviour, error votes, the short-circuit rule, and which errors vote at all.
 */
import { expect } from 'chai';
import { decide, isSettled, type Vote } from '../../../../plugins/consensus/index.ts';
import { punishable } from '../../../../plugins/consensus/decide.ts';
import { voteOf } from '../../../../plugins/consensus/round.ts';
import { DEFAULT_CONSENSUS, type ConsensusConfig } from '../../../../plugins/consensus/schema.ts';
import { RpcResult } from '../../../../core/plugin-api.ts';
import {
  ErrConsensusDispute,
  ErrConsensusLowParticipants,
  ErrEndpointExecutionException,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrUpstreamsExhausted,
} from '../../../../core/plugin-errors.ts';

const cfg = (over: Partial<ConsensusConfig> = {}): ConsensusConfig => ({ ...DEFAULT_CONSENSUS, ...over });
const vote = (upstreamId: string, result: unknown): Vote => voteOf(upstreamId, { result: new RpcResult(result) }, []) as Vote;

describe('consensus: decide', () => {
  it('a group at the threshold wins and its largest member is returned', () => {
    const d = decide({ votes: [vote('a', { x: '0x1' }), vote('b', { x: '0x01' }), vote('c', { x: '0x2' })], infraErrors: [], cfg: cfg(), participants: 3 });
    expect(d.outcome).to.equal('agreement');
    expect(d.winningGroup!.votes.map((v) => v.upstreamId)).to.deep.equal(['a', 'b']);
    // "0x01" is one byte longer than "0x1": the larger member.
    expect(d.winner!.upstreamId).to.equal('b');
  });

  it('preferNonEmpty: a non-empty group at the threshold beats a larger empty group', () => {
    const votes = [vote('a', null), vote('b', null), vote('c', null), vote('d', '0xab'), vote('e', '0xab')];
    expect(decide({ votes, infraErrors: [], cfg: cfg(), participants: 5 }).winner!.result!.result).to.equal('0xab');
    expect(decide({ votes, infraErrors: [], cfg: cfg({ preferNonEmpty: false }), participants: 5 }).winner!.result!.result).to.equal(null);
  });

  it('a dispute is ErrConsensusDispute with the groups; acceptMostCommonValidResult takes the largest group', () => {
    const votes = [vote('a', '0x1'), vote('b', '0x2'), vote('c', '0x3')];
    const d = decide({ votes, infraErrors: [], cfg: cfg({ agreementThreshold: 3 }), participants: 3 });
    expect(d.outcome).to.equal('dispute');
    expect(d.error).to.be.instanceOf(ErrConsensusDispute);
    expect((d.error!.data as { groups: unknown[] }).groups).to.have.length(3);
    const tie = [vote('a', '0x1'), vote('b', '0x2'), vote('c', '0x2')];
    const m = decide({ votes: tie, infraErrors: [], cfg: cfg({ agreementThreshold: 3, disputeBehavior: 'acceptMostCommonValidResult' }), participants: 3 });
    expect(m.outcome).to.equal('dispute');
    expect(m.winner!.result!.result).to.equal('0x2');
  });

  it('preferBlockHeadLeader takes the leader when it voted, else the most common; onlyBlockHeadLeader fails without it', () => {
    const votes = [vote('a', '0x1'), vote('b', '0x2'), vote('c', '0x2')];
    const c = cfg({ agreementThreshold: 3, disputeBehavior: 'preferBlockHeadLeader' });
    expect(decide({ votes, infraErrors: [], cfg: c, participants: 3, leaderId: 'a' }).winner!.upstreamId).to.equal('a');
    expect(decide({ votes, infraErrors: [], cfg: c, participants: 4, leaderId: 'z' }).winner!.result!.result).to.equal('0x2');
    const only = cfg({ agreementThreshold: 3, disputeBehavior: 'onlyBlockHeadLeader' });
    expect(decide({ votes, infraErrors: [], cfg: only, participants: 3, leaderId: 'a' }).winner!.upstreamId).to.equal('a');
    expect(decide({ votes, infraErrors: [], cfg: only, participants: 4, leaderId: 'z' }).error).to.be.instanceOf(ErrConsensusDispute);
  });

  it('low participants: the one valid answer by default; returnError gives ErrConsensusLowParticipants, retryable only when a slot error was', () => {
    const timeout = new ErrEndpointRequestTimeout('slow');
    const d = decide({ votes: [vote('a', '0x1')], infraErrors: [timeout], cfg: cfg(), participants: 2 });
    expect(d.outcome).to.equal('low_participants');
    expect(d.winner!.upstreamId).to.equal('a');
    const e = decide({ votes: [vote('a', '0x1')], infraErrors: [timeout], cfg: cfg({ lowParticipantsBehavior: 'returnError' }), participants: 2 }).error!;
    expect(e).to.be.instanceOf(ErrConsensusLowParticipants);
    expect(e.code).to.equal(-32603);
    expect(e.httpStatus).to.equal(200);
    expect(e.retryable).to.equal(true);
    const nothing = decide({ votes: [], infraErrors: [], cfg: cfg(), participants: 0 }).error!;
    expect(nothing).to.be.instanceOf(ErrConsensusLowParticipants);
    expect(nothing.retryable).to.equal(false);
  });

  it('errors that are facts vote by JSON-RPC code; infrastructure failures do not vote; one slot exhausted votes with its last error', () => {
    const revert = () => new ErrEndpointExecutionException('execution reverted', { code: 3 });
    expect(voteOf('a', { error: revert() }, [])!.hash).to.equal('jsonrpc:3');
    expect(voteOf('a', { error: new ErrEndpointServerSideException('502') }, [])).to.equal(undefined);
    expect(voteOf('a', { error: new ErrEndpointRequestTimeout('slow') }, [])).to.equal(undefined);
    expect(voteOf('a', { error: new ErrUpstreamsExhausted([new ErrEndpointRequestTimeout('slow'), revert()]) }, [])!.hash).to.equal('jsonrpc:3');
    const d = decide({ votes: [voteOf('a', { error: revert() }, [])!, voteOf('b', { error: revert() }, [])!], infraErrors: [], cfg: cfg(), participants: 2 });
    expect(d.outcome).to.equal('agreement');
    expect(d.winner!.error).to.be.instanceOf(ErrEndpointExecutionException);
  });

  it('ignoreFields: answers that differ only in an ignored field agree', () => {
    const ignore = [['*', 'blockTimestamp']];
    const a = voteOf('a', { result: new RpcResult([{ logIndex: '0x0', blockTimestamp: '0x1' }]) }, ignore)!;
    const b = voteOf('b', { result: new RpcResult([{ blockTimestamp: '0x2', logIndex: '0x00' }]) }, ignore)!;
    expect(a.hash).to.equal(b.hash);
  });
});

describe('consensus: who punishMisbehavior counts against (as in eRPC: data answers that disagree with a data winner)', () => {
  const revert = () => voteOf('r', { error: new ErrEndpointExecutionException('execution reverted', { code: 3 }) }, [])!;
  const as = (v: Vote, upstreamId: string): Vote => ({ ...v, upstreamId });

  it('a data winner: the data answers that disagree, never an upstream that answered an error', () => {
    const d = decide({
      votes: [vote('a', '0x1'), vote('b', '0x1'), vote('e', '0x1'), vote('c', '0x2'), as(revert(), 'd')],
      infraErrors: [],
      cfg: cfg(),
      participants: 5,
    });
    expect(d.outcome).to.equal('agreement');
    expect(punishable(d)).to.deep.equal(['c']);
  });

  it('a winner short of a clear majority of the votes (2 of 4): nobody', () => {
    const d = decide({ votes: [vote('a', '0x1'), vote('b', '0x1'), vote('c', '0x2'), vote('d', '0x3')], infraErrors: [], cfg: cfg(), participants: 4 });
    expect(d.outcome).to.equal('agreement');
    expect(punishable(d)).to.deep.equal([]);
  });

  it('an error winner (a revert majority): nobody, not even the data answer that disagreed', () => {
    const d = decide({ votes: [as(revert(), 'a'), as(revert(), 'b'), vote('c', '0x1')], infraErrors: [], cfg: cfg(), participants: 3 });
    expect(d.outcome).to.equal('agreement');
    expect(d.winningGroup!.isError).to.equal(true);
    expect(punishable(d)).to.deep.equal([]);
  });
});

describe('consensus: isSettled (when a round may stop early)', () => {
  it('stops once no running slot could change the winner', () => {
    const c = cfg({ preferNonEmpty: false });
    expect(isSettled([vote('a', '0x1'), vote('b', '0x1')], 1, c)).to.equal(true);
    expect(isSettled([vote('a', '0x1'), vote('b', '0x1')], 2, c)).to.equal(false);
    expect(isSettled([vote('a', '0x1'), vote('b', '0x2')], 1, c)).to.equal(false);
    expect(isSettled([vote('a', '0x1')], 0, c)).to.equal(true);
  });

  it('with preferNonEmpty, an empty leader waits while a non-empty answer could still reach the threshold', () => {
    const empty = [vote('a', null), vote('b', null), vote('c', null)];
    expect(isSettled(empty, 1, cfg({ preferNonEmpty: false }))).to.equal(true);
    expect(isSettled([...empty, vote('d', '0x5')], 1, cfg())).to.equal(false);
  });
});
