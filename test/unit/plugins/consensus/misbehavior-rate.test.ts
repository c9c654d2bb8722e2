/**
 * The consensus plugin's misbehaviour record (the selection policy's `misbehaviorRate`, eRPC's
 * rolling misbehaviour count): per upstream and method, rounds answered and misbehaviours over
 * the project's health window, on an explicit clock; the rate divides by the upstream's requests
 * in the same health cell, as eRPC's does. A data answer is a misbehaviour only against a data
 * consensus answer: the winner, or in a round without one the largest group (none on a tie, none
 * for a `minAgreement` composition dispute). An error vote never is one. Keyed by the Upstream
 * object: a replaced upstream starts clean, and the plugin drops one taken out of service.
 */
import { expect } from 'chai';
import { consensusGroup, MisbehaviorRecord, type Group, type Vote } from '../../../../plugins/consensus/index.ts';
import { decide } from '../../../../plugins/consensus/decide.ts';
import { HealthTracker } from '../../../../lib/health-window.ts';
import { healthOutcome } from '../../../../core/pipeline/blame.ts';
import type { Project } from '../../../../core/registry/project.ts';
import type { Upstream } from '../../../../core/registry/upstream.ts';
import type { AttemptRecord } from '../../../../core/wire/records.ts';
import { ErrEndpointClientSideException } from '../../../../core/wire/errors.ts';
import { createProxy } from '../../../../core/host/create.ts';
import { validateConfig } from '../../../../core/host/validate.ts';
import { createLogger } from '../../../../lib/logger.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { CONSENSUS_MISBEHAVIOR_SERVICE } from '../../../../plugins/consensus/api.ts';

const vote = (upstreamId: string, hash: string, error = false): Vote => ({
  upstreamId,
  hash,
  empty: false,
  size: 10,
  ...(error ? { error: new ErrEndpointClientSideException('execution reverted') } : {}),
});
const group = (votes: Vote[]): Group => ({ hash: votes[0]!.hash, votes, empty: false, isError: votes[0]!.error !== undefined, size: 10 });
/** A decision whose winning group is `votes`, over the groups of every vote of the round. */
const won = (winners: Vote[], all: Vote[]) => ({ winningGroup: group(winners), groups: groupsOf(all) });
/** A decision without a winner (a dispute or too few participants). */
const noWinner = (all: Vote[]) => ({ groups: groupsOf(all) });
function groupsOf(votes: Vote[]): Group[] {
  const by = new Map<string, Vote[]>();
  for (const v of votes) by.set(v.hash, [...(by.get(v.hash) ?? []), v]);
  return [...by.values()].map(group);
}

