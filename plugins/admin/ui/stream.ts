/**
 * The operator page's live stream (`GET /admin/ui/events`, Server-Sent Events): one timer for
 * every open stream, one snapshot per tick written to each (so N viewers cost one snapshot per
 * interval, not N). Bounded: at most `maxStreams` open at once (the next one is refused), a
 * stream whose client does not read (more than {@link MAX_BUFFERED_BYTES} waiting) is closed,
 * and every stream ends when svc leaves `serving` (a drain must not wait for a page) or on
 * {@link EventStreams.closeAll} (the `closing` hook), so `close()` is never held by a viewer.
 */
import { PassThrough } from 'node:stream';

/** Bytes a stream may have waiting for a slow client before it is closed. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

/** One open stream. */
interface Open {
  out: PassThrough;
  /** Node's socket write buffer of the response. */
  pending(): number;
}

/** Options of {@link EventStreams}. */
export interface EventStreamsOptions {
  /** Most open streams; the next one is refused. */
  maxStreams: number;
  /** Push interval, ms. */
  intervalMs: number;
  /** The event data of one tick (a JSON text), built once per tick for every stream. */
  produce(): Promise<string>;
  /** False once svc leaves `serving`: every stream then ends. */
  serving(): boolean;
  /** Where a failing `produce` is reported (the stream stays open; the next tick tries again). */
  onError(err: unknown): void;
}

/** The set of open SSE streams and their shared timer. */
export class EventStreams {
  private readonly open = new Set<Open>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private closed = false;

  /** @param opts bounds and the data source */
  constructor(private readonly opts: EventStreamsOptions) {}

  /** Streams open now. */
  get size(): number {
    return this.open.size;
  }

  /**
   * Opens a stream: an SSE body that gets `event: snapshot` with the first data at once, then one
   * per interval, until the client goes away or svc closes.
   * @param pending the response's queued bytes (Node's `res.writableLength`), for the slow-client bound
   * @returns the body to answer with, or undefined when `maxStreams` are open already or svc is closing
   */
  add(pending: () => number): PassThrough | undefined {
    if (this.closed || this.open.size >= this.opts.maxStreams || !this.opts.serving()) return undefined;
    const out = new PassThrough();
    const entry: Open = { out, pending };
    this.open.add(entry);
    const drop = () => {
      this.open.delete(entry);
      if (this.open.size === 0) this.stopTimer();
    };
    out.once('close', drop);
    out.once('error', drop);
    // The client reconnects after this long when the stream ends (EventSource semantics).
    out.write(`retry: ${Math.max(1000, this.opts.intervalMs)}\n\n`);
    void this.push([entry]);
    this.timer ??= setInterval(() => void this.tick(), this.opts.intervalMs);
    return out;
  }

  /** Ends every stream and refuses new ones (the `closing` hook). Idempotent. */
  closeAll(): void {
    this.closed = true;
    this.stopTimer();
    for (const s of this.open) s.out.end();
    this.open.clear();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One interval: ends every stream when svc is draining, else pushes one snapshot to each. */
  private async tick(): Promise<void> {
    if (!this.opts.serving()) {
      for (const s of this.open) s.out.end();
      this.open.clear();
      this.stopTimer();
      return;
    }
    // A tick still building (a slow registry read) is not overlapped.
    if (this.ticking) return;
    this.ticking = true;
    try {
      await this.push([...this.open]);
    } finally {
      this.ticking = false;
    }
  }

  /** Writes one snapshot event to the given streams. */
  private async push(to: readonly Open[]): Promise<void> {
    let data: string;
    try {
      data = await this.opts.produce();
    } catch (e) {
      this.opts.onError(e);
      return;
    }
    // `data:` may not hold a line break; JSON.stringify output has none.
    const event = `event: snapshot\ndata: ${data}\n\n`;
    for (const s of to) {
      if (!this.open.has(s)) continue;
      if (s.pending() + s.out.writableLength > MAX_BUFFERED_BYTES) {
        s.out.destroy();
        continue;
      }
      s.out.write(event);
    }
  }
}
