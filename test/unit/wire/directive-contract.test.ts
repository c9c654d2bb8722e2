/**
 * The typed directive contract (spec §2.8; `svc-proxy/plugins/directives`): what a declaration hands
 * the directives plugin (request-settable and filtered unless said otherwise), how a value is
 * read (a `string` directive set to a boolean in YAML reads as its text; others as they are; the
 * fallback when unset), the `directiveDefaults` schema with the config reference's description,
 * and when `declareDirectives` declares (at once, or at `configured` when the directives plugin
 * comes later in the preset).
 */
import { expect } from 'chai';
import type { PluginHost } from '../../../core/plugin-api.ts';
import { DIRECTIVES_SERVICE, Directive, declareDirectives, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';

const base = { query: 'acme-x', header: 'X-Acme-X', field: 'acmeX' } as const;

describe('wire: the typed directive contract (spec §2.8)', () => {
  it('a declaration is request-settable and filtered by allowClientDirectives unless it says otherwise', () => {
    expect(new Directive({ ...base, type: 'bool', fallback: false }).declaration).to.deep.equal({ ...base, type: 'bool', fromRequest: true, filtered: true });
    expect(new Directive({ ...base, type: 'flag', fallback: false, fromRequest: false, filtered: false }).declaration).to.deep.equal({
      ...base,
      type: 'flag',
      fromRequest: false,
      filtered: false,
    });
  });

  it('reading: the fallback when unset; a string directive reads a boolean as its text; a boolean one as it is', () => {
    const s = new Directive<string | undefined>({ ...base, type: 'string', fallback: undefined });
    expect(s.get({})).to.equal(undefined);
    expect(s.get({ acmeX: true })).to.equal('true');
    expect(s.get({ acmeX: 'a' })).to.equal('a');
    const b = new Directive<boolean>({ ...base, type: 'bool', fallback: true });
    expect(b.get({})).to.equal(true);
    expect(b.get({ acmeX: false })).to.equal(false);
    expect(b.get({ acmeX: 'yes' })).to.equal('yes');
  });

  it('the directiveDefaults schema: boolean or string by type, the spec id and description joined, none when config cannot default it', () => {
    const both = new Directive({ ...base, type: 'bool', fallback: false, spec: '§2.8 #1', description: 'does x' });
    expect(both.schema).to.deep.include({ type: 'boolean', description: '§2.8 #1 does x' });
    const specOnly = new Directive({ ...base, type: 'string', fallback: undefined, spec: '§2.8 #2', description: '' });
    expect(specOnly.schema).to.deep.include({ type: 'string', description: '§2.8 #2' });
    const none = new Directive({ ...base, type: 'string', fallback: undefined });
    expect(none.schema).to.deep.include({ type: 'string' });
    expect(none.schema).to.not.have.property('description');
    const fixed = new Directive({ ...base, field: 'acmeY', type: 'flag', fallback: false, defaultsSchema: false });
    expect(fixed.schema).to.equal(undefined);
    expect(Object.keys(directiveDefaultsSchema(both, fixed))).to.deep.equal(['acmeX']);
  });

  it('declareDirectives declares at once when the directives plugin is there, else at `configured` (tap named after the plugin)', () => {
    const d = new Directive({ ...base, type: 'bool', fallback: false });
    const declared: unknown[] = [];
    const service = { declare: (x: unknown) => void declared.push(x) };
    let present = true;
    const taps: Array<[string, () => void]> = [];
    const host = {
      services: { get: (k: unknown) => (k === DIRECTIVES_SERVICE && present ? service : undefined) },
      hooks: { configured: { tap: (name: string, f: () => void) => void taps.push([name, f]) } },
    } as unknown as PluginHost;
    declareDirectives(host, 'acme', d);
    expect(declared).to.deep.equal([d.declaration]);
    expect(taps).to.deep.equal([]);
    present = false;
    declareDirectives(host, 'acme', d);
    expect(declared).to.have.length(1);
    expect(taps.map(([n]) => n)).to.deep.equal(['acme:directives']);
    present = true;
    taps[0]![1]();
    expect(declared).to.deep.equal([d.declaration, d.declaration]);
  });
});
