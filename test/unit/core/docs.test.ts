import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { buildConfigSchema } from '../../../core/config/schema.ts';
import { ERRORS_END, ERRORS_START, REFERENCE_END, REFERENCE_START, renderConfigReference, renderErrorTable } from '../../../core/config/docs.ts';
import { ERROR_TABLE } from '../../../core/errors-wire.ts';
import { PACKAGE_ROOT } from '../../../core/version.ts';
import { defaultPreset } from '../../../presets/default.ts';

function between(text: string, a: string, b: string): string {
  return text.slice(text.indexOf(a) + a.length, text.indexOf(b)).trim();
}

describe('README generated sections', () => {
  const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
  it('the config reference matches the schema of the default preset (run `npm run docs:config`)', () => {
    const schema = buildConfigSchema(defaultPreset().flatMap((p) => (p.schema ? [p.schema] : [])));
    expect(between(readme, REFERENCE_START, REFERENCE_END)).to.equal(renderConfigReference(schema));
  });
  it('the error table matches core/errors.ts (run `npm run docs:config`)', () => {
    expect(between(readme, ERRORS_START, ERRORS_END)).to.equal(renderErrorTable(ERROR_TABLE));
  });
});
