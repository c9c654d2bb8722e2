/**
 * Pay per request's checks and settlement (spec §5 item 1, docs/access.md "Pay per request"), with a fake facilitator and claim store:
 * every refusal says why and claims nothing; a verified payment is claimed once; settlement happens only when every call was answered,
 * within `settleTimeout` for the receipt, retried while it fails to reach the chain, and every outcome is counted once.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { checkPayment, ErrPaymentRequired, type Accepted, type CheckDeps } from '../../../../plugins/x402/payment.ts';
import { settleable, settleAnswered, type SettleDeps, type SettleOutcome } from '../../../../plugins/x402/settle.ts';
import type { Facilitator, Settlement, Verdict } from '../../../../plugins/x402/facilitator.ts';
import type { Offer } from '../../../../plugins/x402/offers.ts';
import { newExecutionRecord } from '../../../../core/wire/records.ts';
import {
  ErrAuthRateLimitRuleExceeded,
  ErrEndpointExecutionException,
  ErrEndpointServerSideException,
  ErrInternal,
  ErrInvalidRequest,
} from '../../../../core/wire/errors.ts';

const PAYER = '0x00000000000000000000000000000000000000AA';
const OFFER: Offer = {
  accept: { network: 'eip155:8453', asset: '0xAsset', payTo: '0xPayTo', eip712: { name: 'USD Coin', version: '2' } },
  amount: 1000n,
  v2: { scheme: 'exact', network: 'eip155:8453', asset: '0xAsset', amount: '1000', payTo: '0xPayTo', maxTimeoutSeconds: 300, extra: {} },
  v1: {
    scheme: 'exact',
    network: 'base',
    maxAmountRequired: '1000',
    resource: 'http://x/',
    description: '',
    mimeType: 'application/json',
    outputSchema: {},
    payTo: '0xPayTo',
    maxTimeoutSeconds: 300,
    asset: '0xAsset',
    extra: {},
  },
};
const authorization = (over: object = {}) => ({
  from: PAYER,
  to: '0xPayTo',
  value: '1000',
  validAfter: '0',
  validBefore: String(Math.floor(Date.now() / 1000) + 60),
  nonce: '0x01',
  ...over,
});
const v2Payment = (accepted: object = OFFER.v2, auth: object = {}) => ({
  x402Version: 2,
  accepted,
  payload: { signature: '0xsig', authorization: authorization(auth) },
});
const encode = (p: unknown) => Buffer.from(JSON.stringify(p)).toString('base64');

/** Check dependencies with a facilitator answering `verdict` and a claim store remembering ids. */
function deps(verdict: Verdict | (() => Promise<Verdict>), claimed = new Set<string>()): CheckDeps & { verified: number } {
  const d = {
    verified: 0,
    codec: {
      encodePaymentRequiredHeader: () => '',
      encodePaymentResponseHeader: () => '',
      decodePaymentSignatureHeader: (h: string) => JSON.parse(Buffer.from(h, 'base64').toString('utf8')),
    },
    facilitatorFor: async () =>
      ({
        verify: async () => {
          d.verified++;
          return typeof verdict === 'function' ? verdict() : verdict;
        },
        settle: async () => ({ success: true, transaction: '0x', network: 'eip155:8453' }),
        getSupported: () => ({ kinds: [] }),
      }) as Facilitator,
    claim: async (id: string) => !claimed.has(id) && Boolean(claimed.add(id)),
    verifyTimeoutMs: 50,
    refuse: (reason: string) => new ErrPaymentRequired(reason),
  };
  return d;
}
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => expect.fail('accepted'),
    (e: Error) => {
      expect(e).to.be.instanceOf(ErrPaymentRequired);
      return e.message;
    },
  );

