/**
 * The primary's store of claims for every worker (lib/cluster.ts `PrimaryClaims`, the memory
 * SIWE nonce store of `server.workers`): one ClaimSet per scope, malformed messages dropped.
 */
import { expect } from 'chai';
import { claimInPrimary, PrimaryClaims } from '../../../lib/cluster.ts';

describe('PrimaryClaims: one record of used ids for every worker', () => {
  const ask = (claims: PrimaryClaims, m: unknown): unknown[] => {
    const answers: unknown[] = [];
    const handled = claims.handle(m, (a) => answers.push(a));
    return handled ? answers : ['not a claim'];
  };

  it('an id is claimed once per scope, whichever worker asks; scopes are separate', () => {
    const claims = new PrimaryClaims();
    const m = (n: number, scope: string) => ({ svcClaim: n, scope, id: 'abc', ttlMs: 60_000, maxItems: 10 });
    expect(ask(claims, m(1, 's1'))).to.deep.equal([{ svcClaimAnswer: 1, outcome: 'claimed' }]);
    expect(ask(claims, m(1, 's1'))).to.deep.equal([{ svcClaimAnswer: 1, outcome: 'taken' }]);
    expect(ask(claims, m(2, 's2'))).to.deep.equal([{ svcClaimAnswer: 2, outcome: 'claimed' }]);
  });

  it('full of live ids, a scope refuses new ones (full) rather than forgetting one', () => {
    const claims = new PrimaryClaims();
    const m = (id: string) => ({ svcClaim: 1, scope: 's', id, ttlMs: 60_000, maxItems: 2 });
    ask(claims, m('a'));
    ask(claims, m('b'));
    expect(ask(claims, m('c'))).to.deep.equal([{ svcClaimAnswer: 1, outcome: 'full' }]);
    expect(ask(claims, m('a'))).to.deep.equal([{ svcClaimAnswer: 1, outcome: 'taken' }]);
  });

  it('other messages are not claims; malformed claims are dropped unanswered', () => {
    const claims = new PrimaryClaims();
    expect(ask(claims, { svcBroadcast: 'admin', payload: {} })).to.deep.equal(['not a claim']);
    expect(ask(claims, null)).to.deep.equal(['not a claim']);
    for (const bad of [{ scope: 1 }, { id: 'x'.repeat(5000) }, { ttlMs: -1 }, { maxItems: 0 }, { maxItems: 1.5 }]) {
      expect(ask(claims, { svcClaim: 1, scope: 's', id: 'i', ttlMs: 1000, maxItems: 5, ...bad }), JSON.stringify(bad)).to.deep.equal([]);
    }
  });

  it("outside svc's workers claimInPrimary refuses (the caller uses its own store)", async () => {
    let err: unknown;
    await claimInPrimary('s', 'i', 1000, 5, 100).catch((e: unknown) => (err = e));
    expect(String(err)).to.match(/not one of svc's workers/);
  });
});
