/**
 * One request's payment (spec §5 item 1): the challenge a request without one gets (HTTP 402, v2 `PAYMENT-REQUIRED` header and v1 body),
 * the checks a presented one passes before any upstream work (decoded within bounds, matched to an offer for exactly this price, verified
 * by the facilitator — signature, amount, token, payee, validity window, chain, balance, unused authorization — then claimed once across
 * the fleet), and who the calls then run as: the payer.
 */
import { createHash } from 'node:crypto';
import { SvcError } from 'svc-proxy/plugin/errors';
import { sleep } from 'svc-proxy/util';
import type { Facilitator, PaymentPayload } from './facilitator.ts';
import type { Offer } from './offers.ts';

/** Longest payment header read, characters: an EIP-3009 payment is about 1.5 KB encoded (and Node refuses a request whose headers pass 16 KiB). */
export const MAX_PAYMENT_HEADER_CHARS = 8 * 1024;

/** Clock slack allowed between a payer and svc on `validBefore`, seconds. */
const VALIDITY_SKEW_S = 60;

/** A request refused for payment (spec §5 item 1): HTTP 402, its answer the x402 challenge. -32000 as eRPC's batch form. */
export class ErrPaymentRequired extends SvcError {
  static override readonly defaultCode = -32000;
  static override readonly httpStatus = 402;
}

/** Encoders of the x402 headers (from `@x402/core/http`). */
export interface Codec {
  encodePaymentRequiredHeader(value: never): string;
  decodePaymentSignatureHeader(header: string): unknown;
  encodePaymentResponseHeader(value: never): string;
}

/**
 * The 402 answer: `PAYMENT-REQUIRED` (v2, base64 JSON) and the v1 JSON body, both naming why.
 * @param reason what was missing or wrong, in both the v2 and v1 `error`
 */
export function challenge(codec: Codec, offers: readonly Offer[], reason: string, resource: { url: string; description: string }): ErrPaymentRequired {
  const v2 = { x402Version: 2, error: reason, resource: { ...resource, mimeType: 'application/json' }, accepts: offers.map((o) => o.v2) };
  const v1 = { x402Version: 1, error: reason, accepts: offers.flatMap((o) => (o.v1 ? [o.v1] : [])) };
  const amount = offers[0]?.v2.amount ?? '0';
  return new ErrPaymentRequired(reason, {
    answer: {
      body: JSON.stringify(v1),
      headers: { 'PAYMENT-REQUIRED': codec.encodePaymentRequiredHeader(v2 as never), 'Cache-Control': 'no-store', 'X-SVC-Payment-Amount': amount },
    },
  });
}

/** The EIP-3009 authorization inside a payment, as far as svc reads it (decimal strings, a 0x nonce). */
export interface Authorization {
  from: string;
  to: string;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: string;
}

function authorizationOf(p: PaymentPayload): Authorization | undefined {
  const payload = p.payload as Record<string, unknown> | undefined;
  // Exactly an EIP-3009 payment: anything more (a Permit2 authorization beside it) would be verified as that, while svc claimed this.
  if (!payload || typeof payload !== 'object' || Object.keys(payload).some((k) => k !== 'signature' && k !== 'authorization')) return undefined;
  if (typeof payload.signature !== 'string') return undefined;
  const a = payload.authorization as Record<string, unknown> | undefined;
  if (!a || typeof a !== 'object') return undefined;
  for (const k of ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'] as const) if (typeof a[k] !== 'string') return undefined;
  return a as unknown as Authorization;
}

/** A payment accepted for a request: what settles it once the calls answered. */
export interface Accepted {
  payment: PaymentPayload;
  offer: Offer;
  /** The v1 or v2 requirements it was verified against (the ones settlement uses). */
  requirements: Offer['v2'] | NonNullable<Offer['v1']>;
  /** `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1). */
  responseHeader: 'PAYMENT-RESPONSE' | 'X-PAYMENT-RESPONSE';
  payer: string;
  /** Unix seconds after which the authorization cannot settle. */
  validBefore: number;
}

/** What checking a presented payment needs. */
export interface CheckDeps {
  codec: Codec;
  facilitatorFor(network: string): Promise<Facilitator>;
  claim(id: string, ttlMs: number): Promise<boolean>;
  verifyTimeoutMs: number;
  /**
   * Checks what needs no chain before the facilitator is asked (an EOA's signature recovered locally), so a forged payment costs svc
   * no upstream call.
   * @returns why the payment is refused, or undefined to go on
   */
  precheck?(payment: PaymentPayload, offer: Offer, auth: Authorization): Promise<string | undefined>;
  /** Builds the 402 for a refusal reason. */
  refuse(reason: string): ErrPaymentRequired;
}

/** `p`, or a rejection with `onTimeout()` after `ms` (svc's one sleep; its timer does not hold the process). */
function within<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  const waited = new AbortController();
  const late = sleep(ms, waited.signal, true).then(() => Promise.reject(onTimeout()));
  return Promise.race([p, late]).finally(() => waited.abort());
}

