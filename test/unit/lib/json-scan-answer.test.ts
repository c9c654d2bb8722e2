/**
 * scanAnswer (lib/json-scan.ts): the one walk over an upstream answer's top-level members that
 * finds a member given twice (names decoded, as `JSON.parse` reads them) and where the parsed
 * `result` lies, so the bytes served are the value that was voted on (spec §4.2).
 */
import { expect } from 'chai';
import { scanAnswer } from '../../../lib/json-scan.ts';

describe('scanAnswer: top-level members of an upstream answer (spec §4.2)', () => {
  const at = (text: string) => {
    const r = scanAnswer(text).result;
    return r ? text.slice(r[0], r[1]) : undefined;
  };

  it('a plain answer: no duplicate, the result range is the parsed result', () => {
    const text = ' { "jsonrpc" : "2.0", "id":7, "result" : {"a":[1,"}"],"b":"x\\"y"} } ';
    expect(scanAnswer(text).duplicate).to.equal(undefined);
    expect(JSON.parse(at(text) as string)).to.deep.equal((JSON.parse(text) as { result: unknown }).result);
  });

  it('"result" twice, or once plainly and once with \\u escapes, is a duplicate', () => {
    expect(scanAnswer('{"jsonrpc":"2.0","id":1,"result":"0x1","result":"0x2"}').duplicate).to.equal('result');
    expect(scanAnswer('{"jsonrpc":"2.0","id":1,"result":{"x":1},"res\\u0075lt":"0x2"}').duplicate).to.equal('result');
    expect(scanAnswer('{"jsonrpc":"2.0","id":1,"id":2,"result":"0x1"}').duplicate).to.equal('id');
    expect(scanAnswer('{"jsonrpc":"2.0","\\u006asonrpc":"1.0","id":1,"result":"0x1"}').duplicate).to.equal('jsonrpc');
    expect(scanAnswer('{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"a"},"error":{"code":2,"message":"b"}}').duplicate).to.equal('error');
  });

  it('a result spelled only with escapes is found where JSON.parse read it', () => {
    expect(at('{"jsonrpc":"2.0","id":1,"r\\u0065sult":[1,2]}')).to.equal('[1,2]');
  });

  it('names repeated inside the result are not top-level duplicates', () => {
    const text = '{"jsonrpc":"2.0","id":1,"result":{"result":1,"id":2,"inner":{"result":3}}}';
    expect(scanAnswer(text).duplicate).to.equal(undefined);
    expect(at(text)).to.equal('{"result":1,"id":2,"inner":{"result":3}}');
  });

  it('many members (past the small-array bound) still find a late duplicate', () => {
    const members = Array.from({ length: 40 }, (_, i) => `"m${i}":${i}`).join(',');
    expect(scanAnswer(`{${members},"result":1,"m3":0}`).duplicate).to.equal('m3');
    expect(scanAnswer(`{${members},"result":1}`).duplicate).to.equal(undefined);
  });

  it('a long duplicated name is cut in the report', () => {
    const name = 'n'.repeat(500);
    expect(scanAnswer(`{"${name}":1,"${name}":2}`).duplicate).to.have.length.lessThan(70);
  });
});
