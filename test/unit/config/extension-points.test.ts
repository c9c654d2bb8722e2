/**
 * Schema extension points (docs/plugins.md "Writing a plugin"): a plugin adds keys to an object
 * another plugin owns (`SchemaFragment.extend`, objects declared with `Extensible`), and the one
 * assembled schema validates, defaults, converts and documents them like the owner's keys. A key
 * the object already has, one two plugins add, or a point nobody declares fails boot naming the
 * owners. The consensus plugin's `failsafe[].consensus` is the built-in user.
 */
import { expect } from 'chai';
import { Type } from '@sinclair/typebox';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import { buildConfigSchema, Duration, Extensible, fragmentCollisions, type SchemaFragment } from '../../../config/schema.ts';
import { createLogger } from '../../../lib/logger.ts';
import type { Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { PluginContractError } from '../../../core/plugin-errors.ts';
import { configKeysOf } from '../../../presets/describe.ts';

const owner: SchemaFragment = { root: { owner: Type.Optional(Type.Array(Extensible('owner[]', { name: Type.String() }))) } };
const adder: SchemaFragment = { extend: { 'owner[]': { wait: Duration({ default: '2s' }), note: Type.String() } } };
const load = (raw: unknown, fragments: SchemaFragment[]) => loadConfigObject(raw, { env: {}, fragments }).config.settings;
const problemsOf = (raw: unknown, fragments: SchemaFragment[]) => {
  try {
    load(raw, fragments);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe('config: schema extension points', () => {
  it("keys added to an extension point validate with their path, default and convert like the owner's", () => {
    const cfg = load({ owner: [{ name: 'a', wait: '5s' }, { name: 'b' }] }, [owner, adder]);
    expect(cfg.owner).to.deep.equal([
      { name: 'a', wait: 5000 },
      { name: 'b', wait: 2000 },
    ]);
    expect(problemsOf({ owner: [{ name: 'a', note: { a: 1 }, extra: 1 }] }, [owner, adder])).to.deep.equal([
      { path: 'owner[0].extra', message: 'unknown key "extra"' },
      { path: 'owner[0].note', message: 'must be string' },
    ]);
  });

  it('without the adding plugin the key is unknown; the fragments themselves are never changed', () => {
    expect(problemsOf({ owner: [{ name: 'a', wait: '1s' }] }, [owner])).to.deep.equal([{ path: 'owner[0].wait', message: 'unknown key "wait"' }]);
    buildConfigSchema([owner, adder]);
    expect(problemsOf({ owner: [{ name: 'a', wait: '1s' }] }, [owner])).to.have.length(1);
  });

  it('the assembled schema carries no extension mark (strict JSON Schema tools read it)', () => {
    expect(JSON.stringify(buildConfigSchema([owner, adder]))).not.to.contain('x-svc-extend');
  });

  it('a key the object has, a key two plugins add, and a point nobody declares are boot failures naming the owners', () => {
    expect(
      fragmentCollisions([
        { owner: 'o', fragment: owner },
        { owner: 'x', fragment: { extend: { 'owner[]': { name: Type.Number() } } } },
      ]),
    ).to.deep.equal(['config key owner[].name of plugin "x" is already defined by plugin "o"']);
    expect(
      fragmentCollisions([
        { owner: 'o', fragment: owner },
        { owner: 'a', fragment: adder },
        { owner: 'b', fragment: adder },
      ]),
    ).to.deep.equal([
      'config key owner[].wait of plugin "b" is already defined by plugin "a"',
      'config key owner[].note of plugin "b" is already defined by plugin "a"',
    ]);
    expect(fragmentCollisions([{ owner: 'a', fragment: adder }])).to.deep.equal([
      'plugin "a" adds config keys to the extension point "owner[]", which no applied plugin declares',
    ]);
    const plugin = (name: string, schema: SchemaFragment): Plugin => ({ name, schema, apply() {} });
    expect(() => createProxy({ config: {}, plugins: [plugin('a', adder)], logger: createLogger('silent') })).to.throw(
      PluginContractError,
      /extension point "owner\[\]"/,
    );
  });

  it('the start-up log names an added key by its extension point', () => {
    expect(configKeysOf(adder)).to.deep.equal(['owner[].wait', 'owner[].note']);
  });
});