describe('x402: checking a presented payment', () => {
  const ok: Verdict = { isValid: true, payer: PAYER };

  it('a verified payment is claimed once: the same authorization again is refused as already used', async () => {
    const d = deps(ok);
    const header = encode(v2Payment());
    const a = await checkPayment(d, header, 2, [OFFER]);
    expect(a).to.include({ payer: PAYER.toLowerCase(), responseHeader: 'PAYMENT-RESPONSE' });
    expect(a.requirements).to.equal(OFFER.v2);
    expect(await refusal(checkPayment(d, header, 2, [OFFER]))).to.match(/already used/);
  });

  it('malformed, oversized, the wrong version or not EIP-3009: refused without asking the facilitator', async () => {
    const d = deps(ok);
    expect(await refusal(checkPayment(d, 'x'.repeat(9000), 2, [OFFER]))).to.match(/exceeds 8192 characters/);
    expect(await refusal(checkPayment(d, '%%%', 2, [OFFER]))).to.match(/not base64-encoded x402 JSON|not an x402 v2 payment/);
    expect(await refusal(checkPayment(d, encode(v2Payment()), 1, [OFFER]))).to.match(/not an x402 v1 payment \(X-PAYMENT\)/);
    expect(await refusal(checkPayment(d, encode({ x402Version: 2, accepted: OFFER.v2, payload: { permit2Authorization: {} } }), 2, [OFFER]))).to.match(
      /only EIP-3009/,
    );
    expect(d.verified).to.equal(0);
  });

  it('an offer not made, or a different amount, is refused naming the price', async () => {
    const d = deps(ok);
    expect(await refusal(checkPayment(d, encode(v2Payment({ ...OFFER.v2, network: 'eip155:1' })), 2, [OFFER]))).to.match(/chain, token, payee or scheme/);
    expect(await refusal(checkPayment(d, encode(v2Payment({ ...OFFER.v2, payTo: '0xOther' })), 2, [OFFER]))).to.match(/chain, token, payee or scheme/);
    expect(await refusal(checkPayment(d, encode(v2Payment({ ...OFFER.v2, amount: '999' })), 2, [OFFER]))).to.equal(
      'the payment is for 999 but these calls cost 1000',
    );
    expect(d.verified).to.equal(0);
  });

  it("the facilitator's verdict, its failure and its silence are refusals that say why, and claim nothing", async () => {
    const claimed = new Set<string>();
    expect(await refusal(checkPayment(deps({ isValid: false, invalidReason: 'insufficient_funds' }, claimed), encode(v2Payment()), 2, [OFFER]))).to.equal(
      'payment refused: insufficient_funds',
    );
    expect(
      await refusal(
        checkPayment(
          deps(() => Promise.reject(new Error('facilitator down')), claimed),
          encode(v2Payment()),
          2,
          [OFFER],
        ),
      ),
    ).to.match(/could not be verified: facilitator down/);
    expect(
      await refusal(
        checkPayment(
          deps(() => new Promise(() => undefined), claimed),
          encode(v2Payment()),
          2,
          [OFFER],
        ),
      ),
    ).to.match(/not verified within 50 ms/);
    expect(claimed.size).to.equal(0);
  });

  it('a payment valid longer than offered, one holding more than an EIP-3009 authorization, or verified for another payer: refused', async () => {
    const far = String(Math.floor(Date.now() / 1000) + 300 + 120);
    expect(await refusal(checkPayment(deps(ok), encode(v2Payment(OFFER.v2, { validBefore: far })), 2, [OFFER]))).to.match(
      /valid longer than the 300 s offered/,
    );
    const both = { ...v2Payment(), payload: { ...v2Payment().payload, permit2Authorization: {} } };
    expect(await refusal(checkPayment(deps(ok), encode(both), 2, [OFFER]))).to.match(/only EIP-3009/);
    expect(await refusal(checkPayment(deps({ isValid: true, payer: '0x00000000000000000000000000000000000000BB' }), encode(v2Payment()), 2, [OFFER]))).to.match(
      /another payer/,
    );
  });

  it('what needs no chain is checked before the facilitator is asked: payee, amount, and the local signature check', async () => {
    const d = deps(ok);
    expect(await refusal(checkPayment(d, encode(v2Payment(OFFER.v2, { to: '0xOther' })), 2, [OFFER]))).to.match(/pays another address/);
    expect(await refusal(checkPayment(d, encode(v2Payment(OFFER.v2, { value: '999' })), 2, [OFFER]))).to.match(/is for 999, these calls cost 1000/);
    const forged = { ...d, precheck: async () => 'invalid_exact_evm_payload_signature' };
    expect(await refusal(checkPayment(forged, encode(v2Payment()), 2, [OFFER]))).to.equal('payment refused: invalid_exact_evm_payload_signature');
    expect(d.verified).to.equal(0);
  });

  it('a claim store that fails refuses the payment (fail closed)', async () => {
    const d = { ...deps(ok), claim: () => Promise.reject(new Error('redis down')) };
    expect(await refusal(checkPayment(d, encode(v2Payment()), 2, [OFFER]))).to.match(/claim store is unavailable/);
  });

  it('v1: matched by the chain name and scheme, verified against the v1 requirements, receipt in X-PAYMENT-RESPONSE', async () => {
    const p = { x402Version: 1, scheme: 'exact', network: 'base', payload: { signature: '0xsig', authorization: authorization() } };
    const a = await checkPayment(deps(ok), encode(p), 1, [OFFER]);
    expect(a.requirements).to.equal(OFFER.v1);
    expect(a.responseHeader).to.equal('X-PAYMENT-RESPONSE');
    expect(await refusal(checkPayment(deps(ok), encode({ ...p, network: 'ethereum' }), 1, [OFFER]))).to.match(/chain, payee or scheme/);
  });
});

