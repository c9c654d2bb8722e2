/**
 * Unit tests of error charging (docs/http-interface.md "What counts against an upstream"): the message
 * normaliser and signatures (core/pipeline/blame.ts), who an error is blamed on, how the health tracker,
 * the breaker and the error counter read it, and the per-call ledger that defers an unclassified
 * node error's charge until another upstream answers (core/pipeline/charge.ts), driven with real hooks
 * and hand-made attempt records.
 */
import { expect } from 'chai';
import {
  agreementSignature,
  blameOf,
  errorSignature,
  isCharged,
  isRequestFact,
  MAX_NORMALISED_MESSAGE,
  normaliseErrorMessage,
} from '../../../core/pipeline/blame.ts';
import { settleFailedAttempt, whenCharged, wouldConfirm, isDeferred } from '../../../core/pipeline/charge.ts';
import { newExecutionRecord, type AttemptRecord, type CallContext } from '../../../core/pipeline/context.ts';
import {
  ErrCancelled,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrEndpointUnsupported,
  ErrInternal,
  ErrUpstreamRequestTooLarge,
  type SvcError,
} from '../../../core/wire/errors.ts';
import { isPassThrough } from '../../../core/wire/errors-wire.ts';
import { createHooks, type ProxyHooks } from '../../../core/pipeline/hooks.ts';
import { healthOutcome } from '../../../core/pipeline/blame.ts';
import { breakerOutcome } from '../../../plugins/failsafe/index.ts';

/** A node's JSON-RPC error as the transport classifies an unnamed one. */
function nodeError(message: string, code = -32603, status = 200): ErrEndpointServerSideException {
  return new ErrEndpointServerSideException(message, { code, upstreamStatus: status, details: { upstreamCode: code, upstreamStatus: status } });
}

describe('error charging: the message normaliser', () => {
  it('lower-cases and collapses hex, addresses, hashes, numbers, quoted fragments and whitespace', () => {
    expect(normaliseErrorMessage('Trace TOO heavy for block 0x1F: took 5012ms')).to.equal('trace too heavy for block 0x…: took #ms');
    expect(normaliseErrorMessage('nonce too low: address 0xC100000000000000000000000000000000000000, tx: 0 state: 10')).to.equal(
      'nonce too low: address 0x…, tx: # state: #',
    );
    expect(normaliseErrorMessage('missing trie node 0f86c86b65afff31ad44794f2959cdae3107376a9a9f54cdd902f0df16463352 (path )')).to.equal(
      'missing trie node … (path )',
    );
    expect(normaliseErrorMessage('unknown tracer "fooTracer"')).to.equal('unknown tracer "…"');
    expect(normaliseErrorMessage('unknown variant `fooTracer`, expected one of `callTracer`')).to.equal('unknown variant "…", expected one of "…"');
    expect(normaliseErrorMessage("reverted with reason string 'nope'")).to.equal('reverted with reason string "…"');
    expect(normaliseErrorMessage('failed to evaluate JS code: ReferenceError: x is not defined\n    at <main> (unknown at :?:?)')).to.equal(
      'failed to evaluate js code: referenceerror: x is not defined at <main> (unknown at :?:?)',
    );
  });

  it("keeps an apostrophe inside a word (can't) as text", () => {
    expect(normaliseErrorMessage("can't trace 'x'")).to.equal('can\'t trace "…"');
  });

  it('is bounded: a huge message reads 1024 characters and keeps at most MAX_NORMALISED_MESSAGE', () => {
    const out = normaliseErrorMessage(`boom ${'a b '.repeat(200_000)}`);
    expect(out.length).to.be.at.most(MAX_NORMALISED_MESSAGE);
    const quotes = normaliseErrorMessage('"'.repeat(100_000));
    expect(quotes.length).to.be.at.most(MAX_NORMALISED_MESSAGE);
  });

  it('two nodes saying the same thing with other numbers share a signature; another code or text does not', () => {
    const a = nodeError('trace too heavy for block 0x1f: took 5012ms', -32000);
    const b = nodeError('trace too heavy for block 0x20: took 4870ms', -32000);
    expect(errorSignature(a)).to.equal(errorSignature(b));
    expect(errorSignature(a)).to.equal('-32000 trace too heavy for block 0x…: took #ms');
    expect(errorSignature(nodeError('trace too heavy for block 0x1f: took 5012ms', -32603))).not.to.equal(errorSignature(a));
    expect(errorSignature(nodeError('database corrupted', -32000))).not.to.equal(errorSignature(a));
  });

  it('only an unclassified node error below HTTP 500 has an agreement signature', () => {
    expect(agreementSignature(nodeError('boom'))).to.equal('-32603 boom');
    expect(agreementSignature(nodeError('boom', -32603, 503)), 'a 5xx says the server failed').to.equal(undefined);
    expect(agreementSignature(new ErrEndpointServerSideException('transport error talking to upstream a: ECONNRESET')), 'no node code').to.equal(undefined);
    expect(agreementSignature(new ErrEndpointExecutionException('execution reverted', { code: 3, details: { upstreamCode: 3 } }))).to.equal(undefined);
  });
});

