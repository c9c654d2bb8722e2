/**
 * Pins the error hierarchy (core/wire/errors.ts): names, JSON-RPC codes, HTTP statuses (spec §7),
 * the exhausted error's dominant-cause rules, and the wire form
 * produced by toJsonRpcError.
 */
import { expect } from 'chai';
import * as errors from '../../core/wire/errors.ts';
import {
  ErrAuthUnauthorized,
  ErrCancelled,
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointContentValidation,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointNonceException,
  ErrEndpointRequestTimeout,
  ErrEndpointRequestTooLarge,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  ErrFailsafeCircuitBreakerOpen,
  ErrFailsafeTimeoutExceeded,
  ErrGetLogsExceededMaxAllowedRange,
  ErrInternal,
  ErrInvalidRequest,
  ErrJsonRpcRequestUnmarshal,
  ErrNetworkNotSupported,
  ErrNotImplemented,
  ErrProjectNotFound,
  ErrRateLimitRuleExceeded,
  ErrRequestTooLarge,
  ErrUpstreamMalformedResponse,
  ErrUpstreamMethodIgnored,
  ErrUpstreamsExhausted,
  SvcError,
  asSvcError,
} from '../../core/wire/errors.ts';
import { ERROR_TABLE, toJsonRpcError } from '../../core/wire/errors-wire.ts';

type ErrCtor = (new (message: string, opts?: errors.SvcErrorOptions) => SvcError) & { defaultCode: number; httpStatus: number; retryable: boolean };

/** Every concrete SvcError subclass exported by core/wire/errors.ts. */
/** The error classes a client can receive: every exported `Err*` subclass of SvcError (bases such as ConsensusError are never thrown themselves). */
function exportedErrorClasses(): [string, ErrCtor][] {
  return Object.entries(errors as Record<string, unknown>).filter(
    (e): e is [string, ErrCtor] =>
      e[0].startsWith('Err') && typeof e[1] === 'function' && e[1] !== SvcError && (e[1] as { prototype?: unknown }).prototype instanceof SvcError,
  );
}

