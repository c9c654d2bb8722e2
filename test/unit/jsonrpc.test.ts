/**
 * JSON-RPC wire handling (core/wire/jsonrpc.ts): inbound parsing keeps the caller's id exactly as
 * sent (spec §4.1/§4.2, issue: "numbers (including integers above 2^53), strings and null"),
 * invalid elements get -32600 with the caller's id, unparsable bodies are
 * ErrJsonRpcRequestUnmarshal (HTTP 400), and results are spliced from the upstream's raw bytes.
 */
import { expect } from 'chai';
import { ErrInvalidRequest, ErrJsonRpcRequestUnmarshal } from '../../core/wire/errors.ts';
import { RpcResult, extractTopLevelValue, parseRequestBody, serializeError, serializeOutbound, serializeResult } from '../../core/wire/jsonrpc.ts';

function expectUnmarshal(body: string): void {
  let thrown: unknown;
  try {
    parseRequestBody(body);
  } catch (e) {
    thrown = e;
  }
  expect(thrown, `body ${JSON.stringify(body)} must not parse`).to.be.instanceOf(ErrJsonRpcRequestUnmarshal);
  const e = thrown as ErrJsonRpcRequestUnmarshal;
  expect(e.name).to.equal('ErrJsonRpcRequestUnmarshal');
  expect(e.httpStatus).to.equal(400);
  expect(e.code).to.equal(-32700);
}

