/**
 * The shared-state plugin's {@link SharedValues}: plain keys with a TTL on its main Redis
 * connection, each operation bounded in size and time (api.ts).
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from 'svc-proxy/util';
import { MAX_SHARED_KEY_LENGTH, MAX_SHARED_VALUE_BYTES, SHARED_VALUE_TIMEOUT_MS, type SharedValues } from './api.ts';

/** GET bounded in size: -1 instead of a value over ARGV[1] bytes (STRLEN first, so it is never sent). */
export const GET_BOUNDED_SCRIPT = "if redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[1]) then return -1 end return redis.call('GET', KEYS[1])";
/** Compare-and-delete: DEL only while the value is ARGV[1]. */
export const RELEASE_SCRIPT = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
/** Compare-and-set: SET ARGV[2] PX ARGV[3] only while the value's SHA-1 is ARGV[1]. */
export const REPLACE_SCRIPT =
  "local v = redis.call('GET', KEYS[1]) if v and redis.sha1hex(v) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0";

/** SHA-1 of a value's UTF-8 bytes, hex (what Redis' `redis.sha1hex` gives for the value stored). */
export function sha1Hex(value: string): string {
  return createHash('sha1').update(value).digest('hex');
}

/** Where the values go: the connection while it may take commands, and the key prefix. */
export interface ValuesLink {
  /** The main connection when commands may go out (connected, not frozen); undefined otherwise. */
  client(): RedisClient | undefined;
  /** `sharedState.clusterKey`; undefined while `sharedState` is not configured. */
  clusterKey(): string | undefined;
}

/**
 * Creates the values service over a link (see the module comment).
 * @param link the plugin's connection and prefix, read at each operation
 */
export function sharedValues(link: ValuesLink): SharedValues {
  const run = async <T>(key: string, op: (c: RedisClient, k: string) => Promise<T>): Promise<T> => {
    if (key.length > MAX_SHARED_KEY_LENGTH) throw new RangeError(`shared value key over ${MAX_SHARED_KEY_LENGTH} characters`);
    const prefix = link.clusterKey();
    if (prefix === undefined) throw new Error('shared state: sharedState is not configured');
    const c = link.client();
    if (!c) throw new Error('shared state: Redis unreachable');
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`shared state: Redis did not answer within ${SHARED_VALUE_TIMEOUT_MS} ms`)), SHARED_VALUE_TIMEOUT_MS);
    });
    try {
      return await Promise.race([op(c, `${prefix}:${key}`), late]);
    } finally {
      clearTimeout(timer);
    }
  };
  const px = (ttlMs: number) => Math.max(1, Math.ceil(ttlMs));
  const tooBig = (value: string) =>
    Buffer.byteLength(value) > MAX_SHARED_VALUE_BYTES ? Promise.reject(new RangeError(`shared value over ${MAX_SHARED_VALUE_BYTES} bytes`)) : undefined;
  return {
    get enabled() {
      return link.clusterKey() !== undefined;
    },
    get: (key) =>
      run(key, async (c, k) => {
        const v = await c.eval(GET_BOUNDED_SCRIPT, { keys: [k], arguments: [String(MAX_SHARED_VALUE_BYTES)] });
        if (v === -1) throw new RangeError(`shared value ${key} over ${MAX_SHARED_VALUE_BYTES} bytes`);
        return typeof v === 'string' ? v : undefined;
      }),
    set: (key, value, ttlMs) =>
      tooBig(value) ??
      run(key, async (c, k) => {
        await c.set(k, value, { PX: px(ttlMs) });
      }),
    claim: (key, ttlMs, token = '1') => tooBig(token) ?? run(key, async (c, k) => (await c.set(k, token, { NX: true, PX: px(ttlMs) })) !== null),
    release: (key, token) => run(key, async (c, k) => (await c.eval(RELEASE_SCRIPT, { keys: [k], arguments: [token] })) === 1),
    replace: (key, expected, value, ttlMs) =>
      tooBig(value) ?? run(key, async (c, k) => (await c.eval(REPLACE_SCRIPT, { keys: [k], arguments: [sha1Hex(expected), value, String(px(ttlMs))] })) === 1),
    delete: (key) => run(key, async (c, k) => (await c.del(k)) > 0),
  };
}
