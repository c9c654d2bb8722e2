/**
 * `svc-proxy/plugins/shared-state`: what the shared-state plugin offers other plugins: small
 * values in the fleet's Redis (top-level `sharedState`), so state one replica writes is read by
 * another (the filters plugin keeps its filters there).
 */
import { serviceKey, type ServiceKey } from 'svc-proxy/plugin';

/** Longest key, characters (a plugin's own names and ids, never a client's text verbatim). */
export const MAX_SHARED_KEY_LENGTH = 200;
/** Largest value, bytes (UTF-8). */
export const MAX_SHARED_VALUE_BYTES = 1024 * 1024;
/** Deadline of one operation, ms: a Redis that is down or frozen fails the operation this fast. */
export const SHARED_VALUE_TIMEOUT_MS = 500;

/**
 * Values shared by every replica of the fleet, under `<clusterKey>:<key>` in the `sharedState`
 * Redis. Each operation has {@link SHARED_VALUE_TIMEOUT_MS} and fails at once while Redis is
 * unreachable (never queued); concurrent writers of one key: the last {@link SharedValues.set}
 * wins, so state several replicas update goes through {@link SharedValues.replace}
 * (compare-and-set), and a lock is taken with a token ({@link SharedValues.claim}) and released
 * only by its holder ({@link SharedValues.release}).
 */
export interface SharedValues {
  /** Whether `sharedState` is configured (false: every operation throws; keep state locally). */
  readonly enabled: boolean;
  /**
   * The value of a key.
   * @returns the value, or undefined when absent or expired
   * @throws Error when Redis is unreachable, or answers late; RangeError for a key over
   *   {@link MAX_SHARED_KEY_LENGTH}, or a stored value over {@link MAX_SHARED_VALUE_BYTES} (written
   *   by something else: its size is checked in Redis before it is sent)
   */
  get(key: string): Promise<string | undefined>;
  /**
   * Sets a key's value, expiring after `ttlMs`.
   * @param ttlMs time to live, ms (at least 1)
   * @throws Error when Redis is unreachable, or answers late; RangeError for a key or value over its bound
   */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /**
   * Sets a key only when it is absent (Redis `SET NX PX`): a lock or a claim shared by the fleet.
   * @param ttlMs time to live, ms (at least 1): a holder that dies releases it then
   * @param token the value set (default `1`): a lock's holder names itself with a random token, to
   *   {@link release} only its own claim
   * @returns true when this call set it, false when it was set already
   * @throws Error when Redis is unreachable, or answers late; RangeError for a key or token over its bound
   */
  claim(key: string, ttlMs: number, token?: string): Promise<boolean>;
  /**
   * Removes a key only while its value is `token` (compare-and-delete, one Lua script): a lock's
   * holder releases its claim, never one another replica took after it expired.
   * @returns true when this call removed it
   * @throws Error when Redis is unreachable, or answers late; RangeError for a key over {@link MAX_SHARED_KEY_LENGTH}
   */
  release(key: string, token: string): Promise<boolean>;
  /**
   * Sets a key's value only while its current value is `expected` (compare-and-set, one Lua
   * script comparing SHA-1 digests, so the old value is not sent again): a writer that read
   * `expected` loses to any write or delete made since.
   * @param ttlMs time to live, ms (at least 1)
   * @returns true when this call set it; false when the key changed or is gone
   * @throws Error when Redis is unreachable, or answers late; RangeError for a key or value over its bound
   */
  replace(key: string, expected: string, value: string, ttlMs: number): Promise<boolean>;
  /**
   * Removes a key.
   * @returns true when it was there
   * @throws Error when Redis is unreachable, or answers late
   */
  delete(key: string): Promise<boolean>;
}

/** Key of the shared-state plugin's {@link SharedValues} (provided also without `sharedState`, then `enabled: false`). */
export const SHARED_VALUES_SERVICE: ServiceKey<SharedValues> = serviceKey<SharedValues>('shared-state.values');
