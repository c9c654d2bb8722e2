/**
 * Canonical answers (lib/canonical.ts): the hash consensus groups by and shadow
 * comparisons use ignores key order, number formatting, hex letter case and leading zeros of
 * quantities, and the method's ignored fields; never the raw bytes.
 */
import { expect } from 'chai';
import { canonicalHash, canonicalize, compileIgnorePaths, DEFAULT_IGNORE_FIELDS, firstDifference, isEmptyResult } from '../../../lib/canonical.ts';

describe('core: canonical answer hashing', () => {
  it('key order, hex case and quantity zeros do not matter; values do', () => {
    expect(canonicalHash(JSON.parse('{"b":"0xAB","a":[1.0,"0x01"]}'))).to.equal(canonicalHash({ a: [1, '0x1'], b: '0xab' }));
    expect(canonicalHash({ a: '0x1' })).to.not.equal(canonicalHash({ a: '0x2' }));
  });

  it('hashes and addresses keep their length (leading zeros are data there)', () => {
    const hash = `0x00${'ab'.repeat(31)}`;
    expect(canonicalize(hash)).to.equal(hash);
    expect(canonicalize(`0x00${'AB'.repeat(19)}`)).to.equal(`0x00${'ab'.repeat(19)}`);
  });

  it('the default ignore fields drop blockTimestamp from logs and receipts', () => {
    const logs = compileIgnorePaths(DEFAULT_IGNORE_FIELDS.eth_getLogs);
    expect(canonicalHash([{ logIndex: '0x1', blockTimestamp: '0x5' }], logs)).to.equal(canonicalHash([{ logIndex: '0x1' }], logs));
    const receipt = compileIgnorePaths(DEFAULT_IGNORE_FIELDS.eth_getTransactionReceipt);
    const r = (t: string) => ({ status: '0x1', blockTimestamp: t, logs: [{ data: '0x', blockTimestamp: t }] });
    expect(canonicalHash(r('0x1'), receipt)).to.equal(canonicalHash(r('0x2'), receipt));
    expect(canonicalHash(r('0x1'))).to.not.equal(canonicalHash(r('0x2')));
  });

  it('emptiness and the first differing field', () => {
    for (const e of [null, [], {}, '0x', '']) expect(isEmptyResult(e)).to.equal(true);
    for (const e of ['0x0', [0], { a: 1 }, false]) expect(isEmptyResult(e)).to.equal(false);
    expect(firstDifference(canonicalize({ a: { b: [1, 2] } }), canonicalize({ a: { b: [1, 3] } }))).to.equal('$.a.b[1]');
    expect(firstDifference(canonicalize({ a: 1 }), canonicalize({ a: 1 }))).to.equal(undefined);
  });
});
