/**
 * Every built-in plugin is written as docs/plugins.md tells a third party (`return
 * definePlugin({...})`), and declares the services it provides and needs as it really provides
 * and requires them: the default preset, which holds every built-in, boots and serves with each
 * plugin handed a view of the host whose service registry records that plugin's calls.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { PluginHost, ServiceRegistry } from '../../../core/plugin-api.ts';
import { PACKAGE_ROOT } from '../../../core/wire/version.ts';
import { createLogger } from '../../../lib/logger.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { minimalPreset } from '../../../presets/minimal.ts';

/** What one plugin did with the service registry, by key name. */
interface Calls {
  /** Provided while its `apply` ran. */
  providedInApply: Set<string>;
  /** Provided later, from a hook. */
  providedLater: Set<string>;
  required: Set<string>;
  read: Set<string>;
}

/**
 * The plugins with `apply` handed a view of the host whose `services` records into `calls`
 * (every other member is the host's own, so the plugin behaves as it does in production).
 */
function recorded(plugins: Plugin[], calls: Map<string, Calls>): Plugin[] {
  return plugins.map((p) => ({
    ...p,
    apply(host: PluginHost) {
      const c: Calls = { providedInApply: new Set(), providedLater: new Set(), required: new Set(), read: new Set() };
      calls.set(p.name, c);
      let applying = true;
      const services: ServiceRegistry = {
        provide(key, service) {
          (applying ? c.providedInApply : c.providedLater).add(key.name);
          host.services.provide(key, service);
        },
        get(key) {
          c.read.add(key.name);
          return host.services.get(key);
        },
        require(key) {
          c.required.add(key.name);
          return host.services.require(key);
        },
      };
      const view = new globalThis.Proxy(host, { get: (target, prop) => (prop === 'services' ? services : Reflect.get(target, prop, target)) });
      try {
        p.apply(view);
      } finally {
        applying = false;
      }
    },
  }));
}

const names = (keys: readonly { name: string }[] | undefined): string[] => (keys ?? []).map((k) => k.name).sort();

describe('built-in plugins declare the services they provide and need', function () {
  this.timeout(30_000);
  const calls = new Map<string, Calls>();
  const preset = defaultPreset();

  before(async () => {
    const proxy = createProxy({ config: {}, plugins: recorded(defaultPreset(), calls), logger: createLogger('silent'), port: 0, metricsPort: 0 });
    await proxy.start();
    await proxy.close();
  });

  it('the default preset holds every built-in plugin folder, and the minimal preset nothing else', () => {
    const folders = readdirSync(join(PACKAGE_ROOT, 'plugins'), { withFileTypes: true })
      .filter((d) => d.isDirectory() && !d.name.startsWith('.'))
      .map((d) => d.name);
    expect(preset.map((p) => p.name)).to.have.members(folders);
    expect(preset.map((p) => p.name)).to.include.members(minimalPreset().map((p) => p.name));
  });

  it('each built-in factory returns definePlugin({...}) of svc-proxy/plugin', () => {
    for (const p of preset) {
      const source = readFileSync(join(PACKAGE_ROOT, 'plugins', p.name, 'index.ts'), 'utf8');
      expect(source, p.name).to.match(/^import \{[^}]*\bdefinePlugin\b[^}]*\} from 'svc-proxy\/plugin';$/m);
      expect(source, p.name).to.match(/^ {2}return definePlugin\(\{$/m);
    }
  });

  for (const p of defaultPreset()) {
    it(`${p.name}: provides and needs as it provides and requires at boot`, () => {
      const c = calls.get(p.name);
      expect(c, `${p.name} was applied`).to.not.equal(undefined);
      expect(names(p.provides), `${p.name} provides`).to.deep.equal([...c!.providedInApply].sort());
      expect(names(p.needs), `${p.name} needs`).to.include.members([...c!.required]);
      // A declared need is read at boot (require, or get then refuse to work without it), never stale.
      for (const need of names(p.needs)) expect([...c!.required, ...c!.read], `${p.name} needs ${need}`).to.include(need);
    });
  }

  it('the one service provided after apply is the metrics listener, published once it is bound', () => {
    const late = [...calls].flatMap(([plugin, c]) => [...c.providedLater].map((key) => `${plugin}: ${key}`));
    expect(late).to.deep.equal(['metrics: metrics.server']);
  });
});
