/**
 * JSON-RPC parsing and answers (core/wire/jsonrpc.ts; spec §4.1, §4.2 #5, §7 ErrJsonRpcRequestUnmarshal):
 * the exact refusal of each invalid request object (message, code, caller's id, no method
 * carried on), the parse error and its cause, the raw-params threshold, and the bytes of an
 * answer written in pieces.
 */
import { expect } from 'chai';
import { ErrInvalidRequest, ErrJsonRpcRequestUnmarshal } from '../../../core/wire/errors.ts';
import { answerBytes, parseRequestBody, RAW_PARAMS_MIN_BYTES, rawParamsOf, RpcResult, serializeError, type ParsedCall } from '../../../core/wire/jsonrpc.ts';

function only(body: string): ParsedCall {
  return parseRequestBody(body).calls[0] as ParsedCall;
}

function refusal(c: ParsedCall): [string, number, string, string] {
  expect(c.invalid).to.be.instanceOf(ErrInvalidRequest);
  return [c.idRaw, c.invalid!.code, c.method, c.invalid!.message];
}

function unmarshal(body: string): ErrJsonRpcRequestUnmarshal {
  try {
    parseRequestBody(body, { maxDepth: 2 });
  } catch (e) {
    expect(e).to.be.instanceOf(ErrJsonRpcRequestUnmarshal);
    return e as ErrJsonRpcRequestUnmarshal;
  }
  throw new Error(`${body} parsed`);
}

