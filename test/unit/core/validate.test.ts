/**
 * Whole-config validation (core/host/validate.ts), what `svc validate` and every config reload run:
 * the same problems as a start, and nothing left behind — the throwaway proxy and its plugins
 * are collectable once closed, and no process-wide listener or timer accumulates, however many
 * reloads an operator makes.
 */
import { expect } from 'chai';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ConfigError } from '../../../config/load.ts';
import { createLogger } from '../../../lib/logger.ts';
import { createProxy } from '../../../core/host/create.ts';
import { validateConfig } from '../../../core/host/validate.ts';
import { defaultPreset } from '../../../presets/default.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const CONFIG = {
  admin: { auth: { strategies: [{ type: 'secret', secret: { value: 'x' } }] } },
  projects: [
    { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 } }] },
  ],
};

describe('core: validateConfig', () => {
  it('resolves a valid config and refuses a bad one with every problem', async () => {
    const c = await validateConfig({ config: CONFIG, plugins: defaultPreset() });
    expect(c.projects[0]!.upstreams[0]!.id).to.equal('a');
    const e = await validateConfig({ config: { projects: [{ id: 'main', upstreams: [{ id: 'a', endpoint: 42 }] }] }, plugins: defaultPreset() }).catch(
      (x: unknown) => x,
    );
    expect(e).to.be.instanceOf(ConfigError);
  });

  it('leaves nothing behind: 20 validations keep no proxy alive and add no process listener', async () => {
    await validateConfig({ config: CONFIG, plugins: defaultPreset() });
    // The listeners themselves, not their count: an earlier test's proxy may still be removing its own.
    const listeners = () => (['message', 'SIGHUP', 'exit'] as const).flatMap((ev) => process.listeners(ev as 'exit'));
    const before = new Set(listeners());
    const refs: Array<WeakRef<object>> = [];
    // What validateConfig does, holding a weak reference to the proxy (in a function of its own,
    // so no frame of this test keeps the last one).
    const once = async (): Promise<void> => {
      const p = createProxy({ config: CONFIG, plugins: defaultPreset(), logger: createLogger('silent') });
      refs.push(new WeakRef(p));
      await p.close();
    };
    for (let i = 0; i < 20; i++) await once();
    for (let i = 0; i < 10 && refs.some((r) => r.deref()); i++) {
      await new Promise((r) => setTimeout(r, 20));
      gc();
    }
    const alive = refs.map((r, i) => (r.deref() ? i : -1)).filter((i) => i >= 0);
    expect(alive, 'proxies still reachable').to.deep.equal([]);
    expect(
      listeners().filter((l) => !before.has(l)),
      'process listeners added',
    ).to.deep.equal([]);
  });
});