/**
 * Checks a presented payment header against this request's offers, before any upstream work.
 * @param header the `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1) value
 * @returns the accepted payment, claimed: no other request on any replica sharing the claim store can use it
 * @throws ErrPaymentRequired naming why the payment is refused
 */
export async function checkPayment(deps: CheckDeps, header: string, version: 1 | 2, offers: readonly Offer[]): Promise<Accepted> {
  if (header.length > MAX_PAYMENT_HEADER_CHARS) throw deps.refuse(`payment header exceeds ${MAX_PAYMENT_HEADER_CHARS} characters`);
  let payment: PaymentPayload;
  try {
    payment = deps.codec.decodePaymentSignatureHeader(header) as PaymentPayload;
  } catch {
    throw deps.refuse('payment header is not base64-encoded x402 JSON');
  }
  if (!payment || typeof payment !== 'object' || payment.x402Version !== version)
    throw deps.refuse(`payment header is not an x402 v${version} payment (${version === 2 ? 'PAYMENT-SIGNATURE' : 'X-PAYMENT'})`);
  const auth = authorizationOf(payment);
  if (!auth) throw deps.refuse('only EIP-3009 transferWithAuthorization payments (scheme exact) are accepted');
  let offer: Offer | undefined;
  if (version === 2) {
    const a = payment.accepted;
    const same = (x: string | undefined, y: string) => typeof x === 'string' && x.toLowerCase() === y.toLowerCase();
    offer = offers.find((o) => a && a.scheme === o.v2.scheme && a.network === o.v2.network && same(a.asset, o.v2.asset) && same(a.payTo, o.v2.payTo));
    if (!offer) throw deps.refuse('the payment is for a chain, token, payee or scheme these calls do not accept');
    if (a?.amount !== offer.v2.amount) throw deps.refuse(`the payment is for ${String(a?.amount)} but these calls cost ${offer.v2.amount}`);
  } else {
    const to = auth.to.toLowerCase();
    offer = offers.find((o) => o.v1 && o.v1.network === payment.network && o.v1.scheme === payment.scheme && o.v1.payTo.toLowerCase() === to);
    if (!offer?.v1) throw deps.refuse('the payment is for a chain, payee or scheme these calls do not accept');
  }
  // Valid no longer than offered: a claim is kept until the authorization expires, so a far validBefore would hold it for a day.
  const now = Date.now() / 1000;
  if (Number(auth.validBefore) > now + offer.v2.maxTimeoutSeconds + VALIDITY_SKEW_S)
    throw deps.refuse(`the payment is valid longer than the ${offer.v2.maxTimeoutSeconds} s offered (validBefore too far ahead)`);
  const requirements = version === 2 ? offer.v2 : (offer.v1 as NonNullable<Offer['v1']>);
  if (auth.to.toLowerCase() !== offer.v2.payTo.toLowerCase()) throw deps.refuse('payment refused: the authorization pays another address than offered');
  if (auth.value !== offer.v2.amount) throw deps.refuse(`payment refused: the authorization is for ${auth.value}, these calls cost ${offer.v2.amount}`);
  const early = await deps.precheck?.(payment, offer, auth).catch(() => undefined);
  if (early) throw deps.refuse(`payment refused: ${early}`);
  let verdict;
  try {
    const facilitator = await deps.facilitatorFor(offer.v2.network);
    verdict = await within(facilitator.verify(payment, requirements), deps.verifyTimeoutMs, () => new Error(`not verified within ${deps.verifyTimeoutMs} ms`));
  } catch (e) {
    throw deps.refuse(`the payment could not be verified: ${(e instanceof Error ? e.message : String(e)).slice(0, 200)}`);
  }
  if (!verdict.isValid) {
    const why = verdict.invalidReason ?? 'invalid';
    throw deps.refuse(`payment refused: ${why}${verdict.invalidMessage ? ` (${verdict.invalidMessage.slice(0, 200)})` : ''}`);
  }
  if (verdict.payer !== undefined && verdict.payer.toLowerCase() !== auth.from.toLowerCase())
    throw deps.refuse('the payment was verified for another payer than its authorization names');
  const validBefore = Number(auth.validBefore);
  const ttlMs = Math.max((validBefore - Date.now() / 1000) * 1000, 1000) + 60_000;
  // One use per authorization across the fleet: chain, token, payer and nonce, hashed (the id holds nothing a client chose verbatim).
  const id = createHash('sha256')
    .update(`x402\u0000${offer.v2.network}\u0000${offer.v2.asset.toLowerCase()}\u0000${auth.from.toLowerCase()}\u0000${auth.nonce.toLowerCase()}`)
    .digest('hex');
  let first: boolean;
  try {
    first = await deps.claim(id, ttlMs);
  } catch {
    throw deps.refuse('the payment could not be recorded as used (the claim store is unavailable); retry');
  }
  if (!first) throw deps.refuse('this payment authorization was already used');
  return {
    payment,
    offer,
    requirements,
    responseHeader: version === 2 ? 'PAYMENT-RESPONSE' : 'X-PAYMENT-RESPONSE',
    payer: (verdict.payer ?? auth.from).toLowerCase(),
    validBefore,
  };
}
