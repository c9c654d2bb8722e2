/**
 * Errors as they reach the wire (spec §7; README error table): the exact JSON-RPC error object
 * written for svc's own errors and for an upstream's error that passes through byte for byte,
 * the error a client is shown for an exhausted call, the cause chain written as `error.data`,
 * and the error classes' codes, HTTP statuses and retry flags the unit table leaves out.
 */
import { expect } from 'chai';
import {
  asSvcError,
  ErrAuthRateLimitRuleExceeded,
  ErrCancelled,
  ErrConsensusDispute,
  ErrConsensusLowParticipants,
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointContentValidation,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointNonceException,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  ErrFailsafeCircuitBreakerOpen,
  ErrFailsafeTimeoutExceeded,
  ErrGetLogsExceededMaxAllowedAddresses,
  ErrGetLogsExceededMaxAllowedTopics,
  ErrInternal,
  ErrInvalidRequest,
  ErrNetworkRateLimitRuleExceeded,
  ErrProjectRateLimitRuleExceeded,
  ErrReloadUnavailable,
  ErrResponseBytesInFlightExceeded,
  ErrServiceShuttingDown,
  ErrUnsupportedContentEncoding,
  ErrUpstreamMethodIgnored,
  ErrUpstreamRateLimitRuleExceeded,
  ErrUpstreamRequestTooLarge,
  ErrUpstreamsExhausted,
  isSvcError,
  SVC_ERROR_BRAND,
  type SvcError,
  type UpstreamErrorRaw,
} from '../../../core/wire/errors.ts';
import { isPassThrough, toJsonRpcError, wireError } from '../../../core/wire/errors-wire.ts';
import { serializeError } from '../../../core/wire/jsonrpc.ts';

/** An upstream error object as the classifier keeps it (member order and spacing as the node wrote them). */
function raw(whole: string, extra: Partial<UpstreamErrorRaw> = {}): UpstreamErrorRaw {
  const o = JSON.parse(whole) as { code: number; message: string; data?: unknown };
  return { whole, code: String(o.code), message: JSON.stringify(o.message), ...(o.data === undefined ? {} : { data: JSON.stringify(o.data) }), ...extra };
}

