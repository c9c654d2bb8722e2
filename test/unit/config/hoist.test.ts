/**
 * Shared sub-schemas for the config validator (config/hoist.ts): the
 * hoisted schema must accept and reject exactly what the original does, with the same error
 * paths, while each repeated object schema is compiled once.
 */
import { expect } from 'chai';
import { Ajv } from 'ajv';
import { hoistRepeatedSubschemas } from '../../../config/hoist.ts';
import { buildConfigSchema, type SchemaFragment } from '../../../config/schema.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { validateConfig } from '../../../config/load.ts';

const endpoint = {
  type: 'object',
  additionalProperties: false,
  required: ['url'],
  properties: { url: { type: 'string', minLength: 1, description: 'x'.repeat(300) }, weight: { type: 'number', default: { type: 'object' } } },
};
const schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    primary: endpoint,
    backups: { type: 'array', items: endpoint },
    named: { type: 'object', patternProperties: { '^[a-z]+$': endpoint } },
  },
};

function errorsOf(s: object, doc: unknown): string[] {
  const v = new Ajv({ allErrors: true, strict: false, inlineRefs: false }).compile(s);
  v(doc);
  return (v.errors ?? []).map((e) => `${e.instancePath} ${e.keyword}`).sort();
}

describe('config validator: repeated sub-schemas are shared', () => {
  it('moves each repeated object schema to definitions once and refers to it everywhere', () => {
    const h = hoistRepeatedSubschemas(schema) as unknown as { definitions: Record<string, unknown>; properties: Record<string, unknown> };
    expect(Object.keys(h.definitions)).to.deep.equal(['shared0']);
    expect(h.properties.primary).to.deep.equal({ $ref: '#/definitions/shared0' });
    expect(h.properties.backups).to.deep.equal({ type: 'array', items: { $ref: '#/definitions/shared0' } });
    // Data keywords are copied, never rewritten: the `default` object above looks like a schema.
    expect((h.definitions.shared0 as typeof endpoint).properties.weight.default).to.deep.equal({ type: 'object' });
    expect(schema.properties.primary).to.equal(endpoint, 'the input is not modified');
  });

  it('accepts and rejects what the original accepts and rejects, with the same error paths', () => {
    const h = hoistRepeatedSubschemas(schema);
    const docs = [
      { primary: { url: 'a' }, backups: [{ url: 'b' }], named: { x: { url: 'c' } } },
      { primary: { url: '' }, backups: [{ nope: 1 }, { url: 2 }], named: { x: {} } },
      { primary: 'not an object', extra: true },
    ];
    for (const doc of docs) expect(errorsOf(h, doc)).to.deep.equal(errorsOf(schema, doc));
    expect(errorsOf(h, docs[1])).to.include('/backups/0 required');
  });

  it('leaves a schema with nothing repeated as it is, and refuses a root that has definitions', () => {
    const lone = { type: 'object', properties: { a: endpoint } };
    expect(hoistRepeatedSubschemas(lone)).to.equal(lone);
    expect(() => hoistRepeatedSubschemas({ definitions: {} })).to.throw(/already has definitions/);
  });

  it('the assembled svc config schema still names a bad key by its path in every repeated place', () => {
    const s = buildConfigSchema(
      defaultPreset()
        .map((p) => p.schema)
        .filter((f): f is SchemaFragment => !!f),
    );
    const problems = validateConfig(
      {
        projects: [
          { id: 'p', upstreamDefaults: { failsafe: [{ bogus: 1 }] }, upstreams: [{ id: 'u', endpoint: 'http://127.0.0.1:1/', failsafe: [{ bogus: 1 }] }] },
        ],
      },
      s,
    );
    const paths = problems.map((p) => p.path);
    expect(paths).to.include('projects[0].upstreamDefaults.failsafe[0].bogus');
    expect(paths).to.include('projects[0].upstreams[0].failsafe[0].bogus');
  });
});
