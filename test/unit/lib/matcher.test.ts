import { expect } from 'chai';
import { compileMatcher, MatcherCache } from '../../../lib/matcher.ts';

describe('matcher (spec §2.8 allowClientDirectives / use-upstream)', () => {
  it('matches a plain name and a glob', () => {
    expect(compileMatcher('use-upstream').test('use-upstream')).to.equal(true);
    expect(compileMatcher('skip-*').test('skip-cache-read')).to.equal(true);
    expect(compileMatcher('skip-*').test('use-upstream')).to.equal(false);
  });
  it('`*` matches any characters including / and : (upstream ids contain URLs)', () => {
    const m = compileMatcher('https*');
    expect(m.test('https://rpc.example.com/v1/key')).to.equal(true);
    expect(compileMatcher('*127.0.0.1:8545*').test('http://127.0.0.1:8545/')).to.equal(true);
  });
  it('`!a & !b` allows everything except a and b', () => {
    const m = compileMatcher('!skip-cache-read & !use-upstream');
    expect(m.test('retry-empty')).to.equal(true);
    expect(m.test('skip-cache-read')).to.equal(false);
    expect(m.test('use-upstream')).to.equal(false);
  });
  it('`|` is alternation and `&` binds tighter', () => {
    const m = compileMatcher('a | b & !c');
    expect(m.test('a')).to.equal(true);
    expect(m.test('b')).to.equal(true);
    expect(m.test('c')).to.equal(false);
  });
  it('positive terms also match alternates (tags); negated terms only the primary (id)', () => {
    const pos = compileMatcher('tier:primary');
    expect(pos.test('node-1', ['tier:primary'])).to.equal(true);
    expect(pos.test('node-1', ['tier:fallback'])).to.equal(false);
    const neg = compileMatcher('!tier:primary');
    // the tag is ignored by a negated term: the id does not match, so the negation holds
    expect(neg.test('node-1', ['tier:primary'])).to.equal(true);
    expect(compileMatcher('!node-*').test('node-1', ['x:y'])).to.equal(false);
  });
  it('an empty expression matches nothing', () => {
    expect(compileMatcher('').test('anything')).to.equal(false);
  });
  it('the cache is bounded', () => {
    const c = new MatcherCache(2);
    const a = c.get('a');
    c.get('b');
    c.get('c');
    expect(c.get('a')).to.not.equal(a);
  });
});
