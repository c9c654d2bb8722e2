'use strict';
/**
 * Mocha config: TypeScript specs through tsx, the summary reporter, a generous timeout for
 * anvil-backed tests, and parallel worker processes for whole-suite runs.
 *
 * Mocha concatenates the config's `spec` with spec paths given on the command line, so
 * `mocha test/unit/x.test.ts` would still run every test. The default spec is therefore
 * only used when no spec path/glob is given on the command line.
 *
 * Parallel mode (mocha `--parallel`, one worker process per job, each running whole files): on
 * for `npm test` and for globs or folders given on the command line, off for named files (a
 * helper's or developer's quick run stays one process with immediate output), for `--dry-run`
 * (docs:conformance reads titles) and for the full hostile suite (`CHAOS=full`, whose summary
 * counts every class in one process). `SVC_TEST_JOBS=N` sets the number of workers; 1 turns
 * parallel mode off. `--no-parallel` on the command line also wins.
 */

/** Options that take a value (the next argv entry is not a spec). */
const VALUE_OPTIONS = new Set([
  '--config',
  '--package',
  '--reporter',
  '-R',
  '--reporter-option',
  '--reporter-options',
  '-O',
  '--grep',
  '-g',
  '--fgrep',
  '-f',
  '--timeout',
  '-t',
  '--slow',
  '-s',
  '--retries',
  '--ui',
  '-u',
  '--require',
  '-r',
  '--import',
  '--file',
  '--ignore',
  '--exclude',
  '--extension',
  '--node-option',
  '-n',
  '--jobs',
  '-j',
  '--watch-files',
  '--watch-ignore',
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

const path = require('node:path');
const fs = require('node:fs');

/**
 * Files that take longest (measured on the 2-core CI machine), queued first: mocha hands files to
 * free workers in spec order, so a long file started last would be the run's tail. Keep it to the
 * files over ~5 s; a missing entry is skipped.
 */
const SLOW_FIRST = [
  'test/e2e/admin-ui.test.ts',
  'test/e2e/shared-state.test.ts',
  'test/e2e/shared-state-ops.test.ts',
  'test/e2e/config-reload-process.test.ts',
  'test/e2e/prometheus.test.ts',
  'test/e2e/acme-preset.test.ts',
  'test/e2e/package.test.ts',
  'test/e2e/deadline-timeout.test.ts',
  'test/e2e/fresh-realtime.test.ts',
  'test/e2e/evm-interpolation.test.ts',
  'test/e2e/failsafe-defaults.test.ts',
  'test/e2e/failsafe.test.ts',
  'test/e2e/siwe.test.ts',
  'test/e2e/two-copies.test.ts',
  'test/e2e/first-minutes.test.ts',
  'test/e2e/plugin-entry.test.ts',
  'test/e2e/storage-stall.test.ts',
  'test/e2e/cli.test.ts',
  'test/unit/deploy.test.ts',
  'test/e2e/server-limits.test.ts',
  'test/e2e/healthcheck.test.ts',
  'test/e2e/websocket.test.ts',
  'test/e2e/websocket-subscriptions.test.ts',
  'test/e2e/websocket-failover.test.ts',
];

/**
 * The hostile suite's files, which share one deployment (test/chaos/harness.ts): in parallel mode
 * they run as one spec, test/helpers/chaos-suite.ts, so one worker starts that deployment once.
 */
const CHAOS_SUITE = 'test/helpers/chaos-suite.ts';

/**
 * Every .test.ts file under test/, the slow ones first, then e2e-like folders, then unit tests.
 * @param parallel whether the chaos files are replaced by {@link CHAOS_SUITE} (queued first)
 */
function orderedSpec(parallel) {
  const root = path.join(__dirname, 'test');
  const all = fs
    .readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts') && !f.split(path.sep).some((p) => p.startsWith('.')))
    .map((f) => path.join('test', f).split(path.sep).join('/'))
    .sort();
  const chaos = parallel ? all.filter((f) => f.startsWith('test/chaos/')) : [];
  const slow = [...(chaos.length ? [CHAOS_SUITE] : []), ...SLOW_FIRST.filter((f) => all.includes(f))];
  const rest = all.filter((f) => !slow.includes(f) && !chaos.includes(f));
  const unit = rest.filter((f) => f.startsWith('test/unit/'));
  return [...slow, ...rest.filter((f) => !unit.includes(f)), ...unit].map((f) => path.join(__dirname, f));
}

/**
 * Temp files in memory: the suite writes a lot of small files under os.tmpdir() (npm installs of
 * the packed svc, PostgreSQL clusters, Redis dirs, configs), which on a VM disk costs more than the
 * tests themselves (an `npm install` of svc: 25 s on disk, 7 s on tmpfs). When TMPDIR is unset and
 * /dev/shm is a RAM file system with room to spare (2 GiB, so not Docker's 64 MB default), TMPDIR
 * points there for the run and every child it starts. `SVC_TEST_TMPDIR=<dir>` picks another
 * folder; `SVC_TEST_TMPDIR=` (empty) keeps the system's.
 */
function memoryTmpdir() {
  if (process.env.SVC_TEST_TMPDIR !== undefined) return process.env.SVC_TEST_TMPDIR || undefined;
  if (process.env.TMPDIR) return undefined;
  try {
    const st = fs.statfsSync('/dev/shm');
    const TMPFS_MAGIC = 0x01021994;
    if (st.type !== TMPFS_MAGIC || st.bavail * st.bsize < 2 * 1024 ** 3) return undefined;
    fs.accessSync('/dev/shm', fs.constants.W_OK);
    return '/dev/shm';
  } catch {
    return undefined;
  }
}
const tmp = memoryTmpdir();
if (tmp) process.env.TMPDIR = tmp;

const argv = process.argv.slice(2);
const explicit = cliSpecs(argv);
const jobs = Number.parseInt(process.env.SVC_TEST_JOBS ?? '', 10);
const parallel =
  !(jobs <= 1) &&
  !argv.includes('--dry-run') &&
  process.env.CHAOS !== 'full' &&
  // A glob of the hostile suite's files would start one deployment per file: not in parallel.
  !explicit.some((s) => s.includes('chaos')) &&
  (explicit.length === 0 || explicit.some((s) => s.includes('*') || fs.statSync(s, { throwIfNoEntry: false })?.isDirectory()));

// A run of the whole default spec: the reporter then checks docs/conformance.md's claims against it.
if (explicit.length === 0 && !argv.some((a) => /^(--grep|-g|--fgrep|-f|--dry-run)(=|$)/.test(a))) process.env.SVC_TEST_FULL_SPEC = '1';

module.exports = {
  ...(explicit.length ? {} : { spec: orderedSpec(parallel) }),
  ...(parallel ? { parallel: true, jobs: jobs > 1 ? jobs : 3 } : {}),
  'node-option': ['import=tsx', 'conditions=svc-source'],
  // Root hooks: an empty loopback endpoints catalog, so zero-config projects never dial the internet.
  require: [
    path.join(__dirname, 'test', 'helpers', 'offline-catalog.ts'),
    // Outcome and assertion count of each test titled with a rule id (docs/conformance.md counts them).
    path.join(__dirname, 'test', 'helpers', 'test-record.ts'),
    // Per-file wall times from parallel workers, for the reporter's SVC_TEST_TIMINGS summary.
    ...(process.env.SVC_TEST_TIMINGS ? [path.join(__dirname, 'test', 'helpers', 'file-timings.ts')] : []),
  ],
  extension: ['ts'],
  // Absolute, so mocha finds it from any working directory.
  reporter: path.join(__dirname, 'test', 'helpers', 'reporter.cjs'),
  timeout: 20000,
  exit: true,
  recursive: true,
};
