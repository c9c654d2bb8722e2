/**
 * Mocha root hooks (loaded by .mocharc.cjs `require`) recording what each conformance test did:
 * every chai assertion is counted, and after each test whose title carries a rule id (`§…`) one
 * line `{file, title, state, assertions}` is appended to the file named by
 * `SVC_CONFORMANCE_RESULTS` (set by the reporter before parallel workers fork). The conformance
 * table counts a rule as covered only when such a test ran, passed and asserted
 * (bin/gen-conformance.ts): a skipped, pending or assertion-free test counts for nothing. Pending
 * tests run no hooks, so they are never recorded.
 */
import { appendFileSync } from 'node:fs';
import { relative } from 'node:path';
import { Assertion } from 'chai';
import type { Context } from 'mocha';

/** One recorded test (a line of the results file). */
export interface TestRecord {
  /** Test file, relative to the working directory, `/`-separated. */
  file: string;
  /** The test's own title (the rule id comes first). */
  title: string;
  /** Mocha's state after the test: `passed` or `failed`. */
  state: string;
  /** Chai assertions the test made (hooks' included: they run around it). */
  assertions: number;
}

let assertions = 0;
const PATCHED = Symbol.for('svc.test-record.patched');
const proto = Assertion.prototype as unknown as Record<PropertyKey, unknown> & { assert: (...a: unknown[]) => unknown };
if (proto[PATCHED] !== true) {
  const assert = proto.assert;
  proto.assert = function (this: unknown, ...args: unknown[]): unknown {
    assertions++;
    return assert.apply(this, args);
  };
  proto[PATCHED] = true;
}

export const mochaHooks = {
  beforeEach(): void {
    assertions = 0;
  },
  afterEach(this: Context): void {
    const out = process.env.SVC_CONFORMANCE_RESULTS;
    const t = this.currentTest;
    if (!out || !t || !t.title.startsWith('§')) return;
    const record: TestRecord = {
      file: relative(process.cwd(), t.file ?? '')
        .split('\\')
        .join('/'),
      title: t.title,
      state: t.state ?? 'unknown',
      assertions,
    };
    appendFileSync(out, `${JSON.stringify(record)}\n`);
  },
};
