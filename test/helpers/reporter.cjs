'use strict';
/**
 * Spec reporter whose last output line is exactly `N passed, N failed, N skipped`,
 * printed after the spec reporter's epilogue (CI greps for it).
 *
 * With `SVC_TEST_TIMINGS=N` set (N defaults to 15 when the value is not a number), the epilogue
 * first lists the N slowest files and the N slowest tests, so a slow suite can be found without
 * reading the whole log. A file's time is its wall time, hooks included: measured here from its
 * first to its last event when mocha runs serially; in parallel mode, where a file's events are
 * replayed at once when its worker is done, measured in the worker by the root hooks of
 * test/helpers/file-timings.ts, which append to the file this reporter names in
 * `SVC_TEST_TIMINGS_FILE`.
 */
const Mocha = require('mocha');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');

const { Spec, Base } = Mocha.reporters;
const { EVENT_TEST_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_FAIL } = Mocha.Runner.constants;

/** How many rows `SVC_TEST_TIMINGS` asks for, or 0 when unset. */
function timingRows() {
  const v = process.env.SVC_TEST_TIMINGS;
  if (!v || v === '0' || v === 'false') return 0;
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) && n > 0 ? n : 15;
}

/**
 * Rule ids docs/conformance.md counts as tested that no titled test covered in this run (ran,
 * passed, asserted: the records of test/helpers/test-record.ts). Mirrors bin/gen-conformance.ts's
 * `claimedTested` and `covers`, in plain JavaScript because the reporter loads before tsx.
 */
function unmetClaims(resultsFile) {
  let doc;
  try {
    doc = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'conformance.md'), 'utf8');
  } catch {
    return [];
  }
  const covered = new Set();
  for (const line of fs.readFileSync(resultsFile, 'utf8').split('\n')) {
    if (!line) continue;
    try {
      const o = JSON.parse(line);
      if (o.state === 'passed' && o.assertions > 0) covered.add(o.title.split(' — ')[0]);
    } catch {
      // a torn line of a killed worker
    }
  }
  const unmet = [];
  for (const m of doc.matchAll(/^\| `(§[^`]+)` \|.*?\| tested \|/gm)) if (!covered.has(m[1])) unmet.push(m[1]);
  return unmet;
}

class SummaryReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    // Inherited by the parallel workers (forked after the reporter is made), as the timings file.
    if (!process.env.SVC_CONFORMANCE_RESULTS) {
      this.conformanceResults = path.join(os.tmpdir(), `svc-conformance-${process.pid}.jsonl`);
      fs.writeFileSync(this.conformanceResults, '');
      process.env.SVC_CONFORMANCE_RESULTS = this.conformanceResults;
    }
    this.rows = timingRows();
    if (!this.rows) return;
    /** file -> { tests: ms summed, first: ms, last: ms } */
    this.files = new Map();
    /** [ms, file, full title] */
    this.tests = [];
    // Inherited by the parallel workers, forked after the reporter is made.
    this.workerTimings = path.join(os.tmpdir(), `svc-test-timings-${process.pid}.jsonl`);
    fs.rmSync(this.workerTimings, { force: true });
    process.env.SVC_TEST_TIMINGS_FILE = this.workerTimings;
    const fileOf = (runnable) => {
      let r = runnable;
      while (r && !r.file) r = r.parent;
      return r && r.file ? path.relative(process.cwd(), r.file) : '(unknown file)';
    };
    const entry = (file) => {
      let e = this.files.get(file);
      if (!e) {
        e = { tests: 0, first: Date.now(), last: Date.now() };
        this.files.set(file, e);
      }
      return e;
    };
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file) entry(fileOf(suite)).last = Date.now();
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      if (suite.file) entry(fileOf(suite)).last = Date.now();
    });
    const onTest = (test) => {
      const file = fileOf(test);
      const e = entry(file);
      e.last = Date.now();
      if (typeof test.duration === 'number') {
        e.tests += test.duration;
        this.tests.push([test.duration, file, test.fullTitle()]);
      }
    };
    runner.on(EVENT_TEST_END, onTest);
    // A failing hook ends no test; its time still belongs to the file's wall time.
    runner.on(EVENT_TEST_FAIL, (t) => {
      if (t.type === 'hook') entry(fileOf(t)).last = Date.now();
    });
  }

  epilogue() {
    super.epilogue();
    if (this.rows) this.timings();
    const s = this.stats || {};
    let unmet = [];
    if (this.conformanceResults) {
      // Only a run of the whole suite ran every titled test; a partial run checks nothing.
      if (process.env.SVC_TEST_FULL_SPEC === '1') unmet = unmetClaims(this.conformanceResults);
      fs.rmSync(this.conformanceResults, { force: true });
    }
    if (unmet.length) {
      Base.consoleLog(
        `  conformance: ${unmet.length} rule(s) counted as tested in docs/conformance.md had no titled test that ran, passed and asserted in this run (each counts as a failure):`,
      );
      for (const id of unmet) Base.consoleLog(`    ${id}`);
      Base.consoleLog();
      // mocha's exit code is the runner's failure count, read after this epilogue.
      if (this.runner && typeof this.runner.failures === 'number') this.runner.failures += unmet.length;
    }
    Base.consoleLog(`${s.passes || 0} passed, ${(s.failures || 0) + unmet.length} failed, ${s.pending || 0} skipped`);
  }

  /** Prints the slowest files and tests (only with `SVC_TEST_TIMINGS`). */
  timings() {
    const sec = (ms) => `${(ms / 1000).toFixed(1)}s`.padStart(7);
    /** Wall times the parallel workers measured, by file. */
    const measured = new Map();
    try {
      for (const line of fs.readFileSync(this.workerTimings, 'utf8').split('\n')) {
        if (!line) continue;
        const { file, ms } = JSON.parse(line);
        measured.set(path.relative(process.cwd(), file), ms);
      }
      fs.rmSync(this.workerTimings, { force: true });
    } catch {
      // a serial run: no worker wrote anything
    }
    const files = [...this.files].map(([file, e]) => [Math.max(e.tests, e.last - e.first, measured.get(file) || 0), e.tests, file]);
    files.sort((a, b) => b[0] - a[0]);
    Base.consoleLog(`  slowest files (wall, tests):`);
    for (const [wall, tests, file] of files.slice(0, this.rows)) Base.consoleLog(`  ${sec(wall)} ${sec(tests)}  ${file}`);
    this.tests.sort((a, b) => b[0] - a[0]);
    Base.consoleLog(`  slowest tests:`);
    for (const [ms, file, title] of this.tests.slice(0, this.rows)) Base.consoleLog(`  ${sec(ms)}  ${file}: ${title}`);
    Base.consoleLog();
  }
}

SummaryReporter.description = 'spec, then one line "N passed, N failed, N skipped"';

module.exports = SummaryReporter;
