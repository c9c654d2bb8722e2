'use strict';
/** Mocha config: TypeScript specs through tsx, summary reporter, generous timeout for anvil. */
module.exports = {
  spec: ['test/**/*.test.ts'],
  'node-option': ['import=tsx'],
  extension: ['ts'],
  reporter: 'test/helpers/reporter.cjs',
  timeout: 20000,
  exit: true,
  recursive: true,
};
