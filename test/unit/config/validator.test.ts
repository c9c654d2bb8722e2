/**
 * The config validator compiled ahead of time (config/validator.ts): a schema whose standalone
 * module the build wrote is validated by that module, which must accept, reject and coerce exactly
 * as the validator Ajv compiles at start-up; `npm run build` writes one for each built-in preset.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { expect } from 'chai';
import { Type } from '@sinclair/typebox';
import { problemsOf } from '../../../config/problems.ts';
import { buildConfigSchema, type SchemaFragment } from '../../../config/schema.ts';
import { precompiledName, precompiledSource, validatorFor, type ConfigValidator } from '../../../config/validator.ts';
import { PACKAGE_ROOT } from '../../../core/wire/version.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { minimalPreset } from '../../../presets/minimal.ts';
import { ensureBuilt } from '../../helpers/build.ts';

const schemaOf = (plugins: ReturnType<typeof defaultPreset>) => buildConfigSchema(plugins.flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : [])));

/** The problems and the (coerced) document after one validation. */
function check(v: ConfigValidator, doc: unknown): { problems: unknown; doc: unknown } {
  const copy = structuredClone(doc);
  const ok = v.validate(copy);
  return { problems: ok ? [] : problemsOf(v.validate.errors ?? [], v.compiled()), doc: copy };
}

describe('config validator compiled ahead of time', function () {
  this.timeout(60_000);
  let dir: string;
  let empty: string;
  before(() => {
    // Inside the package, as dist/config/validators/ is: a module requires Ajv's runtime helpers.
    const cache = join(PACKAGE_ROOT, 'node_modules', '.cache');
    mkdirSync(cache, { recursive: true });
    dir = mkdtempSync(join(cache, 'svc-validators-'));
    empty = mkdtempSync(join(cache, 'svc-validators-none-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(empty, { recursive: true, force: true });
  });

  it('a schema whose module is in the folder is validated by that module; another schema is compiled', async () => {
    const schema = Type.Object({ port: Type.Number() }, { additionalProperties: false });
    const file = join(dir, precompiledName(JSON.stringify(schema)));
    writeFileSync(file, await precompiledSource(schema));
    const loaded = validatorFor(schema, dir);
    expect(loaded.validate).to.equal((createRequire(import.meta.url)(file) as { default: unknown }).default);
    expect(validatorFor(schema, dir), 'loaded once').to.equal(loaded);
    const other = validatorFor(Type.Object({ port: Type.String() }), dir);
    expect(other.validate).to.not.equal(loaded.validate);
    expect(other.validate({ port: 'x' })).to.equal(true);
  });

  it("the default preset's precompiled validator accepts, rejects and coerces exactly as the one compiled at start-up", async () => {
    const schema = schemaOf(defaultPreset());
    writeFileSync(join(dir, precompiledName(JSON.stringify(schema))), await precompiledSource(schema));
    const ahead = validatorFor(schema, dir);
    const now = validatorFor(schema, empty);
    expect(ahead.validate).to.not.equal(now.validate);
    const docs: unknown[] = [
      {},
      { server: { httpPort: '8080', maxTimeout: '30s' }, logLevel: 'debug' },
      { projects: [{ id: 'main', upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:8545', evm: { chainId: '1' } }] }] },
      { projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 }, failsafe: [{ timeout: { duration: 'soon' } }] }] }] },
      { projects: [{ id: 'main', networks: [{ architecture: 'solana' }] }] },
      { bogus: 1, server: { httpPort: 'eighty' }, logLevel: 'loud' },
      { projects: [{ upstreams: [{ endpoint: 5 }] }] },
      { database: { evmJsonRpcCache: { connectors: [{ id: 'r', driver: 'redis' }], policies: [{ connector: 'r', finality: 'sometimes' }] } } },
    ];
    for (const doc of docs) expect(check(ahead, doc), JSON.stringify(doc)).to.deep.equal(check(now, doc));
    expect(check(ahead, docs[5]).problems).to.not.deep.equal([]);
  });

  it('npm run build writes the validator of each built-in preset, and no other', async () => {
    await ensureBuilt();
    const shipped = readdirSync(join(PACKAGE_ROOT, 'dist', 'config', 'validators')).sort();
    const expected = [defaultPreset(), minimalPreset()].map((p) => precompiledName(JSON.stringify(schemaOf(p)))).sort();
    expect(shipped).to.deep.equal(expected);
  });
});
