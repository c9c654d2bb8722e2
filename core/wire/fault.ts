/**
 * What an upstream's error answer said, and how it becomes a named error. The naming rules are a plugin's (the `upstreamFault`
 * hook, evm-errors for EVM nodes): core only carries the facts and, with no rule matching, passes the vendor's code through.
 */
import { ErrEndpointServerSideException, type SvcError, type SvcErrorOptions, type UpstreamErrorRaw } from './errors.ts';

/** What an upstream said, as far as naming its fault needs it. */
export interface UpstreamFault {
  /** HTTP status of the upstream response. */
  status: number;
  /** JSON-RPC error code, when the body held one. */
  code?: number;
  /** JSON-RPC error message or the HTTP body excerpt (redacted). */
  message: string;
  /** JSON-RPC `error.data`, passed through untouched. */
  data?: unknown;
  /** Method of the call (some rules are method-specific). */
  method: string;
  /** The error object's raw pieces, kept for errors that pass through to the client. */
  raw?: UpstreamErrorRaw;
}

/**
 * Names one fault: an error built with `opts` (status, vendor code and data already in it), or undefined to leave it to the next rule.
 * The `upstreamFault` hook's tap has this shape.
 */
export type FaultClassifier = (fault: UpstreamFault, opts: SvcErrorOptions) => SvcError | undefined;

/**
 * The named error of an upstream fault (spec §7): the classifier's, else `ErrEndpointServerSideException` with the vendor's code.
 * @param upstream the upstream's id, in the error's details
 * @param classify the `upstreamFault` hook's call, when a plugin tapped it
 */
export function nameUpstreamFault(f: UpstreamFault, upstream: string, classify: FaultClassifier | undefined): SvcError {
  if (classify) {
    try {
      const named = classify(f, faultOptions(f, upstream));
      if (named) return named;
    } catch {
      // A rule's bug must not turn an upstream's answer into svc's failure: the fault keeps its generic name.
    }
  }
  // Fresh options: a rule that set a code and then named nothing leaves no trace here.
  const opts = faultOptions(f, upstream);
  if (f.code !== undefined) opts.code = f.code;
  return new ErrEndpointServerSideException(f.message || `upstream answered HTTP ${f.status}`, opts);
}

/** The options every named fault carries: the upstream's status, code and data, and its raw error pieces. */
function faultOptions(f: UpstreamFault, upstream: string): SvcErrorOptions {
  const opts: SvcErrorOptions = { upstreamStatus: f.status, details: { upstreamCode: f.code, upstreamStatus: f.status, upstream } };
  if (f.data !== undefined) opts.upstreamData = f.data;
  if (f.raw !== undefined) opts.upstreamError = f.raw;
  return opts;
}
