/**
 * Config problems a person can act on: a discriminated union (an auth strategy, a cache
 * connector...) reports only the branch its tag names, an unknown tag is one line listing the
 * valid ones, a pattern is described rather than printed as a regular expression, a union's
 * type mismatches are one line, and unset `${VAR}` warnings come with the errors.
 */
import { expect } from 'chai';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import { discriminateUnions } from '../../../config/discriminate.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { defaultPreset } from '../../../presets/default.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

/** The problems of a config that must not load. */
function problems(doc: unknown, env: NodeJS.ProcessEnv = {}): { lines: string[]; error: ConfigError } {
  try {
    loadConfigObject(doc, { fragments: FRAGMENTS, env });
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    const error = e as ConfigError;
    return { lines: error.problems.map((p) => `${p.path}: ${p.message}`), error };
  }
  return expect.fail('expected a ConfigError');
}

const strategy = (s: Record<string, unknown>) => ({ projects: [{ id: 'p', auth: { strategies: [s] } }] });

describe('config: problems a person can act on', () => {
  it('an auth strategy with one mistake reports that mistake only, not one line per strategy type', () => {
    expect(problems(strategy({ type: 'secret', secret: { value: 'k', bogus: 1 } })).lines).to.deep.equal([
      'projects[0].auth.strategies[0].secret.bogus: unknown key "bogus"',
    ]);
    const jwt = problems(strategy({ type: 'jwt', jwt: {} })).lines;
    expect(jwt).to.have.length(1);
    expect(jwt[0]).to.match(/^projects\[0\]\.auth\.strategies\[0\]\.jwt\.\w+: is required$/);
  });

  it('an unknown strategy type is one line naming the valid types; a missing type is "is required"', () => {
    expect(problems(strategy({ type: 'apiKeys' })).lines).to.deep.equal([
      'projects[0].auth.strategies[0].type: must be one of "secret", "network", "jwt", "siwe", "database", "x402"',
    ]);
    expect(problems(strategy({ secret: { value: 'k' } })).lines).to.deep.equal(['projects[0].auth.strategies[0].type: is required']);
    expect(problems(strategy({ type: 7 })).lines).to.have.length(1);
  });

  it('every union whose object branches require a distinct string tag is validated by its tag', () => {
    const schema = {
      type: 'object',
      properties: {
        a: {
          anyOf: [
            { type: 'object', required: ['kind'], properties: { kind: { const: 'x' } } },
            { type: 'object', required: ['kind'], properties: { kind: { const: 'y' } } },
          ],
        },
        b: { anyOf: [{ type: 'string' }, { type: 'number' }] },
      },
    };
    const out = discriminateUnions(schema) as { properties: Record<string, Record<string, unknown>> };
    expect(out.properties.a).to.include({ type: 'object' }).and.to.have.property('discriminator').that.deep.equals({ propertyName: 'kind' });
    expect(out.properties.a).to.not.have.property('anyOf');
    expect(out.properties.b).to.have.property('anyOf');
    expect(schema.properties.a).to.have.property('anyOf');
  });

  it('tags, durations and URLs say what they expect instead of printing a regular expression', () => {
    const { lines } = problems({
      server: { maxTimeout: 'soon' },
      projects: [{ id: 'p', upstreams: [{ endpoint: 'http://127.0.0.1:8545', tags: ['fallback'] }] }],
    });
    expect(lines).to.deep.equal([
      'server.maxTimeout: must be a duration such as "500ms", "15s", "2m" or "1h" (a bare number is milliseconds)',
      'projects[0].upstreams[0].tags[0]: must be "<key>:<value>", such as "tier:fallback" or "region:eu"',
    ]);
    for (const l of lines) expect(l).to.not.match(/\^|\$/);
  });

  it('a value of the wrong type in a union is one line naming every accepted type', () => {
    expect(problems({ server: { maxTimeout: { seconds: 5 } } }).lines).to.deep.equal(['server.maxTimeout: must be string or number']);
  });

  it('an unset ${VAR} is reported with the errors it may have caused', () => {
    const { error } = problems({ projects: [{ id: 'p', upstreams: [{ endpoint: '${RPC_URL}' }] }] });
    expect(error.warnings).to.deep.equal(['environment variable RPC_URL is not set; using an empty string']);
    expect(error.message).to.match(/endpoint: must be an http:\/\/ or https:\/\/ URL[^\n]*\nwarnings:\n {2}environment variable RPC_URL is not set/);
  });
});
