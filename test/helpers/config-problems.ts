/**
 * The problems a config load refuses with, for tests of the load-time checks and rewrites.
 */
import { expect } from 'chai';
import { ConfigError } from '../../config/load.ts';

/**
 * Runs a load that must fail and returns its problems.
 * @param load the load (e.g. `() => loadConfigObject(raw, {...})`)
 * @throws AssertionError when it loads, or fails with something other than a ConfigError
 */
export function problemsOf(load: () => unknown): Array<{ path: string; message: string }> {
  try {
    load();
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  return expect.fail('expected a ConfigError');
}
