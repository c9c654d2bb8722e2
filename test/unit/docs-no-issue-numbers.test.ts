/**
 * User docs speak of features, never of internal issue numbers: README.md, every docs/*.md,
 * bench/RESULTS.md (written by `npm run bench`) and every `description` of the config schema
 * that `svc config schema` prints for the default preset (the descriptions also become the
 * generated config reference of docs/configuration.md and editors' hover text) must not cite
 * `issue #<n>` or `issues #…`. Neither may code, its comments or test names (every source file
 * of the repository): a reader of a clone cannot resolve a tracker number, so code names the
 * feature or the spec rule. Nor may code point at a design document outside the repository.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { editorConfigSchema } from '../../config/editor-schema.ts';
import type { SchemaFragment } from '../../config/schema.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { defaultPreset } from '../../presets/default.ts';

/**
 * An internal issue reference: the word issue (or issues, any case) followed by a number, with or
 * without a hash sign. Another project's public issue is cited as `owner/repo#N` instead.
 */
const ISSUE_REF = /\bissues? #?\d+\b|\bissues #/i;

/**
 * The lines of a text that cite an issue number, as `line N: text`.
 * @param text a markdown document
 */
function offendingLines(text: string): string[] {
  return text.split('\n').flatMap((line, i) => (ISSUE_REF.test(line) ? [`line ${i + 1}: ${line.trim()}`] : []));
}

/**
 * Every `description` string in a JSON Schema document, with its JSON path.
 * @param node a schema (sub)document
 * @param path the JSON path of `node`
 * @param out accumulator of `[path, description]` pairs
 */
function descriptions(node: unknown, path: string, out: [string, string][]): [string, string][] {
  if (Array.isArray(node)) node.forEach((v, i) => descriptions(v, `${path}[${i}]`, out));
  else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === 'description' && typeof v === 'string') out.push([path, v]);
      else descriptions(v, `${path}.${k}`, out);
    }
  }
  return out;
}

describe('user docs name features, not internal issue numbers', () => {
  const docsDir = join(PACKAGE_ROOT, 'docs');
  const pages = [
    'README.md',
    'bench/RESULTS.md',
    ...readdirSync(docsDir)
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  it('the pattern catches the forms used before (sanity check of the test itself)', () => {
    // Built from parts, so this file does not cite what it forbids.
    const hash = '#';
    expect(offendingLines(`fails over (issue ${hash}8): each`)).to.have.length(1);
    expect(offendingLines(`targets of Issues ${hash}10 and ${hash}11`)).to.have.length(1);
    expect(offendingLines(`written in one writeHead (issue ${27}), instead`)).to.have.length(1);
    expect(offendingLines(`spec §2.8 ${hash}10, a tissue ${hash}4 item, an issue to solve, owner/repo${hash}92`)).to.have.length(0);
  });

  for (const page of pages) {
    it(`${page} cites no issue number`, () => {
      expect(offendingLines(readFileSync(join(PACKAGE_ROOT, page), 'utf8')), page).to.deep.equal([]);
    });
  }

  it('no source file (code, comments, test names, scripts) cites an issue number or the design sketch outside the repository', () => {
    const files = execFileSync(
      'git',
      ['ls-files', '-co', '--exclude-standard', '*.ts', '*.js', '*.cjs', '*.mjs', '*.mts', '*.json', '*.yaml', '*.yml', 'Dockerfile'],
      { cwd: PACKAGE_ROOT, encoding: 'utf8' },
    )
      .split('\n')
      .filter(
        (f) =>
          f !== '' && !f.startsWith('dist/') && !f.includes('node_modules/') && f !== 'package-lock.json' && f !== 'test/unit/docs-no-issue-numbers.test.ts',
      );
    expect(files.length, 'source files found').to.be.greaterThan(300);
    const bad: string[] = [];
    for (const f of files) {
      let text: string;
      try {
        text = readFileSync(join(PACKAGE_ROOT, f), 'utf8');
      } catch {
        continue; // listed but deleted in the work tree
      }
      // Another project's public issue, named with its repository (a fixture's source), is a citation anyone can follow.
      // A citation broken over two comment lines (`(issue` then `#8 item 2)`) counts too.
      for (const l of offendingLines(text.replace(/\bissues?\s*\n\s*(?:\*|\/\/)?\s*#/gi, 'issue #')))
        if (!/[\w.-]+\/[\w.-]+ issues? #\d+/.test(l)) bad.push(`${f} ${l}`);
      text.split('\n').forEach((line, i) => {
        if (/\bDESIGN\b(?!_)/.test(line) && /\bDESIGN\b\s*(principle|"|:|'s)/.test(line)) bad.push(`${f} line ${i + 1}: ${line.trim()}`);
        // Reference notes kept beside the repository (not in a clone) cannot be followed either.
        if (/erpc-notes|shared\/(reference|DESIGN)|DESIGN\.md/.test(line)) bad.push(`${f} line ${i + 1}: ${line.trim()}`);
      });
    }
    expect(bad).to.deep.equal([]);
  });

  it("no description of the default preset's config schema (`svc config schema`) cites an issue number", () => {
    const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
    const all = descriptions(editorConfigSchema(fragments), '$', []);
    expect(all.length, 'the schema has descriptions').to.be.greaterThan(50);
    const bad = all.filter(([, d]) => ISSUE_REF.test(d)).map(([p, d]) => `${p}: ${d}`);
    expect(bad).to.deep.equal([]);
  });
});
