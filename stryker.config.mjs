/**
 * Mutation testing of the modules that implement the interface's wire rules (docs/interface.md):
 * JSON-RPC parsing and answers, the error table, diagnostic headers, inbound batching,
 * multiplexing, directives, admin methods and the healthcheck. `npm run mutation` (not part of
 * `npm test`: it takes long); `npm run mutation -- --mutate core/jsonrpc.ts` for one module.
 * The score and the surviving mutants explained one by one are in docs/mutation.md.
 *
 * StrykerJS 9 with its command runner and TypeScript checker. Its mocha runner cannot run here:
 * mocha-runner 9 reaches into mocha's internals that mocha 12 moved (`lib/cli/run-helpers`), and
 * StrykerJS 10, whose runner follows mocha 12, needs Node 22. The command runner runs mocha as a
 * child process per mutant (the active mutant in `__STRYKER_ACTIVE_MUTANT__`), so each mutant runs
 * the whole wire test set below: a few seconds each.
 */
/** The unit and conformance tests that pin the wire rules (STRYKER_SPEC=a,b overrides). */
const SPEC = process.env.STRYKER_SPEC
  ? process.env.STRYKER_SPEC.split(',')
  : ['test/unit/jsonrpc.test.ts', 'test/unit/errors.test.ts', 'test/unit/core/parse-limits.test.ts', 'test/unit/core/one-parse.test.ts', 'test/unit/server/routing.test.ts', 'test/unit/lib/json-scan-answer.test.ts'];

export default {
  packageManager: 'npm',
  testRunner: 'command',
  commandRunner: {
    command: `node --import tsx --conditions=svc-source node_modules/mocha/bin/mocha.js --no-config --no-package --extension ts --reporter dot --bail --timeout 20000 --require test/helpers/offline-catalog.ts ${SPEC.join(' ')}`,
  },
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'off',
  concurrency: Number(process.env.STRYKER_CONCURRENCY ?? 1),
  timeoutMS: 30_000,
  mutate: ['core/jsonrpc.ts', 'core/errors.ts', 'core/errors-wire.ts', 'lib/json-scan.ts', 'plugins/headers/*.ts', 'plugins/multiplex/*.ts', 'plugins/directives/*.ts', 'plugins/healthcheck/*.ts', 'plugins/admin/*.ts', 'core/serve.ts'],
  ignorePatterns: ['dist', '.stryker-tmp', 'reports'],
  incremental: process.env.STRYKER_INCREMENTAL !== '0',
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
