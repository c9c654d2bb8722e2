/**
 * scanTopLevelMembers (spec §4.2, one parse, one truth): an upstream answer's top-level names are
 * checked for duplicates, escapes decoded as JSON.parse decodes them, and the wanted value's range
 * is the one JSON.parse reads.
 */
import { expect } from 'chai';
import { scanTopLevelMembers } from '../../../lib/json-scan.ts';

describe('json-scan: scanTopLevelMembers', () => {
  it('finds the range of the wanted member in a well-formed answer', () => {
    const text = '{"jsonrpc":"2.0","id":7,"result":{"a":[1,2,"x"]}}';
    const r = scanTopLevelMembers(text, 'result');
    expect(r.duplicate).to.equal(undefined);
    expect(text.slice(...(r.at as [number, number]))).to.equal('{"a":[1,2,"x"]}');
  });

  it('reports a top-level name given twice, plain or spelled with escapes', () => {
    expect(scanTopLevelMembers('{"id":1,"result":"0x1","result":"0x2"}', 'result')).to.deep.equal({ duplicate: 'result', at: undefined });
    expect(scanTopLevelMembers('{"id":1,"result":"0x1","res\\u0075lt":"0x2"}', 'result').duplicate).to.equal('result');
    expect(scanTopLevelMembers('{"id":1,"id":2,"result":"0x1"}', 'result').duplicate).to.equal('id');
  });

  it('does not take a nested name, nor a name inside a string, for a top-level one', () => {
    const text = '{"id":1,"result":{"result":"x","s":"\\"result\\":1"}}';
    const r = scanTopLevelMembers(text, 'result');
    expect(r.duplicate).to.equal(undefined);
    expect(JSON.parse(text.slice(...(r.at as [number, number])))).to.deep.equal(JSON.parse(text).result);
  });

  it('a single escaped name is the member JSON.parse reads', () => {
    const text = '{"id":1,"res\\u0075lt":"0xab"}';
    const r = scanTopLevelMembers(text, 'result');
    expect(text.slice(...(r.at as [number, number]))).to.equal('"0xab"');
  });

  it('caps the reported name', () => {
    const long = 'k'.repeat(500);
    expect(scanTopLevelMembers(`{"${long}":1,"${long}":2}`, 'result').duplicate).to.have.length(65);
  });
});
