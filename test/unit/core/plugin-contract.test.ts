/**
 * The plugin contract checked at boot and at run time: unique names, declared
 * dependencies, the svc version range, schema fragments that may add keys but never redefine one,
 * config read only from the `configured` phase, observation taps that can throw without breaking
 * a call (logged, counted in `svc_plugin_errors_total`), and authentication before the body is read.
 */
import { expect } from 'chai';
import { connect } from 'node:net';
import type { Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { createLogger } from '../../../lib/logger.ts';
import { CallStage, FINALITY, RpcResult, Slot, Type, VERSION } from '../../../core/plugin-api.ts';
import { ErrAuthUnauthorized, PluginContractError, PluginDependencyError } from '../../../core/plugin-errors.ts';
import { DIRECTIVES_SERVICE, type DirectivesService } from '../../../plugins/directives/index.ts';
import { minimalPreset } from '../../../presets/minimal.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { NO_CACHE, httpRequest, startSvc, type SvcHandle } from '../../helpers/svc.ts';

const plugin = (name: string, extra: Partial<Plugin> = {}): Plugin => ({ name, apply() {}, ...extra });
const build = (plugins: Plugin[], config: object = {}) => createProxy({ config, plugins, logger: createLogger('silent') });

describe('plugin contract', () => {
  describe('at boot', () => {
    it('a duplicate plugin name fails boot naming it', () => {
      expect(() => build([plugin('a'), plugin('a')])).to.throw(PluginContractError, /plugin "a" is applied twice/);
    });

    it('a missing dependency fails boot naming both plugins', () => {
      expect(() => build([plugin('b', { dependsOn: ['a'] })])).to.throw(PluginDependencyError, /plugin "b" depends on "a"/);
      expect(() => build([plugin('a'), plugin('b', { dependsOn: ['a'] })])).not.to.throw();
    });

    it('the built-in plugins declare what they use: evm-state needs selection, evm-retries needs failsafe', () => {
      const byName = new Map(defaultPreset().map((p) => [p.name, p]));
      expect(byName.get('evm-state')!.dependsOn).to.include('selection');
      expect(byName.get('evm-retries')!.dependsOn).to.include('failsafe');
    });

    it('an svc range the running version does not satisfy fails boot naming both versions', () => {
      expect(() => build([plugin('old', { version: '1.2.3', svc: '>=99' })])).to.throw(
        PluginContractError,
        new RegExp(`plugin "old" 1.2.3 needs svc >=99, but this is svc ${VERSION.replace(/\./g, '\\.')}`),
      );
      expect(() => build([plugin('ok', { svc: `^${VERSION}` })])).not.to.throw();
      expect(() => build([plugin('bad', { svc: 'not a range' })])).to.throw(PluginContractError, /invalid svc range/);
      expect(() => build([plugin('bad', { version: 'one' })])).to.throw(PluginContractError, /invalid version/);
    });

    it('a schema fragment may add keys, but redefining a core key fails boot naming both owners', () => {
      const alias = plugin('loose', { schema: { network: { alias: Type.Number() } } });
      expect(() => build([alias])).to.throw(PluginContractError, /config key network\.alias of plugin "loose" is already defined by the core/);
      const a = plugin('a', { schema: { server: { pricing: Type.String() } } });
      const b = plugin('b', { schema: { server: { pricing: Type.Number() } } });
      expect(() => build([a, b])).to.throw(PluginContractError, /config key server\.pricing of plugin "b" is already defined by plugin "a"/);
      expect(() => build([a], { server: { pricing: 'x' } })).not.to.throw();
    });

    it('config read inside apply fails boot; from the configured hook it is the final config', () => {
      expect(() => build([plugin('eager', { apply: (h) => void h.config })])).to.throw(PluginContractError, /plugin "eager" read host\.config inside apply/);
      let seen: unknown;
      const derive = plugin('derive', { apply: (h) => h.hooks.config.tap('derive', (c) => ({ ...c, logLevel: 'warn' })) });
      const reader = plugin('reader', { apply: (h) => h.hooks.configured.tap('reader', (c) => (seen = c.logLevel)) });
      build([reader, derive]);
      expect(seen, 'a later plugin deriving config is seen by an earlier one').to.equal('warn');
    });

    it('an exception in apply fails boot naming the plugin', () => {
      expect(() =>
        build([
          plugin('broken', {
            apply: () => {
              throw new Error('boom');
            },
          }),
        ]),
      ).to.throw(PluginContractError, /plugin "broken" failed to apply: boom/);
    });
  });

  describe('at run time (real server)', function () {
    this.timeout(15_000);
    let up: FaultServer;
    let svc: SvcHandle;
    let authed: SvcHandle;
    const throwing = plugin('noisy', {
      apply(h) {
        h.hooks.attemptDone.tap('noisy', () => {
          throw new Error('attemptDone bug');
        });
        h.hooks.callDone.tap('noisy:calls', () => {
          throw new Error('callDone bug');
        });
        h.hooks.responseHeaders.tap('noisy', () => {
          throw new Error('responseHeaders bug');
        });
      },
    });
    const gate = plugin('gate', {
      apply(h) {
        h.hooks.authenticate.tapPromise('gate', async (http) => {
          if (http.headers['x-key'] !== 'let-me-in') throw new ErrAuthUnauthorized('unauthorized');
          return { userId: 'u1' };
        });
      },
    });
    const cfg = (url: string) => ({
      ...NO_CACHE,
      logLevel: 'error',
      projects: [
        { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [{ id: 'a', endpoint: url, evm: { chainId: 31337 } }] },
      ],
    });

    before(async () => {
      up = await startFaultServer();
      svc = await startSvc(cfg(up.url), { plugins: [...defaultPreset(), throwing] });
      authed = await startSvc(cfg(up.url), { plugins: [...defaultPreset(), gate] });
    });
    after(async () => {
      await svc?.close();
      await authed?.close();
      await up?.close();
    });

    it('throwing attemptDone, callDone and responseHeaders taps never change the answer; each is counted per plugin and hook', async () => {
      for (let i = 0; i < 3; i++) {
        const res = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 7, method: 'eth_blockNumber', params: [] });
        expect(res.status).to.equal(200);
        expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 7, result: '0x10' });
        expect(res.headers['x-svc-upstream']).to.equal('a');
      }
      const metrics = (await httpRequest('GET', svc.metricsUrl!)).text;
      for (const hook of ['attemptDone', 'callDone', 'responseHeaders']) {
        expect(metrics).to.match(new RegExp(`svc_plugin_errors_total\\{plugin="noisy",hook="${hook}"\\} [3-9]`));
      }
    });

    it('authentication runs before the body is read: a client declaring 5 MB is refused without sending it', async () => {
      const port = Number(new URL(authed.url).port);
      const answer = await new Promise<string>((resolve, reject) => {
        const s = connect(port, '127.0.0.1', () => {
          s.write('POST /main/evm/31337 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{"jsonrpc"');
        });
        let got = '';
        s.on('data', (d) => {
          got += d.toString();
          if (got.includes('\r\n\r\n')) {
            s.destroy();
            resolve(got);
          }
        });
        s.on('error', reject);
        setTimeout(() => reject(new Error(`no answer without the body: ${got}`)), 3000);
      });
      expect(answer).to.match(/^HTTP\/1\.1 401/);
      const ok = await authed.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }, { 'x-key': 'let-me-in' });
      expect(ok.json.result).to.equal('0x10');
    });
  });

  describe('extension slots and declared directives', function () {
    this.timeout(15_000);
    let up: FaultServer;
    let svc: SvcHandle;
    const TIER = new Slot<string>('acme.tier', 'none');
    const acme = plugin('acme', {
      dependsOn: ['directives'],
      schema: { directiveDefaults: { acmeTier: Type.String() } },
      apply(h) {
        h.services.require<DirectivesService>(DIRECTIVES_SERVICE).declare({ query: 'acme-tier', header: 'X-Acme-Tier', field: 'acmeTier', type: 'string' });
        h.hooks.call.tap({ name: 'acme', stage: CallStage.LOCAL_METHODS }, (inner) => (ctx) => {
          if (ctx.request.method !== 'acme_echo') return inner(ctx);
          TIER.set(ctx, String(ctx.directives.acmeTier ?? 'unset'));
          // Another plugin (another copy, even) reads the same slot by its name.
          const sameByName = ctx.state.get(Symbol.for('svc.slot.acme.tier'));
          return Promise.resolve(new RpcResult({ tier: TIER.get(ctx), sameByName, finality: FINALITY.get(ctx) }));
        });
      },
    });

    before(async () => {
      up = await startFaultServer();
      svc = await startSvc(
        {
          logLevel: 'error',
          projects: [
            {
              id: 'main',
              networks: [{ architecture: 'evm', evm: { chainId: 31337 }, directiveDefaults: { acmeTier: 'gold' } }],
              upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: 31337 } }],
            },
            {
              id: 'locked',
              allowClientDirectives: '!acme-tier',
              networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
              upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: 31337 } }],
            },
          ],
        },
        { plugins: [...defaultPreset(), acme] },
      );
    });
    after(async () => {
      await svc?.close();
      await up?.close();
    });
    const echo = async (path: string, headers: Record<string, string> = {}) =>
      (await svc.post(path, { jsonrpc: '2.0', id: 1, method: 'acme_echo', params: [] }, headers)).json.result;

    it('a declared directive is defaulted from directiveDefaults, set by its header and query, and governed by allowClientDirectives', async () => {
      expect((await echo('/main/evm/31337')).tier).to.equal('gold');
      expect((await echo('/main/evm/31337', { 'x-acme-tier': 'silver' })).tier).to.equal('silver');
      expect((await echo('/main/evm/31337?acme-tier=%20bronze%20', { 'x-acme-tier': 'silver' })).tier).to.equal('bronze');
      expect((await echo('/locked/evm/31337?acme-tier=bronze')).tier).to.equal('unset');
    });

    it('slots are reached by name; the finality slot is set before the call chain runs', async () => {
      const r = await echo('/main/evm/31337');
      expect(r.sameByName).to.equal('gold');
      expect(r.finality).to.equal('unknown');
    });

    it('a malformed or colliding directive fails boot', () => {
      const bad = (d: object) =>
        plugin('bad', { dependsOn: ['directives'], apply: (h) => h.services.require<DirectivesService>(DIRECTIVES_SERVICE).declare(d as never) });
      expect(() => build([...defaultPreset(), bad({ query: 'retry-empty', header: 'x-other', field: 'other', type: 'bool' })])).to.throw(
        PluginContractError,
        /collides/,
      );
      expect(() => build([...defaultPreset(), bad({ query: 'Bad Name', header: 'x-a', field: 'a', type: 'bool' })])).to.throw(
        PluginContractError,
        /must match/,
      );
    });

    it('health tracking is paid only by presets that carry the health plugin', async () => {
      const min = await startSvc(
        {
          logLevel: 'error',
          projects: [
            { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: 31337 } }] },
          ],
        },
        { plugins: minimalPreset() },
      );
      try {
        await min.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
        expect(min.proxy.projects.get('main')!.health.snapshot('a').requests).to.equal(0);
      } finally {
        await min.close();
      }
      await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
      expect(svc.proxy.projects.get('main')!.health.snapshot('a').requests).to.be.above(0);
    });
  });
});
