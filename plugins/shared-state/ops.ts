/**
 * The operator-change log of shared state (pure, no Redis): what a replica appends to the stream
 * `<clusterKey>:ops` for a broadcast of this process (an admin cordon, an API-key change), what it
 * accepts of what it reads back, and the outbox that holds entries while Redis is unreachable.
 *
 * An entry has three fields: `replica` (the sender's fleet replica id: every worker of one
 * `svc start` shares it; kept to tell who made a change), `topic` (the broadcast topic, e.g.
 * `admin`) and `payload` (JSON). Every replica delivers every entry locally in log order, its own
 * included, so all of them end at the log's last entry.
 * Everything read is bounded: another deployment or version may share the Redis.
 */

/** Longest payload a replica appends or accepts, bytes of JSON text (an admin call's params are far smaller). */
export const MAX_OP_PAYLOAD_BYTES = 64 * 1024;
/** Longest topic or replica id accepted, characters. */
export const MAX_OP_NAME = 128;
/** Entries held while Redis is unreachable; beyond it the oldest is dropped. */
export const MAX_OUTBOX = 1000;
/** Entries read per XREAD. */
export const OPS_READ_COUNT = 100;

/** The stream fields of one entry. */
export interface OpFields {
  /** Fleet replica id of the sender. */
  replica: string;
  /** Broadcast topic. */
  topic: string;
  /** The payload as JSON text. */
  payload: string;
  /** Index signature: node-redis takes a plain record of strings. */
  [field: string]: string;
}

/** One entry of the log, as read. */
export interface OpEntry {
  /** Stream id (`<ms>-<seq>`). */
  id: string;
  /** Fleet replica id of the sender. */
  replica: string;
  /** Broadcast topic. */
  topic: string;
  /** The payload, parsed. */
  payload: unknown;
}

/**
 * The fields of an entry for a broadcast of this process.
 * @param replica this replica's fleet id
 * @param topic the broadcast topic
 * @param payload the broadcast payload
 * @returns the fields, or undefined when the payload is not JSON-serialisable or its JSON is over
 *   {@link MAX_OP_PAYLOAD_BYTES} (it is then not shared; the caller logs it)
 */
export function opFields(replica: string, topic: string, payload: unknown): OpFields | undefined {
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch {
    return undefined;
  }
  if (json === undefined || Buffer.byteLength(json) > MAX_OP_PAYLOAD_BYTES || topic.length > MAX_OP_NAME) return undefined;
  return { replica, topic, payload: json };
}

/** A stream id `<ms>-<seq>`. */
const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

/**
 * Parses one entry read from the stream; anything malformed or over the bounds is dropped.
 * @param id the stream id
 * @param fields the entry's fields as node-redis returns them
 * @returns the entry, or undefined
 */
export function parseOpEntry(id: unknown, fields: unknown): OpEntry | undefined {
  if (typeof id !== 'string' || !STREAM_ID.test(id) || typeof fields !== 'object' || fields === null) return undefined;
  const { replica, topic, payload } = fields as Record<string, unknown>;
  if (typeof replica !== 'string' || typeof topic !== 'string' || typeof payload !== 'string') return undefined;
  if (replica === '' || topic === '' || replica.length > MAX_OP_NAME || topic.length > MAX_OP_NAME || payload.length > MAX_OP_PAYLOAD_BYTES) return undefined;
  try {
    return { id, replica, topic, payload: JSON.parse(payload) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * The entries of an XREAD reply (node-redis's RESP2 shape: `[{ name, messages: [{ id, message }] }]`
 * or null), parsed.
 * @param reply the reply
 * @returns every entry in order with its stream id, `undefined` for a malformed one (its id still
 *   moves the read position on), and the last id seen
 */
export function entriesOfReply(reply: unknown): { entries: Array<OpEntry | undefined>; lastId: string | undefined } {
  const entries: Array<OpEntry | undefined> = [];
  let lastId: string | undefined;
  if (!Array.isArray(reply)) return { entries, lastId };
  for (const stream of reply as unknown[]) {
    const messages = (stream as { messages?: unknown } | null)?.messages;
    if (!Array.isArray(messages)) continue;
    for (const m of messages.slice(0, OPS_READ_COUNT * 10) as unknown[]) {
      const { id, message } = (m ?? {}) as { id?: unknown; message?: unknown };
      if (typeof id === 'string' && STREAM_ID.test(id)) lastId = id;
      entries.push(parseOpEntry(id, message));
    }
  }
  return { entries, lastId };
}

/**
 * Entries appended while they could not be written (Redis unreachable or frozen), in order,
 * bounded: past {@link MAX_OUTBOX} the oldest is dropped and counted.
 */
export class OpsOutbox {
  private readonly queue: OpFields[] = [];
  /** Entries dropped because the outbox was full, since the last {@link takeDropped}. */
  private dropped = 0;

  constructor(private readonly max = MAX_OUTBOX) {}

  /** Entries waiting. */
  get size(): number {
    return this.queue.length;
  }

  /** Queues an entry (dropping the oldest when full). */
  push(fields: OpFields): void {
    this.queue.push(fields);
    while (this.queue.length > this.max) {
      this.queue.shift();
      this.dropped++;
    }
  }

  /** The oldest entry, still queued. */
  peek(): OpFields | undefined {
    return this.queue[0];
  }

  /** Removes the oldest entry once it is written. */
  shift(): void {
    this.queue.shift();
  }

  /** How many entries were dropped since the last call, resetting the count. */
  takeDropped(): number {
    const n = this.dropped;
    this.dropped = 0;
    return n;
  }
}