describe('wire: error objects (spec §7)', () => {
  describe('codes, HTTP statuses and retry flags of the remaining classes', () => {
    const table: [new (m: string) => SvcError, number, number, boolean][] = [
      [ErrUnsupportedContentEncoding, -32600, 415, false],
      [ErrServiceShuttingDown, -32603, 503, false],
      [ErrResponseBytesInFlightExceeded, -32005, 503, false],
      [ErrReloadUnavailable, -32603, 503, false],
      [ErrAuthRateLimitRuleExceeded, -32005, 429, false],
      [ErrProjectRateLimitRuleExceeded, -32005, 429, false],
      [ErrNetworkRateLimitRuleExceeded, -32005, 429, false],
      [ErrUpstreamRateLimitRuleExceeded, -32005, 200, true],
      [ErrGetLogsExceededMaxAllowedAddresses, -32012, 200, false],
      [ErrGetLogsExceededMaxAllowedTopics, -32012, 200, false],
      [ErrUpstreamRequestTooLarge, -32600, 413, true],
      [ErrUpstreamMethodIgnored, -32601, 200, true],
      [ErrCancelled, -32603, 200, false],
      [ErrInternal, -32603, 500, false],
      // Retryable per the README error table (docs/http-interface.md), as the unit table leaves them.
      [ErrEndpointBillingIssue, -32005, 200, true],
      [ErrEndpointUnauthorized, -32016, 401, true],
      [ErrEndpointContentValidation, -32603, 200, true],
      [ErrFailsafeTimeoutExceeded, -32603, 200, true],
      [ErrFailsafeCircuitBreakerOpen, -32603, 200, true],
    ];
    for (const [cls, code, status, retryable] of table) {
      it(`${cls.name}: code ${code}, HTTP ${status}, ${retryable ? '' : 'not '}retryable`, () => {
        const e = new cls('m');
        expect([e.name, e.code, e.httpStatus, e.retryable]).to.deep.equal([cls.name, code, status, retryable]);
      });
    }

    it('consensus errors: -32603, HTTP 200, groups as error.data, retryable only when a slot error was', () => {
      const groups = [{ hash: '0123456789abcdef', upstreams: ['a', 'b'], count: 2 }];
      const d = new ErrConsensusDispute('dispute', groups, [new ErrEndpointRequestTimeout('t')], { threshold: 3 });
      expect([d.name, d.code, d.httpStatus, d.retryable]).to.deep.equal(['ErrConsensusDispute', -32603, 200, true]);
      expect(d.data).to.deep.equal({ groups, threshold: 3 });
      expect(d.causes).to.have.length(1);
      // The slots' errors are the cause chain written as error.data details.
      expect(d.toDetails().cause).to.deep.equal([{ code: 'ErrEndpointRequestTimeout', message: 't' }]);
      const low = new ErrConsensusLowParticipants('low', [], [new ErrEndpointExecutionException('reverted')]);
      expect([low.name, low.retryable]).to.deep.equal(['ErrConsensusLowParticipants', false]);
      expect(low.data).to.deep.equal({ groups: [] });
      const none = new ErrConsensusLowParticipants('none', [], []);
      expect(none.retryable).to.equal(false);
      expect(none.cause).to.equal(undefined);
      expect(none.toDetails()).to.deep.equal({ code: 'ErrConsensusLowParticipants', message: 'none' });
    });

    it('an error a second upstream confirmed is never retryable', () => {
      const e = new ErrEndpointMissingData('missing trie node');
      expect(e.retryable).to.equal(true);
      e.confirmed = true;
      expect(e.retryable).to.equal(false);
    });

    it('constructor options are kept: code, details, upstream data, status, raw object; data only when given', () => {
      const r = raw('{"code":-32000,"message":"x"}');
      const e = new ErrEndpointServerSideException('x', {
        code: -32000,
        details: { upstreamId: 'u' },
        upstreamData: '0x',
        upstreamStatus: 502,
        upstreamError: r,
      });
      expect([e.code, e.details, e.upstreamData, e.upstreamStatus, e.upstreamError]).to.deep.equal([-32000, { upstreamId: 'u' }, '0x', 502, r]);
      expect(e.data).to.equal(undefined);
      expect(Object.hasOwn(e, 'cause')).to.equal(false);
      expect(new ErrInternal('y', { data: { n: 1 } }).data).to.deep.equal({ n: 1 });
    });
  });

  describe('brand: svc errors from another installed copy', () => {
    it('isSvcError reads the brand, not the class', () => {
      expect(isSvcError(new ErrInvalidRequest('x'))).to.equal(true);
      expect(isSvcError(new Error('x'))).to.equal(false);
      expect(isSvcError(null)).to.equal(false);
      expect(isSvcError('ErrInvalidRequest')).to.equal(false);
      expect(isSvcError({ [SVC_ERROR_BRAND]: 'yes' })).to.equal(false);
      expect(isSvcError({ [SVC_ERROR_BRAND]: true })).to.equal(true);
    });

    it('instanceof holds for a branded error whose class of the same name is on its prototype chain', () => {
      // What another copy of svc would throw: same class names, other class objects.
      class ErrEndpointMissingDataCopy extends Error {}
      Object.defineProperty(ErrEndpointMissingDataCopy, 'name', { value: 'ErrEndpointMissingData' });
      const foreign = Object.assign(new ErrEndpointMissingDataCopy('m'), { [SVC_ERROR_BRAND]: true });
      expect(foreign instanceof ErrEndpointMissingData).to.equal(true);
      expect(foreign instanceof ErrEndpointNonceException).to.equal(false);
      const unbranded = new ErrEndpointMissingDataCopy('m');
      expect(unbranded instanceof ErrEndpointMissingData).to.equal(false);
      // The chain stops at Error.prototype: "Error" never matches an svc class.
      expect(Object.assign(new Error('e'), { [SVC_ERROR_BRAND]: true }) instanceof ErrInternal).to.equal(false);
    });
  });

  describe('ErrUpstreamsExhausted', () => {
    it('message: counts per cause name in first-seen order, or "no upstream available"', () => {
      expect(new ErrUpstreamsExhausted([]).message).to.equal('all upstream attempts failed (no upstream available)');
      const e = new ErrUpstreamsExhausted([new ErrEndpointRequestTimeout('a'), new ErrEndpointCapacityExceeded('b'), new ErrEndpointRequestTimeout('c')]);
      expect(e.message).to.equal('all upstream attempts failed (2 ErrEndpointRequestTimeout, 1 ErrEndpointCapacityExceeded)');
      expect(new ErrUpstreamsExhausted([new ErrEndpointRequestTimeout('a')], 'own words').message).to.equal('own words');
    });

    it('retryable: with no cause, or when some cause is; not when none is', () => {
      expect(new ErrUpstreamsExhausted([]).retryable).to.equal(true);
      expect(new ErrUpstreamsExhausted([new ErrEndpointExecutionException('r'), new ErrEndpointRequestTimeout('t')]).retryable).to.equal(true);
      expect(new ErrUpstreamsExhausted([new ErrEndpointExecutionException('r'), new ErrEndpointNonceException('n')]).retryable).to.equal(false);
    });

    it('only non-voting causes: the first cause is the dominant one', () => {
      const first = new ErrUpstreamMethodIgnored('ignored');
      const e = new ErrUpstreamsExhausted([first, new ErrCancelled('lost')]);
      expect(e.dominantCause).to.equal(first);
      expect(e.code).to.equal(-32601);
      expect(new ErrUpstreamsExhausted([]).dominantCause).to.equal(undefined);
    });

    it('a tie between codes goes to the first seen, a later majority wins', () => {
      const t = new ErrEndpointRequestTimeout('t');
      const m1 = new ErrEndpointMissingData('m1');
      expect(new ErrUpstreamsExhausted([t, m1]).dominantCause).to.equal(t);
      expect(new ErrUpstreamsExhausted([t, m1, new ErrEndpointMissingData('m2')]).dominantCause).to.equal(m1);
    });
  });

  describe('cause chain as error.data (server.includeErrorDetails)', () => {
    it('causes are written to depth 8, nested arrays and non-errors included', () => {
      let e: SvcError = new ErrEndpointRequestTimeout('level 0');
      for (let i = 1; i <= 10; i++) e = new ErrInternal(`level ${i}`, { cause: e });
      let d = e.toDetails() as { cause?: unknown; message: string };
      let depth = 0;
      while (d.cause !== undefined) {
        d = d.cause as { cause?: unknown; message: string };
        depth++;
      }
      expect(depth).to.equal(8);
      expect(d.message).to.equal('level 2');
      const mixed = new ErrInternal('m', { cause: [new ErrInvalidRequest('a'), ['nested', 7]] });
      expect(mixed.toDetails()).to.deep.equal({ code: 'ErrInternal', message: 'm', cause: [{ code: 'ErrInvalidRequest', message: 'a' }, ['nested', '7']] });
    });

    it("a foreign error's message is redacted (it may quote an upstream URL)", () => {
      const e = new ErrInternal('internal', { cause: new Error('connect ECONNREFUSED https://mainnet.example.com/v3/abcdef0123456789abcdef') });
      const cause = e.toDetails().cause as { code: string; message: string };
      expect(cause.code).to.equal('Error');
      expect(cause.message).to.match(/^connect ECONNREFUSED https:\/\/mainnet\.example\.com\/#redacted=[0-9a-f]{8}$/);
    });

    it('asSvcError: "internal error: <redacted message>" for anything not an svc error', () => {
      const w = asSvcError(new TypeError('password=hunter2 refused'));
      expect(w.message).to.match(/^internal error: password=#redacted=[0-9a-f]{8} refused$/);
      expect(w.cause).to.be.instanceOf(TypeError);
      expect(asSvcError(42).message).to.equal('internal error: 42');
    });
  });

  describe('the error a client is shown', () => {
    it('wireError: an exhausted error with one cause is that cause, through nesting; otherwise itself', () => {
      const t = new ErrEndpointRequestTimeout('t');
      expect(wireError(new ErrUpstreamsExhausted([new ErrUpstreamsExhausted([t])]))).to.equal(t);
      const two = new ErrUpstreamsExhausted([t, new ErrEndpointRequestTimeout('u')]);
      expect(wireError(two)).to.equal(two);
      const none = new ErrUpstreamsExhausted([]);
      expect(wireError(none)).to.equal(none);
      expect(wireError(t)).to.equal(t);
    });

    it('wireError unwraps at most 8 levels of single-cause exhausted errors', () => {
      const levels: SvcError[] = [new ErrEndpointRequestTimeout('t')];
      for (let i = 1; i <= 10; i++) levels.push(new ErrUpstreamsExhausted([levels[i - 1]!]));
      // levels[10] is the outermost: 8 unwraps reach levels[2], which is still an exhausted error.
      expect(wireError(levels[10]!)).to.equal(levels[2]);
      expect(wireError(levels[8]!)).to.equal(levels[0]);
    });

    it('isPassThrough: reverts, nonce, invalid params, unsupported, missing data and confirmed errors', () => {
      for (const e of [
        new ErrEndpointExecutionException('r'),
        new ErrEndpointNonceException('n'),
        new ErrEndpointClientSideException('c'),
        new ErrEndpointUnsupported('u'),
        new ErrEndpointMissingData('m'),
      ]) {
        expect(isPassThrough(e), e.name).to.equal(true);
      }
      for (const e of [
        new ErrEndpointRequestTimeout('t'),
        new ErrEndpointServerSideException('s'),
        new ErrInvalidRequest('i'),
        new ErrUpstreamsExhausted([]),
      ]) {
        expect(isPassThrough(e), e.name).to.equal(false);
      }
      const confirmed = new ErrEndpointServerSideException('s');
      confirmed.confirmed = true;
      expect(isPassThrough(confirmed)).to.equal(true);
    });
  });

  describe("toJsonRpcError: pass-through errors (the node's own object, byte for byte)", () => {
    it("with the node's data: written exactly as the node sent it, svc details or not", () => {
      const whole = '{ "code" : 3, "message":"execution reverted", "data":"0x08c379a0" }';
      const e = new ErrEndpointExecutionException('execution reverted', { code: 3, upstreamData: '0x08c379a0', upstreamError: raw(whole) });
      for (const details of [true, false]) {
        const w = toJsonRpcError(e, 'eth_sendRawTransaction', details);
        expect(w).to.deep.equal({ code: 3, message: 'execution reverted', data: '0x08c379a0', raw: whole });
        expect(serializeError('1', w)).to.equal(`{"jsonrpc":"2.0","id":1,"error":${whole}}`);
      }
    });

    it("without the node's data: svc's cause chain is appended as data when details are on", () => {
      const whole = '{"code":-32000,"message":"nonce too low" }';
      const e = new ErrEndpointNonceException('nonce too low', { code: -32000, upstreamError: raw(whole) });
      const on = toJsonRpcError(e, 'eth_sendRawTransaction', true);
      expect(on.code).to.equal(-32000);
      expect(on.raw).to.equal('{"code":-32000,"message":"nonce too low","data":{"code":"ErrEndpointNonceException","message":"nonce too low"}}');
      expect(JSON.parse(on.raw!)).to.deep.equal({ code: -32000, message: 'nonce too low', data: on.data });
      const off = toJsonRpcError(e, 'eth_sendRawTransaction', false);
      expect(off).to.deep.equal({ code: -32000, message: 'nonce too low', raw: whole });
    });

    it('the raw code wins over the class default; no data appended for eth_call / eth_estimateGas', () => {
      const whole = '{"code":-32602,"message":"invalid argument 0"}';
      const e = new ErrEndpointClientSideException('invalid argument 0', { upstreamError: raw(whole) });
      expect(toJsonRpcError(e, 'eth_call', true)).to.deep.equal({ code: -32602, message: 'invalid argument 0', raw: whole });
      expect(toJsonRpcError(e, 'eth_estimateGas', true)).to.deep.equal({ code: -32602, message: 'invalid argument 0', raw: whole });
      const other = new ErrEndpointClientSideException('invalid argument 0', {
        code: -32602,
        upstreamError: raw('{"code":-39001,"message":"invalid argument 0"}'),
      });
      expect(toJsonRpcError(other, 'eth_getBalance', false).code).to.equal(-39001);
    });

    it('a raw object without a closing brace is written as it is (nothing to append to)', () => {
      for (const whole of ['{"code":-32000,"message":"x"']) {
        const e = new ErrEndpointNonceException('x', { code: -32000, upstreamError: { whole, code: '-32000', message: '"x"' } });
        expect(toJsonRpcError(e, 'eth_sendRawTransaction', true).raw).to.equal(whole);
      }
    });

    it('an exact object (a configured answer) never gets data appended', () => {
      const whole = '{"code":-32601,"message":"disabled here"}';
      const e = new ErrEndpointUnsupported('disabled here', { code: -32601, upstreamError: raw(whole, { exact: true }) });
      expect(toJsonRpcError(e, 'eth_getBalance', true)).to.deep.equal({ code: -32601, message: 'disabled here', raw: whole });
    });

    it('an exhausted error whose dominant cause passes through is written as that cause', () => {
      const whole = '{"code":3,"message":"execution reverted","data":"0x"}';
      const revert = () => new ErrEndpointExecutionException('execution reverted', { code: 3, upstreamData: '0x', upstreamError: raw(whole) });
      const e = new ErrUpstreamsExhausted([revert(), new ErrEndpointRequestTimeout('t'), revert()]);
      expect(toJsonRpcError(e, 'eth_getBalance', true)).to.deep.equal({ code: 3, message: 'execution reverted', data: '0x', raw: whole });
      const minority = new ErrUpstreamsExhausted([revert(), new ErrEndpointRequestTimeout('t'), new ErrEndpointRequestTimeout('u')]);
      expect(toJsonRpcError(minority, 'eth_getBalance', false)).to.deep.equal({ code: -32603, message: minority.message });
    });

    it('a pass-through error without a raw object is written from its code and message', () => {
      const e = new ErrEndpointMissingData('header not found', { code: -32000 });
      expect(toJsonRpcError(e, 'eth_getBlockByNumber', false)).to.deep.equal({ code: -32000, message: 'header not found' });
      expect(toJsonRpcError(e, 'eth_getBlockByNumber', true)).to.deep.equal({
        code: -32000,
        message: 'header not found',
        data: { code: 'ErrEndpointMissingData', message: 'header not found' },
      });
    });
  });

  describe("toJsonRpcError: svc's own errors", () => {
    it("svc's structured data is always written; with details on, the cause chain is added under details", () => {
      const groups = [{ hash: 'aa', upstreams: ['a'], count: 1 }];
      const e = new ErrConsensusDispute('no agreement', groups, []);
      expect(toJsonRpcError(e, 'eth_getBalance', false)).to.deep.equal({ code: -32603, message: 'no agreement', data: { groups } });
      expect(toJsonRpcError(e, 'eth_getBalance', true)).to.deep.equal({
        code: -32603,
        message: 'no agreement',
        data: { groups, details: { code: 'ErrConsensusDispute', message: 'no agreement' } },
      });
      expect(toJsonRpcError(e, 'eth_call', true)).to.deep.equal({ code: -32603, message: 'no agreement', data: { groups } });
    });

    it("an upstream's own data on svc's error is written as the data, details on or off", () => {
      const e = new ErrEndpointServerSideException('backend failure', { code: -32000, upstreamData: { trace: 'x' } });
      for (const details of [true, false])
        expect(toJsonRpcError(e, 'eth_getBalance', details)).to.deep.equal({ code: -32000, message: 'backend failure', data: { trace: 'x' } });
    });

    it('an unknown method (undefined) still gets details when they are on', () => {
      expect(toJsonRpcError(new ErrInvalidRequest('bad'), undefined, true)).to.deep.equal({
        code: -32600,
        message: 'bad',
        data: { code: 'ErrInvalidRequest', message: 'bad' },
      });
    });
  });
});