describe('jsonrpc', () => {
  describe('parseRequestBody', () => {
    it('single request', () => {
      const p = parseRequestBody('{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xabc","latest"]}');
      expect(p.batch).to.equal(false);
      expect(p.calls).to.have.length(1);
      const c = p.calls[0]!;
      expect(c.idRaw).to.equal('1');
      expect(c.method).to.equal('eth_getBalance');
      expect(c.params).to.deep.equal(['0xabc', 'latest']);
      expect(c.invalid).to.equal(undefined);
    });

    it('params omitted (viem) and object params are valid', () => {
      expect(parseRequestBody('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}').calls[0]!.params).to.equal(undefined);
      expect(parseRequestBody('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}').calls[0]!.invalid).to.equal(undefined);
      const o = parseRequestBody('{"jsonrpc":"2.0","id":1,"method":"x_named","params":{"a":1}}').calls[0]!;
      expect(o.params).to.deep.equal({ a: 1 });
      expect(o.invalid).to.equal(undefined);
    });

    it('body field networkId is picked up', () => {
      const c = parseRequestBody('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","networkId":"evm:137"}').calls[0]!;
      expect(c.networkId).to.equal('evm:137');
    });

    it('leading whitespace before a single object', () => {
      const p = parseRequestBody(' \n\t{"jsonrpc":"2.0","id":"a","method":"eth_chainId"}');
      expect(p.batch).to.equal(false);
      expect(p.calls[0]!.idRaw).to.equal('"a"');
    });

    it('batch: calls kept in request order', () => {
      const p = parseRequestBody(
        '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":"two","method":"eth_blockNumber","params":[]},{"jsonrpc":"2.0","id":null,"method":"net_version"}]',
      );
      expect(p.batch).to.equal(true);
      expect(p.calls.map((c) => c.method)).to.deep.equal(['eth_chainId', 'eth_blockNumber', 'net_version']);
      expect(p.calls.map((c) => c.idRaw)).to.deep.equal(['1', '"two"', 'null']);
    });

    it('batch with leading whitespace is still a batch', () => {
      expect(parseRequestBody('  \r\n [{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]').batch).to.equal(true);
    });

    it('empty batch: batch with no calls', () => {
      const p = parseRequestBody('[]');
      expect(p.batch).to.equal(true);
      expect(p.calls).to.deep.equal([]);
    });

    it('batch: one invalid element does not spoil the others', () => {
      const p = parseRequestBody('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},42,{"jsonrpc":"2.0","id":3}]');
      expect(p.calls).to.have.length(3);
      expect(p.calls[0]!.invalid).to.equal(undefined);
      expect(p.calls[1]!.invalid).to.be.instanceOf(ErrInvalidRequest);
      expect(p.calls[1]!.idRaw).to.equal('null');
      expect(p.calls[2]!.invalid).to.be.instanceOf(ErrInvalidRequest);
      expect(p.calls[2]!.idRaw).to.equal('3');
    });

    describe('malformed body -> ErrJsonRpcRequestUnmarshal (HTTP 400)', () => {
      for (const body of ['{"jsonrpc":"2.0","id":1,', 'not json', '', '[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},', '[', '{"id":1}}']) {
        it(JSON.stringify(body), () => expectUnmarshal(body));
      }
    });

    describe('invalid request objects -> -32600 with the caller id kept', () => {
      const cases: [string, string, string][] = [
        ['missing jsonrpc', '{"id":7,"method":"eth_chainId"}', '7'],
        ['jsonrpc "1.0"', '{"jsonrpc":"1.0","id":"abc","method":"eth_chainId"}', '"abc"'],
        ['jsonrpc as a number', '{"jsonrpc":2.0,"id":8,"method":"eth_chainId"}', '8'],
        ['missing method', '{"jsonrpc":"2.0","id":"abc"}', '"abc"'],
        ['method not a string', '{"jsonrpc":"2.0","id":9,"method":123}', '9'],
        ['empty method', '{"jsonrpc":"2.0","id":10,"method":""}', '10'],
        ['big id kept on an invalid request', '{"id":12345678901234567890,"method":"eth_chainId"}', '12345678901234567890'],
        ['null id kept', '{"jsonrpc":"2.0","id":null}', 'null'],
      ];
      for (const [name, body, idRaw] of cases) {
        it(name, () => {
          const c = parseRequestBody(body).calls[0]!;
          expect(c.invalid).to.be.instanceOf(ErrInvalidRequest);
          expect(c.invalid!.code).to.equal(-32600);
          expect(c.invalid!.httpStatus).to.equal(400);
          expect(c.idRaw).to.equal(idRaw);
        });
      }

      it('a non-object body (a number, a string) is an invalid request with id null', () => {
        for (const body of ['42', '"eth_chainId"', 'null']) {
          const c = parseRequestBody(body).calls[0]!;
          expect(c.invalid, body).to.be.instanceOf(ErrInvalidRequest);
          expect(c.idRaw).to.equal('null');
        }
      });

      it('params that are neither array nor object are invalid', () => {
        const c = parseRequestBody('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":"x"}').calls[0]!;
        expect(c.invalid).to.be.instanceOf(ErrInvalidRequest);
      });

      it('an id that is an object or array is invalid', () => {
        for (const id of ['{}', '[1]', 'true']) {
          const c = parseRequestBody(`{"jsonrpc":"2.0","id":${id},"method":"eth_chainId"}`).calls[0]!;
          expect(c.invalid, id).to.be.instanceOf(ErrInvalidRequest);
        }
      });
    });

    describe('ids exactly as sent', () => {
      const idCase = (name: string, idText: string, expected = idText) =>
        it(name, () => {
          const single = parseRequestBody(`{"jsonrpc":"2.0","id":${idText},"method":"eth_chainId"}`).calls[0]!;
          expect(single.idRaw).to.equal(expected);
          expect(single.invalid).to.equal(undefined);
          const batch = parseRequestBody(`[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":${idText},"method":"eth_chainId"}]`).calls[1]!;
          expect(batch.idRaw).to.equal(expected);
        });
      idCase('small integer', '1');
      idCase('zero', '0');
      idCase('negative integer', '-5');
      idCase('2^53 + 1 (9007199254740993)', '9007199254740993');
      idCase('integer above 2^53 (12345678901234567890)', '12345678901234567890');
      idCase('negative integer above 2^53', '-98765432109876543210');
      idCase('huge integer (40 digits)', '1234567890123456789012345678901234567890');
      idCase('string', '"req-1"');
      idCase('numeric string', '"12345678901234567890"');
      idCase('string with escaped quote', '"a\\"b"');
      idCase('empty string', '""');
      idCase('null', 'null');
      it('absent id -> null', () => {
        expect(parseRequestBody('{"jsonrpc":"2.0","method":"eth_chainId"}').calls[0]!.idRaw).to.equal('null');
      });
      it('a big id elsewhere in the body does not disturb a small id', () => {
        const c = parseRequestBody('{"jsonrpc":"2.0","id":3,"method":"eth_getBalance","params":["0x12345678901234567890123456789012345678ab", "latest"]}')
          .calls[0]!;
        expect(c.idRaw).to.equal('3');
      });
      it('fractional id text is kept as sent (1.0)', () => {
        // "The response id is the caller's id exactly as sent: numbers ..." (issue text).
        const c = parseRequestBody('{"jsonrpc":"2.0","id":1.0,"method":"eth_chainId"}').calls[0]!;
        expect(c.idRaw).to.equal('1.0');
      });
    });
  });

  describe('extractTopLevelValue', () => {
    it('finds a nested object value verbatim', () => {
      const text = '{"jsonrpc":"2.0","id":1,"result":{"a":{"b":[1,{"c":2}]},"d":"x"}}';
      expect(extractTopLevelValue(text, 'result')).to.equal('{"a":{"b":[1,{"c":2}]},"d":"x"}');
    });

    it('strings with escaped quotes and braces do not confuse it', () => {
      const text = '{"id":1,"result":{"s":"a \\"quoted\\" {brace} [bracket] \\\\","t":"}"},"after":1}';
      expect(extractTopLevelValue(text, 'result')).to.equal('{"s":"a \\"quoted\\" {brace} [bracket] \\\\","t":"}"}');
      expect(extractTopLevelValue(text, 'after')).to.equal('1');
    });

    it('a key with an escaped quote before the wanted key', () => {
      const text = '{"we\\"ird":{"result":0},"result":[1, 2]}';
      expect(extractTopLevelValue(text, 'result')).to.equal('[1, 2]');
    });

    it('whitespace around keys, colons and values', () => {
      const text = ' {\n  "jsonrpc" : "2.0" ,\n  "id" : 1 ,\n  "result" :  { "k" : [ 1 , 2 ] }  \n}\n';
      expect(extractTopLevelValue(text, 'result')).to.equal('{ "k" : [ 1 , 2 ] }');
      expect(extractTopLevelValue(text, 'id')).to.equal('1');
      expect(extractTopLevelValue(text, 'jsonrpc')).to.equal('"2.0"');
    });

    it('matches top-level keys only', () => {
      const text = '{"error":{"result":"inner"},"result":"outer"}';
      expect(extractTopLevelValue(text, 'result')).to.equal('"outer"');
    });

    it('scalars, null, true, false', () => {
      const text = '{"a":null,"b":true,"c":false,"d":-1.5e3,"e":"s"}';
      expect(extractTopLevelValue(text, 'a')).to.equal('null');
      expect(extractTopLevelValue(text, 'b')).to.equal('true');
      expect(extractTopLevelValue(text, 'c')).to.equal('false');
      expect(extractTopLevelValue(text, 'd')).to.equal('-1.5e3');
      expect(extractTopLevelValue(text, 'e')).to.equal('"s"');
    });

    it('absent key or a non-object document -> undefined', () => {
      expect(extractTopLevelValue('{"a":1}', 'result')).to.equal(undefined);
      expect(extractTopLevelValue('[{"result":1}]', 'result')).to.equal(undefined);
      expect(extractTopLevelValue('"result"', 'result')).to.equal(undefined);
      expect(extractTopLevelValue('{}', 'result')).to.equal(undefined);
    });
  });

  describe('RpcResult', () => {
    it('json() splices the raw bytes of an object result (1.0 and odd spacing kept)', () => {
      const body = '{"jsonrpc":"2.0","id":1,"result":{ "gasUsed" : 1.0,"big":123456789012345678901234567890,  "list":[ 1.50 ,2 ] }}';
      const r = new RpcResult(JSON.parse(body).result, body);
      expect(r.json()).to.equal('{ "gasUsed" : 1.0,"big":123456789012345678901234567890,  "list":[ 1.50 ,2 ] }');
      expect(r.json()).to.equal(r.json());
    });

    it('json() splices the raw bytes of an array result', () => {
      const body = '{"jsonrpc":"2.0","id":1,"result":[ {"logIndex":"0x0"} , {"x":1.0} ]}';
      const r = new RpcResult(JSON.parse(body).result, body);
      expect(r.json()).to.equal('[ {"logIndex":"0x0"} , {"x":1.0} ]');
    });

    it('json() of a scalar number result keeps its bytes (1.0)', () => {
      const body = '{"jsonrpc":"2.0","id":1,"result":1.0}';
      const r = new RpcResult(JSON.parse(body).result, body);
      expect(r.json()).to.equal('1.0');
    });

    it('json() of a scalar big integer result keeps its bytes', () => {
      const body = '{"jsonrpc":"2.0","id":1,"result":123456789012345678901234567890}';
      const r = new RpcResult(JSON.parse(body).result, body);
      expect(r.json()).to.equal('123456789012345678901234567890');
    });

    it('json() of a string / null result without source text', () => {
      expect(new RpcResult('0x1').json()).to.equal('"0x1"');
      expect(new RpcResult(null).json()).to.equal('null');
      expect(new RpcResult({ a: 1 }).json()).to.equal('{"a":1}');
    });

    it('withResult drops the raw bytes and keeps the upstream id', () => {
      const body = '{"jsonrpc":"2.0","id":1,"result":{"a":1.0}}';
      const r = new RpcResult(JSON.parse(body).result, body);
      r.upstreamId = 'up-1';
      r.fromCache = true;
      const w = r.withResult({ a: 2 });
      expect(w.json()).to.equal('{"a":2}');
      expect(w.upstreamId).to.equal('up-1');
      expect(w.fromCache).to.equal(true);
    });

    it('isEmpty: null, "0x", [], {}, "" are empty; "0x0", false, 0 are not', () => {
      for (const v of [null, '0x', [], {}, '']) expect(new RpcResult(v).isEmpty(), JSON.stringify(v)).to.equal(true);
      for (const v of ['0x0', false, 0, [0], { a: 1 }]) expect(new RpcResult(v).isEmpty(), JSON.stringify(v)).to.equal(false);
    });
  });

  describe('serialisation', () => {
    it('serializeResult writes the caller id verbatim and the spliced result', () => {
      const body = '{"jsonrpc":"2.0","id":99,"result":{"n": 1.0}}';
      const r = new RpcResult(JSON.parse(body).result, body);
      expect(serializeResult('12345678901234567890', r)).to.equal('{"jsonrpc":"2.0","id":12345678901234567890,"result":{"n": 1.0}}');
      expect(serializeResult('"abc"', new RpcResult('0x1'))).to.equal('{"jsonrpc":"2.0","id":"abc","result":"0x1"}');
      expect(serializeResult('null', new RpcResult(null))).to.equal('{"jsonrpc":"2.0","id":null,"result":null}');
    });

    it('a result made from raw bytes is written as pieces around those very bytes (no copy)', () => {
      const bytes = Buffer.from('[{"a":"\u00e9"},1]');
      const out = serializeResult('7', RpcResult.fromBytes([{ a: 'é' }, 1], bytes));
      expect(Array.isArray(out)).to.equal(true);
      const pieces = out as Array<string | Buffer>;
      expect(pieces[1]).to.equal(bytes);
      expect(JSON.parse(Buffer.concat(pieces.map((x) => (typeof x === 'string' ? Buffer.from(x) : x))).toString())).to.deep.equal({
        jsonrpc: '2.0',
        id: 7,
        result: [{ a: 'é' }, 1],
      });
    });

    it('serializeResult output is valid JSON that round-trips the id', () => {
      const p = parseRequestBody('{"jsonrpc":"2.0","id":"x\\"y","method":"eth_chainId"}').calls[0]!;
      const out = serializeResult(p.idRaw, new RpcResult('0x7a69'));
      expect(typeof out).to.equal('string');
      expect(JSON.parse(out as string)).to.deep.equal({ jsonrpc: '2.0', id: 'x"y', result: '0x7a69' });
    });

    it('serializeError writes code, message and optional data', () => {
      expect(serializeError('7', { code: -32600, message: 'invalid request' })).to.equal(
        '{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"invalid request"}}',
      );
      expect(serializeError('12345678901234567890', { code: 3, message: 'execution reverted', data: '0x' })).to.equal(
        '{"jsonrpc":"2.0","id":12345678901234567890,"error":{"code":3,"message":"execution reverted","data":"0x"}}',
      );
    });

    it('serializeOutbound uses svc ids and omits absent params', () => {
      expect(serializeOutbound(5, 'eth_chainId', undefined)).to.equal('{"jsonrpc":"2.0","id":5,"method":"eth_chainId"}');
      expect(JSON.parse(serializeOutbound(6, 'eth_getBalance', ['0xabc', 'latest']))).to.deep.equal({
        jsonrpc: '2.0',
        id: 6,
        method: 'eth_getBalance',
        params: ['0xabc', 'latest'],
      });
    });
  });
});