describe('wire: JSON-RPC parsing (spec §4.1, §4.2)', () => {
  describe('a body that is not JSON: ErrJsonRpcRequestUnmarshal', () => {
    it('says "failed to parse json-rpc request" and keeps the parser error as its cause', () => {
      const e = unmarshal('{"jsonrpc":"2.0",');
      expect([e.name, e.code, e.httpStatus, e.message]).to.deep.equal(['ErrJsonRpcRequestUnmarshal', -32700, 400, 'failed to parse json-rpc request']);
      expect(e.cause).to.be.instanceOf(SyntaxError);
    });

    it('the same for a body too deep to measure further that is not JSON either', () => {
      const e = unmarshal('{"a":{"b":{"c":[1,}}}');
      expect(e.message).to.equal('failed to parse json-rpc request');
      expect(e.cause).to.be.instanceOf(SyntaxError);
    });
  });

  describe('invalid request objects: -32600 with the exact reason, the caller id kept, no method carried on', () => {
    const cases: [string, string, string, string][] = [
      ['not an object', '[7]', 'null', 'invalid request: not a JSON-RPC request object'],
      ['an id of the wrong kind', '{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"}', 'null', 'invalid request: id must be a string, a number or null'],
      ['a wrong jsonrpc version', '{"jsonrpc":"1.0","id":4,"method":"eth_chainId"}', '4', 'invalid request: "jsonrpc" must be "2.0"'],
      ['no method', '{"jsonrpc":"2.0","id":"x","method":7}', '"x"', 'invalid request: "method" must be a non-empty string'],
      [
        'a method outside the alphabet',
        '{"jsonrpc":"2.0","id":5,"method":"eth call"}',
        '5',
        'invalid request: "method" must be at most 256 characters of [A-Za-z0-9_.:-]',
      ],
      [
        'params neither array nor object',
        '{"jsonrpc":"2.0","id":6,"method":"eth_chainId","params":"x"}',
        '6',
        'invalid request: "params" must be an array or an object',
      ],
    ];
    for (const [name, body, idRaw, message] of cases) {
      it(name, () => {
        const c = only(body);
        expect(refusal(c)).to.deep.equal([idRaw, -32600, '', message]);
        expect(c.invalid!.httpStatus).to.equal(400);
      });
    }

    it('params null is accepted like absent params', () => {
      const c = only('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":null}');
      expect(c.invalid).to.equal(undefined);
      expect(c.method).to.equal('eth_chainId');
    });

    it('a batch element nested deeper than server.maxJsonDepth: its id as sent (null when it has none), no method', () => {
      const p = parseRequestBody(
        '[{"jsonrpc":"2.0","id":9,"method":"m","params":[[[1]]]},{"jsonrpc":"2.0","method":"m","params":[[[1]]]},{"jsonrpc":"2.0","id":3,"method":"eth_chainId"}]',
        { maxDepth: 3 },
      );
      const msg = 'invalid request: JSON nesting deeper than server.maxJsonDepth (3)';
      expect(refusal(p.calls[0]!)).to.deep.equal(['9', -32600, '', msg]);
      expect(refusal(p.calls[1]!)).to.deep.equal(['null', -32600, '', msg]);
      expect(p.calls[2]!.invalid).to.equal(undefined);
      expect(p.calls[2]!.method).to.equal('eth_chainId');
    });

    it('a name given twice inside a value: the caller id kept (null when absent), no method', () => {
      expect(refusal(only('{"jsonrpc":"2.0","id":8,"method":"m","params":[{"a":1,"a":2}]}'))).to.deep.equal([
        '8',
        -32600,
        '',
        'invalid request: member "a" appears twice in one object of the request',
      ]);
      expect(refusal(only('{"jsonrpc":"2.0","method":"m","params":[{"a":1,"a":2}]}'))).to.deep.equal([
        'null',
        -32600,
        '',
        'invalid request: member "a" appears twice in one object of the request',
      ]);
      expect(refusal(only('{"jsonrpc":"2.0","id":2,"method":"m","method":"n"}'))).to.deep.equal([
        '2',
        -32600,
        '',
        'invalid request: member "method" appears twice',
      ]);
      expect(refusal(only('{"jsonrpc":"2.0","id":1,"method":"m","id":2}'))).to.deep.equal(['null', -32600, '', 'invalid request: member "id" appears twice']);
    });
  });

  describe("large params forwarded as the client's own bytes", () => {
    /** A single request whose params text is exactly `n` characters, after a prefix that moves it from offset 0. */
    function body(n: number): { text: string; paramsText: string } {
      const paramsText = `["${'a'.repeat(n - 4)}"]`;
      return { text: `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":${paramsText}}`, paramsText };
    }

    it(`the threshold is ${64 * 1024} bytes of params, that many included`, () => {
      expect(RAW_PARAMS_MIN_BYTES).to.equal(65536);
      const at = body(RAW_PARAMS_MIN_BYTES);
      const c = parseRequestBody(at.text, undefined, Buffer.from(at.text)).calls[0]!;
      expect(rawParamsOf(c.params)?.toString()).to.equal(at.paramsText);
      const below = body(RAW_PARAMS_MIN_BYTES - 1);
      const d = parseRequestBody(below.text, undefined, Buffer.from(below.text)).calls[0]!;
      expect(d.invalid).to.equal(undefined);
      expect(rawParamsOf(d.params)).to.equal(undefined);
    });

    it("in a batch, each element's own params bytes", () => {
      const a = body(RAW_PARAMS_MIN_BYTES);
      const b = body(RAW_PARAMS_MIN_BYTES - 1);
      const text = `[${b.text},${a.text}]`;
      const calls = parseRequestBody(text, undefined, Buffer.from(text)).calls;
      expect(rawParamsOf(calls[0]!.params)).to.equal(undefined);
      expect(rawParamsOf(calls[1]!.params)?.toString()).to.equal(a.paramsText);
    });
  });

  describe('answers', () => {
    it('a result of undefined is written as null', () => {
      expect(new RpcResult(undefined).json()).to.equal('null');
    });

    it('answerBytes counts UTF-8 bytes of strings and the length of raw pieces', () => {
      expect(answerBytes('{"a":"é"}')).to.equal(10);
      expect(answerBytes(['{"r":"é",', Buffer.from('[1,2]'), '}'])).to.equal(9 + 1 + 5 + 1);
      expect(answerBytes([])).to.equal(0);
    });

    it('an error object with raw text is written as that text; without data, no data member', () => {
      expect(serializeError('1', { code: 3, message: 'm', raw: '{ "code":3,"message":"m" }' })).to.equal(
        '{"jsonrpc":"2.0","id":1,"error":{ "code":3,"message":"m" }}',
      );
      expect(serializeError('"a"', { code: -32603, message: 'x', data: undefined })).to.equal(
        '{"jsonrpc":"2.0","id":"a","error":{"code":-32603,"message":"x"}}',
      );
    });
  });
});
