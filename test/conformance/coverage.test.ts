/**
 * The conformance table stays true: every rule of docs/interface.md has a test named after it or
 * a declared exception (test/conformance/exceptions.ts), no test title carries an id the
 * document does not have, docs/conformance.md lists exactly the rules and titled tests there are
 * now, and a titled test counts only when it ran, passed and asserted (the generator's real run
 * of a fixture of skipped, empty, pending, failing and guarded tests proves it). Whether each
 * `tested` claim held in this very run is checked by the reporter at the end of a full `npm test`.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import {
  claimedOutcomes,
  claimedTested,
  collectTitledTests,
  CONFORMANCE_FILE,
  extractRules,
  INTERFACE_FILE,
  renderConformance,
  ruleStatus,
  runTitledTests,
  titleId,
  type Rule,
  type TestOutcome,
  type TitledTest,
} from '../../bin/gen-conformance.ts';
import { DEVIATIONS, UNTESTABLE } from './exceptions.ts';

describe('conformance: interface document coverage', function () {
  this.timeout(60_000);
  let rules: Rule[];
  let tests: TitledTest[];
  let markdown: string;
  let claimed: TestOutcome[];
  before(() => {
    rules = extractRules(readFileSync(INTERFACE_FILE, 'utf8'));
    tests = collectTitledTests();
    markdown = readFileSync(CONFORMANCE_FILE, 'utf8');
    claimed = claimedOutcomes(markdown, tests);
  });

  it('the rule ids follow the naming convention (numbered items, lettered rules, table rows, repeated first cells)', () => {
    const doc = [
      '## 4. Endpoints',
      '### 4.2 Batch',
      '1. first rule',
      '2. second rule',
      '| # | Header |',
      '|---|---|',
      '| 4 | X-`A` |',
      '',
      '| State | Trigger |',
      '|---|---|',
      '| `on` | `go` |',
      '| `on` | stop |',
      '| off | `go` \\| x |',
      'Rules: (a) one thing; (b) another.',
    ].join('\n');
    expect(extractRules(doc).map((r) => r.id)).to.deep.equal([
      '§4.2 #1',
      '§4.2 #2',
      '§4.2 (a)',
      '§4.2 (b)',
      '§4.2 #4',
      '§4.2 on / go',
      '§4.2 on / stop',
      '§4.2 off',
    ]);
    expect(titleId('§4.2 #3 — a batch is HTTP 200')).to.equal('§4.2 #3');
    expect(titleId('a plain title')).to.equal(undefined);
  });

  it('every rule of docs/interface.md has a test named after it or a declared exception', () => {
    const missing = rules.filter((r) => ruleStatus(r.id, claimed) === 'missing').map((r) => r.id);
    expect(missing, `rules with neither a test titled "<id> — …" nor an entry in test/conformance/exceptions.ts`).to.deep.equal([]);
  });

  it('every test title that starts with § carries an id of docs/interface.md, followed by " — "', () => {
    const known = new Set(rules.map((r) => r.id));
    const unknown = tests.filter((t) => !known.has(t.id)).map((t) => `${t.file}: ${t.title}`);
    expect(unknown, 'test titles whose id is not a rule of docs/interface.md').to.deep.equal([]);
  });

  it('every declared exception names a rule of docs/interface.md', () => {
    const known = new Set(rules.map((r) => r.id));
    const stale = [...Object.keys(UNTESTABLE), ...Object.keys(DEVIATIONS)].filter((id) => !known.has(id));
    expect(stale, 'exceptions.ts entries that are not rule ids').to.deep.equal([]);
  });

  it('docs/conformance.md lists the rules and titled tests there are now (else: `npm run docs:conformance`)', () => {
    expect(renderConformance(rules, tests, claimed), 'docs/conformance.md is stale: run `npm run docs:conformance`').to.equal(markdown);
    expect(claimedTested(markdown)).to.have.length.above(0);
  });

  it('a skipped, empty, pending, failing or condition-guarded titled test covers nothing; one that passed and asserted does', function () {
    this.timeout(120_000);
    const outcomes = runTitledTests(['test/fixtures/conformance/loophole.fixture.ts']);
    expect(outcomes.map((o) => titleId(o.title)).sort(), 'pending and skipped tests never run').to.deep.equal(['§99 #2', '§99 #4', '§99 #5', '§99 #6']);
    const status = Object.fromEntries([1, 2, 3, 4, 5, 6].map((n) => [n, ruleStatus(`§99 #${n}`, outcomes)]));
    expect(status).to.deep.equal({ 1: 'missing', 2: 'missing', 3: 'missing', 4: 'missing', 5: 'missing', 6: 'tested' });
  });
});