describe('errors', () => {
  describe('names, codes and HTTP statuses', () => {
    // [class, JSON-RPC code, HTTP status of a single call]
    const table: [ErrCtor, number, number][] = [
      // HTTP 400: body that does not parse, invalid request object (spec §4.2 #5)
      [ErrJsonRpcRequestUnmarshal, -32700, 400],
      [ErrInvalidRequest, -32600, 400],
      // HTTP 413: body over server.maxBodySize
      [ErrRequestTooLarge, -32600, 413],
      // HTTP 404: unknown project / network (spec §4.1, §7)
      [ErrProjectNotFound, -32602, 404],
      [ErrNetworkNotSupported, -32602, 404],
      // HTTP 401: caller failed auth, upstream refused our key
      [ErrAuthUnauthorized, -32016, 401],
      [ErrEndpointUnauthorized, -32016, 401],
      // HTTP 429: capacity exceeded
      [ErrEndpointCapacityExceeded, -32005, 429],
      [ErrRateLimitRuleExceeded, -32005, 429],
      // HTTP 200: timeouts, reverts, unsupported and the other upstream-side failures
      [ErrEndpointRequestTimeout, -32603, 200],
      [ErrFailsafeTimeoutExceeded, -32603, 200],
      [ErrEndpointExecutionException, 3, 200],
      [ErrEndpointNonceException, -32003, 200],
      [ErrEndpointUnsupported, -32601, 200],
      [ErrUpstreamMethodIgnored, -32601, 200],
      [ErrNotImplemented, -32601, 200],
      [ErrEndpointServerSideException, -32603, 200],
      [ErrEndpointBillingIssue, -32005, 200],
      [ErrEndpointClientSideException, -32602, 200],
      [ErrEndpointMissingData, -32014, 200],
      [ErrEndpointRequestTooLarge, -32012, 200],
      [ErrGetLogsExceededMaxAllowedRange, -32012, 200],
      [ErrUpstreamMalformedResponse, -32603, 200],
      [ErrEndpointContentValidation, -32603, 200],
      [ErrFailsafeCircuitBreakerOpen, -32603, 200],
      [ErrInternal, -32603, 500],
    ];
    for (const [cls, code, status] of table) {
      it(`${cls.name}: code ${code}, HTTP ${status}`, () => {
        const e = new cls('boom');
        expect(e).to.be.instanceOf(SvcError);
        expect(e).to.be.instanceOf(Error);
        expect(e.name).to.equal(cls.name);
        expect(e.code).to.equal(code);
        expect(e.httpStatus).to.equal(status);
        expect(e.message).to.equal('boom');
      });
    }

    it('a vendor code overrides the class default (code option)', () => {
      const e = new ErrEndpointServerSideException('vendor said no', { code: -32099 });
      expect(e.code).to.equal(-32099);
      expect(e.name).to.equal('ErrEndpointServerSideException');
    });

    it('retryable flags: upstream-side failures retry, execution/nonce/client-side do not', () => {
      for (const cls of [
        ErrEndpointServerSideException,
        ErrEndpointCapacityExceeded,
        ErrEndpointUnsupported,
        ErrEndpointMissingData,
        ErrEndpointRequestTooLarge,
        ErrEndpointRequestTimeout,
        ErrUpstreamMalformedResponse,
      ]) {
        expect(new cls('x').retryable, cls.name).to.equal(true);
      }
      for (const cls of [
        ErrEndpointExecutionException,
        ErrEndpointNonceException,
        ErrEndpointClientSideException,
        ErrInvalidRequest,
        ErrJsonRpcRequestUnmarshal,
      ]) {
        expect(new cls('x').retryable, cls.name).to.equal(false);
      }
    });
  });

  describe('ERROR_TABLE', () => {
    it('each row matches its class (name, code, HTTP status, retryable)', () => {
      const byName = new Map(exportedErrorClasses());
      for (const row of ERROR_TABLE) {
        const cls = byName.get(row.name);
        expect(cls, `row ${row.name} names an exported class`).to.not.equal(undefined);
        expect(row.code, row.name).to.equal(cls!.defaultCode);
        if (row.name === 'ErrUpstreamsExhausted') expect(row.httpStatus).to.equal('200 / 429');
        else expect(row.httpStatus, row.name).to.equal(cls!.httpStatus);
        expect(row.retryable, row.name).to.equal(cls!.retryable);
        expect(row.when, row.name).to.be.a('string').and.not.equal('');
      }
    });

    it('has one row per client-visible error class, no duplicates', () => {
      const names = ERROR_TABLE.map((r) => r.name);
      expect(new Set(names).size).to.equal(names.length);
      // ErrCancelled is internal (a losing hedge leg / a client that went away).
      const expected = exportedErrorClasses()
        .map(([n]) => n)
        .filter((n) => n !== ErrCancelled.name);
      expect([...names].sort()).to.deep.equal(expected.sort());
    });
  });

  describe('ErrUpstreamsExhausted', () => {
    const cap = () => new ErrEndpointCapacityExceeded('429 from upstream');
    const server = () => new ErrEndpointServerSideException('502 from upstream');

    it('with no cause: code -32603, HTTP 200', () => {
      const e = new ErrUpstreamsExhausted([]);
      expect(e.name).to.equal('ErrUpstreamsExhausted');
      expect(e.code).to.equal(-32603);
      expect(e.httpStatus).to.equal(200);
      expect(e.causes).to.deep.equal([]);
    });

    it('code is the most frequent cause code', () => {
      const e = new ErrUpstreamsExhausted([server(), new ErrEndpointMissingData('missing trie node'), new ErrEndpointMissingData('header not found')]);
      expect(e.code).to.equal(-32014);
      expect(e.httpStatus).to.equal(200);
    });

    it('dominant capacity-exceeded cause gives HTTP 429 and -32005', () => {
      const e = new ErrUpstreamsExhausted([cap(), server(), cap()]);
      expect(e.code).to.equal(-32005);
      expect(e.httpStatus).to.equal(429);
    });

    it('capacity-exceeded in the minority gives HTTP 200', () => {
      const e = new ErrUpstreamsExhausted([cap(), server(), server()]);
      expect(e.code).to.equal(-32603);
      expect(e.httpStatus).to.equal(200);
    });

    it('a tie is broken by first occurrence', () => {
      expect(new ErrUpstreamsExhausted([cap(), server()]).httpStatus).to.equal(429);
      expect(new ErrUpstreamsExhausted([server(), cap()]).httpStatus).to.equal(200);
    });

    it('ignored-method and cancelled attempts do not vote', () => {
      const e = new ErrUpstreamsExhausted([
        new ErrUpstreamMethodIgnored('ignored'),
        new ErrUpstreamMethodIgnored('ignored'),
        new ErrCancelled('hedge lost'),
        cap(),
      ]);
      expect(e.code).to.equal(-32005);
      expect(e.httpStatus).to.equal(429);
    });

    it('a vendor code passes through as the dominant code', () => {
      const e = new ErrUpstreamsExhausted([
        new ErrEndpointServerSideException('x', { code: -32099 }),
        new ErrEndpointServerSideException('y', { code: -32099 }),
      ]);
      expect(e.code).to.equal(-32099);
    });

    it('message summarises the causes; cause chain kept', () => {
      const e = new ErrUpstreamsExhausted([cap(), server(), cap()]);
      expect(e.message).to.contain('2 ErrEndpointCapacityExceeded');
      expect(e.message).to.contain('1 ErrEndpointServerSideException');
      const d = e.toDetails();
      expect(d.code).to.equal('ErrUpstreamsExhausted');
      expect(d.cause).to.be.an('array').with.length(3);
      expect((d.cause as { code: string }[])[0]!.code).to.equal('ErrEndpointCapacityExceeded');
    });
  });

  describe('asSvcError', () => {
    it('passes SvcErrors through and wraps anything else into ErrInternal', () => {
      const e = new ErrInvalidRequest('x');
      expect(asSvcError(e)).to.equal(e);
      const w = asSvcError(new TypeError('oops'));
      expect(w).to.be.instanceOf(ErrInternal);
      expect(w.code).to.equal(-32603);
      expect(w.message).to.contain('oops');
      expect(asSvcError('str')).to.be.instanceOf(ErrInternal);
    });
  });

  describe('toJsonRpcError', () => {
    it('upstream data passes through untouched (even with includeErrorDetails)', () => {
      const data = { nested: ['0x01', 1.5, null], reason: 'x' };
      const e = new ErrEndpointClientSideException('invalid params', { upstreamData: data });
      const w = toJsonRpcError(e, 'eth_getBalance', true);
      expect(w.data).to.equal(data);
      expect(w.code).to.equal(-32602);
    });

    it('includeErrorDetails true: data is {code: <ErrName>, message, cause}', () => {
      const cause = new ErrEndpointServerSideException('502 Bad Gateway');
      const e = new ErrUpstreamsExhausted([cause]);
      const w = toJsonRpcError(e, 'eth_blockNumber', true);
      expect(w.code).to.equal(-32603);
      expect(w.message).to.equal(e.message);
      const data = w.data as { code: string; message: string; cause: unknown };
      expect(data.code).to.equal('ErrUpstreamsExhausted');
      expect(data.message).to.equal(e.message);
      expect(data.cause).to.deep.equal([{ code: 'ErrEndpointServerSideException', message: '502 Bad Gateway' }]);
    });

    it('includeErrorDetails true: details and a non-SvcError cause are serialised', () => {
      const e = new ErrInternal('internal error: boom', { cause: new RangeError('boom'), details: { upstreamId: 'u1' } });
      const w = toJsonRpcError(e, 'eth_chainId', true);
      expect(w.data).to.deep.equal({
        code: 'ErrInternal',
        message: 'internal error: boom',
        details: { upstreamId: 'u1' },
        cause: { code: 'RangeError', message: 'boom' },
      });
    });

    for (const method of ['eth_call', 'eth_estimateGas']) {
      it(`never fills data with svc details for ${method}`, () => {
        const e = new ErrUpstreamsExhausted([new ErrEndpointServerSideException('502')]);
        const w = toJsonRpcError(e, method, true);
        expect(w).to.not.have.property('data');
      });
    }

    it('includeErrorDetails false: no data', () => {
      const e = new ErrUpstreamsExhausted([new ErrEndpointServerSideException('502')]);
      const w = toJsonRpcError(e, 'eth_blockNumber', false);
      expect(w).to.deep.equal({ code: -32603, message: e.message });
      expect(w).to.not.have.property('data');
    });

    it('an execution exception keeps the upstream code, message and data (anvil revert)', () => {
      // source: anvil 1.7.1, eth_call to a contract that reverts with Error("nope")
      const revertData =
        '0x08c379a0000000000000000000000000000000000000000000000000000000000000002000000000000000000000000000000000000000000000000000000000000000046e6f706500000000000000000000000000000000000000000000000000000000';
      const e = new ErrEndpointExecutionException('execution reverted: nope', { code: 3, upstreamData: revertData });
      for (const details of [true, false]) {
        expect(toJsonRpcError(e, 'eth_call', details)).to.deep.equal({ code: 3, message: 'execution reverted: nope', data: revertData });
      }
    });
  });
});
