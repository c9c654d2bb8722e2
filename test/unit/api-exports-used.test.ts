/**
 * A public API that is small and deliberate. svc's plugin-facing entries are `svc-proxy/plugin` (what a
 * plugin author needs), `svc-proxy/plugin/errors`, `svc-proxy/plugin/contracts`, `svc-proxy/util`, and each plugin
 * contract `svc-proxy/plugins/<name>` (what one plugin offers others):
 *
 * - `svc-proxy/plugin` exports at most 100 names (values and types), so a newcomer can hold it in
 *   their head; the rest lives in the three companion entries;
 * - every value an entry exports (function, class, constant, error class) is used by at least
 *   two built-in plugins or named in docs/plugins.md (for `svc-proxy/plugin/errors`, also the error
 *   table of docs/http-interface.md), so nothing sits in the semver-frozen surface only because
 *   core or one plugin happened to have it.
 *
 * Types are exempt from the second rule: many exist only as the parameter or return type of an
 * export (the API reports under etc/api/ flag a type used but not exported).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';
import * as contracts from '../../core/plugin-contracts.ts';
import * as errors from '../../core/plugin-errors.ts';
import * as plugin from '../../core/plugin-api.ts';
import * as util from '../../core/util-api.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

function filesUnder(dir: string, ext: string): string[] {
  return (
    readdirSync(dir, { recursive: true, encoding: 'utf8' })
      // Not hidden folders: a parallel test's throwaway probe (plugins/.boundary-probe-*) may vanish meanwhile.
      .filter((f) => f.endsWith(ext) && !f.split(/[\\/]/).some((part) => part.startsWith('.')))
      .map((f) => join(dir, f))
  );
}

/** The source text of each built-in plugin (every `.ts` file of its folder), by plugin name. */
function pluginSources(): Map<string, string> {
  const root = join(PACKAGE_ROOT, 'plugins');
  const names = readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && !d.name.startsWith('.'))
    .map((d) => d.name);
  return new Map(
    names.map((name) => [
      name,
      filesUnder(join(root, name), '.ts')
        .map((f) => readFileSync(f, 'utf8'))
        .join('\n'),
    ]),
  );
}

const read = (rel: string): string => readFileSync(join(PACKAGE_ROOT, rel), 'utf8');

const ENTRIES: readonly { name: string; module: object; docs: readonly string[] }[] = [
  { name: 'svc-proxy/plugin', module: plugin, docs: ['docs/plugins.md'] },
  { name: 'svc-proxy/plugin/errors', module: errors, docs: ['docs/plugins.md', 'docs/http-interface.md'] },
  { name: 'svc-proxy/plugin/contracts', module: contracts, docs: ['docs/plugins.md'] },
  { name: 'svc-proxy/util', module: util, docs: ['docs/plugins.md'] },
];

describe('svc-proxy/plugin entries are deliberate', () => {
  it('svc-proxy/plugin exports at most 100 names (values and types)', function () {
    this.timeout(30_000);
    const file = join(PACKAGE_ROOT, 'core', 'plugin-api.ts');
    const program = ts.createProgram([file], {
      allowImportingTsExtensions: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      skipLibCheck: true,
    });
    const checker = program.getTypeChecker();
    const symbol = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
    const names = checker.getExportsOfModule(symbol).map((s) => s.name);
    expect(names.length, names.join(', ')).to.be.within(50, 100);
  });

  for (const entry of ENTRIES) {
    it(`every value ${entry.name} exports is used by two built-in plugins or named in its docs`, () => {
      const plugins = pluginSources();
      const docs = entry.docs.map(read).join('\n');
      const keys = Object.keys(entry.module);
      const unused = keys.filter((name) => {
        const word = new RegExp(`\\b${name}\\b`);
        const users = [...plugins.values()].filter((text) => word.test(text)).length;
        return users < 2 && !word.test(docs);
      });
      expect(keys.length).to.be.greaterThan(5);
      expect(
        unused,
        `exported by ${entry.name} but used by fewer than two built-in plugins and named in no doc of the entry: use it, document it, or stop exporting it`,
      ).to.deep.equal([]);
    });
  }

  it('every value a plugin contract (svc-proxy/plugins/<name>) exports is used by a built-in other than its owner, or named in docs/plugins.md', async () => {
    const plugins = pluginSources();
    const docs = read('docs/plugins.md');
    const owners = [...plugins.keys()].filter((name) => plugins.get(name)!.length > 0 && readdirSync(join(PACKAGE_ROOT, 'plugins', name)).includes('api.ts'));
    expect(owners.length, 'plugins with a contract').to.be.greaterThan(5);
    const unused: string[] = [];
    for (const owner of owners) {
      const api = (await import(join(PACKAGE_ROOT, 'plugins', owner, 'api.ts'))) as object;
      for (const name of Object.keys(api)) {
        const word = new RegExp(`\\b${name}\\b`);
        const others = [...plugins.entries()].filter(([n, text]) => n !== owner && word.test(text)).length;
        if (others === 0 && !word.test(docs)) unused.push(`svc-proxy/plugins/${owner}: ${name}`);
      }
    }
    expect(unused, 'a contract value no other plugin uses and no doc names belongs inside its plugin').to.deep.equal([]);
  });

  it('no name is exported by two entries', () => {
    const seen = new Map<string, string>();
    const twice: string[] = [];
    for (const entry of ENTRIES) {
      for (const name of Object.keys(entry.module)) {
        if (seen.has(name)) twice.push(`${name}: ${seen.get(name)} and ${entry.name}`);
        seen.set(name, entry.name);
      }
    }
    expect(twice).to.deep.equal([]);
  });
});
