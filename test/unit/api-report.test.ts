/**
 * The public API reports (etc/api/*.api.md) match the built declarations in dist/.
 *
 * svc's public surface is its package.json `exports` (`svc-proxy/plugin`, `svc-proxy/presets`,
 * `svc-proxy/config`); a change to any exported name or signature must show in review as a diff of
 * the checked-in report. This runs API Extractor in production mode (`localBuild: false`: it
 * compares, writes nothing under etc/) on each entry against the current dist/, which `pretest`
 * builds. Run alone: `npm run build --silent && npx mocha test/unit/api-report.test.ts`.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_ENTRIES, ROOT, exportsLine, runApiReports, type ApiReportResult } from '../../api-extractor/api-report.ts';

/** Lines of the diff shown in a failure: enough to see what changed, short enough to read. */
const DIFF_LINES = 40;

describe('public API reports (etc/api/)', function () {
  // One TypeScript program for the three entries: ~2-5 s on the CI machine.
  this.timeout(60_000);

  let results: ApiReportResult[];
  before(function () {
    try {
      results = runApiReports({ write: false });
    } catch (err) {
      throw new Error(`API Extractor could not analyse dist/ (run \`npm run build\` first): ${(err as Error).message}`);
    }
  });

  it('every entry of package.json exports has a report config', function () {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    // "./plugins/*" is one entry per plugin folder with a contract (plugins/<name>/api.ts).
    const plugins = API_ENTRIES.filter((e) => e.name.startsWith('svc-proxy/plugins/'));
    expect(plugins.length, 'plugin contract entries').to.be.greaterThan(0);
    const entries = Object.keys(pkg.exports)
      .filter((k) => k !== './package.json')
      .flatMap((k) => (k === './plugins/*' ? plugins.map((e) => e.name) : [`svc-proxy/${k.slice(2)}`]));
    expect(API_ENTRIES.map((e) => e.name)).to.have.members(entries);
  });

  for (const entry of API_ENTRIES) {
    it(`${entry.name}: ${entry.report} matches dist/`, function () {
      const r = results.find((x) => x.entry === entry)!;
      expect(r.errors, `API Extractor failed on ${entry.config}`).to.deep.equal([]);
      // The spec reporter prints the title after the test body: `svc-proxy/plugin: N exports; ...`.
      this.test!.title = `${exportsLine(r)}; ${entry.report} matches dist/`;
      expect(r.exports, `${entry.name} exports nothing: is dist/ built?`).to.be.greaterThan(0);
      expect(r.forgotten, `types ${entry.name} uses that no public entry exports (a user cannot name them)`).to.deep.equal([]);
      if (r.changed) {
        const diff = (r.diff ?? '(no diff: the report file is missing)').split('\n');
        const shown = diff.slice(0, DIFF_LINES).join('\n') + (diff.length > DIFF_LINES ? `\n... (${diff.length - DIFF_LINES} more lines)` : '');
        expect.fail(`the public API changed: run \`npm run api:report\` and commit ${entry.report}\n${shown}`);
      }
    });
  }
});
