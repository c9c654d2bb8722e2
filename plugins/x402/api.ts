/**
 * `svc-proxy/plugins/x402`: pay per request (spec §5 item 1). The error a request refused for payment carries, and the headers the
 * strategy reads and writes, for plugins and clients that deal with paid requests.
 */
export { ErrPaymentRequired, MAX_PAYMENT_HEADER_CHARS } from './payment.ts';

/** Request headers carrying a payment: x402 v2 first, then v1. */
export const PAYMENT_HEADERS = ['PAYMENT-SIGNATURE', 'X-PAYMENT'] as const;

/**
 * Response headers of pay per request: the v2 challenge, the v2 and v1 settlement receipts, the price of the request in the asset's
 * atomic units, the credits it was priced from, and how its payment ended (`settled`, `pending`, `failed`, `not-settled`).
 */
export const PAYMENT_RESPONSE_HEADERS = [
  'PAYMENT-REQUIRED',
  'PAYMENT-RESPONSE',
  'X-PAYMENT-RESPONSE',
  'X-SVC-Payment-Amount',
  'X-SVC-Payment-Credits',
  'X-SVC-Payment-Outcome',
] as const;
