/**
 * Runs @keyv/test-suite (keyv's own conformance tests for storage adapters, written for vitest)
 * under mocha: the suite only needs `test.it`, `test.beforeEach`, `test.afterEach` and a
 * `t.expect` with a few jest matchers, which are mapped onto chai here.
 */
import { expect } from 'chai';

type Matchers = Record<'toBe' | 'toEqual' | 'toBeTruthy' | 'toBeFalsy' | 'toBeUndefined' | 'toBeNull' | 'toBeDefined', (v?: unknown) => void>;

/** Jest-style matchers on chai, as many as @keyv/test-suite uses. */
function jestExpect(actual: unknown): Matchers {
  return {
    toBe: (v) => expect(actual).to.equal(v),
    toEqual: (v) => expect(actual).to.deep.equal(v),
    toBeTruthy: () => expect(actual).to.be.ok,
    toBeFalsy: () => expect(actual).to.not.be.ok,
    toBeUndefined: () => expect(actual).to.equal(undefined),
    toBeNull: () => expect(actual).to.equal(null),
    toBeDefined: () => expect(actual).to.not.equal(undefined),
  };
}

/** The `test` object @keyv/test-suite's functions take, on mocha's globals. */
export function mochaKeyvTest(): unknown {
  return {
    it: (name: string, fn: (t: { expect: typeof jestExpect }) => unknown) => it(name, () => fn({ expect: jestExpect })),
    beforeEach: (fn: () => unknown) => beforeEach(fn as Mocha.Func),
    afterEach: (fn: () => unknown) => afterEach(fn as Mocha.Func),
  };
}
