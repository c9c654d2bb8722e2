/**
 * Small values held by the primary of `server.workers` for every worker (docs/operations.md "Workers"): what one worker stores, the
 * others read. The workers share the listening socket, so a client's next request may reach another worker; state a client keeps
 * between requests (an svc-managed filter) must therefore outlive the worker that made it. Without workers a plugin keeps such state in
 * its own memory; across replicas, in the `sharedState` Redis. Every operation is one IPC round trip with a deadline: a primary that does
 * not answer fails the operation, never holds a request.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { svcWorker } from './cluster.ts';

/** Longest scope or key, characters (a plugin's own names and ids). */
export const MAX_PRIMARY_KEY_LENGTH = 200;
/** Largest value, characters. */
export const MAX_PRIMARY_VALUE_LENGTH = 1024 * 1024;
/** Most characters the primary holds in values of one scope; past it the least recently used go. */
export const MAX_PRIMARY_SCOPE_CHARS = 64 * 1024 * 1024;
/** Most entries of one scope. */
export const MAX_PRIMARY_SCOPE_ENTRIES = 100_000;

/** One operation on the primary's values, as it travels over the cluster IPC channel. */
interface ValueRequest {
  /** Request number, unique in the worker. */
  svcValues: number;
  op: 'get' | 'set' | 'claim' | 'release' | 'replace' | 'delete';
  scope: string;
  key: string;
  /** The value set (`set`, `replace`), the token (`claim`, `release`). */
  value?: string;
  /** `replace`: SHA-1 (hex) of the value expected in place. */
  expected?: string;
  ttlMs?: number;
}

/** The primary's answer: the value (`get`), whether it was set (`claim`) or there (`delete`), or why it failed. */
interface ValueAnswer {
  svcValuesAnswer: number;
  value?: string;
  done?: boolean;
  error?: string;
}

/**
 * Values kept in the primary for every worker, the same operations as the fleet's shared values (`svc-proxy/plugins/shared-state`
 * `SharedValues`): a store written for one works with the other.
 */
export interface PrimaryValues {
  /** Always true: the values are shared by the workers of this replica. */
  readonly enabled: boolean;
  /** @returns the value, or undefined when absent or expired @throws Error when the primary does not answer within the deadline */
  get(key: string): Promise<string | undefined>;
  /** Sets a value expiring after `ttlMs` (ms, at least 1). @throws Error when the primary does not answer, or for a key or value over its bound */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /**
   * Sets a key only when absent, for `ttlMs` (ms): a lock among the workers.
   * @param token the value set (default `1`), for {@link release}
   * @returns whether this call set it @throws Error as {@link set}
   */
  claim(key: string, ttlMs: number, token?: string): Promise<boolean>;
  /** Removes a key only while its value is `token` (a lock released by its holder only). @returns whether this call removed it @throws Error as {@link get} */
  release(key: string, token: string): Promise<boolean>;
  /**
   * Sets a key's value (for `ttlMs`, ms) only while its current value is `expected` (compare-and-set; the primary compares SHA-1
   * digests, so the old value is not sent again). @returns whether this call set it @throws Error as {@link set}
   */
  replace(key: string, expected: string, value: string, ttlMs: number): Promise<boolean>;
  /** Removes a key. @returns whether it was there @throws Error when the primary does not answer */
  delete(key: string): Promise<boolean>;
}

/** SHA-1 of a value's UTF-8 bytes, hex. */
function sha1Hex(value: string): string {
  return createHash('sha1').update(value).digest('hex');
}

let nextRequest = 1;
const pending = new Map<number, (a: ValueAnswer) => void>();
let listener: ((m: unknown) => void) | undefined;

function ask(request: Omit<ValueRequest, 'svcValues'>, timeoutMs: number): Promise<ValueAnswer> {
  const send = process.send?.bind(process);
  if (!send) return Promise.reject(new Error("primary values: not one of svc's workers"));
  if (request.scope.length > MAX_PRIMARY_KEY_LENGTH || request.key.length > MAX_PRIMARY_KEY_LENGTH)
    return Promise.reject(new RangeError(`primary values: a scope or key over ${MAX_PRIMARY_KEY_LENGTH} characters`));
  if (request.value !== undefined && request.value.length > MAX_PRIMARY_VALUE_LENGTH)
    return Promise.reject(new RangeError(`primary values: a value over ${MAX_PRIMARY_VALUE_LENGTH} characters`));
  if (!listener) {
    listener = (m: unknown) => {
      const a = m as Partial<ValueAnswer> | null;
      if (typeof a === 'object' && a !== null && typeof a.svcValuesAnswer === 'number') pending.get(a.svcValuesAnswer)?.(a as ValueAnswer);
    };
    process.on('message', listener);
  }
  return new Promise<ValueAnswer>((resolve, reject) => {
    const n = nextRequest++;
    if (nextRequest > 2_000_000_000) nextRequest = 1;
    const fail = (e: Error): void => {
      clearTimeout(timer);
      pending.delete(n);
      reject(e);
    };
    const timer = setTimeout(() => fail(new Error(`the primary did not answer within ${timeoutMs} ms`)), timeoutMs);
    pending.set(n, (a) => {
      clearTimeout(timer);
      pending.delete(n);
      if (a.error !== undefined) reject(new Error(`primary values: ${a.error}`));
      else resolve(a);
    });
    const m: ValueRequest = { svcValues: n, ...request };
    send(m, undefined, {}, (e: Error | null) => {
      if (e) fail(e);
    });
  });
}

