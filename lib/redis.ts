/**
 * A node-redis client for plugins that keep shared state in Redis (API keys, rate-limit
 * counters): commands fail fast while disconnected (no offline queue), so a Redis that is down
 * never holds a request; it reconnects in the background with a capped backoff. A Redis that
 * stalls with its socket up is not covered here: node-redis's command timeout only applies to
 * commands not yet written, so callers run each operation under a {@link StorageBreaker}
 * (lib/storage-breaker.ts) with its own deadline. The command queue is bounded, so a stall
 * never grows memory. node-redis is loaded on first use only (it ships CommonJS, so this stays
 * synchronous for `configured` hooks).
 */
import { createRequire } from 'node:module';
import type { createClient } from 'redis';
import type { StorageBreaker } from './storage-breaker.ts';
import { backoffDelay } from './backoff.ts';

/** A node-redis client. */
export type RedisClient = ReturnType<typeof createClient>;

/** How long a command may wait to be written before it fails, ms (see the module comment). */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;
/** Commands waiting to be written or answered before new ones are refused at once. */
export const REDIS_MAX_QUEUED_COMMANDS = 1000;

/**
 * Opens a client; connection happens in the background.
 * @param opts `uri` (`redis://[user:password@]host:port[/db]`) and an optional `password`
 * @param onError connection and command errors (an unhandled one would crash the process);
 *   callers log them without the URI
 */
export function openRedisClient(opts: { uri: string; password?: string }, onError: (e: unknown) => void): RedisClient {
  const { createClient: create } = createRequire(import.meta.url)('redis') as typeof import('redis');
  const client = create({
    url: opts.uri,
    password: opts.password,
    disableOfflineQueue: true,
    commandsQueueMaxLength: REDIS_MAX_QUEUED_COMMANDS,
    commandOptions: { timeout: REDIS_COMMAND_TIMEOUT_MS },
    socket: { connectTimeout: 2000, reconnectStrategy: (n: number) => backoffDelay({ initialMs: 50, factor: 2, maxMs: 2000 }, Math.min(n, 10) + 1) },
  });
  client.on('error', onError);
  client.connect().catch(onError);
  return client;
}

/** Closes a client: a clean QUIT when connected, else drops the socket. Never throws. */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  if (client.isReady) await client.quit().catch(() => client.destroy());
  else if (client.isOpen) client.destroy();
}
