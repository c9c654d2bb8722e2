/**
 * A node-redis client for plugins that keep shared state in Redis (API keys, rate-limit
 * counters): commands fail fast while disconnected (no offline queue) and give up after 1 s, so
 * a Redis that is down or stalled never holds a request; it reconnects in the background with a
 * capped backoff. node-redis is loaded on first use only (it ships CommonJS, so this stays
 * synchronous for `configured` hooks).
 */
import { createRequire } from 'node:module';
import type { createClient } from 'redis';

/** A node-redis client. */
export type RedisClient = ReturnType<typeof createClient>;

/** How long one command may take before it fails, ms. */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;

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
    commandOptions: { timeout: REDIS_COMMAND_TIMEOUT_MS },
    socket: { connectTimeout: 2000, reconnectStrategy: (n: number) => Math.min(50 * 2 ** Math.min(n, 10), 2000) },
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
