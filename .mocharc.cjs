'use strict';
/**
 * Mocha config: TypeScript specs through tsx, the summary reporter, a generous timeout for
 * anvil-backed tests.
 *
 * Mocha concatenates the config's `spec` with spec paths given on the command line, so
 * `mocha test/unit/x.test.ts` would still run every test. The default spec is therefore
 * only used when no spec path/glob is given on the command line.
 */

/** Options that take a value (the next argv entry is not a spec). */
const VALUE_OPTIONS = new Set([
  '--config', '--package', '--reporter', '-R', '--reporter-option', '--reporter-options', '-O',
  '--grep', '-g', '--fgrep', '-f', '--timeout', '-t', '--slow', '-s', '--retries', '--ui', '-u',
  '--require', '-r', '--import', '--file', '--ignore', '--exclude', '--extension', '--node-option',
  '-n', '--jobs', '-j', '--watch-files', '--watch-ignore',
]);

function cliSpecs(argv) {
  const out = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--spec') {
      if (argv[i + 1] !== undefined) out.push(argv[++i]);
      continue;
    }
    if (a.startsWith('--spec=')) {
      out.push(a.slice('--spec='.length));
      continue;
    }
    if (a.startsWith('-')) {
      if (VALUE_OPTIONS.has(a)) i++;
      continue;
    }
    if (/\.[cm]?[jt]s$/.test(a) || a.includes('*') || /^\.?\/?test(\/|$)/.test(a)) out.push(a);
  }
  return out;
}

const explicit = cliSpecs(process.argv.slice(2));

module.exports = {
  ...(explicit.length ? {} : { spec: ['test/**/*.test.ts'] }),
  'node-option': ['import=tsx', 'conditions=svc-source'],
  // Root hooks: an empty loopback endpoints catalog, so zero-config projects never dial the internet.
  require: [require('node:path').join(__dirname, 'test', 'helpers', 'offline-catalog.ts')],
  extension: ['ts'],
  // Absolute, so mocha finds it from any working directory.
  reporter: require('node:path').join(__dirname, 'test', 'helpers', 'reporter.cjs'),
  timeout: 20000,
  exit: true,
  recursive: true,
};
