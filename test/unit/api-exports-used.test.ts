/**
 * A public API that is small and deliberate: every value `svc/plugin` exports (function, class,
 * constant, error class) is used by a built-in plugin or named in the user docs (README.md,
 * docs/*.md), so nothing sits in the semver-frozen surface only because core happened to have
 * it. Types are exempt: many exist only as the parameter or return type of an export (the API
 * report, etc/api/svc-plugin.api.md, flags a type used but not exported).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import * as api from '../../core/plugin-api.ts';
import { PACKAGE_ROOT } from '../../core/version.ts';

function filesUnder(dir: string, ext: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    // Not hidden folders: a parallel test's throwaway probe (plugins/.boundary-probe-*) may vanish meanwhile.
    .filter((f) => f.endsWith(ext) && !f.split(/[\\/]/).some((part) => part.startsWith('.')))
    .map((f) => join(dir, f));
}

describe('svc/plugin exports are deliberate', () => {
  it('every value export is used by a built-in plugin or named in the docs', () => {
    const plugins = filesUnder(join(PACKAGE_ROOT, 'plugins'), '.ts').map((f) => readFileSync(f, 'utf8')).join('\n');
    const docs = [join(PACKAGE_ROOT, 'README.md'), ...filesUnder(join(PACKAGE_ROOT, 'docs'), '.md')].map((f) => readFileSync(f, 'utf8')).join('\n');
    const unused = Object.keys(api).filter((name) => {
      const word = new RegExp(`\\b${name}\\b`);
      return !word.test(plugins) && !word.test(docs);
    });
    expect(Object.keys(api).length).to.be.greaterThan(50);
    expect(unused, 'exported by svc/plugin but used by no plugin and named in no doc: use it, document it, or stop exporting it').to.deep.equal([]);
  });
});
