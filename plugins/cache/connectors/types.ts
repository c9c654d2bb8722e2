/**
 * The storage contract every cache tier implements, and the one
 * encoding the shared tiers use, so any svc replica reads what another wrote.
 */
import type { Finality, Logger } from 'svc-proxy/plugin';

/** A connector's driver: `redis` and `postgresql` run on @keyv/redis and @keyv/postgres, `keyv` on any keyv adapter. */
export type ConnectorDriver = 'memory' | 'redis' | 'postgresql' | 'keyv';

/** One cached answer. */
export interface CacheEntry {
  /** The result's exact JSON (text, or bytes for large answers): written to clients as is. */
  wire: string | Buffer;
  /** Finality class it was written under. */
  finality: Finality;
  /** Block number it rests on, when known (realtime: the head it was read at). */
  blockNumber?: number;
  /** Block hash it rests on, when the answer names one (reorg check of unfinalized entries). */
  blockHash?: string;
  /** Write time, `Date.now()` ms (reorg check). */
  writtenAt: number;
}

/**
 * A cache tier. `get`/`getReverse` resolve `undefined` on a miss and reject on a tier failure
 * (the caller counts it and treats it as a miss). The memory tier answers synchronously.
 */
export interface Connector {
  /** Connector id (labels, `skip-cache-read`). */
  readonly id: string;
  /** Driver name. */
  readonly driver: ConnectorDriver;
  /** Connects (never rejects: a tier that is down makes reads miss until it comes back). */
  open(): Promise<void>;
  /** Closes connections and timers. */
  close(): Promise<void>;
  /**
   * The entry at `partition`/`range`.
   * @param finality the call's finality class (a remote tier's `failsafeForGets` entry may match on it)
   */
  get(partition: string, range: string, finality?: Finality): CacheEntry | undefined | Promise<CacheEntry | undefined>;
  /** The entry a lookup by hash was last written to, through the reverse index of `network`. */
  getReverse(network: string, range: string, finality?: Finality): CacheEntry | undefined | Promise<CacheEntry | undefined>;
  /**
   * Stores an entry.
   * @param ttlMs lifetime in ms; 0 = forever
   * @param reverseNetwork when set, also points the reverse index of that network at this entry
   */
  set(partition: string, range: string, entry: CacheEntry, ttlMs: number, reverseNetwork?: string): void | Promise<void>;
  /** Drops an entry (a reorged block). */
  delete(partition: string, range: string): void | Promise<void>;
}

/** Bytes of an entry's result. */
export function wireSize(wire: string | Buffer): number {
  return typeof wire === 'string' ? wire.length : wire.length;
}

/**
 * Shared-tier encoding: a one-line JSON header, a newline, then the result's JSON untouched (so a
 * hit is served without parsing the result).
 */
export function encodeEntry(e: CacheEntry): string {
  const head: Record<string, unknown> = { f: e.finality, t: e.writtenAt };
  if (e.blockNumber !== undefined) head.n = e.blockNumber;
  if (e.blockHash !== undefined) head.h = e.blockHash;
  return `${JSON.stringify(head)}\n${typeof e.wire === 'string' ? e.wire : e.wire.toString('utf8')}`;
}

/**
 * Reads {@link encodeEntry}'s text.
 * @returns the entry, or undefined when the text is not an entry (another writer's key)
 */
export function decodeEntry(text: string): CacheEntry | undefined {
  const nl = text.indexOf('\n');
  if (nl < 0) return undefined;
  try {
    const h = JSON.parse(text.slice(0, nl)) as { f?: unknown; t?: unknown; n?: unknown; h?: unknown };
    if (typeof h.f !== 'string' || typeof h.t !== 'number') return undefined;
    const e: CacheEntry = { wire: text.slice(nl + 1), finality: h.f as Finality, writtenAt: h.t };
    if (typeof h.n === 'number') e.blockNumber = h.n;
    if (typeof h.h === 'string') e.blockHash = h.h;
    return e;
  } catch {
    return undefined;
  }
}

/** Key of the reverse-index pointer of a lookup by hash on a network. */
export function reverseKey(network: string, range: string): string {
  return `rvi#${network}#${range}`;
}

/**
 * Hides a connection URI's secrets and address in a tier's error text (URIs
 * never reach logs or labels): the URI itself, its user and password, and `host:port` become
 * `#redacted`.
 * @param uri the connector's connection URI
 * @param password a password given beside the URI
 */
export function connectionRedactor(uri: string, password?: string): (text: string) => string {
  const secrets = [uri, password];
  try {
    const u = new URL(uri);
    secrets.push(
      u.password && decodeURIComponent(u.password),
      u.username && decodeURIComponent(u.username),
      u.host,
      u.port ? `${u.hostname}:${u.port}` : undefined,
      u.hostname.replace(/^\[|\]$/g, ''),
    );
  } catch {
    /* not a URL: the whole string is still hidden */
  }
  const list = secrets.filter((s): s is string => typeof s === 'string' && s.length >= 3).sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const s of list) out = out.split(s).join('#redacted');
    return out;
  };
}

/** A tier's failures are logged at most this often, ms (a dead Redis must not flood the log). */
export const TIER_ERROR_LOG_INTERVAL_MS = 30_000;

/**
 * Logs a remote tier's failures: rate-limited, naming the connector, with the connection URI's
 * secrets and address redacted ({@link connectionRedactor}).
 */
export class TierReporter {
  private lastLog = -Infinity;
  private readonly redact: (text: string) => string;

  /**
   * @param id connector id
   * @param driver driver name, for the message
   * @param logger where to log
   * @param uri the connection URI to keep out of the log
   * @param password a password given beside the URI
   */
  constructor(
    private readonly id: string,
    private readonly driver: string,
    private readonly logger: Logger,
    uri: string,
    password?: string,
  ) {
    this.redact = connectionRedactor(uri, password);
  }

  /** Logs one failure of `what` (connect, read, write, purge...), at most every 30 s. */
  report(what: string, e: unknown): void {
    const now = Date.now();
    if (now - this.lastLog < TIER_ERROR_LOG_INTERVAL_MS) return;
    this.lastLog = now;
    const err = this.redact(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    this.logger.warn(
      { connector: this.id, err },
      `cache connector ${this.id}: ${this.driver} ${what} failed (calls go to upstreams; logged at most every 30 s)`,
    );
  }
}
