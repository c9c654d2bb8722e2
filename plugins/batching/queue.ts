/**
 * The outbound batch queue of one upstream (spec §2.6, §3.5, §4.7): calls wait
 * until the queue holds `batchMaxSize` of them or `batchMaxWait` passed since the first, then go
 * as one JSON-RPC batch. Independent of HTTP: the plugin hands it a `send` function.
 *
 * Every call of a client batch passes through here, so a queued call costs one record and one
 * listener: no closure per call, and a deadline timer only when a queued call's deadline comes
 * before the flush (it almost never does: deadlines are seconds, the wait milliseconds).
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

/** Settings of a {@link BatchQueue} of calls of type `C`. */
export interface BatchQueueOptions<C extends QueuedCall = QueuedCall> {
  /** Queue length that flushes at once; 0 = every call flushes at once. */
  maxSize: number;
  /** Time from the first queued call to a forced flush, ms; 0 = at once. */
  maxWaitMs: number;
  /** Sends one batch; never rejects: one outcome per call, in order. */
  send: (calls: readonly C[]) => Promise<Array<RpcResult | SvcError>>;
  /** Delay before a transport failure reaches the queued calls, ms (spec §4.7 #6: 5 ms). */
  graceMs?: number;
  /**
   * The caller guarantees that no two queued calls share an id (it numbers them itself), so the §3.5 duplicate-id flush is skipped
   * instead of scanning the queue on every call.
   */
  uniqueIds?: boolean;
}

/** A queued call with its promise's ends; it is its own abort listener (no closure per call). */
class Pending<C extends QueuedCall> {
  /** True once the call left (cancelled): its answer is discarded. */
  gone = false;

  constructor(
    readonly call: C,
    readonly resolve: (r: RpcResult) => void,
    readonly reject: (e: unknown) => void,
    private readonly queue: Queue<C>,
  ) {}

  /** The call's signal aborted: it leaves the queue (or its answer is discarded) and fails with the reason. */
  handleEvent(): void {
    this.gone = true;
    this.queue.drop(this);
    this.reject(cancelled(this.call.signal));
  }
}

/** The queue of one upstream. */
export class BatchQueue<C extends QueuedCall = QueuedCall> {
  readonly #q: Queue<C>;

  /** @param opts size, wait and the send function */
  constructor(opts: BatchQueueOptions<C>) {
    this.#q = new Queue(opts);
  }

  /** Calls waiting to be sent. */
  get length(): number {
    return this.#q.length;
  }

  /**
   * Queues a call.
   * @returns the call's answer
   * @throws the upstream's error for this call; `ErrEndpointRequestTimeout` when the batch deadline
   *   (the earliest of the queued calls) passed before the flush; the cancel reason when cancelled
   */
  add(call: C): Promise<RpcResult> {
    return this.#q.add(call);
  }

  /** Sends everything queued as one batch (no-op when empty). */
  flush(): void {
    this.#q.flush();
  }
}

/** The queue's state and logic, kept off {@link BatchQueue}'s public surface (its calls' listeners and timers reach it). */
class Queue<C extends QueuedCall> {
  private queue: Array<Pending<C>> = [];
  private waitTimer?: NodeJS.Timeout;
  private deadlineTimer?: NodeJS.Timeout;
  /** When the wait timer flushes the queue, `Date.now()` ms (Infinity while nothing waits). */
  private flushAt = Infinity;
  /** The deadline the deadline timer is armed for, `Date.now()` ms (Infinity when unarmed). */
  private armedAt = Infinity;

  constructor(private readonly opts: BatchQueueOptions<C>) {}

  get length(): number {
    return this.queue.length;
  }

