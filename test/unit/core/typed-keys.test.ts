/**
 * Typed service and slot keys (docs/plugins.md "Services and slots"): a service is provided and
 * read by a typed key (no cast at the call site; the `@ts-expect-error` lines below are checked by
 * `tsc --noEmit` and fail the build if they stop being errors), a second provider of a key fails
 * boot naming both plugins, and a key or a slot is declared once per name. Services still meet by
 * name, so a plugin built against another installed copy of svc reaches the same service.
 */
import { expect } from 'chai';
import { createLogger } from '../../../lib/logger.ts';
import type { Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { serviceKey, ServiceKey, Slot } from '../../../core/plugin-api.ts';
import { PluginContractError } from '../../../core/plugin-errors.ts';
import { COST_SERVICE, type CostService, type PriceTable } from 'svc-proxy/plugins/cost';
import { FAILSAFE_ENTRY } from 'svc-proxy/plugins/failsafe';
import { Services } from '../../../core/host/host.ts';
import { defaultPreset } from '../../../presets/default.ts';

const plugin = (name: string, extra: Partial<Plugin> = {}): Plugin => ({ name, apply() {}, ...extra });
const build = (plugins: Plugin[], config: object = {}) => createProxy({ config, plugins, logger: createLogger('silent') });

/** A service of a test plugin, declared once at module level like any key. */
interface Greeter {
  greet(who: string): string;
}
const GREETER = serviceKey<Greeter>('test-typed-keys.greeter');

describe('typed service and slot keys', () => {
  describe('services', () => {
    it('provide/get/require are typed by the key: the value comes back as the key says, no cast', () => {
      let got: Greeter | undefined;
      let required = '';
      const provider = plugin('greeter', { apply: (h) => h.services.provide(GREETER, { greet: (w) => `hello ${w}` }) });
      const consumer = plugin('consumer', {
        dependsOn: ['greeter'],
        apply(h) {
          got = h.services.get(GREETER);
          required = h.services.require(GREETER).greet('svc');
        },
      });
      build([provider, consumer]);
      expect(got?.greet('you')).to.equal('hello you');
      expect(required).to.equal('hello svc');
      const s = new Services();
      // @ts-expect-error the value must have the key's type
      expect(() => s.provide(GREETER, { greet: 42 })).not.to.throw();
      // @ts-expect-error a string is not a key (string keys are gone from the API); plain JavaScript passing one is told so
      expect(() => s.get('test-typed-keys.greeter')).to.throw(
        PluginContractError,
        /looked up by a key from serviceKey\(\).*not by the string "test-typed-keys\.greeter"/,
      );
      const typed: Greeter | undefined = s.get(GREETER);
      // @ts-expect-error get() may be undefined: the providing plugin may not be applied
      const notOptional: Greeter = s.get(GREETER);
      expect([typed, notOptional]).to.have.length(2);
    });

    it('a key of one type is not a key of another', () => {
      const s = new Services();
      const table: PriceTable = () => 1;
      // @ts-expect-error COST_SERVICE holds a CostService, not a Greeter
      const wrong: ServiceKey<Greeter> = COST_SERVICE;
      expect(wrong.name).to.equal('cost');
      s.provide(COST_SERVICE, { registerPriceTable: () => undefined, quoteCredits: () => 1 });
      const cost: CostService = s.require(COST_SERVICE);
      expect(() => cost.registerPriceTable('acme', table)).not.to.throw();
    });

    it('a second provider of a key fails boot naming both plugins', () => {
      const a = plugin('acme-greeter', { apply: (h) => h.services.provide(GREETER, { greet: () => 'a' }) });
      const b = plugin('other-greeter', { apply: (h) => h.services.provide(GREETER, { greet: () => 'b' }) });
      expect(() => build([a, b])).to.throw(
        PluginContractError,
        /service "test-typed-keys\.greeter" is provided twice: by plugin "acme-greeter" and by plugin "other-greeter"/,
      );
      const cost = plugin('acme-cost', { apply: (h) => h.services.provide(COST_SERVICE, { registerPriceTable: () => undefined, quoteCredits: () => 1 }) });
      expect(() => build([...defaultPreset(), cost])).to.throw(
        PluginContractError,
        /service "cost" is provided twice: by plugin "cost" and by plugin "acme-cost"/,
      );
    });

    it('require names a missing service; get answers undefined', () => {
      const s = new Services();
      expect(s.get(GREETER)).to.equal(undefined);
      expect(() => s.require(GREETER)).to.throw(PluginContractError, /service "test-typed-keys\.greeter" is not provided/);
    });

    it('a key is declared once per name; services meet by name, as with a key from another copy of svc', () => {
      expect(() => serviceKey<Greeter>('test-typed-keys.greeter')).to.throw(PluginContractError, /service key "test-typed-keys\.greeter" is declared twice/);
      expect(() => serviceKey<CostService>('cost')).to.throw(PluginContractError, /service key "cost" is declared twice/);
      const s = new Services();
      s.provide(GREETER, { greet: () => 'same' });
      // Another installed copy of svc has its own key object with the same name (stand-in: a structural copy).
      const fromOtherCopy = Object.create(ServiceKey.prototype, { name: { value: 'test-typed-keys.greeter' } }) as ServiceKey<Greeter>;
      expect(s.require(fromOtherCopy).greet('x')).to.equal('same');
    });
  });

  describe('slots', () => {
    it('a second slot with a name already declared throws naming it; the shared one is imported instead', () => {
      expect(() => new Slot<number>('failsafe.entry', 0)).to.throw(PluginContractError, /slot "failsafe\.entry" is declared twice/);
      expect(() => new Slot<string>('cache.outcome', '')).to.throw(PluginContractError, /slot "cache\.outcome" is declared twice/);
      const mine = new Slot<number>('test-typed-keys.count', 0);
      expect(() => new Slot<number>('test-typed-keys.count', 1)).to.throw(PluginContractError, /slot "test-typed-keys\.count"/);
      const holder = { slots: undefined as Map<symbol, unknown> | undefined };
      mine.set(holder, 3);
      expect(mine.get(holder)).to.equal(3);
      expect(FAILSAFE_ENTRY.get(holder), 'unset: the fallback').to.equal(undefined);
    });

    it('the failsafe entry slot has one type for every reader', () => {
      const holder = { slots: undefined as Map<symbol, unknown> | undefined };
      FAILSAFE_ENTRY.set(holder, { matchMethod: '*', retry: { emptyResultMaxAttempts: 2 }, consensus: { maxParticipants: 3 } });
      expect(FAILSAFE_ENTRY.get(holder)?.retry?.emptyResultMaxAttempts).to.equal(2);
      // @ts-expect-error matchMethod is part of the entry's type
      FAILSAFE_ENTRY.set(holder, { retry: {} });
    });

    it('every built-in plugin and preset loads with each slot and key declared once', () => {
      expect(() => build(defaultPreset())).not.to.throw();
    });
  });
});
