/**
 * The primary of `svc start` with `server.workers` > 1 (docs/operations.md "Workers"): forks the
 * workers (node:cluster; each runs the whole proxy and they share the listening socket, which
 * the primary accepts on and hands out round-robin), relays broadcasts between them
 * (lib/cluster.ts), serves `/metrics` summed over the workers (prom-client's AggregatorRegistry,
 * the library's own cluster support), keeps the memory rate-limit counters of every worker in
 * one place (rate-limiter-flexible's cluster master) and the memory store of used SIWE messages
 * (lib/cluster.ts `PrimaryClaims`), replaces a worker that dies, and drains
 * them all on SIGTERM/SIGINT. The primary itself serves no call.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry } from 'prom-client';
import { RateLimiterClusterMaster } from 'rate-limiter-flexible';
import { isWorkerBroadcast, PrimaryClaims, workerEnv } from '../lib/cluster.ts';
import { PrimaryValueStore } from '../lib/primary-values.ts';
import type { Logger } from '../lib/logger.ts';

/** A worker's message asking the primary to have the other workers reload their config. */
export const RELOAD_OTHERS = 'svcReloadOthers';

/** Whether an IPC message from a worker is a {@link RELOAD_OTHERS} request. */
function isReloadRequest(m: unknown): boolean {
  return typeof m === 'object' && m !== null && (m as Record<string, unknown>)[RELOAD_OTHERS] === true;
}
import { createMetricsServer } from '../lib/metrics-listener.ts';

/** What the primary needs of the resolved config. */
export interface PrimaryOptions {
  /** Worker processes to run (>= 2). */
  workers: number;
  /** `/metrics` listener, when metrics are enabled: host and port (0 = any free port). */
  metrics?: { host: string; port: number };
  /** Longest a worker may take to drain after SIGTERM before it is killed, ms. */
  drainTimeoutMs: number;
  logger: Logger;
}

/** Most replacements of dead workers per minute; beyond it the primary stops (a crash loop). */
const MAX_RESTARTS_PER_MINUTE = 10;

/**
 * Runs the primary until every worker exited after a signal.
 * @returns a promise of the exit code: 0 after a drain in which every worker exited cleanly
 */
export async function runPrimary(opts: PrimaryOptions): Promise<number> {
  const { logger } = opts;
  const workers = new Map<number, Worker>();
  let stopping = false;
  const restarts: number[] = [];
  let exitCode = 0;
  // Config reload: every worker re-reads the config (the primary's own settings apply at restart).
  process.on('SIGHUP', () => {
    logger.info({ workers: workers.size }, 'SIGHUP: every worker reloads its config');
    for (const w of workers.values()) if (w.isConnected()) w.process.kill('SIGHUP');
  });
  // One counter store for every worker's memory rate limits (a budget is the service's, not a worker's).
  new RateLimiterClusterMaster();
  // One store of used SIWE messages (memory driver) for every worker: a message is accepted once.
  const claims = new PrimaryClaims();
  // Values plugins keep for every worker (svc-managed filters): a client's next request may reach another worker.
  const values = new PrimaryValueStore();

  const fork = (index: number): void => {
    const w = cluster.fork(workerEnv(index, opts.workers));
    workers.set(index, w);
    w.on('message', (m: unknown) => {
      // A worker that reloaded its config on an admin call: the others reload too (as on SIGHUP).
      if (isReloadRequest(m)) {
        for (const [i, other] of workers) if (i !== index && other.isConnected()) other.process.kill('SIGHUP');
        return;
      }
      if (claims.handle(m, (answer) => w.isConnected() && w.send(answer))) return;
      if (values.handle(m, (answer) => w.isConnected() && w.send(answer))) return;
      if (!isWorkerBroadcast(m)) return;
      for (const [i, other] of workers) if (i !== index && other.isConnected()) other.send(m);
    });
    w.on('exit', (code, signal) => {
      if (workers.get(index) === w) workers.delete(index);
      if (stopping) {
        if (code !== 0) exitCode = 1;
        return;
      }
      const now = Date.now();
      while (restarts.length && (restarts[0] as number) < now - 60_000) restarts.shift();
      if (restarts.length >= MAX_RESTARTS_PER_MINUTE) {
        logger.error({ worker: index, code, signal }, `worker died and ${MAX_RESTARTS_PER_MINUTE} workers were replaced in the last minute: stopping`);
        exitCode = 1;
        void stop('crash loop');
        return;
      }
      restarts.push(now);
      logger.error({ worker: index, code, signal }, 'worker died: starting a replacement');
      fork(index);
    });
  };
  for (let i = 1; i <= opts.workers; i++) fork(i);

  let metricsServer: Server | undefined;
  if (opts.metrics) {
    const aggregator = new AggregatorRegistry();
    metricsServer = createMetricsServer({ metrics: () => aggregator.clusterMetrics(), contentType: aggregator.contentType });
    const m = opts.metrics;
    await new Promise<void>((resolve, reject) => {
      metricsServer?.once('error', reject);
      metricsServer?.listen(m.port, m.host, () => resolve());
    });
    logger.info(
      { listen: `http://${m.host}:${(metricsServer.address() as AddressInfo).port}`, path: '/metrics', workers: opts.workers },
      'metrics listening (summed over the workers)',
    );
  }

  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => {
    resolveDone = r;
  });
  const stop = async (why: string): Promise<void> => {
    stopping = true;
    logger.info({ why, workers: workers.size }, 'draining every worker');
    const exits = [...workers.values()].map(
      (w) =>
        new Promise<void>((resolve) => {
          if (w.isDead()) return resolve();
          const timer = setTimeout(() => {
            logger.warn({ pid: w.process.pid }, 'worker did not drain in time: killing it');
            exitCode = 1;
            w.process.kill('SIGKILL');
          }, opts.drainTimeoutMs);
          w.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          w.process.kill('SIGTERM');
        }),
    );
    await Promise.all(exits);
    // Last: /metrics stays up while the workers drain (the drain metrics are read from it).
    await new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()));
    logger.info({ exitCode }, 'every worker exited');
    resolveDone(exitCode);
  };
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      for (const w of workers.values()) w.process.kill('SIGKILL');
      process.exit(1);
    }
    void stop(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return done;
}
