/**
 * What a plugin declares it needs and provides (docs/plugins.md "Declaring services"): boot fails
 * naming both the plugin and the service when a needed service has no provider, when a declared
 * service was not provided in `apply`, or when a list holds something other than a key; a service
 * provided without a declaration is allowed.
 */
import { expect } from 'chai';
import { createLogger } from '../../../lib/logger.ts';
import { Proxy, type Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { definePlugin, serviceKey, type AnyServiceKey, type PluginHost } from '../../../core/plugin-api.ts';
import { PluginContractError } from '../../../core/plugin-errors.ts';
import { loadConfigObject } from '../../../config/load.ts';
import { PROVIDERS_SERVICE } from 'svc-proxy/plugins/providers';
import { vendorsPlugin } from '../../../plugins/vendors/index.ts';

/** A service of the test plugins below, named after its provider as built-in keys are. */
interface Clock {
  now(): number;
}
const CLOCK = serviceKey<Clock>('test-needs-clock.time');

const build = (plugins: Plugin[]) => createProxy({ config: {}, plugins, logger: createLogger('silent') });

/** The boot error of `plugins`, or a failure when boot succeeds. */
function bootError(plugins: Plugin[]): PluginContractError {
  try {
    build(plugins);
  } catch (e) {
    expect(e).to.be.instanceOf(PluginContractError);
    return e as PluginContractError;
  }
  return expect.fail('boot succeeded') as never;
}

const clockPlugin = (provide = true) =>
  definePlugin({
    name: 'test-needs-clock',
    provides: [CLOCK],
    apply(host) {
      if (provide) host.services.provide(CLOCK, { now: () => 1 });
    },
  });

/** Reads the clock from `configured` on, so it needs no place in the preset before the clock. */
const readerPlugin = () => {
  let clock: Clock | undefined;
  const p = definePlugin({
    name: 'test-needs-reader',
    needs: [CLOCK],
    apply(host) {
      host.hooks.configured.tap('test-needs-reader', () => {
        clock = host.services.require(CLOCK);
      });
    },
  });
  return { plugin: p, clock: () => clock };
};

describe('plugin needs and provides', () => {
  it('a needed service provided by a plugin applied later boots: needs are checked once every plugin is applied', () => {
    const reader = readerPlugin();
    build([reader.plugin, clockPlugin()]);
    expect(reader.clock()?.now()).to.equal(1);
  });

  it('a needed service no plugin provides fails boot naming the plugin, the service and its usual provider', () => {
    const e = bootError([readerPlugin().plugin]);
    expect(e.message).to.equal(
      'plugin "test-needs-reader" needs service "test-needs-clock.time", which no applied plugin provides (by its name, plugin "test-needs-clock" provides it: is that plugin in the preset?)',
    );
  });

  it('a built-in that needs a service names it: vendors without the providers plugin', () => {
    // dependsOn catches it first when the plugin reads the service in apply: both names either way.
    const e = bootError([vendorsPlugin()]);
    expect(e.message).to.contain('"vendors"').and.to.contain('"providers"');
    expect(vendorsPlugin().needs).to.deep.equal([PROVIDERS_SERVICE]);
  });

  it('needs are checked before the config phase: no configured tap runs when one is missing', () => {
    let ran = false;
    const p = definePlugin({ name: 'test-needs-early', needs: [CLOCK], apply: (h) => h.hooks.configured.tap('test-needs-early', () => void (ran = true)) });
    const { config, schema } = loadConfigObject({});
    const proxy = new Proxy(config, { schema, logger: createLogger('silent') }).use(p);
    expect(() => proxy.configure()).to.throw(PluginContractError, /plugin "test-needs-early" needs service "test-needs-clock.time"/);
    expect(ran).to.equal(false);
  });

  it('a declared service the plugin did not provide in apply fails boot naming both', () => {
    const e = bootError([clockPlugin(false)]);
    expect(e.message).to.equal(
      'plugin "test-needs-clock" declares it provides service "test-needs-clock.time", but did not provide it in apply() (host.services.provide)',
    );
  });

  it('a declared service provided only from a later hook fails boot: a declaration promises it once apply returns', () => {
    const late = definePlugin({
      name: 'test-needs-late',
      provides: [CLOCK],
      apply: (h) => h.hooks.configured.tap('test-needs-late', () => h.services.provide(CLOCK, { now: () => 2 })),
    });
    expect(bootError([late]).message).to.contain('plugin "test-needs-late" declares it provides service "test-needs-clock.time"');
  });

  it('a service created on first use by a plugin applied earlier counts as provided', () => {
    // The pattern of selectionHooks(host): whoever calls the helper first publishes the shared hooks.
    const shared = (host: PluginHost) => host.services.get(CLOCK) ?? (host.services.provide(CLOCK, { now: () => 3 }), host.services.require(CLOCK));
    const early = definePlugin({ name: 'test-needs-tapper', apply: (h) => void shared(h) });
    const owner = definePlugin({ name: 'test-needs-clock', provides: [CLOCK], apply: (h) => void shared(h) });
    expect(() => build([early, owner])).not.to.throw();
  });

  it('providing a service without declaring it is allowed', () => {
    const p = definePlugin({ name: 'test-needs-quiet', apply: (h) => h.services.provide(CLOCK, { now: () => 4 }) });
    expect(build([p]).services.require(CLOCK).now()).to.equal(4);
  });

  it('a list holding something other than a service key fails boot naming the plugin and the list', () => {
    const bad = { name: 'test-needs-strings', needs: ['test-needs-clock.time'] as unknown as AnyServiceKey[], apply() {} } satisfies Plugin;
    expect(bootError([bad]).message).to.match(
      /^plugin "test-needs-strings" lists in needs something that is not a service key: .*the string "test-needs-clock.time"/,
    );
    const notList = { name: 'test-needs-one', provides: CLOCK as unknown as AnyServiceKey[], apply() {} } satisfies Plugin;
    expect(bootError([notList]).message).to.equal('plugin "test-needs-one" declares provides that is not a list of service keys');
  });

  it('keys of different service types share one list, typed without a cast', () => {
    const p = definePlugin({ name: 'test-needs-both', provides: [CLOCK, serviceKey<string>('test-needs-both.label')], apply() {} });
    expect(p.provides.map((k) => k.name)).to.deep.equal(['test-needs-clock.time', 'test-needs-both.label']);
  });
});
