// @ts-check
/**
 * StrykerJS mutation testing of the modules that implement the wire rules of docs/interface.md
 * (`npm run mutation`; not part of `npm test`). Results and the command per module: docs/mutation.md.
 *
 * - Test runner: mocha, through scripts/stryker-mocha-runner.mjs (the 9.x mocha runner, made to
 *   load mocha 12's `.cjs` CLI helpers). It reads .mocharc.cjs (root hooks, extension); the
 *   spec below replaces the whole-suite spec that file would pick.
 * - TypeScript specs run through tsx with the `svc-source` export condition, as in .mocharc.cjs
 *   (`node-option`), here given to the test-runner processes as `testRunnerNodeArgs`.
 * - TypeScript checker: tsconfig.stryker.json (tsconfig.json's options, the wire modules and
 *   what they import; the whole repository per mutant made the checker the bottleneck).
 * - One test-runner process (2-core machine, other work runs next to it).
 * - Incremental: results are reused for unchanged code and tests (reports/mutation/, gitignored).
 *
 * One module at a time: `npm run mutation -- --mutate core/wire/jsonrpc.ts`. Such a run keeps its own
 * incremental file and JSON report under reports/mutation/<module>/ (an incremental file holds
 * only the files of the run that wrote it, so one file per module keeps each module's results).
 */

/** The wire modules (spec sections in brackets). */
export const WIRE_MODULES = [
  'core/wire/jsonrpc.ts', // JSON-RPC parsing and answers (4.1, 4.2)
  'lib/json-scan.ts', // raw id / params / result scanning behind core/wire/jsonrpc.ts (4.1, 4.2)
  'core/wire/errors.ts', // the error classes and codes (7)
  'core/wire/errors-wire.ts', // errors as written to the client, the error table (7)
  'core/http/serve.ts', // inbound batches (4.2)
  'plugins/headers/index.ts', // response headers (4.5)
  'plugins/multiplex/index.ts', // multiplexing (2.7, 3.4, 4.6)
  'plugins/directives/index.ts', // request directives (2.8)
  'plugins/directives/api.ts', // typed directives: declaration and reading (2.8)
  'plugins/admin/methods.ts', // admin methods (4.4)
  'plugins/healthcheck/index.ts', // healthcheck endpoint (4.3)
  'plugins/healthcheck/evaluate.ts', // healthcheck strategies (4.3)
];

/** Tests run against the mutants: the conformance suite plus the unit tests of those modules. */
export const WIRE_SPECS = [
  'test/conformance/[1-9]*.test.ts', // every section file (coverage.test.ts only checks docs, in a child mocha)
  'test/unit/jsonrpc.test.ts',
  'test/unit/core/parse-limits.test.ts',
  'test/unit/core/one-parse.test.ts',
  'test/unit/lib/json-scan-answer.test.ts',
  'test/unit/errors.test.ts',
  'test/unit/core/error-charging.test.ts',
  'test/unit/core/docs.test.ts',
  'test/unit/plugins/headers.test.ts',
  'test/unit/plugins/directives.test.ts',
  'test/unit/plugins/admin/host-guard.test.ts',
  'test/unit/wire/*.test.ts',
];

/** `--mutate <files>` / `-m <files>` from the command line, when given. */
function mutateArg() {
  const argv = process.argv;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--mutate' || argv[i] === '-m') return argv[i + 1];
    if (argv[i]?.startsWith('--mutate=')) return argv[i].slice('--mutate='.length);
  }
  return undefined;
}

const only = mutateArg();
/** reports/mutation/ for the whole set, reports/mutation/<module>/ for a `--mutate` run. */
const REPORT_DIR = only ? `reports/mutation/${only.replace(/\.ts$/, '').replace(/[^A-Za-z0-9.-]+/g, '-')}` : 'reports/mutation';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  plugins: ['./scripts/stryker-mocha-runner.mjs', '@stryker-mutator/typescript-checker'],
  testRunner: 'mocha',
  mochaOptions: {
    config: '.mocharc.cjs',
    spec: WIRE_SPECS,
  },
  testRunnerNodeArgs: ['--import=tsx', '--conditions=svc-source'],
  checkers: ['typescript'],
  // tsconfig.json's options over the wire modules and their imports (keep its list in step with WIRE_MODULES).
  tsconfigFile: 'tsconfig.stryker.json',
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: 'perTest',
  mutate: WIRE_MODULES,
  concurrency: 1,
  // Tests start anvil and svc; a mutant that stalls a call is a timeout, not a hang.
  timeoutMS: 30_000,
  incremental: true,
  incrementalFile: `${REPORT_DIR}/stryker-incremental.json`,
  reporters: ['clear-text', 'json', 'progress'],
  jsonReporter: { fileName: `${REPORT_DIR}/mutation.json` },
  // The score table and each surviving mutant; not the list of every test.
  clearTextReporter: { allowColor: false, logTests: false, reportTests: false, reportMutants: true, reportScoreTable: true },
  thresholds: { high: 90, low: 85, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  ignorePatterns: ['dist', 'reports', 'coverage', 'docs/api', 'bench/.compiled', 'test-output', '.scratch', '.tmp'],
};