describe('error charging: who an error is blamed on', () => {
  it('request facts: reverts, invalid params, over-size requests, unknown tracer and option messages', () => {
    const facts: SvcError[] = [
      new ErrEndpointExecutionException('execution reverted'),
      new ErrEndpointClientSideException('invalid argument 0'),
      new ErrUpstreamRequestTooLarge('HTTP 413'),
      nodeError('failed to evaluate JS code: ReferenceError: noSuchTracer is not defined'),
      nodeError('tracer not found', -32000),
      nodeError('unknown variant `fooTracer`, expected one of `callTracer`', -32603),
      nodeError('unsupported option: tracerConfig.onlyTopCall', -32000),
    ];
    for (const e of facts) {
      expect(isRequestFact(e), e.message).to.equal(true);
      expect(blameOf(e), e.message).to.equal('request');
    }
  });

  it('upstream faults: an unclassified error, a transport failure, a timeout, a rate limit', () => {
    for (const e of [
      nodeError('database corrupted'),
      new ErrEndpointServerSideException('transport error: ECONNREFUSED'),
      new ErrEndpointRequestTimeout('late'),
      new ErrEndpointCapacityExceeded('429'),
    ]) {
      expect(blameOf(e), e.message).to.equal('upstream');
    }
    // A fact message without a node code is not read as a fact (svc wrote it).
    expect(blameOf(new ErrEndpointServerSideException('transport error: unknown tracer'))).to.equal('upstream');
  });

  it('nobody: svc failures, cancellations, capability answers', () => {
    for (const e of [
      new ErrInternal('bug'),
      new ErrCancelled('gone'),
      new ErrEndpointUnsupported('method not found'),
      new ErrEndpointMissingData('header not found'),
    ]) {
      expect(blameOf(e), e.name).to.equal('none');
    }
  });

  it('isCharged: dialled failures blamed on the upstream, unless waived', () => {
    const a = (error: SvcError, outcome: AttemptRecord['outcome'] = 'error', charge?: AttemptRecord['charge']) => ({ dialled: true, outcome, error, charge });
    expect(isCharged(a(nodeError('database corrupted')))).to.equal(true);
    expect(isCharged(a(nodeError('database corrupted'), 'error', 'waived'))).to.equal(false);
    expect(isCharged(a(new ErrEndpointExecutionException('reverted'), 'exec_revert'))).to.equal(false);
    expect(isCharged(a(new ErrEndpointClientSideException('invalid argument 0')))).to.equal(false);
    expect(isCharged(a(new ErrUpstreamRequestTooLarge('413')))).to.equal(false);
    expect(isCharged(a(new ErrCancelled('lost'), 'cancelled'))).to.equal(false);
    expect(isCharged({ ...a(nodeError('x')), dialled: false })).to.equal(false);
    expect(isCharged(a(new ErrEndpointCapacityExceeded('429'), 'rate_limited'))).to.equal(true);
  });

  it('the health tracker and the breaker never count a request fact or a waived error', () => {
    const tracer = nodeError('failed to evaluate JS code: ReferenceError: noSuchTracer is not defined');
    expect(healthOutcome({ dialled: true, outcome: 'error', error: tracer })).to.equal('neutral');
    expect(breakerOutcome(tracer)).to.equal(undefined);
    const generic = nodeError('database corrupted');
    expect(healthOutcome({ dialled: true, outcome: 'error', error: generic })).to.equal('error');
    expect(healthOutcome({ dialled: true, outcome: 'error', error: generic, charge: 'waived' })).to.equal('neutral');
    expect(breakerOutcome(generic)).to.equal(true);
  });
});

