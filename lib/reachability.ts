/**
 * Whether an upstream answers at all, from its last attempt (the upstream-up state of the health
 * tracker, `svc_upstream_up` and the operator page): an attempt the node answered, whatever the
 * answer (a result, a revert, its own rate limit or any JSON-RPC error about the request),
 * says it is up; one that got no answer (connection refused or reset, DNS or TLS failure, no
 * answer before the deadline, HTTP 5xx) says it is down. A cancelled or skipped attempt, or one
 * svc's own budget refused before dialling, says nothing.
 */
import type { AttemptRecord } from '../core/wire/records.ts';

/** An upstream's last reachability verdict. */
export interface Reachability {
  /** The last attempt that said anything got an answer. */
  up: boolean;
  /** When that attempt ended, ms since the epoch. */
  at: number;
  /** Since when the current state holds, ms since the epoch. */
  since: number;
  /** Why it is down: the error of the attempt that said so (already redacted); undefined while up. */
  error?: string;
  /**
   * Down because no connection could be made (refused, no route, name not resolved): no node
   * was reached at all, unlike a timeout or an HTTP 5xx from a node that is there.
   */
  unreachable?: boolean;
}

/** Socket errors that mean no node was reached: the connection itself failed. */
const CONNECT_ERRNOS: ReadonlySet<string> = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

/** True when an attempt failed before reaching a node (see {@link CONNECT_ERRNOS}). */
export function connectFailed(a: AttemptRecord): boolean {
  const errno = (a.error?.details as { errno?: unknown } | undefined)?.errno;
  return typeof errno === 'string' && CONNECT_ERRNOS.has(errno);
}

/**
 * What one finished attempt says about its upstream.
 * @returns `up`, `down`, or undefined when it says nothing (cancelled, skipped, refused by svc's own budget, in flight)
 */
export function reachabilityOf(a: AttemptRecord): 'up' | 'down' | undefined {
  switch (a.outcome) {
    case 'success':
    case 'exec_revert':
      return 'up';
    case 'timeout':
      return 'down';
    case 'rate_limited':
      // The node's own 429 is an answer; svc's budget refusing before dialling says nothing.
      return a.error?.name === 'ErrEndpointCapacityExceeded' ? 'up' : undefined;
    case 'error': {
      const e = a.error;
      if (!e) return undefined;
      if (e.name === 'ErrEndpointRequestTimeout') return 'down';
      if ((e.details as { errno?: unknown } | undefined)?.errno !== undefined) return 'down';
      if (e.name === 'ErrEndpointServerSideException' && (e.upstreamStatus ?? 0) >= 500) return 'down';
      return 'up';
    }
    default:
      return undefined;
  }
}
