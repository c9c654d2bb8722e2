/**
 * Root hooks that time each spec file in a parallel worker, for the slowest-files list of
 * test/helpers/reporter.cjs (`SVC_TEST_TIMINGS`). In parallel mode the reporter only sees a
 * file's events once its worker is done, so it knows the tests' durations but not the time the
 * file's hooks took (an `npm install` in a `before`). In a worker (`MOCHA_WORKER_ID` set) mocha
 * runs root hooks around every file: this appends one JSON line `{ file, ms }` per file to
 * `SVC_TEST_TIMINGS_FILE`, which the reporter created. Loaded by .mocharc.cjs only with
 * `SVC_TEST_TIMINGS` set; in a serial run it does nothing (the reporter times files itself).
 */
import { appendFileSync } from 'node:fs';
import type { Context } from 'mocha';

let started = 0;

/** The spec file of the suites a worker loaded: every top-level suite carries it. */
function fileOf(ctx: Context): string | undefined {
  const root = ctx.test?.parent;
  return root?.suites.find((s) => s.file)?.file ?? root?.tests.find((t) => t.file)?.file;
}

export const mochaHooks = {
  beforeAll(): void {
    started = Date.now();
  },
  afterAll(this: Context): void {
    const out = process.env.SVC_TEST_TIMINGS_FILE;
    const file = fileOf(this);
    if (!out || process.env.MOCHA_WORKER_ID === undefined || !file) return;
    appendFileSync(out, `${JSON.stringify({ file, ms: Date.now() - started })}\n`);
  },
};