  add(call: C): Promise<RpcResult> {
    if (call.signal.aborted) return Promise.reject(cancelled(call.signal));
    // §3.5: a call whose id is already pending flushes the queue first.
    if (!this.opts.uniqueIds && this.queue.some((p) => p.call.id === call.id)) this.flush();
    return new Promise<RpcResult>((resolve, reject) => {
      const p = new Pending(call, resolve, reject, this);
      call.signal.addEventListener('abort', p, { once: true });
      this.queue.push(p);
      const { maxSize, maxWaitMs } = this.opts;
      if (maxSize <= 0 || this.queue.length >= maxSize || maxWaitMs <= 0) {
        this.flush();
        return;
      }
      if (this.queue.length === 1) {
        this.flushAt = Date.now() + maxWaitMs;
        this.waitTimer = setTimeout(flushQueue, maxWaitMs, this);
      }
      // The batch deadline is the earliest deadline of the queued calls; it needs a timer only when it comes before the flush.
      if (call.deadline < this.armedAt && call.deadline < this.flushAt) this.armDeadline(call.deadline);
    });
  }

  flush(): void {
    this.clearTimers();
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    void this.opts.send(batch.map((p) => p.call)).then((outcomes) => {
      // A transport failure is one error shared by every call: it arrives after a grace window.
      const shared = outcomes.length > 1 && outcomes.every((o) => o === outcomes[0]) && outcomes[0] instanceof SvcError;
      if (shared) setTimeout(settle, this.opts.graceMs ?? 5, batch, outcomes);
      else settle(batch, outcomes);
    });
  }

  /** A cancelled call leaves the queue (a no-op once it was sent: its answer is discarded then). */
  drop(p: Pending<C>): void {
    const i = this.queue.indexOf(p);
    if (i < 0) return;
    this.queue.splice(i, 1);
    if (this.queue.length === 0) this.clearTimers();
  }

  private armDeadline(at: number): void {
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.armedAt = at;
    this.deadlineTimer = setTimeout(deadlineReached, Math.max(0, at - Date.now()), this);
  }

  /** The armed deadline came: the queued calls fail if the earliest of them has passed (a cancelled call may have held it). */
  onDeadline(): void {
    this.deadlineTimer = undefined;
    this.armedAt = Infinity;
    let earliest = Infinity;
    for (const p of this.queue) if (p.call.deadline < earliest) earliest = p.call.deadline;
    if (earliest > Date.now()) {
      if (earliest < this.flushAt) this.armDeadline(earliest);
      return;
    }
    const batch = this.queue;
    this.queue = [];
    this.clearTimers();
    for (const p of batch) {
      p.call.signal.removeEventListener('abort', p);
      p.reject(new ErrEndpointRequestTimeout('outbound batch deadline exceeded before the batch was sent'));
    }
  }

  private clearTimers(): void {
    if (this.waitTimer) clearTimeout(this.waitTimer);
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
    this.waitTimer = undefined;
    this.deadlineTimer = undefined;
    this.flushAt = Infinity;
    this.armedAt = Infinity;
  }
}

/** Timer callbacks (module-level, so no closure is allocated per batch). */
function flushQueue(q: { flush(): void }): void {
  q.flush();
}
function deadlineReached(q: { onDeadline(): void }): void {
  q.onDeadline();
}

/** Hands each sent call its outcome, in order; a call cancelled after the flush has its answer discarded. */
function settle<C extends QueuedCall>(batch: ReadonlyArray<Pending<C>>, outcomes: ReadonlyArray<RpcResult | SvcError>): void {
  for (let i = 0; i < batch.length; i++) {
    const p = batch[i] as Pending<C>;
    p.call.signal.removeEventListener('abort', p);
    if (p.gone) continue;
    const o = outcomes[i];
    if (o instanceof SvcError || o === undefined) p.reject(o ?? new ErrEndpointRequestTimeout('no answer for a batched call'));
    else p.resolve(o);
  }
}

/** The error a call cancelled while queued ends with: its deadline is a timeout, anything else a cancellation. */
function cancelled(signal: AbortSignal): SvcError {
  const r: unknown = signal.reason;
  if (r instanceof SvcError) return r;
  if (isDeadline(r)) return new ErrEndpointRequestTimeout('call deadline passed while queued for an outbound batch');
  return new ErrCancelled('batched call cancelled while queued');
}
