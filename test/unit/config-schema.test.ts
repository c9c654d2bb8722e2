/**
 * `svc config schema`: the JSON Schema of the whole config (core plus every plugin of the
 * preset; `--preset` honoured) for editors (`# yaml-language-server: $schema=...`). The printed
 * document is valid JSON Schema (Ajv checks it against the draft-07 meta-schema and compiles
 * it, with no type coercion, as an editor reads YAML), accepts the first config of
 * docs/configuration.md and the Kubernetes ConfigMap's svc.yaml as written (`${VAR}` included), and rejects an unknown
 * key, as `svc validate` does.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { Ajv, type ValidateFunction } from 'ajv';
import { marked, type Tokens } from 'marked';
import { parse as parseYaml } from 'yaml';
import { editorConfigSchema } from '../../config/editor-schema.ts';
import type { SchemaFragment } from '../../config/schema.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { defaultPreset } from '../../presets/default.ts';
import { minimalPreset } from '../../presets/minimal.ts';

const run = promisify(execFile);

/** Runs `svc config schema ARGS` from sources; resolves to its parsed stdout. */
async function cli(...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', '--conditions=svc-source', join(PACKAGE_ROOT, 'bin', 'svc.ts'), 'config', 'schema', ...args],
    { cwd: PACKAGE_ROOT, maxBuffer: 16 << 20 },
  );
  return JSON.parse(stdout) as Record<string, unknown>;
}

/** Compiles a schema as an editor would use it: strict Ajv, no coercion, no defaults. */
function compile(schema: Record<string, unknown>): ValidateFunction {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictTuples: false });
  ajv.addKeyword('x-svc-kind');
  expect(ajv.validateSchema(schema), JSON.stringify(ajv.errors)).to.equal(true);
  return ajv.compile(schema);
}

/** The first ```yaml block of a markdown page (read with the marked lexer). */
function firstYamlBlock(markdown: string, page: string): string {
  const block = marked.lexer(markdown).find((t): t is Tokens.Code => t.type === 'code' && (t as Tokens.Code).lang === 'yaml');
  expect(block, `${page} has no yaml block`).to.not.equal(undefined);
  return block?.text ?? '';
}

const fragmentsOf = (preset: typeof defaultPreset) => preset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));

describe('svc config schema', () => {
  let printed: Record<string, unknown>;
  let validate: ValidateFunction;

  before(async function () {
    this.timeout(60_000);
    printed = await cli();
    validate = compile(printed);
  });

  it('prints a draft-07 JSON Schema that Ajv compiles: the core plus every plugin of the default preset', () => {
    expect(printed.$schema).to.equal('http://json-schema.org/draft-07/schema#');
    expect(printed).to.deep.equal(JSON.parse(JSON.stringify(editorConfigSchema(fragmentsOf(defaultPreset)))));
    const root = Object.keys(printed.properties as object);
    expect(root).to.include.members(['server', 'metrics', 'projects', 'database', 'healthCheck', 'admin']);
  });

  it('validates the first config of docs/configuration.md and the Kubernetes ConfigMap svc.yaml as written', () => {
    const page = readFileSync(join(PACKAGE_ROOT, 'docs', 'configuration.md'), 'utf8');
    const quickStart = parseYaml(firstYamlBlock(page, 'docs/configuration.md'));
    expect(validate(quickStart), JSON.stringify(validate.errors)).to.equal(true);
    const cm = parseYaml(readFileSync(join(PACKAGE_ROOT, 'deploy', 'kubernetes', 'configmap.yaml'), 'utf8')) as { data: { 'svc.yaml': string } };
    expect(validate(parseYaml(cm.data['svc.yaml'])), JSON.stringify(validate.errors)).to.equal(true);
  });

  it('validates every YAML config example of README.md and docs/ as written', () => {
    const pages = [join(PACKAGE_ROOT, 'README.md')];
    const docs = join(PACKAGE_ROOT, 'docs');
    if (existsSync(docs))
      pages.push(
        ...readdirSync(docs, { recursive: true, encoding: 'utf8' })
          .filter((f) => f.endsWith('.md'))
          .map((f) => join(docs, f)),
      );
    let n = 0;
    for (const page of pages) {
      for (const [i, m] of [...readFileSync(page, 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)].entries()) {
        n++;
        expect(validate(parseYaml(m[1] as string)), `${page} yaml example #${i + 1}: ${JSON.stringify(validate.errors)}`).to.equal(true);
      }
    }
    expect(n).to.be.greaterThan(5);
  });

  it('accepts ${VAR} where svc expands it (ports, booleans, endpoints) and rejects wrong types', () => {
    const withEnv = {
      server: { httpPort: '${PORT}', enableGzip: '${GZIP}', maxTimeout: '${TIMEOUT}' },
      projects: [{ id: 'main', upstreams: [{ endpoint: '${RPC_URL}' }] }],
    };
    expect(validate(withEnv), JSON.stringify(validate.errors)).to.equal(true);
    expect(validate({ server: { httpPort: 'four thousand' } })).to.equal(false);
    expect(validate({ projects: [{ id: 'main', upstreams: [{ endpoint: 'ftp://x' }] }] })).to.equal(false);
  });

  it('rejects an unknown key, at the root and nested', () => {
    expect(validate({ serverr: {} })).to.equal(false);
    expect(
      validate.errors?.some((e) => e.keyword === 'additionalProperties' && (e.params as { additionalProperty: string }).additionalProperty === 'serverr'),
    ).to.equal(true);
    expect(validate({ projects: [{ id: 'main', upstreams: [{ endpoint: 'http://a', endpont: 'x' }] }] })).to.equal(false);
  });

  it("honours --preset: the minimal preset has only its own plugins' keys", async function () {
    this.timeout(60_000);
    const minimal = await cli('--preset', 'minimal');
    expect(minimal).to.deep.equal(JSON.parse(JSON.stringify(editorConfigSchema(fragmentsOf(minimalPreset)))));
    expect(minimal).to.not.deep.equal(printed);
    const v = compile(minimal);
    expect(v({ logLevel: 'info', server: { httpPort: 4000 } })).to.equal(true);
  });
});