/** A client call context on a fresh record (only what the ledger reads). */
function callCtx(internal = false): CallContext {
  return {
    request: { idRaw: '1', method: 'debug_traceTransaction', params: [] },
    record: newExecutionRecord('debug_traceTransaction'),
    internal,
    state: new Map(),
  } as unknown as CallContext;
}

/** A finished failed attempt on an upstream, appended to the call's trace. */
function failed(ctx: CallContext, upstreamId: string, err: SvcError): AttemptRecord {
  const a = { upstreamId, method: ctx.request.method, outcome: 'error', dialled: true, error: err } as AttemptRecord;
  ctx.record.attempts.push(a);
  return a;
}

describe('error charging: the per-call ledger (deferred charges)', () => {
  let hooks: ProxyHooks;
  let done: AttemptRecord[];
  beforeEach(() => {
    hooks = createHooks();
    done = [];
    hooks.attemptDone.tap('test', (a) => {
      done.push(a);
    });
  });
  /** Ends a call as the server does: duration set, then `callDone`. */
  const end = (ctx: CallContext) => {
    ctx.record.durationMs = 1;
    hooks.callDone.call(ctx);
  };

  it('a second upstream with the same error confirms it: both waived, a non-retryable pass-through copy comes back', () => {
    const ctx = callCtx();
    const ea = nodeError('trace too heavy: took 5012ms', -32000);
    const a = failed(ctx, 'a', ea);
    const charged: string[] = [];
    expect(isDeferred(ctx, ea)).to.equal(true);
    whenCharged(hooks, ctx, a, () => charged.push('a'));
    expect(settleFailedAttempt(hooks, ctx, a, ea)).to.equal(ea);
    expect(a.charge).to.equal('deferred');
    expect(done, 'attemptDone held back').to.deep.equal([]);

    const eb = nodeError('trace too heavy: took 4870ms', -32000);
    expect(wouldConfirm(ctx, 'b', eb)).to.equal(true);
    expect(wouldConfirm(ctx, 'a', eb), 'not the same upstream').to.equal(false);
    const b = failed(ctx, 'b', eb);
    const thrown = settleFailedAttempt(hooks, ctx, b, eb);
    expect(thrown).not.to.equal(eb);
    expect(thrown).to.be.instanceOf(ErrEndpointServerSideException);
    expect(thrown.confirmed).to.equal(true);
    expect(thrown.retryable).to.equal(false);
    expect(thrown.code).to.equal(-32000);
    expect(thrown.message).to.equal(eb.message);
    expect(isPassThrough(thrown)).to.equal(true);
    expect(eb.retryable, 'the original (maybe shared) error is untouched').to.equal(true);
    expect([a.charge, b.charge]).to.deep.equal(['waived', 'waived']);
    expect(done).to.have.members([a, b]);
    end(ctx);
    expect(charged, 'the breaker never charged').to.deep.equal([]);
    expect(done).to.have.length(2);
    expect(done.some(isCharged)).to.equal(false);
  });

  it('no second answer: charged when the call ends (attemptDone then, the parked breaker failure runs)', () => {
    const ctx = callCtx();
    const e = nodeError('database corrupted', -32000);
    const a = failed(ctx, 'a', e);
    const charged: string[] = [];
    whenCharged(hooks, ctx, a, () => charged.push('a'));
    settleFailedAttempt(hooks, ctx, a, e);
    expect(done).to.deep.equal([]);
    end(ctx);
    expect(a.charge).to.equal('charged');
    expect(done).to.deep.equal([a]);
    expect(charged).to.deep.equal(['a']);
    expect(isCharged(a)).to.equal(true);
    // After the call ended, nothing is deferred any more.
    expect(isDeferred(ctx, e)).to.equal(false);
  });

  it('another upstream answering differently charges the first at once', () => {
    const ctx = callCtx();
    const a = failed(ctx, 'a', nodeError('database corrupted', -32000));
    settleFailedAttempt(hooks, ctx, a, a.error!);
    const b = failed(ctx, 'b', nodeError('something else entirely', -32000));
    settleFailedAttempt(hooks, ctx, b, b.error!);
    expect(a.charge).to.equal('charged');
    expect(b.charge).to.equal('deferred');
    expect(done).to.deep.equal([a]);
    // A revert from a third upstream is a definite answer too.
    const c = failed(ctx, 'c', new ErrEndpointExecutionException('execution reverted', { code: 3, details: { upstreamCode: 3 } }));
    c.outcome = 'exec_revert';
    settleFailedAttempt(hooks, ctx, c, c.error!);
    expect(b.charge).to.equal('charged');
    expect(done).to.deep.equal([a, b, c]);
  });

  it('the same upstream twice (an upstream-scope retry) does not confirm its own error', () => {
    const ctx = callCtx();
    const e1 = nodeError('database corrupted');
    const a1 = failed(ctx, 'a', e1);
    settleFailedAttempt(hooks, ctx, a1, e1);
    const e2 = nodeError('database corrupted');
    const a2 = failed(ctx, 'a', e2);
    expect(settleFailedAttempt(hooks, ctx, a2, e2)).to.equal(e2);
    end(ctx);
    expect([a1.charge, a2.charge]).to.deep.equal(['charged', 'charged']);
  });

  it('a request fact is never charged, and a second upstream with the same answer stops the call', () => {
    const ctx = callCtx();
    const msg = 'failed to evaluate JS code: ReferenceError: noSuchTracer is not defined';
    const a = failed(ctx, 'a', nodeError(msg));
    expect(isDeferred(ctx, a.error!)).to.equal(false);
    expect(settleFailedAttempt(hooks, ctx, a, a.error!)).to.equal(a.error);
    expect(done, 'emitted at once').to.deep.equal([a]);
    const b = failed(ctx, 'b', nodeError(msg));
    const thrown = settleFailedAttempt(hooks, ctx, b, b.error!);
    expect(thrown.confirmed).to.equal(true);
    end(ctx);
    expect(done.some(isCharged)).to.equal(false);
  });

  it('different requests of one call (split parts sharing the record) never confirm each other', () => {
    const parent = callCtx();
    const part = (from: number): CallContext => ({ ...parent, request: { ...parent.request, params: [from] }, state: new Map() });
    const p1 = part(1);
    const p2 = part(2);
    const a = failed(p1, 'a', nodeError('boom'));
    settleFailedAttempt(hooks, p1, a, a.error!);
    const b = failed(p2, 'b', nodeError('boom'));
    expect(settleFailedAttempt(hooks, p2, b, b.error!).confirmed).to.equal(undefined);
    end(parent);
    expect([a.charge, b.charge]).to.deep.equal(['charged', 'charged']);
  });

  it('internal calls and faults without a node answer are charged at once', () => {
    const internal = callCtx(true);
    const e = nodeError('database corrupted');
    expect(isDeferred(internal, e)).to.equal(false);
    const a = failed(internal, 'a', e);
    settleFailedAttempt(hooks, internal, a, e);
    expect(done).to.deep.equal([a]);
    expect(a.charge).to.equal(undefined);

    const ctx = callCtx();
    const t = failed(ctx, 'a', new ErrEndpointServerSideException('transport error talking to upstream a: ECONNRESET'));
    settleFailedAttempt(hooks, ctx, t, t.error!);
    expect(done).to.deep.equal([a, t]);
    expect(isCharged(t)).to.equal(true);
  });
});
