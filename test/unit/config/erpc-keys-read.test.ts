/**
 * svc never accepts a key it does not honour: every key the default preset's assembled schema
 * accepts is read somewhere in svc's source. Reads are found with the TypeScript compiler API:
 * property accesses (`x.key`, `x?.key`), element accesses with a literal (`x['key']`),
 * destructuring (`{ key } = x`, `{ key: y } = x`), `'key' in x`, property names of the typed
 * settings a plugin reads (`interface ... { key: number }`), a string literal handed to a helper
 * that reads a setting by name (`duration('evalInterval', ...)`), and a directive's declared
 * `field` (its `directiveDefaults` key, read as `directives[field]` by the directives contract, plugins/directives/api.ts). A key
 * read only by being passed through whole is listed in PASSED_WHOLE with the reader that consumes it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';
import { Type } from '@sinclair/typebox';
import { buildConfigSchema, type SchemaFragment } from '../../../config/schema.ts';
import { PACKAGE_ROOT } from '../../../core/wire/version.ts';
import { defaultPreset } from '../../../presets/default.ts';

/**
 * Keys whose value is handed whole to a library or another reader rather than read by name.
 * Each names the reader.
 */
const PASSED_WHOLE: Readonly<Record<string, string>> = {};

/** Every property name the schema accepts, with one path where it occurs. */
function schemaKeys(node: unknown, path: string, out: Map<string, string>): void {
  if (!node || typeof node !== 'object') return;
  const s = node as Record<string, unknown>;
  for (const k of ['anyOf', 'oneOf', 'allOf']) if (Array.isArray(s[k])) for (const c of s[k] as unknown[]) schemaKeys(c, path, out);
  if (s.items) schemaKeys(s.items, `${path}[]`, out);
  if (s.additionalProperties && typeof s.additionalProperties === 'object') schemaKeys(s.additionalProperties, `${path}.*`, out);
  for (const [k, v] of Object.entries((s.properties as Record<string, unknown> | undefined) ?? {})) {
    const p = path ? `${path}.${k}` : k;
    if (!out.has(k)) out.set(k, p);
    schemaKeys(v, p, out);
  }
}

function sourceFiles(): string[] {
  const out: string[] = [];
  for (const dir of ['core', 'config', 'lib', 'plugins', 'presets', 'bin']) {
    for (const f of readdirSync(join(PACKAGE_ROOT, dir), { recursive: true, encoding: 'utf8' })) {
      if (f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.split(/[\\/]/).some((p) => p.startsWith('.'))) out.push(join(PACKAGE_ROOT, dir, f));
    }
  }
  return out;
}

/** Every property name read somewhere in the source (see the module comment). */
function readNames(): Set<string> {
  const names = new Set<string>();
  for (const file of sourceFiles()) {
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const visit = (n: ts.Node): void => {
      if (ts.isPropertyAccessExpression(n)) names.add(n.name.text);
      else if (ts.isElementAccessExpression(n) && ts.isStringLiteralLike(n.argumentExpression)) names.add(n.argumentExpression.text);
      else if (ts.isBindingElement(n)) {
        const key = n.propertyName ?? n.name;
        if (ts.isIdentifier(key) || ts.isStringLiteralLike(key)) names.add(key.text);
      } else if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.InKeyword && ts.isStringLiteralLike(n.left)) names.add(n.left.text);
      else if (ts.isPropertySignature(n) && (ts.isIdentifier(n.name) || ts.isStringLiteralLike(n.name))) names.add(n.name.text);
      // A helper reading a setting by name: `duration('evalInterval', 15_000)`, `intSetting(evm, 'statePollerInterval', ...)`.
      else if (ts.isCallExpression(n)) for (const a of n.arguments) if (ts.isStringLiteralLike(a)) names.add(a.text);
      // A declared directive reads its `directiveDefaults` key by its field name (plugins/directives/api.ts: `directives[field]`).
      if (ts.isPropertyAssignment(n) && ts.isIdentifier(n.name) && n.name.text === 'field' && ts.isStringLiteralLike(n.initializer))
        names.add(n.initializer.text);
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return names;
}

/** Keys of the schema assembled from `fragments` that no source file reads. */
function unreadKeys(fragments: SchemaFragment[], read: ReadonlySet<string>): string[] {
  const keys = new Map<string, string>();
  schemaKeys(buildConfigSchema(fragments), '', keys);
  return [...keys].filter(([k]) => !read.has(k) && !(k in PASSED_WHOLE)).map(([k, p]) => `${k} (${p})`);
}

describe('config: every key the schema accepts is read somewhere', () => {
  const read = readNames();
  const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

  it("no key of the default preset's schema goes unread", () => {
    expect(unreadKeys(fragments, read), 'accepted by the schema but read nowhere: implement it, refuse it, or name its reader in PASSED_WHOLE').to.deep.equal(
      [],
    );
  });

  it('a key nothing reads is found (the check is not vacuous)', () => {
    const probe: SchemaFragment = { network: { neverReadProbeSetting: Type.Optional(Type.Boolean()) } };
    expect(unreadKeys([...fragments, probe], read)).to.deep.equal(['neverReadProbeSetting (projects[].networks[].neverReadProbeSetting)']);
  });
});
