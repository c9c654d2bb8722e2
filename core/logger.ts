/**
 * Logging through pino: JSON to stdout, pretty on a TTY (DESIGN "Real parts").
 * No per-call logging at info level: the request path logs at debug/trace only.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * Creates the process logger.
 * @param level pino level, or `silent` (tests)
 * @param pretty force pretty output; default: when stdout is a TTY
 */
export function createLogger(level: LevelWithSilent = 'info', pretty = !!process.stdout.isTTY): Logger {
  if (pretty && level !== 'silent') {
    return pino({ level, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } });
  }
  return pino({ level, base: { service: 'svc' } });
}
