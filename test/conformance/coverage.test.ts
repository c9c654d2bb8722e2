/**
 * The conformance table stays true: every rule of docs/interface.md has a test named after it or
 * a declared exception (test/conformance/exceptions.ts), no test title carries an id the
 * document does not have, and docs/conformance.md is exactly what `npm run docs:conformance`
 * would write now.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { CONFORMANCE_FILE, extractRules, generateConformance, renderConformance, ruleStatus, titleId, type Rule, type TitledTest } from '../../bin/gen-conformance.ts';
import { DEVIATIONS, UNTESTABLE } from './exceptions.ts';

describe('conformance: interface document coverage', function () {
  this.timeout(60_000);
  let rules: Rule[];
  let tests: TitledTest[];
  let markdown: string;
  before(() => {
    ({ rules, tests, markdown } = generateConformance());
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
    expect(extractRules(doc).map((r) => r.id)).to.deep.equal(['§4.2 #1', '§4.2 #2', '§4.2 (a)', '§4.2 (b)', '§4.2 #4', '§4.2 on / go', '§4.2 on / stop', '§4.2 off']);
    expect(titleId('§4.2 #3 — a batch is HTTP 200')).to.equal('§4.2 #3');
    expect(titleId('a plain title')).to.equal(undefined);
  });

  it('every rule of docs/interface.md has a test named after it or a declared exception', () => {
    const missing = rules.filter((r) => ruleStatus(r.id, tests) === 'missing').map((r) => r.id);
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

  it('docs/conformance.md is what `npm run docs:conformance` writes now', () => {
    expect(readFileSync(CONFORMANCE_FILE, 'utf8'), 'docs/conformance.md is stale: run `npm run docs:conformance`').to.equal(markdown);
    expect(renderConformance(rules, tests)).to.equal(markdown);
  });
});
