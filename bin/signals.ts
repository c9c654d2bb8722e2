/**
 * How `svc start` stops (spec §3.2): the first SIGTERM or SIGINT drains (healthcheck 503 at once, calls served for
 * `server.waitBeforeShutdown`, then in-flight calls finish), a second one exits at once. One exception: Ctrl-C from a person at a
 * terminal (SIGINT with stdin a TTY) while no request is in flight stops at once, since there is no load balancer to tell and nothing
 * to finish; an orchestrator's SIGTERM always drains.
 */
import type { Logger } from '../lib/logger.ts';
import type { Proxy } from '../core/host/proxy.ts';

/**
 * Whether a stop signal ends the process at once instead of draining.
 * @param signal `SIGINT` or `SIGTERM`
 * @param atTerminal whether stdin is a TTY (a person pressed Ctrl-C)
 * @param inFlight HTTP requests in flight, now
 */
export function stopsAtOnce(signal: string, atTerminal: boolean, inFlight: number): boolean {
  return signal === 'SIGINT' && atTerminal && inFlight === 0;
}

/**
 * Installs the stop signals of one serving process.
 * @param proxy the started proxy
 * @param logger the CLI's logger
 * @param worker whether this process is a worker of `server.workers` (the primary forwards the drain as SIGTERM; a terminal's Ctrl-C
 *   reaches the whole process group, so a worker leaves SIGINT to the primary instead of counting it as a second signal)
 * @param atTerminal whether stdin is a TTY (default: `process.stdin.isTTY`)
 */
export function installStopSignals(proxy: Proxy, logger: Logger, worker: boolean, atTerminal = process.stdin.isTTY === true): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    if (stopsAtOnce(signal, atTerminal, proxy.lifecycleStatus.requestsInFlight)) {
      logger.info({ signal }, 'Ctrl-C at a terminal with nothing in flight: stopping now (SIGTERM drains for server.waitBeforeShutdown)');
      proxy.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
      return;
    }
    const s = proxy.config.server;
    logger.info(
      { signal, waitBeforeShutdownMs: s.waitBeforeShutdownMs, waitAfterShutdownMs: s.waitAfterShutdownMs },
      `draining: healthcheck is 503, calls still served until waitBeforeShutdown; send ${signal} again (Ctrl-C) to exit at once`,
    );
    proxy.shutdown().then(
      () => {
        logger.info('drained: exiting');
        process.exit(0);
      },
      () => process.exit(1),
    );
  };
  process.on('SIGINT', worker ? () => undefined : () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
