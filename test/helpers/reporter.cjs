'use strict';
/**
 * Spec reporter whose last output line is exactly `N passed, N failed, N skipped`,
 * printed after the spec reporter's epilogue (CI greps for it).
 */
const Mocha = require('mocha');

const { Spec, Base } = Mocha.reporters;

class SummaryReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
  }

  epilogue() {
    super.epilogue();
    const s = this.stats || {};
    Base.consoleLog(`${s.passes || 0} passed, ${s.failures || 0} failed, ${s.pending || 0} skipped`);
  }
}

SummaryReporter.description = 'spec, then one line "N passed, N failed, N skipped"';

module.exports = SummaryReporter;
