/**
 * A remote API-key store behind its connector's circuit breaker: every operation (opening the
 * driver included) has a deadline, lookups `lookupTimeout` (default 500 ms) and admin changes and
 * listings `writeTimeout` (default 2 s), and a store that keeps failing is skipped for the
 * breaker's back-off. So a Redis or PostgreSQL that stalls never holds a request: an unknown key
 * fails closed (the request is refused as unauthorized) within one lookup deadline, at once while
 * the breaker is open, and an admin change answers an error instead of hanging. Keys already in
 * the key space's memory cache are served without the store (api-keys/space.ts).
 */
import { StorageUnavailableError } from 'svc-proxy/plugin/errors';
import type { ApiKeyRecord } from '../api.ts';
import type { StorageBreaker } from 'svc-proxy/util';
import type { ApiKeyPage, ApiKeyStore } from './store.ts';

/** Default deadline of a key lookup, ms. */
export const DEFAULT_LOOKUP_TIMEOUT_MS = 500;
/** Default deadline of an admin change or listing, ms. */
export const DEFAULT_WRITE_TIMEOUT_MS = 2000;

/** The message of a corrupt record (spec §7): the store answered, it is not failing. */
export const CORRUPT_RECORD = 'missing or invalid userId in current data';

/**
 * Whether an error of a key store operation is the store failing (for the breaker): a corrupt
 * record is an answer.
 */
export function isStoreFailure(e: unknown): boolean {
  return !(e instanceof Error && e.message === CORRUPT_RECORD);
}

/** See the module comment. */
export class GuardedApiKeyStore implements ApiKeyStore {
  /**
   * @param open opens the driver's store (once; called inside each operation's deadline)
   * @param breaker the connector's breaker (kind `api-keys`), built with {@link isStoreFailure}
   * @param timeouts `lookupTimeout` and `writeTimeout`, ms
   */
  constructor(
    private readonly open: () => Promise<ApiKeyStore>,
    private readonly breaker: StorageBreaker,
    private readonly timeouts: { lookupTimeout: number; writeTimeout: number },
  ) {}

  /**
   * The record of a key (`lookupTimeout`).
   * @throws StorageUnavailableError when the store missed the lookup deadline or the breaker is open
   */
  get(key: string): Promise<ApiKeyRecord | undefined> {
    return this.breaker.run(async () => (await this.open()).get(key), this.timeouts.lookupTimeout);
  }

  /** Adds a record (`writeTimeout`); false when the key exists. @throws StorageUnavailableError */
  add(record: ApiKeyRecord): Promise<boolean> {
    return this.write(async () => (await this.open()).add(record));
  }

  /** Replaces a record (`writeTimeout`). @throws StorageUnavailableError */
  put(record: ApiKeyRecord, previousUserId: string | undefined): Promise<void> {
    return this.write(async () => (await this.open()).put(record, previousUserId));
  }

  /** Deletes a key (`writeTimeout`); the deleted record, or undefined. @throws StorageUnavailableError */
  delete(key: string): Promise<ApiKeyRecord | undefined> {
    return this.write(async () => (await this.open()).delete(key));
  }

  /** A page of keys (`writeTimeout`: an admin listing). @throws StorageUnavailableError */
  list(limit: number, after: string | undefined): Promise<ApiKeyPage> {
    return this.write(async () => (await this.open()).list(limit, after));
  }

  /** Keys of a user (`writeTimeout`). @throws StorageUnavailableError */
  keysOf(userId: string): Promise<string[]> {
    return this.write(async () => (await this.open()).keysOf(userId));
  }

  /** Nothing to release here. */
  close(): Promise<void> {
    // The driver's client or pool is shared; its owner (Connectors) closes it.
    return Promise.resolve();
  }

  /** An admin operation: a missed deadline says the change may still land. */
  private async write<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await this.breaker.run(op, this.timeouts.writeTimeout);
    } catch (e) {
      if (e instanceof StorageUnavailableError && e.reason === 'timeout') {
        throw new StorageUnavailableError(
          `${e.message}; a change may or may not have been applied: read the key back before retrying`,
          e.connector,
          e.kind,
          'timeout',
        );
      }
      throw e;
    }
  }
}
