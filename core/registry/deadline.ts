/** Why a request was aborted: a call deadline, told apart from a hedge loss or a client's cancellation by its brand. */
const ABORT_TIMEOUT = Symbol('svc.timeout');

/** The abort reason used for call deadlines, so the transport can tell timeouts from cancellations. */
export class DeadlineReason {
  readonly [ABORT_TIMEOUT] = true;
  constructor(readonly message = 'request deadline exceeded') {}
}

/** True when an abort reason is a deadline (not a hedge loss or client cancel). */
export function isDeadline(reason: unknown): boolean {
  return !!reason && typeof reason === 'object' && ABORT_TIMEOUT in reason;
}
