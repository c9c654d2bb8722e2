/**
 * The base of svc's error hierarchy (spec §7): {@link SvcError}, its options and its brand, which
 * recognises an svc error across installed copies of svc. The named classes are in core/wire/errors.ts.
 */
import { redactText } from '../../lib/redact.ts';

/** Options accepted by every {@link SvcError} constructor. */
export interface SvcErrorOptions {
  /** The error(s) that led to this one; serialised as `data.cause`. */
  cause?: unknown;
  /** Extra structured details (upstream id, method...) shown in `data.details`. */
  details?: Record<string, unknown>;
  /** Overrides the class's default JSON-RPC code (e.g. a vendor code passed through). */
  code?: number;
  /** Upstream's own `error.data` (revert bytes); passed through untouched. */
  upstreamData?: unknown;
  /** Upstream's own message, kept verbatim for execution errors. */
  upstreamMessage?: string;
  /** HTTP status the upstream answered with, if any. */
  upstreamStatus?: number;
  /** svc's own structured `error.data` (consensus groups), always written; ignored when the upstream sent data. */
  data?: unknown;
  /** The upstream's own error object as raw JSON pieces, for errors that pass through. */
  upstreamError?: UpstreamErrorRaw;
  /**
   * Seconds until the same request may succeed (a full rate-limit window): sent as the HTTP
   * `Retry-After` header (RFC 9110 §10.2.3) when this error is the whole answer (a single call).
   */
  retryAfterSeconds?: number;
  /** The whole HTTP answer of a request refused as a whole, instead of the JSON-RPC error body: see {@link RefusalAnswer}. */
  answer?: RefusalAnswer;
}

/**
 * A refusal that carries its own HTTP answer (a payment challenge, spec §5 pay-per-request: the x402 body and `PAYMENT-REQUIRED` header):
 * written with the error's HTTP status when the error refuses a request as a whole (the `admit` hook), never for one call of a batch.
 */
export interface RefusalAnswer {
  /** The body, JSON text (Content-Type stays `application/json`). */
  readonly body: string;
  /** Headers added to the core's own (names as sent). */
  readonly headers: Readonly<Record<string, string>>;
}

/** An upstream's JSON-RPC error object as raw, already redacted JSON pieces: an error that is a fact about the request reaches the client byte for byte. */
export interface UpstreamErrorRaw {
  /** The whole error object as written (member order and spacing kept). */
  whole: string;
  /** `error.code` as written (an integer). */
  code: string;
  /** `error.message` as written (a JSON string, quotes and escapes included). */
  message: string;
  /** `error.data` as written, when present. */
  data?: string;
  /** True when written exactly as {@link whole}, no `data` added: a configured answer (static-responses plugin), not a node's error svc may annotate. */
  exact?: boolean;
}

/** The brand every svc error carries: a registry symbol, so an error from a plugin built against another installed copy of svc is recognised. */
export const SVC_ERROR_BRAND: unique symbol = Symbol.for('svc.error') as never;

/** True for any svc error, from this copy of svc or another (brand, not class identity). */
export function isSvcError(e: unknown): e is SvcError {
  return e !== null && typeof e === 'object' && (e as Record<symbol, unknown>)[SVC_ERROR_BRAND] === true;
}

/**
 * Base class of every named error: subclasses set `defaultCode`, `httpStatus` and `retryable`; instances may override the code (vendor
 * codes pass through). `instanceof` works across installed copies of svc: {@link SVC_ERROR_BRAND} plus the class name on the prototype chain.
 */
export abstract class SvcError extends Error {
  /** Cross-copy `instanceof`: class identity first, then brand and name. */
  static override [Symbol.hasInstance](obj: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, obj)) return true;
    if (!isSvcError(obj)) return false;
    for (let p: unknown = Object.getPrototypeOf(obj); p && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
      if ((p as { constructor?: { name?: string } }).constructor?.name === this.name) return true;
    }
    return false;
  }

  /** See {@link SVC_ERROR_BRAND}. */
  readonly [SVC_ERROR_BRAND] = true;

  /** Default JSON-RPC code of this error class. */
  static readonly defaultCode: number = -32603;
  /** HTTP status for a single call carrying this error (eRPC 0.1.x table). */
  static readonly httpStatus: number = 200;
  /** Whether the sweep may try the next upstream / the retry policy may try again. */
  static readonly retryable: boolean = false;

  /** JSON-RPC code written on the wire. */
  readonly code: number;
  /** Structured details shown in `data.details`. */
  readonly details?: Record<string, unknown>;
  /** Upstream's own `error.data`, kept byte-for-byte (revert reasons). */
  readonly upstreamData?: unknown;
  /** HTTP status the upstream answered with. */
  readonly upstreamStatus?: number;
  /** The upstream's raw error object, kept for pass-through classes. */
  readonly upstreamError?: UpstreamErrorRaw;
  /** svc's own structured `error.data` (consensus groups), written whatever `includeErrorDetails` says. */
  readonly data?: unknown;
  /** Seconds until the request may succeed, sent as `Retry-After` on a single call's answer ({@link SvcErrorOptions.retryAfterSeconds}). */
  readonly retryAfterSeconds?: number;
  /** The request's whole answer when this error refuses it as a whole ({@link SvcErrorOptions.answer}). */
  readonly answer?: RefusalAnswer;

  constructor(message: string, opts: SvcErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    const ctor = this.constructor as typeof SvcError;
    this.name = ctor.name;
    this.code = opts.code ?? ctor.defaultCode;
    this.details = opts.details;
    this.upstreamData = opts.upstreamData;
    this.upstreamStatus = opts.upstreamStatus;
    this.upstreamError = opts.upstreamError;
    if (opts.data !== undefined) this.data = opts.data;
    if (opts.retryAfterSeconds !== undefined) this.retryAfterSeconds = opts.retryAfterSeconds;
    if (opts.answer !== undefined) this.answer = opts.answer;
  }

  /** HTTP status for a single call failing with this error. */
  get httpStatus(): number {
    return (this.constructor as typeof SvcError).httpStatus;
  }

  /**
   * Set once a second upstream gave the same error (core/pipeline/charge.ts): a fact about the request, so not retryable, no further
   * upstream tried, passed to the client as the node sent it, charged to no upstream.
   */
  declare confirmed?: boolean;

  /** Whether another upstream or another round may still succeed (never, once {@link confirmed}). */
  get retryable(): boolean {
    return this.confirmed !== true && (this.constructor as typeof SvcError).retryable;
  }

  /** The cause chain as plain JSON (`{code, message, details?, cause?}`): `error.data` when `server.includeErrorDetails` is true. */
  toDetails(depth = 0): Record<string, unknown> {
    const out: Record<string, unknown> = { code: this.name, message: this.message };
    if (this.details) out.details = this.details;
    const cause = (this as { cause?: unknown }).cause;
    if (cause !== undefined && depth < 8) out.cause = serialiseCause(cause, depth + 1);
    return out;
  }
}

function serialiseCause(cause: unknown, depth: number): unknown {
  if (Array.isArray(cause)) return cause.map((c) => serialiseCause(c, depth));
  if (cause instanceof SvcError) return cause.toDetails(depth);
  // A foreign error (a driver's, a library's) may quote a connection string or a URL.
  if (cause instanceof Error) return { code: cause.name, message: redactText(cause.message) };
  return String(cause);
}
