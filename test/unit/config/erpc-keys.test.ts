/**
 * The eRPC key table (config/erpc-keys.ts, config/erpc-doc.ts): every eRPC EVM config key is
 * accepted by the default preset's schema, rewritten at load, or refused with a message naming
 * the eRPC feature and svc's alternative; never a plain "unknown key". The migration page's
 * table is the generated one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ERPC_TABLE_END, ERPC_TABLE_START, erpcKeyStatus, renderErpcKeyTable, schemaAccepts } from '../../../config/erpc-doc.ts';
import { ERPC_KEY_PATHS, ERPC_REFUSED } from '../../../config/erpc-keys.ts';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import { buildConfigSchema, type SchemaFragment } from '../../../config/schema.ts';
import { PACKAGE_ROOT } from '../../../core/wire/version.ts';
import { defaultPreset } from '../../../presets/default.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
/** The auth strategy types of the default preset (the tags of the strategy union). */
const STRATEGY_TYPES = ['secret', 'network', 'jwt', 'siwe', 'database'];
const SCHEMA = buildConfigSchema(FRAGMENTS);

type Doc = Record<string, unknown>;

/** A document holding a value at a canonical path (each `[]` one element), plus the keys its parents require. */
function docAt(path: string): { doc: Doc; concrete: string } {
  const doc: Doc = {};
  let cur: Doc = doc;
  const concrete: string[] = [];
  const segs = path.split('.');
  segs.forEach((seg, i) => {
    const list = seg.endsWith('[]');
    const key = list ? seg.slice(0, -2) : seg;
    concrete.push(list ? `${key}[0]` : key);
    if (i === segs.length - 1) {
      cur[key] = list ? [{}] : { probe: 1 };
      return;
    }
    const next: Doc = {};
    if (key === 'projects') next.id = 'p';
    if (key === 'networks') next.evm = { chainId: 1 };
    if (key === 'upstreams') next.endpoint = 'http://127.0.0.1:8545';
    // A strategy keyed by its type (`strategies[].jwt.…`) has that type; a key beside the type block is checked on a `secret` strategy.
    if (key === 'strategies') next.type = STRATEGY_TYPES.includes(segs[i + 1] ?? '') ? segs[i + 1] : 'secret';
    cur[key] = list ? [next] : next;
    cur = next;
  });
  return { doc, concrete: concrete.join('.') };
}

describe('config: every eRPC key is accepted, rewritten or refused by name', () => {
  it('no eRPC key is left unclassified (the schema accepts it, a rewrite takes it, or a refusal names it)', () => {
    const unknown = ERPC_KEY_PATHS.filter((p) => erpcKeyStatus(SCHEMA, p).status === 'unknown');
    expect(unknown).to.deep.equal([]);
  });

  it("every refusal entry the schema does not accept is refused by name (its eRPC feature and alternative, or a normaliser's own message)", () => {
    const plain: string[] = [];
    for (const [key, r] of Object.entries(ERPC_REFUSED)) {
      if (schemaAccepts(SCHEMA, key)) continue; // implemented meanwhile: the schema wins
      const { doc, concrete } = docAt(key);
      let problems: Array<{ path: string; message: string }> = [];
      try {
        loadConfigObject(doc, { fragments: FRAGMENTS, env: {} });
      } catch (e) {
        expect(e).to.be.instanceOf(ConfigError);
        problems = (e as ConfigError).problems;
      }
      const hit = problems.find((p) => p.path === concrete);
      if (!hit || hit.message.startsWith('unknown key') || (/^eRPC's `/.test(hit.message) && !hit.message.includes(r.instead)))
        plain.push(`${concrete}: ${hit?.message ?? JSON.stringify(problems)}`);
    }
    expect(plain).to.deep.equal([]);
  });

  it('docs/migrating-from-erpc.md carries the generated key table (run `npm run docs:config`)', () => {
    const page = readFileSync(join(PACKAGE_ROOT, 'docs', 'migrating-from-erpc.md'), 'utf8');
    const a = page.indexOf(ERPC_TABLE_START);
    const b = page.indexOf(ERPC_TABLE_END);
    expect(a).to.be.greaterThan(-1);
    expect(page.slice(a + ERPC_TABLE_START.length, b).trim()).to.equal(renderErpcKeyTable(SCHEMA));
  });
});
