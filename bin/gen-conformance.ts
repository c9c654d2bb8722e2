/**
 * `npm run docs:conformance`: writes docs/conformance.md, the table that maps every rule of the
 * interface document (docs/interface.md) to the tests named after it, or to the declared reason
 * it is untestable or a deliberate deviation (test/conformance/exceptions.ts).
 *
 * Rule ids (shared naming convention of the conformance tests):
 * - a numbered list item `n.` in section S (the deepest heading number) is `§S #n`;
 * - a lettered rule `(a)` in section S is `§S (a)`;
 * - a table row in section S is `§S <first cell>` (backticks removed, trimmed); a table whose
 *   first column is `#` gives `§S #<n>`; when a first cell repeats within a section, every such
 *   row gets ` / <second cell>` appended;
 * - every other sentence of a section's prose (paragraphs that are neither list items, tables
 *   nor lettered rules) is `§S ¶n`, n counting the section's sentences from 1; a bare label such
 *   as `Responses:` is no sentence.
 *
 * A test carries an id when its title starts with `§` and the id is the part before ` — `.
 * Titles are read by running mocha in dry-run mode with the JSON reporter (no hand parsing of
 * test sources; titles built in loops count too). A rule counts as covered only when one of its
 * tests ran for real, passed and made at least one assertion: the generator runs the titled
 * tests (`mocha --grep §`) with test/helpers/test-record.ts recording each one's outcome and
 * assertion count, so a skipped, pending, failing or empty titled test covers nothing. The full
 * suite checks the table's claims against its own run (test/helpers/reporter.cjs).
 *
 * The module exports the pieces so that test/conformance/coverage.test.ts checks the same thing
 * the generator writes; it writes the file only when run as the main module.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PACKAGE_ROOT } from '../core/wire/version.ts';
import { DEVIATIONS, README_DEVIATIONS, UNTESTABLE } from '../test/conformance/exceptions.ts';
import { MUTATION_RUN, MUTATION_SCORES, MUTATION_TARGET } from '../test/conformance/mutation.ts';
import { extractRules, type Rule } from './conformance-rules.ts';

export { extractRules, type Rule, sentencesOf } from './conformance-rules.ts';

/** Path of the interface document inside the repository. */
export const INTERFACE_FILE = join(PACKAGE_ROOT, 'docs', 'interface.md');
/** Path of the generated conformance table. */
export const CONFORMANCE_FILE = join(PACKAGE_ROOT, 'docs', 'conformance.md');
/** Separator between a rule id and the description in a test title. */
export const TITLE_SEPARATOR = ' — ';

/** What one titled test did in a real run (test/helpers/test-record.ts writes these). */
export interface TestOutcome {
  /** Test file, relative to the package root, `/`-separated. */
  file: string;
  /** The whole test title. */
  title: string;
  /** Mocha's state: `passed` or `failed` (pending tests run no hooks and are never recorded). */
  state: string;
  /** Chai assertions the test made. */
  assertions: number;
}

/** A test whose title carries a rule id. */
export interface TitledTest {
  /** The rule id (title before ` — `). */
  id: string;
  /** The whole test title. */
  title: string;
  /** Test file, relative to the package root, `/`-separated. */
  file: string;
}

/**
 * The rule id a test title carries, or `undefined` when the title does not start with `§`.
 * A title that starts with `§` but has no ` — ` yields the whole title (reported as unknown).
 */
export function titleId(title: string): string | undefined {
  if (!title.startsWith('§')) return undefined;
  const at = title.indexOf(TITLE_SEPARATOR);
  return at < 0 ? title : title.slice(0, at);
}

/**
 * Lists every test under test/ whose title carries a rule id: runs mocha with `--dry-run` and
 * the JSON reporter (hooks and tests do not run; files are loaded, so titles built at load time
 * count).
 * @throws Error when mocha fails to load the test files
 */
