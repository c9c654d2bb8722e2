#!/usr/bin/env node
/**
 * Summarises StrykerJS JSON reports (every mutation.json under reports/mutation/, written by
 * `npm run mutation`): per file the mutation score (killed + timed out over all valid mutants,
 * Stryker's definition: no-coverage mutants count as undetected, compile errors and ignored ones
 * are left out) and, with `--survivors`, each surviving or uncovered mutant's line and change.
 * Usage: node scripts/mutation-summary.mjs [--survivors] [report.json ...]
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const args = process.argv.slice(2);
const survivors = args.includes('--survivors');
let files = args.filter((a) => !a.startsWith('--'));
if (!files.length) {
  const walk = (d) => readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : f === 'mutation.json' ? [join(d, f)] : []));
  files = walk('reports/mutation');
}
const rows = new Map();
for (const f of files) {
  const report = JSON.parse(readFileSync(f, 'utf8'));
  for (const [name, file] of Object.entries(report.files)) {
    const c = { Killed: 0, Timeout: 0, Survived: 0, NoCoverage: 0, CompileError: 0, RuntimeError: 0, Ignored: 0, Pending: 0 };
    const left = [];
    for (const m of file.mutants) {
      c[m.status] = (c[m.status] ?? 0) + 1;
      if (m.status === 'Survived' || m.status === 'NoCoverage') {
        const line = file.source.split('\n')[m.location.start.line - 1] ?? '';
        const orig = line.slice(m.location.start.column - 1, m.location.start.line === m.location.end.line ? m.location.end.column - 1 : undefined);
        left.push(
          `  ${name}:${m.location.start.line}:${m.location.start.column} ${m.status} ${m.mutatorName} [${m.id}]: ${JSON.stringify(orig.slice(0, 80))} -> ${JSON.stringify(String(m.replacement ?? '').slice(0, 80))}`,
        );
      }
    }
    const detected = c.Killed + c.Timeout;
    const valid = detected + c.Survived + c.NoCoverage;
    rows.set(name, { ...c, score: valid ? (100 * detected) / valid : 100, left, report: f });
  }
}
let tk = 0;
let tv = 0;
console.log('file | killed | timeout | survived | no coverage | compile errors | score');
for (const [name, r] of [...rows].sort()) {
  tk += r.Killed + r.Timeout;
  tv += r.Killed + r.Timeout + r.Survived + r.NoCoverage;
  console.log(`${name} | ${r.Killed} | ${r.Timeout} | ${r.Survived} | ${r.NoCoverage} | ${r.CompileError} | ${r.score.toFixed(2)}%`);
}
console.log(`all | ${tk} detected of ${tv} | | | | | ${tv ? ((100 * tk) / tv).toFixed(2) : '100.00'}%`);
if (survivors) for (const [, r] of rows) for (const l of r.left) console.log(l);