describe('x402: settlement after the answer', () => {
  const paid = {
    payment: {},
    offer: OFFER,
    requirements: OFFER.v2,
    responseHeader: 'PAYMENT-RESPONSE',
    payer: PAYER,
    validBefore: Date.now() / 1000 + 3600,
  } as unknown as Accepted;
  const answered = () => [newExecutionRecord('eth_call')];
  /** Settle dependencies around a facilitator's `settle`; outcomes and retries recorded. */
  const settleDeps = (settle: () => Promise<Settlement>, timeoutMs = 1000) => {
    const seen = { outcomes: [] as SettleOutcome[], retries: 0, settles: 0 };
    const d: SettleDeps = {
      facilitator: {
        verify: async () => ({ isValid: true }),
        settle: () => {
          seen.settles++;
          return settle();
        },
        getSupported: () => ({ kinds: [] }),
      },
      timeoutMs,
      retries: 2,
      done: (o) => void seen.outcomes.push(o),
      retried: () => void seen.retries++,
      encode: (s) => `receipt:${s.transaction}`,
      track: () => undefined,
    };
    return { d, seen };
  };
  const sink = () => {
    const h: Record<string, string> = {};
    return { h, set: (n: string, v: string) => void (h[n] = v) };
  };

  it("paid for: something served (a result or a revert) and no svc-side or upstream failure; the caller's own refusals do not make it free", () => {
    const failing = (e: Error) => Object.assign(newExecutionRecord('eth_call'), { error: e });
    const result = newExecutionRecord('eth_call');
    expect(settleable([result, failing(new ErrEndpointExecutionException('reverted'))])).to.equal(true);
    // An invalid element or a budget refusal appended to a served batch: still paid for.
    expect(settleable([result, failing(new ErrInvalidRequest('bad')), failing(new ErrAuthRateLimitRuleExceeded('budget'))])).to.equal(true);
    // Nothing served: not paid for.
    expect(settleable([failing(new ErrInvalidRequest('bad'))])).to.equal(false);
    expect(settleable([failing(new ErrAuthRateLimitRuleExceeded('budget'))])).to.equal(false);
    expect(settleable([])).to.equal(false);
    // An upstream's or svc's own failure: not paid for, whatever else was served.
    expect(settleable([result, failing(new ErrEndpointServerSideException('node failed'))])).to.equal(false);
    expect(settleable([result, failing(new ErrInternal('bug'))])).to.equal(false);
  });

  it('a failed call is not settled: no settlement, outcome unsettled', async () => {
    const { d, seen } = settleDeps(async () => ({ success: true, transaction: '0x1', network: 'eip155:8453' }));
    const failed = newExecutionRecord('eth_call');
    failed.error = new ErrEndpointServerSideException('node failed');
    const s = sink();
    await settleAnswered(d, paid, [newExecutionRecord('eth_call'), failed], s);
    expect(seen.settles).to.equal(0);
    expect(seen.outcomes).to.deep.equal(['unsettled']);
    expect(s.h).to.deep.equal({ 'X-SVC-Payment-Outcome': 'not-settled' });
  });

  it('settled in time: the receipt header and outcome settled, counted once', async () => {
    const { d, seen } = settleDeps(async () => ({ success: true, transaction: '0xabc', network: 'eip155:8453' }));
    const s = sink();
    await settleAnswered(d, paid, answered(), s);
    expect(s.h).to.deep.equal({ 'PAYMENT-RESPONSE': 'receipt:0xabc', 'X-SVC-Payment-Outcome': 'settled' });
    expect(seen.outcomes).to.deep.equal(['settled']);
  });

  it('a settlement slower than settleTimeout: the answer goes on without a receipt; the outcome is counted when it ends', async () => {
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let finish!: (s: Settlement) => void;
      const { d, seen } = settleDeps(() => new Promise((r) => (finish = r)), 3000);
      const s = sink();
      const answer = settleAnswered(d, paid, answered(), s);
      await clock.tickAsync(3000);
      await answer;
      expect(s.h).to.deep.equal({ 'X-SVC-Payment-Outcome': 'pending' });
      expect(seen.outcomes).to.deep.equal([]);
      finish({ success: true, transaction: '0x2', network: 'eip155:8453' });
      await clock.tickAsync(0);
      expect(seen.outcomes).to.deep.equal(['settled']);
    } finally {
      clock.uninstall();
    }
  });

  it('a settlement that cannot reach the chain is retried with backoff, then counted as failed; a refused one is not retried', async () => {
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { d, seen } = settleDeps(() => Promise.reject(new Error('ECONNRESET')), 60_000);
      const answer = settleAnswered(d, paid, answered(), sink());
      await clock.tickAsync(20_000);
      await answer;
      expect(seen.settles).to.equal(3);
      expect(seen.retries).to.equal(2);
      expect(seen.outcomes).to.deep.equal(['settle_failed']);
    } finally {
      clock.uninstall();
    }
    const refused = settleDeps(async () => ({ success: false, errorReason: 'insufficient_funds', transaction: '', network: 'eip155:8453' }));
    const withheld = await settleAnswered(refused.d, paid, answered(), sink());
    expect(refused.seen.settles).to.equal(1);
    expect(refused.seen.outcomes).to.deep.equal(['settle_failed']);
    // Refused in time: the answer is withheld with a 402 saying why, the failed receipt attached.
    expect(withheld).to.be.instanceOf(ErrPaymentRequired);
    expect(withheld!.answer!.headers).to.include({ 'X-SVC-Payment-Outcome': 'failed', 'PAYMENT-RESPONSE': 'receipt:' });
    expect(JSON.parse(withheld!.answer!.body).error).to.equal('payment settlement failed: insufficient_funds');
  });
});