/**
 * The primary's values of one scope, for a worker of `server.workers`.
 * @param scope the plugin's name for its values, identical in every worker (e.g. `filters`)
 * @param timeoutMs deadline of one operation, ms
 * @returns the values, or undefined outside svc's workers (a single process keeps its state itself)
 */
export function primaryValues(scope: string, timeoutMs = 500): PrimaryValues | undefined {
  if (!svcWorker()) return undefined;
  return {
    enabled: true,
    get: async (key) => (await ask({ op: 'get', scope, key }, timeoutMs)).value,
    set: async (key, value, ttlMs) => void (await ask({ op: 'set', scope, key, value, ttlMs }, timeoutMs)),
    claim: async (key, ttlMs, token = '1') => (await ask({ op: 'claim', scope, key, value: token, ttlMs }, timeoutMs)).done === true,
    release: async (key, token) => (await ask({ op: 'release', scope, key, value: token }, timeoutMs)).done === true,
    replace: async (key, expected, value, ttlMs) =>
      (await ask({ op: 'replace', scope, key, expected: sha1Hex(expected), value, ttlMs }, timeoutMs)).done === true,
    delete: async (key) => (await ask({ op: 'delete', scope, key }, timeoutMs)).done === true,
  };
}

/**
 * The primary's side of {@link primaryValues}: one bounded TTL map per scope ({@link MAX_PRIMARY_SCOPE_ENTRIES} entries and
 * {@link MAX_PRIMARY_SCOPE_CHARS} characters, least recently used first out), shared by every worker. Scopes and keys come from the
 * workers' plugins, never from clients verbatim; every field of a message is checked before use.
 */
export class PrimaryValueStore {
  private readonly scopes = new Map<string, LRUCache<string, string>>();

  /** @param now clock, ms (tests drive it) */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Decides a worker's message when it is a value operation.
   * @param m a message from a worker
   * @param reply sends the answer back to that worker
   * @returns whether the message was a value operation (answered, or dropped when malformed)
   */
  handle(m: unknown, reply: (answer: ValueAnswer) => void): boolean {
    const r = m as Partial<ValueRequest> | null;
    if (typeof r !== 'object' || r === null || typeof r.svcValues !== 'number') return false;
    const { op, scope, key, value, ttlMs, expected } = r;
    const answer = (a: Omit<ValueAnswer, 'svcValuesAnswer'>) => reply({ svcValuesAnswer: r.svcValues as number, ...a });
    if (typeof scope !== 'string' || typeof key !== 'string' || scope.length > MAX_PRIMARY_KEY_LENGTH || key.length > MAX_PRIMARY_KEY_LENGTH) {
      answer({ error: 'malformed scope or key' });
      return true;
    }
    const ttl = typeof ttlMs === 'number' && ttlMs >= 1 && Number.isFinite(ttlMs) ? ttlMs : undefined;
    let values = this.scopes.get(scope);
    if (!values) {
      const now = this.now;
      values = new LRUCache<string, string>({
        max: MAX_PRIMARY_SCOPE_ENTRIES,
        maxSize: MAX_PRIMARY_SCOPE_CHARS,
        sizeCalculation: (v, k) => v.length + k.length + 1,
        ttl: 1,
        ttlResolution: 0,
        perf: { now },
      });
      this.scopes.set(scope, values);
    }
    switch (op) {
      case 'get':
        answer(values.has(key) ? { value: values.get(key) as string } : {});
        return true;
      case 'set':
        if (typeof value !== 'string' || value.length > MAX_PRIMARY_VALUE_LENGTH || ttl === undefined) answer({ error: 'malformed value or ttl' });
        else {
          values.set(key, value, { ttl });
          answer({ done: true });
        }
        return true;
      case 'claim':
        if (ttl === undefined || (value !== undefined && (typeof value !== 'string' || value.length > MAX_PRIMARY_KEY_LENGTH)))
          answer({ error: 'malformed ttl or token' });
        else if (values.has(key)) answer({ done: false });
        else {
          values.set(key, value ?? '1', { ttl });
          answer({ done: true });
        }
        return true;
      case 'release':
        answer({ done: typeof value === 'string' && values.get(key) === value && values.delete(key) });
        return true;
      case 'replace': {
        const current = values.get(key);
        if (typeof value !== 'string' || value.length > MAX_PRIMARY_VALUE_LENGTH || ttl === undefined || typeof expected !== 'string')
          answer({ error: 'malformed value, expected or ttl' });
        else if (current === undefined || sha1Hex(current) !== expected) answer({ done: false });
        else {
          values.set(key, value, { ttl });
          answer({ done: true });
        }
        return true;
      }
      case 'delete':
        answer({ done: values.delete(key) });
        return true;
      default:
        answer({ error: 'unknown operation' });
        return true;
    }
  }
}
