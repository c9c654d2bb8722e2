/**
 * The shared-state plugin's {@link SharedValues}: plain keys with a TTL on its main Redis
 * connection, each operation bounded in size and time (api.ts).
 */
import type { RedisClient } from 'svc-proxy/util';
import { MAX_SHARED_KEY_LENGTH, MAX_SHARED_VALUE_BYTES, SHARED_VALUE_TIMEOUT_MS, type SharedValues } from './api.ts';

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
  return {
    get enabled() {
      return link.clusterKey() !== undefined;
    },
    get: (key) => run(key, async (c, k) => (await c.get(k)) ?? undefined),
    set: (key, value, ttlMs) => {
      if (Buffer.byteLength(value) > MAX_SHARED_VALUE_BYTES) return Promise.reject(new RangeError(`shared value over ${MAX_SHARED_VALUE_BYTES} bytes`));
      return run(key, async (c, k) => {
        await c.set(k, value, { PX: Math.max(1, Math.ceil(ttlMs)) });
      });
    },
    claim: (key, ttlMs) => run(key, async (c, k) => (await c.set(k, '1', { NX: true, PX: Math.max(1, Math.ceil(ttlMs)) })) !== null),
    delete: (key) => run(key, async (c, k) => (await c.del(k)) > 0),
  };
}
