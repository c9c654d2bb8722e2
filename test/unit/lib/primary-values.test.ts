/**
 * The primary's values for `server.workers` (lib/primary-values.ts), driven as the primary drives
 * it: messages in, answers out. Values expire after their TTL, a claim is taken once until it
 * expires, a delete says whether the key was there, and a malformed or oversized message gets an
 * error answer (never a throw in the primary); messages that are not value operations are left
 * to the other handlers.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { MAX_PRIMARY_KEY_LENGTH, MAX_PRIMARY_VALUE_LENGTH, PrimaryValueStore } from '../../../lib/primary-values.ts';

describe('lib/primary-values: values the primary keeps for every worker', () => {
  let now = 1_000;
  let store: PrimaryValueStore;
  let answers: unknown[];
  const send = (m: Record<string, unknown>) => {
    answers = [];
    const handled = store.handle({ svcValues: 7, scope: 'filters', ...m }, (a) => answers.push(a));
    return { handled, answer: answers[0] as { svcValuesAnswer: number; value?: string; done?: boolean; error?: string } };
  };

  beforeEach(() => {
    now = 1_000;
    store = new PrimaryValueStore(() => now);
  });

  it('set then get answers the value under the request number; it is gone after its TTL', () => {
    expect(send({ op: 'set', key: 'k', value: 'v1', ttlMs: 100 }).answer).to.deep.equal({ svcValuesAnswer: 7, done: true });
    expect(send({ op: 'get', key: 'k' }).answer).to.deep.equal({ svcValuesAnswer: 7, value: 'v1' });
    now += 101;
    expect(send({ op: 'get', key: 'k' }).answer).to.deep.equal({ svcValuesAnswer: 7 });
  });

  it('a claim is taken once until it expires; delete says whether the key was there', () => {
    expect(send({ op: 'claim', key: 'lock', ttlMs: 50 }).answer.done).to.equal(true);
    expect(send({ op: 'claim', key: 'lock', ttlMs: 50 }).answer.done).to.equal(false);
    now += 51;
    expect(send({ op: 'claim', key: 'lock', ttlMs: 50 }).answer.done).to.equal(true);
    expect(send({ op: 'delete', key: 'lock' }).answer.done).to.equal(true);
    expect(send({ op: 'delete', key: 'lock' }).answer.done).to.equal(false);
  });

  it('a lock taken with a token is released only with that token (never a claim taken by another after it expired)', () => {
    expect(send({ op: 'claim', key: 'lock', value: 'token-a', ttlMs: 50 }).answer.done).to.equal(true);
    expect(send({ op: 'release', key: 'lock', value: 'token-b' }).answer.done).to.equal(false);
    now += 51;
    expect(send({ op: 'claim', key: 'lock', value: 'token-b', ttlMs: 50 }).answer.done).to.equal(true);
    expect(send({ op: 'release', key: 'lock', value: 'token-a' }).answer.done).to.equal(false);
    expect(send({ op: 'claim', key: 'lock', value: 'token-c', ttlMs: 50 }).answer.done).to.equal(false);
    expect(send({ op: 'release', key: 'lock', value: 'token-b' }).answer.done).to.equal(true);
  });

  it('replace sets a value only while the stored one has the expected SHA-1 (compare-and-set); never a deleted key', () => {
    const sha1 = (v: string) => createHash('sha1').update(v).digest('hex');
    send({ op: 'set', key: 'f', value: 'v1', ttlMs: 1000 });
    expect(send({ op: 'replace', key: 'f', expected: sha1('v0'), value: 'v2', ttlMs: 1000 }).answer.done).to.equal(false);
    expect(send({ op: 'replace', key: 'f', expected: sha1('v1'), value: 'v2', ttlMs: 1000 }).answer.done).to.equal(true);
    expect(send({ op: 'get', key: 'f' }).answer.value).to.equal('v2');
    send({ op: 'delete', key: 'f' });
    expect(send({ op: 'replace', key: 'f', expected: sha1('v2'), value: 'v3', ttlMs: 1000 }).answer.done).to.equal(false);
    expect(send({ op: 'get', key: 'f' }).answer).to.deep.equal({ svcValuesAnswer: 7 });
    expect(send({ op: 'replace', key: 'f', value: 'v3', ttlMs: 1000 }).answer.error).to.be.a('string');
  });

  it('scopes are apart: a key of one scope is not seen in another', () => {
    send({ op: 'set', key: 'k', value: 'x', ttlMs: 1000 });
    answers = [];
    store.handle({ svcValues: 8, scope: 'other', op: 'get', key: 'k' }, (a) => answers.push(a));
    expect(answers).to.deep.equal([{ svcValuesAnswer: 8 }]);
  });

  it('a malformed or oversized operation gets an error answer and stores nothing', () => {
    expect(send({ op: 'set', key: 'k', value: 'v', ttlMs: 0 }).answer.error).to.be.a('string');
    expect(send({ op: 'set', key: 'k', value: 42, ttlMs: 100 }).answer.error).to.be.a('string');
    expect(send({ op: 'set', key: 'k', value: 'x'.repeat(MAX_PRIMARY_VALUE_LENGTH + 1), ttlMs: 100 }).answer.error).to.be.a('string');
    expect(send({ op: 'get', key: 'k'.repeat(MAX_PRIMARY_KEY_LENGTH + 1) }).answer.error).to.be.a('string');
    expect(send({ op: 'claim', key: 'k', ttlMs: Number.NaN }).answer.error).to.be.a('string');
    expect(send({ op: 'drop-all', key: 'k' }).answer.error).to.be.a('string');
    expect(send({ op: 'get', key: 'k' }).answer).to.deep.equal({ svcValuesAnswer: 7 });
  });

  it('messages that are not value operations are not handled (the other handlers take them)', () => {
    for (const m of [null, 'text', { svcClaim: 1 }, { svcBroadcast: 'admin', payload: {} }]) {
      answers = [];
      expect(store.handle(m, (a) => answers.push(a))).to.equal(false);
      expect(answers).to.deep.equal([]);
    }
  });
});
