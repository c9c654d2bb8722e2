/**
 * Cleanup of child servers when the test process ends (test helpers for Redis and PostgreSQL):
 * on exit, and on SIGINT/SIGTERM/SIGHUP, which end node without an 'exit' event (mocha's wrapper
 * turns Ctrl-C into SIGINT + SIGTERM for its child). After cleaning up, a signal is re-raised once
 * no other listener is left, so the default still ends the process.
 */
const cleanups = new Set<() => void>();
let installed = false;

function runAll(): void {
  for (const fn of cleanups) {
    try {
      fn();
    } catch {
      /* best effort */
    }
  }
}

/**
 * Registers a cleanup to run when the process ends.
 * @param fn synchronous cleanup (kill children, remove temp dirs)
 */
export function onProcessEnd(fn: () => void): void {
  cleanups.add(fn);
  if (installed) return;
  installed = true;
  process.on('exit', runAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      runAll();
      process.removeListener(sig, onSignal);
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}
