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

/** What a test helper watches of a server child: its last output, whether it ended, a spawn failure. */
export interface ChildWatch {
  /** The last 8 KiB of stdout and stderr. */
  readonly output: string;
  /** True once the process closed. */
  readonly exited: boolean;
  /** The spawn error (a missing binary), if any. */
  readonly spawnError: Error | undefined;
  /** Resolves when the process closed. */
  readonly closed: Promise<void>;
}

/**
 * Watches a spawned server: keeps its last output for error messages and tracks its end.
 * @param child a process spawned with piped stdout/stderr
 */
export function watchChild(child: import('node:child_process').ChildProcess): ChildWatch {
  const w = { output: '', exited: false, spawnError: undefined as Error | undefined, closed: Promise.resolve() };
  const keep = (d: string) => {
    w.output = (w.output + d).slice(-8192);
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  w.closed = new Promise<void>((res) => {
    child.once('close', () => {
      w.exited = true;
      res();
    });
  });
  child.once('error', (e) => {
    w.spawnError = e;
  });
  return w;
}

/**
 * The `stop()` of a spawned server, run at most once: SIGTERM (after SIGCONT, so a server a test
 * paused with SIGSTOP can act on it), SIGKILL when it has not closed within 3 s, then `after`
 * (forget the child, remove its data directory).
 * @param child the server process
 * @param watch its {@link watchChild} watch
 * @param after run once the process is gone (or never started)
 */
export function childStopper(child: import('node:child_process').ChildProcess, watch: ChildWatch, after: () => void): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () =>
    (stopping ??= (async () => {
      if (!watch.exited && !watch.spawnError) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        const t = setTimeout(() => {
          if (!watch.exited) child.kill('SIGKILL');
        }, 3000);
        await watch.closed;
        clearTimeout(t);
      }
      after();
    })());
}
