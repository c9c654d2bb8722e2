/**
 * Parse-time limits: a request nested deeper than `server.maxJsonDepth`
 * is refused with -32600 naming the limit before anything recursive touches it (a batch element
 * alone, its neighbours untouched); a method name over 256 characters or outside
 * `[A-Za-z0-9_.:-]` is refused the same way, its text never echoed; ids are echoed byte for byte.
 */
import { expect } from 'chai';
import { ErrInvalidRequest, ErrJsonRpcRequestUnmarshal } from '../../../core/wire/errors.ts';
import { parseRequestBody, MAX_METHOD_LENGTH } from '../../../core/wire/jsonrpc.ts';
import { arrayElements, extractTopLevelValue, nestingDepth } from '../../../lib/json-scan.ts';

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const call = (params: string, id: string | number = 1, method = 'eth_call') => `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}`;

describe('parse limits', () => {
  describe('server.maxJsonDepth', () => {
    it('a single request deeper than the limit is ErrInvalidRequest naming the limit (HTTP 400, -32600)', () => {
      // params at depth 2, so `nested(63)` inside makes the request 64 deep: allowed; 65: refused.
      expect(() => parseRequestBody(call(nested(63)), { maxDepth: 64 })).not.to.throw();
      let thrown: unknown;
      try {
        parseRequestBody(call(nested(64)), { maxDepth: 64 });
      } catch (e) {
        thrown = e;
      }
      expect(thrown).to.be.instanceOf(ErrInvalidRequest);
      expect((thrown as ErrInvalidRequest).httpStatus).to.equal(400);
      expect((thrown as ErrInvalidRequest).code).to.equal(-32600);
      expect((thrown as Error).message).to.include('server.maxJsonDepth (64)');
    });

    it('6,000 levels (the probe that overflowed the stack) and 1,000,000 levels are refused without a RangeError', () => {
      for (const d of [6000, 1_000_000]) {
        expect(() => parseRequestBody(call(nested(d)))).to.throw(ErrInvalidRequest, /maxJsonDepth/);
      }
    });

    it('a body that is both too deep and not JSON is a parse error first (spec §4.2 #5)', () => {
      expect(() => parseRequestBody(`{"jsonrpc":"2.0","params":${'['.repeat(100)}`)).to.throw(ErrJsonRpcRequestUnmarshal);
    });

    it('in a batch only the deep element is invalid, with its own id; its neighbours parse', () => {
      const body = `[${call('[]', 1)},${call(nested(6000), '"deep"')},${call('["0x1",false]', 3, 'eth_getBlockByNumber')}]`;
      const p = parseRequestBody(body);
      expect(p.batch).to.equal(true);
      expect(p.calls.map((c) => c.invalid?.name)).to.deep.equal([undefined, 'ErrInvalidRequest', undefined]);
      expect(p.calls[1]!.idRaw).to.equal('"deep"');
      expect(p.calls[1]!.invalid!.message).to.include('maxJsonDepth');
      expect(p.calls[1]!.params).to.equal(undefined);
      expect(p.calls[2]!.params).to.deep.equal(['0x1', false]);
    });

    it('depth counts only structure, never brackets inside strings', () => {
      expect(nestingDepth('{"a":"[[[[[[[[[[{{{{{{{{"}', 2)).to.equal(1);
      expect(nestingDepth('[[[', 2)).to.equal(3);
      expect(arrayElements('[1, "x]", {"a":[1,[2]]}, null]').map((e) => [e.text, e.depth])).to.deep.equal([
        ['1', 0],
        ['"x]"', 0],
        ['{"a":[1,[2]]}', 3],
        ['null', 0],
      ]);
    });
  });

  describe('method names', () => {
    it(`longer than ${MAX_METHOD_LENGTH} characters: -32600, not echoed`, () => {
      const long = `eth_${'a'.repeat(MAX_METHOD_LENGTH)}`;
      const c = parseRequestBody(call('[]', 1, long)).calls[0]!;
      expect(c.invalid).to.be.instanceOf(ErrInvalidRequest);
      expect(c.invalid!.message).not.to.include('aaaa');
      expect(c.method).to.equal('');
      expect(parseRequestBody(call('[]', 1, 'a'.repeat(MAX_METHOD_LENGTH))).calls[0]!.invalid).to.equal(undefined);
    });

    for (const bad of ['eth call', 'eth_call\\n', 'eth/call', 'eth_cäll', 'eth_*']) {
      it(`outside [A-Za-z0-9_.:-]: ${JSON.stringify(bad)}`, () => {
        const c = parseRequestBody(call('[]', 5, bad)).calls[0]!;
        expect(c.invalid).to.be.instanceOf(ErrInvalidRequest);
        expect(c.idRaw).to.equal('5');
      });
    }

    it('names used in the wild pass', () => {
      for (const m of [
        'eth_getBlockByNumber',
        'debug_traceTransaction',
        'alchemy_getTokenBalances',
        'suix_getBalance',
        'starknet_blockNumber',
        'rpc.discover',
        'x:y-z.1',
      ]) {
        expect(parseRequestBody(call('[]', 1, m)).calls[0]!.invalid, m).to.equal(undefined);
      }
    });
  });

  describe('raw ids without a second parse', () => {
    for (const id of ['1e400', '12345678901234567890', '1.0', '-0', '1E3', '"a\\"b"', 'null', '9007199254740993']) {
      it(`id ${id} is echoed byte for byte`, () => {
        expect(parseRequestBody(call('[]', id)).calls[0]!.idRaw).to.equal(id);
        expect(parseRequestBody(`[${call('[]', id)},${call('[]', 2)}]`).calls.map((c) => c.idRaw)).to.deep.equal([id, '2']);
      });
    }

    it('the id key found after a large params member', () => {
      const body = `{"jsonrpc":"2.0","method":"eth_call","params":["0x${'00'.repeat(50_000)}"],"id":123456789012345678901}`;
      expect(parseRequestBody(body).calls[0]!.idRaw).to.equal('123456789012345678901');
      expect(extractTopLevelValue(body, 'id')).to.equal('123456789012345678901');
    });

    it('an id of the wrong kind is invalid and echoed as null', () => {
      const c = parseRequestBody('{"jsonrpc":"2.0","id":{"x":1},"method":"eth_chainId"}').calls[0]!;
      expect(c.invalid).to.be.instanceOf(ErrInvalidRequest);
      expect(c.idRaw).to.equal('null');
    });
  });
});
