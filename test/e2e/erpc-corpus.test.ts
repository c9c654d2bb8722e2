/**
 * A corpus of eRPC config files (test/fixtures/erpc/*.yaml, written in eRPC's shapes after its
 * complete example files, the kube ConfigMap, its docs pages' complete configs and use-case pages;
 * secrets through `${VAR}` as deployments write them) checked the way `svc validate` checks a file:
 * the default preset's schema, rewrites and start-up checks (docs/migrating-from-erpc.md).
 *
 * It reports how many validate and holds that count as a floor. Every file that does not validate
 * is listed below with the eRPC features it is refused for, and every refusal must name the eRPC
 * feature and svc's alternative (no bare "unknown key"). The features listed are being built
 * (or are refused by design, as marked): when one lands, its files validate, the test says so, and
 * the floor is raised.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { stringify, parse as parseYaml } from 'yaml';
import { createProxy } from '../../core/host/create.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { normalizedForPrint } from '../../config/from-erpc.ts';
import { ConfigError } from '../../config/load.ts';
import type { SchemaFragment } from '../../config/schema.ts';
import { createLogger } from '../../lib/logger.ts';
import { defaultPreset } from '../../presets/default.ts';

const DIR = join(PACKAGE_ROOT, 'test', 'fixtures', 'erpc');

/** What the files' `${VAR}` references hold in a deployment (placeholders, never real secrets). */
const ENV: Readonly<Record<string, string>> = {
  ALCHEMY_API_KEY: 'alchemy-test-key',
  DRPC_API_KEY: 'drpc-test-key',
  INFURA_API_KEY: 'infura-test-key',
  TENDERLY_API_KEY: 'tenderly-test-key',
  BLASTAPI_KEY: 'blast-test-key',
  QUICKNODE_SUBDOMAIN: 'example-sub',
  QUICKNODE_KEY: 'quicknode-test-key',
  PG_PASSWORD: 'pg-test-password',
  DATABASE_URL: 'postgres://auth:auth-test-password@db.internal:5432/keys',
  REDIS_PASSWORD: 'redis-test-password',
  SERVER_SECRET: 'server-test-secret',
  JWT_PUBLIC_KEY: 'jwt-test-shared-secret',
  ETH_RPC_URL: 'https://eth.node.internal',
  ETH_RPC_BACKUP_URL: 'https://eth-backup.node.internal',
  OP_RPC_URL: 'https://op.node.internal',
  ARB_RPC_URL: 'https://arb.node.internal',
  CANARY_RPC_URL: 'https://canary.node.internal',
};

/**
 * The files that do not validate yet, each with the features it is refused for: a refusal's
 * path must end in one of the listed keys. `(by design)` marks a refusal svc keeps.
 */
const EXPECTED_FAILURES: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>> = {};

/** How many files validate today: raise it when a feature above lands. */
const VALIDATING_FLOOR = 23;

/** A problem that only says what is wrong, not which eRPC feature and what to use instead. */
const BARE = /^(unknown key|is required$|must be )/;
/** Known bare lines, by file and path end, each a side effect of a listed feature. */
const BARE_ALLOWED: Readonly<Record<string, readonly string[]>> = {};

const FRAGMENTS = (): SchemaFragment[] => defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));

/** `svc validate` in process: the problems of one document (none when it validates). */
async function validate(doc: unknown): Promise<Array<{ path: string; message: string }>> {
  let proxy: ReturnType<typeof createProxy> | undefined;
  try {
    proxy = createProxy({ config: doc as object, plugins: defaultPreset(), logger: createLogger('silent') });
    return [];
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    return [{ path: '(start-up)', message: (e as Error).message }];
  } finally {
    await proxy?.close();
  }
}

describe('e2e: a corpus of eRPC config files validates, or is refused naming the feature and the alternative', function () {
  this.timeout(120_000);
  const files = readdirSync(DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  const saved: Record<string, string | undefined> = {};
  const results = new Map<string, Array<{ path: string; message: string }>>();

  before(async () => {
    for (const [k, v] of Object.entries(ENV)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    for (const f of files) results.set(f, await validate(parseYaml(readFileSync(join(DIR, f), 'utf8'))));
  });
  after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('the corpus has a file for each shape it covers, and every expected failure names a file of it', () => {
    expect(files.length).to.be.at.least(19);
    for (const f of Object.keys(EXPECTED_FAILURES)) expect(files, f).to.include(f);
  });

  it(`at least ${VALIDATING_FLOOR} files validate; the others fail only for the features listed`, () => {
    const validated = files.filter((f) => results.get(f)?.length === 0);
    const landed = validated.filter((f) => EXPECTED_FAILURES[f]);
    // The count, for whoever raises the floor.
    console.log(`      eRPC corpus: ${validated.length} of ${files.length} files validate${landed.length ? `; now validating: ${landed.join(', ')}` : ''}`);
    expect(validated.length).to.be.at.least(VALIDATING_FLOOR);
    const unexpected: string[] = [];
    for (const f of files) {
      const problems = results.get(f) ?? [];
      if (problems.length === 0) continue;
      const keys = Object.values(EXPECTED_FAILURES[f] ?? {}).flat();
      for (const p of problems) if (!keys.some((k) => p.path.endsWith(k))) unexpected.push(`${f}: ${p.path}: ${p.message}`);
    }
    expect(unexpected, 'refused for a feature not listed in EXPECTED_FAILURES').to.deep.equal([]);
  });

  it('every refusal names the eRPC feature and what to use in svc instead', () => {
    const bare: string[] = [];
    for (const [f, problems] of results) {
      for (const p of problems) {
        if (BARE_ALLOWED[f]?.some((k) => p.path.endsWith(k))) continue;
        if (BARE.test(p.message) || !/eRPC/.test(p.message) || !/svc|use |instead|remove|drop|write /i.test(p.message))
          bare.push(`${f}: ${p.path}: ${p.message}`);
      }
    }
    expect(bare).to.deep.equal([]);
  });

  it('each file that validates prints (`svc validate --print`) as a svc config that validates with no rewrite left', async () => {
    const fragments = FRAGMENTS();
    for (const f of files.filter((x) => results.get(x)?.length === 0)) {
      const printed = normalizedForPrint(parseYaml(readFileSync(join(DIR, f), 'utf8')), fragments, false);
      expect(printed.problems, f).to.deep.equal([]);
      const again = parseYaml(stringify(printed.document));
      expect(normalizedForPrint(again, fragments, false).rewrites, f).to.deep.equal([]);
      expect(await validate(again), f).to.deep.equal([]);
    }
  });
});
