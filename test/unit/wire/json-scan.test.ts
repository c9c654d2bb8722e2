/**
 * The raw scans behind the JSON-RPC wire rules (lib/json-scan.ts; spec §4.1 ids as sent, §4.2
 * batches, "one parse, one truth"): exact offsets, depths and findings, with every JSON blank
 * (space, tab, CR, LF), escaped quotes and backslash runs, and the bounds on reported names.
 */
import { expect } from 'chai';
import {
  arrayElements,
  extractTopLevelValue,
  findTopLevelValue,
  MAX_REPORTED_NAME,
  nestingDepth,
  scanAnswer,
  scanMembers,
  skipWs,
} from '../../../lib/json-scan.ts';

describe('wire: JSON scans (lib/json-scan.ts)', () => {
  describe('skipWs', () => {
    it('skips exactly the four JSON blanks', () => {
      expect(skipWs(' \t\r\n{', 0)).to.equal(4);
      expect(skipWs('x \t', 1)).to.equal(3);
      expect(skipWs('\u00a0{', 0)).to.equal(0);
      expect(skipWs('\f{', 0)).to.equal(0);
      expect(skipWs('{', 0)).to.equal(0);
    });
  });

  describe('findTopLevelValue / extractTopLevelValue', () => {
    it('exact [start, end) offsets, from a given start', () => {
      const text = 'xx{"a":1,"b":[2,3]}';
      expect(findTopLevelValue(text, 'b', 2)).to.deep.equal([13, 18]);
      expect(findTopLevelValue(text, 'a', 2)).to.deep.equal([7, 8]);
      expect(findTopLevelValue(text, 'a')).to.equal(undefined);
    });

    it('a key that only starts like the wanted one does not match', () => {
      expect(extractTopLevelValue('{"results":1,"result":2}', 'result')).to.equal('2');
      expect(extractTopLevelValue('{"resul":1,"result":2}', 'result')).to.equal('2');
      expect(extractTopLevelValue('{"result":2}', 'resul')).to.equal(undefined);
    });

    it('every blank around members and values', () => {
      const text = '{\t"a"\r:\n"x"\t,\r\n"b" : \t7\n}';
      expect(extractTopLevelValue(text, 'a')).to.equal('"x"');
      expect(extractTopLevelValue(text, 'b')).to.equal('7');
    });

    it('a scalar value ends at the first blank, comma or closing bracket', () => {
      expect(extractTopLevelValue('{"a":12\t,"b":0}', 'a')).to.equal('12');
      expect(extractTopLevelValue('{"a":true\r}', 'a')).to.equal('true');
      expect(extractTopLevelValue('{"a":[1,-2.5e3]}', 'a')).to.equal('[1,-2.5e3]');
      expect(extractTopLevelValue('{"a":null}', 'a')).to.equal('null');
    });

    it('strings ending in escaped backslashes, and escaped quotes, are skipped exactly', () => {
      const text = '{"a":"x\\\\","b":"y\\"}\\\\\\"z","c":3}';
      expect(extractTopLevelValue(text, 'a')).to.equal('"x\\\\"');
      expect(extractTopLevelValue(text, 'b')).to.equal('"y\\"}\\\\\\"z"');
      expect(extractTopLevelValue(text, 'c')).to.equal('3');
    });

    it('malformed member lists stop the search', () => {
      expect(findTopLevelValue('{"a" 1,"b":2}', 'b')).to.equal(undefined);
      expect(findTopLevelValue('{"a":1 "b":2}', 'b')).to.equal(undefined);
      expect(findTopLevelValue('{a:1}', 'a')).to.equal(undefined);
      expect(findTopLevelValue('{"a":{"b":1', 'a')).to.deep.equal([5, 11]);
      expect(findTopLevelValue('{"a":"unterminated', 'a')).to.deep.equal([5, 18]);
    });
  });

  describe('nestingDepth', () => {
    it('a scalar is 0, {} and [] are 1, each level adds one; brackets in strings do not count', () => {
      expect(nestingDepth('"[[{"', 10)).to.equal(0);
      expect(nestingDepth('7', 10)).to.equal(0);
      expect(nestingDepth('{}', 10)).to.equal(1);
      expect(nestingDepth('[]', 10)).to.equal(1);
      expect(nestingDepth('{"a":[{"b":"]]]}}"}],"c":[1]}', 10)).to.equal(3);
      expect(nestingDepth('[[1],[2],[3]]', 10)).to.equal(2);
    });

    it('at the limit: the depth; past it: limit + 1', () => {
      expect(nestingDepth('[[[]]]', 3)).to.equal(3);
      expect(nestingDepth('[[[[]]]]', 3)).to.equal(4);
      expect(nestingDepth('['.repeat(1000), 5)).to.equal(6);
    });
  });

  describe('arrayElements', () => {
    it('text, start offset and depth of each element, blanks around them skipped', () => {
      const text = '[ {"a":[1,{"b":2}]} ,\t"s]" ,\n7\r, [ ] ,{"x":"}{"}]';
      expect(arrayElements(text)).to.deep.equal([
        { text: '{"a":[1,{"b":2}]}', start: 2, depth: 3 },
        { text: '"s]"', start: 22, depth: 0 },
        { text: '7', start: 29, depth: 0 },
        { text: '[ ]', start: 33, depth: 1 },
        { text: '{"x":"}{"}', start: 38, depth: 1 },
      ]);
    });

    it('an empty array (blanks inside) has no elements; a non-array none either', () => {
      expect(arrayElements('[]')).to.deep.equal([]);
      expect(arrayElements(' [ \n ] ')).to.deep.equal([]);
      expect(arrayElements('{"a":1}')).to.deep.equal([]);
    });

    it('an unterminated element ends at the text end', () => {
      expect(arrayElements('[{"a":[1')).to.deep.equal([{ text: '{"a":[1', start: 1, depth: 2 }]);
    });
  });

  describe('scanMembers', () => {
    it('a request with distinct names and plain numbers: nothing found', () => {
      expect(scanMembers('{"jsonrpc":"2.0","id":1,"method":"m","params":[{"a":1,"b":[2,{"a":3}]},-4]}')).to.deep.equal({ lossyNumber: false });
    });

    it('a top-level duplicate (names decoded) is reported as top level', () => {
      expect(scanMembers('{"id":1,"method":"m","id":2}')).to.deep.equal({ duplicate: 'id', topLevel: true, lossyNumber: false });
      expect(scanMembers('{"id":1,"\\u0069d":2}')).to.deep.equal({ duplicate: 'id', topLevel: true, lossyNumber: false });
    });

    it('a duplicate inside a value is not top level; the same name in sibling objects is no duplicate', () => {
      expect(scanMembers('{"params":[{"a":1,"a":2}]}')).to.deep.equal({ duplicate: 'a', topLevel: false, lossyNumber: false });
      expect(scanMembers('{"params":{"x":{"a":1},"y":{"a":2}}}')).to.deep.equal({ lossyNumber: false });
      expect(scanMembers('{"params":["a","a"],"x":"a"}')).to.deep.equal({ lossyNumber: false });
    });

    it('after an array closes, the next name is read as a name again', () => {
      expect(scanMembers('{"p":[1,2],"q":[3],"p":0}')).to.deep.equal({ duplicate: 'p', topLevel: true, lossyNumber: false });
      expect(scanMembers('{"p":{"a":1},"p":0}')).to.deep.equal({ duplicate: 'p', topLevel: true, lossyNumber: false });
    });

    it('string values are not names', () => {
      expect(scanMembers('{"a":"b","b":"a"}')).to.deep.equal({ lossyNumber: false });
    });

    it('numbers whose text does not survive a parse are lossy (1.0, 1e3, beyond 2^53); the finding is kept', () => {
      for (const n of ['1.0', '1e3', '9007199254740993', '-0.50']) expect(scanMembers(`{"params":[${n}]}`).lossyNumber, n).to.equal(true);
      for (const n of ['1', '-5', '0.5', '9007199254740991']) expect(scanMembers(`{"params":[${n}]}`).lossyNumber, n).to.equal(false);
      expect(scanMembers('{"params":[1.0,2],"id":1,"id":2}')).to.deep.equal({ duplicate: 'id', topLevel: true, lossyNumber: true });
      expect(scanMembers('{"params":[1.0,2,3]}').lossyNumber).to.equal(true);
    });

    it('objects with many members (past the small-array bound) still find a duplicate', () => {
      const members = Array.from({ length: 20 }, (_, i) => `"k${i}":${i}`).join(',');
      expect(scanMembers(`{${members},"k0":1}`).duplicate).to.equal('k0');
      expect(scanMembers(`{${members},"k19":1}`).duplicate).to.equal('k19');
      expect(scanMembers(`{${members}}`).duplicate).to.equal(undefined);
      // After such an object closes, the enclosing object's names are still checked.
      expect(scanMembers(`{"p":{${members}},"p":0}`)).to.deep.equal({ duplicate: 'p', topLevel: true, lossyNumber: false });
    });

    it(`a duplicated name longer than ${MAX_REPORTED_NAME} characters is cut to ${MAX_REPORTED_NAME} and an ellipsis`, () => {
      const long = 'n'.repeat(MAX_REPORTED_NAME + 1);
      expect(scanMembers(`{"${long}":1,"${long}":2}`).duplicate).to.equal(`${'n'.repeat(MAX_REPORTED_NAME)}…`);
      const exact = 'm'.repeat(MAX_REPORTED_NAME);
      expect(scanMembers(`{"${exact}":1,"${exact}":2}`).duplicate).to.equal(exact);
    });

    it('a name with an escape that is not valid JSON is compared as written', () => {
      expect(scanMembers('{"a\\q":1,"a\\q":2}').duplicate).to.equal('a\\q');
    });
  });

  describe('scanAnswer', () => {
    it(`a duplicated name is cut to ${MAX_REPORTED_NAME} characters and an ellipsis`, () => {
      const long = 'r'.repeat(MAX_REPORTED_NAME + 1);
      expect(scanAnswer(`{"${long}":1,"${long}":2}`).duplicate).to.equal(`${'r'.repeat(MAX_REPORTED_NAME)}…`);
      const exact = 's'.repeat(MAX_REPORTED_NAME);
      expect(scanAnswer(`{"${exact}":1,"${exact}":2}`).duplicate).to.equal(exact);
    });

    it('exact result offsets; no result member: nothing', () => {
      expect(scanAnswer('{"jsonrpc":"2.0","result":[1]}')).to.deep.equal({ result: [26, 29] });
      expect(scanAnswer('{"jsonrpc":"2.0","error":{}}')).to.deep.equal({});
      expect(scanAnswer('[1]')).to.deep.equal({});
    });

    it('a malformed member list stops the walk (the result found so far is kept)', () => {
      expect(scanAnswer('{"result":1 "result":2}')).to.deep.equal({ result: [10, 11] });
      expect(scanAnswer('{"result" 1}')).to.deep.equal({});
    });
  });
});
