/**
 * Logging through pino: JSON to stdout, pretty on a TTY (docs/architecture.md).
 * No per-call logging at info level: the request path logs at debug/trace only.
 *
 * Every log line is redacted: pino's `logMethod` hook passes each argument of
 * an enabled log call through lib/redact.ts (objects by `redactTree`: credential-looking keys,
 * header maps, URLs; strings by `redactText`), so a config value, an upstream URL with a key or
 * a driver error quoting a connection string never reaches stdout in plain text. Child bindings
 * go through the same rules ({@link redactChildren}). Disabled levels never reach the hook, so
 * the request path pays nothing at the default level.
 */
import { pino, type Logger, type LevelWithSilent, type LoggerOptions } from 'pino';
import { redactLogValue, redactText, redactTree } from './redact.ts';

export type { Logger };

/** One log call's arguments redacted (an Error stays an Error of its class, so pino logs it as usual). */
function redactArgs(args: unknown[]): unknown[] {
  const out = new Array<unknown>(args.length);
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    out[i] = typeof a === 'string' ? redactText(a) : a !== null && typeof a === 'object' ? redactLogValue(a) : a;
  }
  return out;
}

/**
 * The redaction of every log call's arguments (see the module comment), as pino options;
 * combine with {@link redactChildren} for child bindings. Exported for tests and embedders
 * building their own pino.
 */
export const LOG_REDACTION: Pick<LoggerOptions, 'hooks'> = {
  hooks: {
    logMethod(args, method) {
      return method.apply(this, redactArgs(args) as Parameters<typeof method>);
    },
  },
};

/**
 * Makes `logger.child(bindings)` (and its children's) redact the bindings: pino resets the
 * bindings formatter for children, so the method itself is wrapped; children inherit it through
 * their prototype.
 * @param logger a pino logger built with {@link LOG_REDACTION}
 * @returns the same logger
 */
export function redactChildren(logger: Logger): Logger {
  // The prototype's method, called on whichever logger (the root or a child) it is invoked on.
  const child = logger.child;
  const wrapped = function (this: Logger, bindings: Record<string, unknown>, options?: Parameters<Logger['child']>[1]) {
    return child.call(this, redactTree(bindings) as Record<string, unknown>, options);
  };
  logger.child = wrapped as Logger['child'];
  return logger;
}

/**
 * Creates the process logger.
 * @param level pino level, or `silent` (tests)
 * @param pretty force pretty output; default: when stdout is a TTY
 */
export function createLogger(level: LevelWithSilent = 'info', pretty = !!process.stdout.isTTY): Logger {
  if (pretty && level !== 'silent') {
    return redactChildren(
      pino({
        level,
        ...LOG_REDACTION,
        transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
      }),
    );
  }
  return redactChildren(pino({ level, base: { service: 'svc' }, ...LOG_REDACTION }));
}
