/**
 * The generated sections of the user docs match what they are generated from: the config
 * reference in docs/configuration.md (the default preset's schema) and the error table in
 * docs/http-interface.md (core/wire/errors-wire.ts ERROR_TABLE). `npm run docs:config` rewrites them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { buildConfigSchema } from '../../../config/schema.ts';
import { ERRORS_END, ERRORS_START, REFERENCE_END, REFERENCE_START, renderConfigReference, renderErrorTable } from '../../../config/docs.ts';
import { ERROR_TABLE } from '../../../core/wire/errors-wire.ts';
import { PACKAGE_ROOT } from '../../../core/wire/version.ts';
import { defaultPreset } from '../../../presets/default.ts';

/** The text between two markers of a docs page; fails naming the page when a marker is missing. */
function between(page: string, a: string, b: string): string {
  const text = readFileSync(join(PACKAGE_ROOT, page), 'utf8');
  const from = text.indexOf(a);
  const to = text.indexOf(b);
  expect(from, `${page} has no ${a} marker`).to.be.greaterThan(-1);
  expect(to, `${page} has no ${b} marker after ${a}`).to.be.greaterThan(from);
  return text.slice(from + a.length, to).trim();
}

describe('docs generated sections', () => {
  it('docs/configuration.md: the config reference matches the schema of the default preset (run `npm run docs:config`)', () => {
    const schema = buildConfigSchema(defaultPreset().flatMap((p) => (p.schema ? [p.schema] : [])));
    expect(between('docs/configuration.md', REFERENCE_START, REFERENCE_END)).to.equal(renderConfigReference(schema));
  });
  it('docs/http-interface.md: the error table matches core/wire/errors-wire.ts (run `npm run docs:config`)', () => {
    expect(between('docs/http-interface.md', ERRORS_START, ERRORS_END)).to.equal(renderErrorTable(ERROR_TABLE));
  });
});
