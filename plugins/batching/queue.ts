/**
 * The outbound batch queue of one upstream (spec §2.6, §3.5, §4.7): calls wait
 * until the queue holds `batchMaxSize` of them or `batchMaxWait` passed since the first, then go
 * as one JSON-RPC batch. Independent of HTTP: the plugin hands it a `send` function.
 */
import type { RpcResult } from 'svc-proxy/plugin';
import { ErrCancelled, ErrEndpointRequestTimeout, SvcError } from 'svc-proxy/plugin/errors';
import { isDeadline } from 'svc-proxy/plugin/contracts';

/** One call waiting in the queue. */
export interface QueuedCall {
  /** The call's JSON-RPC id in the batch: a second call with a pending id flushes the queue first (§3.5). */
  id: string;
  method: string;
  params: unknown;
  /** The call's absolute deadline, `Date.now()` ms. */
  deadline: number;
  /** Cancels the call (a lost hedge leg, the client leaving). */
  signal: AbortSignal;
}

/** Settings of a {@link BatchQueue}. */
export interface BatchQueueOptions {
  /** Queue length that flushes at once; 0 = every call flushes at once. */
  maxSize: number;
  /** Time from the first queued call to a forced flush, ms; 0 = at once. */
  maxWaitMs: number;
  /** Sends one batch; never rejects: one outcome per call, in order. */
  send: (calls: readonly QueuedCall[]) => Promise<Array<RpcResult | SvcError>>;
  /** Delay before a transport failure reaches the queued calls, ms (spec §4.7 #6: 5 ms). */
  graceMs?: number;
}

interface Pending {
  call: QueuedCall;
  resolve: (r: RpcResult) => void;
  reject: (e: unknown) => void;
  /** True once the call left (cancelled): its answer is discarded. */
  gone: boolean;
  onAbort: () => void;
}

/** The queue of one upstream. */
export class BatchQueue {
  private queue: Pending[] = [];
  private waitTimer?: NodeJS.Timeout;
  private deadlineTimer?: NodeJS.Timeout;

  /** @param opts size, wait and the send function */
  constructor(private readonly opts: BatchQueueOptions) {}

  /** Calls waiting to be sent. */
  get length(): number {
    return this.queue.length;
  }

  /**
   * Queues a call.
   * @returns the call's answer
   * @throws the upstream's error for this call; `ErrEndpointRequestTimeout` when the batch deadline
   *   (the earliest of the queued calls) passed before the flush; the cancel reason when cancelled
   */
  add(call: QueuedCall): Promise<RpcResult> {
    if (call.signal.aborted) return Promise.reject(cancelled(call.signal));
    // §3.5: a call whose id is already pending flushes the queue first.
    if (this.queue.some((p) => p.call.id === call.id)) this.flush();
    return new Promise<RpcResult>((resolve, reject) => {
      const p: Pending = {
        call,
        resolve,
        reject,
        gone: false,
        onAbort: () => {
          p.gone = true;
          const i = this.queue.indexOf(p);
          if (i >= 0) {
            this.queue.splice(i, 1);
            if (this.queue.length === 0) this.clearTimers();
            else this.armDeadline();
          }
          reject(cancelled(call.signal));
        },
      };
      call.signal.addEventListener('abort', p.onAbort, { once: true });
      this.queue.push(p);
      if (this.opts.maxSize <= 0 || this.queue.length >= this.opts.maxSize || this.opts.maxWaitMs <= 0) {
        this.flush();
        return;
      }
      if (this.queue.length === 1) this.waitTimer = setTimeout(() => this.flush(), this.opts.maxWaitMs);
      this.armDeadline();
    });
  }

  /** Sends everything queued as one batch (no-op when empty). */
  flush(): void {
    this.clearTimers();
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    void this.opts.send(batch.map((p) => p.call)).then((outcomes) => {
      // A transport failure is one error shared by every call: it arrives after a grace window.
      const shared = outcomes.length > 1 && outcomes.every((o) => o === outcomes[0]) && outcomes[0] instanceof SvcError;
      const settle = () =>
        batch.forEach((p, i) => {
          p.call.signal.removeEventListener('abort', p.onAbort);
          if (p.gone) return; // cancelled after the flush: the answer is discarded
          const o = outcomes[i];
          if (o instanceof SvcError || o === undefined) p.reject(o ?? new ErrEndpointRequestTimeout('no answer for a batched call'));
          else p.resolve(o);
        });
      if (shared) setTimeout(settle, this.opts.graceMs ?? 5);
      else settle();
    });
  }

  /** The batch deadline is the earliest deadline of the queued calls: when it passes, they all fail. */
  private armDeadline(): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    if (this.queue.length === 0) return;
    const earliest = Math.min(...this.queue.map((p) => p.call.deadline));
    this.deadlineTimer = setTimeout(() => this.expire(), Math.max(0, earliest - Date.now()));
  }

  private expire(): void {
    const batch = this.queue;
    this.queue = [];
    this.clearTimers();
    for (const p of batch) {
      p.call.signal.removeEventListener('abort', p.onAbort);
      p.reject(new ErrEndpointRequestTimeout('outbound batch deadline exceeded before the batch was sent'));
    }
  }

  private clearTimers(): void {
    if (this.waitTimer) clearTimeout(this.waitTimer);
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.waitTimer = undefined;
    this.deadlineTimer = undefined;
  }
}

/** The error a call cancelled while queued ends with: its deadline is a timeout, anything else a cancellation. */
function cancelled(signal: AbortSignal): SvcError {
  const r: unknown = signal.reason;
  if (r instanceof SvcError) return r;
  if (isDeadline(r)) return new ErrEndpointRequestTimeout('call deadline passed while queued for an outbound batch');
  return new ErrCancelled('batched call cancelled while queued');
}
