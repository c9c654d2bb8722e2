/**
 * Linear-time wildcard matching: patterns compile to RE2 (re2js), so a crafted
 * subject against a many-wildcard pattern costs time linear in its length. The 50 ms bound is
 * the acceptance figure for a 2 KB subject; the same input froze a backtracking matcher
 * for minutes.
 */
import { expect } from 'chai';
import { compileGlobs } from '../../../lib/glob.ts';
import { compileMatcher } from '../../../lib/matcher.ts';
import { BoundedLabel, MAX_LABEL_LENGTH } from '../../../lib/labels.ts';

describe('glob', () => {
  it('`*` matches any run (including `/`, `:` and `.`), `?` one character, the rest is literal', () => {
    const t = compileGlobs(['debug_*', 'eth_get?lock']);
    expect(t('debug_traceTransaction')).to.equal(true);
    expect(t('debug_')).to.equal(true);
    expect(t('xdebug_trace')).to.equal(false);
    expect(t('eth_getBlock')).to.equal(true);
    expect(t('eth_getblockx')).to.equal(false);
    expect(compileGlobs('a.c')('abc')).to.equal(false);
    expect(compileGlobs('http://*:8545/*')('http://10.0.0.1:8545/rpc')).to.equal(true);
    expect(compileGlobs('*')('')).to.equal(true);
    expect(compileGlobs([])('x')).to.equal(false);
    expect(compileGlobs('*.Example.com', { nocase: true })('rpc.example.COM')).to.equal(true);
  });

  it("the probe's 8-wildcard pattern against a 2 KB subject answers within 50 ms", () => {
    const t = compileGlobs('*a*b*c*d*e*f*g*h*');
    const subject = 'a'.repeat(2048);
    const start = performance.now();
    expect(t(subject)).to.equal(false);
    expect(performance.now() - start).to.be.below(50);
  });

  it('`eth_*_legacy_*` against a crafted 480 KB method is linear (well under a second)', () => {
    const t = compileGlobs('eth_*_legacy_*');
    const subject = `eth_${'_legacy'.repeat(80_000)}x`;
    const start = performance.now();
    t(subject);
    expect(performance.now() - start).to.be.below(1000);
  });

  it('matcher expressions (use-upstream, allowClientDirectives) go through the same engine', () => {
    const m = compileMatcher('*a*b*c*d*e*f*g*h* | tier:*');
    const start = performance.now();
    expect(m.test('a'.repeat(2048))).to.equal(false);
    expect(m.test('x', ['tier:primary'])).to.equal(true);
    expect(performance.now() - start).to.be.below(50);
  });
});

describe('bounded metric labels', () => {
  it(`cuts every value to ${MAX_LABEL_LENGTH} characters and caps distinct values`, () => {
    const l = new BoundedLabel(2);
    expect(l.value('x'.repeat(1_000_000))).to.equal('x'.repeat(MAX_LABEL_LENGTH));
    expect(l.value('y')).to.equal('y');
    expect(l.value('z')).to.equal('other');
    expect(l.value(`${'x'.repeat(MAX_LABEL_LENGTH)}different-tail`)).to.equal('x'.repeat(MAX_LABEL_LENGTH));
  });
});