export function collectTitledTests(): TitledTest[] {
  const dir = mkdtempSync(join(tmpdir(), 'svc-conformance-'));
  const out = join(dir, 'tests.json');
  try {
    execFileSync(
      process.execPath,
      [
        join(PACKAGE_ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js'),
        '--dry-run',
        '--reporter',
        'json',
        '--reporter-option',
        `output=${out}`,
        'test/**/*.test.ts',
      ],
      {
        cwd: PACKAGE_ROOT,
        stdio: ['ignore', 'ignore', 'pipe'],
        timeout: 120_000,
      },
    );
    const report = JSON.parse(readFileSync(out, 'utf8')) as { tests: { title: string; file: string }[] };
    const found: TitledTest[] = [];
    for (const t of report.tests) {
      const id = titleId(t.title);
      if (id !== undefined) found.push({ id, title: t.title, file: relative(PACKAGE_ROOT, t.file).split('\\').join('/') });
    }
    return found.sort((a, b) => (a.file === b.file ? a.title.localeCompare(b.title) : a.file.localeCompare(b.file)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs the titled tests for real (`mocha --grep §` over the files that have any, two workers)
 * and reads what each did from test/helpers/test-record.ts's results file.
 * @param files test files holding titled tests, relative to the package root
 * @returns one outcome per titled test that ran (pending tests are absent)
 * @throws Error when mocha cannot start or no result was recorded
 */
export function runTitledTests(files: string[]): TestOutcome[] {
  const dir = mkdtempSync(join(tmpdir(), 'svc-conformance-run-'));
  const out = join(dir, 'results.jsonl');
  try {
    writeFileSync(out, '');
    const args = [
      join(PACKAGE_ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js'),
      '--reporter',
      'dot',
      '--grep',
      '(^| )§',
      '--parallel',
      '--jobs',
      '2',
      ...files,
    ];
    try {
      execFileSync(process.execPath, args, {
        cwd: PACKAGE_ROOT,
        stdio: ['ignore', 'ignore', 'pipe'],
        timeout: 900_000,
        env: { ...process.env, SVC_CONFORMANCE_RESULTS: out },
      });
    } catch (e) {
      // Failing tests make mocha exit non-zero: their outcomes are recorded and counted as such.
      if (readFileSync(out, 'utf8').length === 0) throw e;
    }
    return readOutcomes(readFileSync(out, 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Parses a results file (one JSON {@link TestOutcome} per line); malformed lines are skipped.
 * When a test ran more than once (retries), a passing run with assertions wins.
 */
export function readOutcomes(text: string): TestOutcome[] {
  const out: TestOutcome[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const o = JSON.parse(line) as TestOutcome;
      if (typeof o.title === 'string' && typeof o.file === 'string') out.push(o);
    } catch {
      /* a torn line of a killed worker */
    }
  }
  return out;
}

/** Whether an outcome covers its rule: the test passed and made at least one assertion. */
export function covers(o: TestOutcome): boolean {
  return o.state === 'passed' && o.assertions > 0;
}

/** Status of one rule in the table. */
export type RuleStatus = 'tested' | 'untestable' | 'deviation' | 'missing';

/**
 * The status of a rule: a declared deviation wins (it stays listed with its tests), then a test
 * carrying its id that ran, passed and asserted, then a declared untestable reason; otherwise
 * `missing` (a titled test that was skipped, pending, failed or asserted nothing covers nothing).
 * @param outcomes what the titled tests did in a real run
 */
export function ruleStatus(id: string, outcomes: TestOutcome[]): RuleStatus {
  if (DEVIATIONS[id] !== undefined) return 'deviation';
  if (outcomes.some((o) => titleId(o.title) === id && covers(o))) return 'tested';
  if (UNTESTABLE[id] !== undefined) return 'untestable';
  return 'missing';
}

/** Why a titled test covers nothing, for the table (undefined when it covers its rule). */
function notCounted(t: TitledTest, outcomes: TestOutcome[]): string | undefined {
  const mine = outcomes.filter((o) => o.file === t.file && o.title === t.title);
  if (mine.some(covers)) return undefined;
  if (mine.length === 0) return 'did not run (skipped or pending)';
  if (mine.some((o) => o.state === 'passed')) return 'asserts nothing';
  return 'failed';
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const excerpt = (s: string, max = 110): string => (s.length > max ? `${s.slice(0, max - 1).trimEnd()}…` : s);
const code = (s: string): string => `\`${s.replace(/`/g, '')}\``;

/**
 * Renders docs/conformance.md.
 * @param rules the rules of the interface document
 * @param tests the tests that carry rule ids
 */
export function renderConformance(rules: Rule[], tests: TitledTest[], outcomes: TestOutcome[]): string {
  const byId = new Map<string, TitledTest[]>();
  for (const t of tests) byId.set(t.id, [...(byId.get(t.id) ?? []), t]);
  const counts: Record<RuleStatus, number> = { tested: 0, untestable: 0, deviation: 0, missing: 0 };
  const rows: string[] = [];
  for (const r of rules) {
    const status = ruleStatus(r.id, outcomes);
    counts[status]++;
    const mine = byId.get(r.id) ?? [];
    const testList = mine
      .map((t) => {
        const why = notCounted(t, outcomes);
        return `${code(t.file)}: ${t.title.slice(r.id.length + TITLE_SEPARATOR.length)}${why ? ` **(not counted: ${why})**` : ''}`;
      })
      .join('<br>');
    let detail: string;
    if (status === 'deviation') detail = `${DEVIATIONS[r.id]}${testList ? `<br>${testList}` : ''}`;
    else if (status === 'untestable') detail = UNTESTABLE[r.id] ?? '';
    else if (status === 'tested') detail = testList;
    else detail = testList ? `**no titled test ran, passed and asserted**<br>${testList}` : '**no test and no declared exception**';
    rows.push(`| ${code(r.id)} | ${cell(excerpt(r.text))} | ${status} | ${cell(detail)} |`);
  }
  const deviationList = rules.filter((r) => DEVIATIONS[r.id] !== undefined).map((r) => `- ${code(r.id)}: ${DEVIATIONS[r.id]}`);
  const readmeList = README_DEVIATIONS.map((d) => `- ${d.where}: ${d.what}`);
  return [
    '# Interface conformance',
    '',
    '<!-- Generated by `npm run docs:conformance` (bin/gen-conformance.ts) from docs/interface.md, a',
    '     real run of the tests under test/ whose titles carry rule ids, and',
    '     test/conformance/exceptions.ts. Do not edit by hand; test/conformance/coverage.test.ts fails',
    '     when the rules or test titles are stale, and a full `npm test` fails when a rule counted as',
    '     tested here had no titled test that passed and asserted in that run. -->',
    '',
    'Every rule of [the interface document](interface.md) (numbered items `§S #n`, lettered rules',
    '`§S (a)`, table rows `§S <first cell>`) with the tests whose titles start with its id, or the',
    'declared reason it is untestable or a deliberate deviation. A rule is **tested** only when one',
    'of its tests ran, passed and made at least one assertion in a real run; a titled test that was',
    'skipped, failed or asserted nothing is listed as not counted.',
    '',
    `**${rules.length} rules: ${counts.tested} covered by tests, ${counts.deviation} deliberate ${counts.deviation === 1 ? 'deviation' : 'deviations'}, ${counts.untestable} untestable${counts.missing ? `, ${counts.missing} MISSING` : ''}.**`,
    '',
    '## Deliberate deviations',
    '',
    ...(deviationList.length ? deviationList : ['None.']),
    '',
    'Other documented choices where svc goes beyond or differs from the document, each with the page that describes it:',
    '',
    ...readmeList,
    '',
    ...mutationSection(),
    '## Rules',
    '',
    '| Rule | Text | Status | Tests / reason |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

/**
 * Reads the document, lists the titled tests, runs them for real and renders the conformance
 * table (what the generator writes).
 */
export function generateConformance(): { rules: Rule[]; tests: TitledTest[]; outcomes: TestOutcome[]; markdown: string } {
  const rules = extractRules(readFileSync(INTERFACE_FILE, 'utf8'));
  const tests = collectTitledTests();
  const outcomes = runTitledTests([...new Set(tests.map((t) => t.file))]);
  return { rules, tests, outcomes, markdown: renderConformance(rules, tests, outcomes) };
}

/**
 * The rule ids docs/conformance.md counts as tested (its `tested` rows), for checks of the
 * table's claims against a run.
 * @param markdown the table's text
 */
export function claimedTested(markdown: string): string[] {
  const out: string[] = [];
  for (const m of markdown.matchAll(/^\| `(§[^`]+)` \|.*?\| tested \|/gm)) out.push(m[1] as string);
  return out;
}

/**
 * The outcomes docs/conformance.md states for the titled tests (covering, or not counted and why),
 * so that the table can be rendered again from the test titles alone and compared with the file
 * (a staleness check that runs no test). A test the table does not list is taken as covering.
 * @param markdown the table's text
 * @param tests the titled tests (dry run)
 */
export function claimedOutcomes(markdown: string, tests: TitledTest[]): TestOutcome[] {
  return tests.map((t) => {
    const listed = `${code(t.file)}: ${cell(t.title.slice(t.id.length + TITLE_SEPARATOR.length))}`;
    const at = markdown.indexOf(`${listed} **(not counted: `);
    const why = at < 0 ? undefined : markdown.slice(at + listed.length + ' **(not counted: '.length).split(')**')[0];
    const state = why === 'failed' ? 'failed' : 'passed';
    if (why === 'did not run (skipped or pending)') return { file: t.file, title: `(not run) ${t.title}`, state: 'pending', assertions: 0 };
    return { file: t.file, title: t.title, state, assertions: why === 'asserts nothing' ? 0 : 1 };
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { markdown, rules } = generateConformance();
  writeFileSync(CONFORMANCE_FILE, markdown);
  process.stdout.write(`docs/conformance.md written (${rules.length} rules)\n`);
}

/**
 * The mutation score section: whether the tests would catch a deviation in the modules that
 * implement the wire rules (docs/mutation.md), per module and in total.
 */
function mutationSection(): string[] {
  if (MUTATION_SCORES.length === 0) return [];
  const pct = (k: number, n: number): string => `${((100 * k) / n).toFixed(2)}%`;
  const killed = MUTATION_SCORES.reduce((a, m) => a + m.killed, 0);
  const mutants = MUTATION_SCORES.reduce((a, m) => a + m.mutants, 0);
  return [
    '## Mutation score',
    '',
    `Whether the tests fail when the code deviates: StrykerJS changes the modules that implement the wire rules one edit at a time and runs their tests ([mutation testing](mutation.md), ${MUTATION_RUN}). **${killed} of ${mutants} mutants killed: ${pct(killed, mutants)}** (target ${MUTATION_TARGET}% per module); every survivor is explained in [docs/mutation.md](mutation.md#surviving-mutants).`,
    '',
    '| Module | Mutants | Killed | Survived | Score |',
    '|---|---|---|---|---|',
    ...MUTATION_SCORES.map((m) => `| ${code(m.module)} | ${m.mutants} | ${m.killed} | ${m.survived} | ${pct(m.killed, m.mutants)} |`),
    '',
  ];
}