describe('consensus: misbehaviour record (misbehaviorRate)', () => {
  let now = 1_000_000;
  const record = () => new MisbehaviorRecord(() => now);
  const ups = (...ids: string[]) => ids.map((id) => ({ id }) as Upstream);
  const [A, B, C] = ups('a', 'b', 'c');
  const all = [A!, B!, C!];
  // A 60 s health window in 10 buckets of 6 s, on the same clock.
  const project = () => ({ health: new HealthTracker(healthOutcome, 60_000, 10, () => now) }) as unknown as Project;
  /** `n` answered requests of `upstream` for `method` in the project's health window. */
  const requests = (p: Project, upstream: string, method: string, n: number) => {
    for (let i = 0; i < n; i++) {
      p.health.record({ upstreamId: upstream, method, outcome: 'success', dialled: true, durationMs: 5, startedAt: now } as AttemptRecord);
    }
  };
  beforeEach(() => (now = 1_000_000));

  it("the rate is misbehaviours over the upstream's requests in the same health cell, per method and for `*`", () => {
    const r = record();
    const p = project();
    requests(p, 'c', 'eth_call', 4);
    requests(p, 'c', 'eth_getBalance', 6);
    const [a, b, c] = [vote('a', 'x'), vote('b', 'x'), vote('c', 'y')];
    r.record(p, won([a, b], [a, b, c]), [a, b, c], 'eth_call', all);
    r.record(p, won([a, b], [a, b, c]), [a, b, c], 'eth_call', all);
    const agreeing = vote('c', 'x');
    r.record(p, won([a, agreeing], [a, agreeing]), [a, agreeing], 'eth_getBalance', all);
    expect(r.counts(p, C!, 'eth_call')).to.deep.equal({ rounds: 2, misbehaviors: 2, requests: 4, rate: 0.5 });
    expect(r.counts(p, C!, 'eth_getBalance')).to.deep.equal({ rounds: 1, misbehaviors: 0, requests: 6, rate: 0 });
    expect(r.counts(p, C!)).to.deep.equal({ rounds: 3, misbehaviors: 2, requests: 10, rate: 0.2 });
    expect(r.counts(p, A!)).to.deep.include({ rounds: 3, misbehaviors: 0, rate: 0 });
    // Without requests in the window there is no rate (a share of nothing).
    expect(r.counts(p, B!, 'eth_call')).to.deep.equal({ rounds: 2, misbehaviors: 0, requests: 0, rate: 0 });
  });

  it('a round an error group won blames nobody: a data answer that differs from an error is no misbehaviour', () => {
    const r = record();
    const p = project();
    requests(p, 'c', 'eth_call', 1);
    const [ea, eb, c] = [vote('a', 'jsonrpc:3', true), vote('b', 'jsonrpc:3', true), vote('c', 'y')];
    r.record(p, won([ea, eb], [ea, eb, c]), [ea, eb, c], 'eth_call', all);
    expect(r.counts(p, C!, 'eth_call')).to.deep.include({ rounds: 1, misbehaviors: 0, rate: 0 });
  });

  it('an error vote that differs from the data winner is no misbehaviour', () => {
    const r = record();
    const p = project();
    requests(p, 'b', 'eth_call', 1);
    const a = vote('a', 'x');
    const eb = vote('b', 'jsonrpc:3', true);
    r.record(p, won([a], [a, eb]), [a, eb], 'eth_call', all);
    expect(r.counts(p, B!, 'eth_call')).to.deep.include({ rounds: 1, misbehaviors: 0 });
  });

  it('a round without a winner judges against its largest group (the minority misbehaved); a tie blames nobody', () => {
    const r = record();
    const p = project();
    requests(p, 'c', 'eth_call', 2);
    requests(p, 'b', 'eth_call', 2);
    const [a, b, c] = [vote('a', 'x'), vote('b', 'x'), vote('c', 'y')];
    r.record(p, noWinner([a, b, c]), [a, b, c], 'eth_call', all);
    expect(r.counts(p, C!, 'eth_call')).to.deep.include({ misbehaviors: 1, rate: 0.5 });
    expect(r.counts(p, B!, 'eth_call')).to.deep.include({ misbehaviors: 0 });
    const [a2, b2] = [vote('a', 'x'), vote('b', 'y')];
    r.record(p, noWinner([a2, b2]), [a2, b2], 'eth_call', all);
    expect(r.counts(p, B!, 'eth_call')).to.deep.include({ rounds: 2, misbehaviors: 0 });
    expect(consensusGroup(noWinner([a2, b2]))).to.equal(undefined);
  });

  it('a winner refused for its minAgreement composition blames nobody (its majority is the untrusted side)', () => {
    const r = record();
    const p = project();
    requests(p, 'c', 'eth_call', 1);
    const votes = [vote('a', 'x'), vote('b', 'x'), vote('c', 'y')];
    const cfg = { agreementThreshold: 2, disputeBehavior: 'returnError', lowParticipantsBehavior: 'returnError' } as never;
    const d = decide({ votes, infraErrors: [], cfg, participants: 3, agreementShortfall: () => 'has 0 upstreams tagged tier:trusted' });
    expect(d).to.deep.include({ outcome: 'dispute', composition: true });
    r.record(p, d, votes, 'eth_call', all);
    expect(r.counts(p, C!, 'eth_call')).to.deep.include({ rounds: 1, misbehaviors: 0 });
  });

  it('an upstream with several slots in one round counts one round', () => {
    const r = record();
    const p = project();
    requests(p, 'b', 'eth_call', 2);
    const a = vote('a', 'x');
    const bs = [vote('b', 'y'), vote('b', 'y')];
    r.record(p, won([a], [a, ...bs]), [a, ...bs], 'eth_call', all);
    expect(r.counts(p, B!, 'eth_call')).to.deep.equal({ rounds: 1, misbehaviors: 1, requests: 2, rate: 0.5 });
  });

  it("ages out with the project's health window, bucket by bucket", () => {
    const r = record();
    const p = project();
    const a = vote('a', 'x');
    const by = vote('b', 'y');
    r.record(p, won([a], [a, by]), [a, by], 'eth_call', all);
    now += 30_000;
    const bx = vote('b', 'x');
    r.record(p, won([a, bx], [a, bx]), [a, bx], 'eth_call', all);
    expect(r.counts(p, B!)).to.deep.include({ rounds: 2, misbehaviors: 1 });
    now += 31_000;
    expect(r.counts(p, B!)).to.deep.include({ rounds: 1, misbehaviors: 0 });
    now += 60_000;
    expect(r.counts(p, B!)).to.deep.include({ rounds: 0, misbehaviors: 0 });
  });

  it('keyed by the Upstream object: a replacement under the same id starts clean; forget drops an upstream', () => {
    const r = record();
    const p = project();
    requests(p, 'b', 'eth_call', 1);
    const a = vote('a', 'x');
    const by = vote('b', 'y');
    r.record(p, won([a], [a, by]), [a, by], 'eth_call', all);
    expect(r.counts(p, B!).misbehaviors).to.equal(1);
    const [successor] = ups('b');
    expect(r.counts(p, successor!)).to.deep.include({ rounds: 0, misbehaviors: 0, rate: 0 });
    r.forget(B!);
    expect(r.counts(p, B!)).to.deep.include({ rounds: 0, misbehaviors: 0 });
  });

  it('a vote of an upstream not among the participants is not recorded', () => {
    const r = record();
    const p = project();
    const a = vote('a', 'x');
    const z = vote('z', 'y');
    r.record(p, won([a], [a, z]), [a, z], 'eth_call', all);
    expect(r.counts(p, A!).rounds).to.equal(1);
  });

  it('a config reload that removes an upstream drops its record; one it changes comes back clean under the same id', async function () {
    this.timeout(10_000);
    const cfg = (upstreams: Array<{ id: string; endpoint: string }>) => ({
      logLevel: 'error',
      server: { maxTimeout: '1s' },
      projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: upstreams.map((u) => ({ ...u, evm: { chainId: 1 } })) }],
    });
    let current = cfg([
      { id: 'a', endpoint: 'http://127.0.0.1:9' },
      { id: 'b', endpoint: 'http://127.0.0.1:9' },
    ]);
    const proxy = createProxy({ config: current, plugins: defaultPreset(), logger: createLogger('silent'), port: 0, host: '127.0.0.1', metricsPort: 0 });
    await proxy.start();
    try {
      proxy.setConfigSource(() => validateConfig({ config: structuredClone(current), plugins: defaultPreset() }));
      const project = proxy.projects.get('main')!;
      const service = proxy.services.get(CONSENSUS_MISBEHAVIOR_SERVICE) as MisbehaviorRecord;
      const [oldA, oldB] = [project.upstreams.get('a')!, project.upstreams.get('b')!];
      const [va, vb, vc] = [vote('c', 'x'), vote('a', 'y'), vote('b', 'y')];
      // Both lose a round to a third participant.
      service.record(project, won([va], [va, vb, vc]), [va, vb, vc], 'eth_call', [oldA, oldB, { id: 'c' } as Upstream]);
      expect(service.counts(project, oldA).misbehaviors).to.equal(1);
      expect(service.counts(project, oldB).misbehaviors).to.equal(1);
      current = cfg([{ id: 'a', endpoint: 'http://127.0.0.2:9' }]);
      await proxy.reloadConfig();
      const newA = project.upstreams.get('a')!;
      expect(newA).to.not.equal(oldA);
      expect(service.counts(project, newA)).to.deep.include({ rounds: 0, misbehaviors: 0, rate: 0 });
      expect(service.counts(project, oldA)).to.deep.include({ rounds: 0, misbehaviors: 0 });
      expect(service.counts(project, oldB)).to.deep.include({ rounds: 0, misbehaviors: 0 });
    } finally {
      await proxy.close();
    }
  });
});
