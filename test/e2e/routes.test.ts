/**
 * The `routes` hook (core/pipeline/hooks.ts): a plugin mounts its own paths (admin, healthcheck) on the
 * core's router; its routes are served, and proxy calls on other paths still reach the pipeline.
 */
import { expect } from 'chai';
import type Router from '@koa/router';
import type { Plugin } from '../../core/host/proxy.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const routesPlugin: Plugin = {
  name: 'test-routes',
  apply(proxy) {
    proxy.hooks.routes.tap('test-routes', (router: Router) => {
      router.post('/custom', (k) => {
        k.body = JSON.stringify({ served: 'plugin-post' });
      });
      router.get('/custom-get', (k) => {
        k.body = JSON.stringify({ served: 'plugin-get' });
      });
    });
  },
};

describe('e2e: plugin routes through the routes hook', () => {
  let up: FaultServer;
  let svc: SvcHandle;
  before(async () => {
    up = await startFaultServer({ chainId: 1 });
    svc = await startSvc(
      {
        metrics: { enabled: false },
        projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: [{ id: 'up', endpoint: up.url, evm: { chainId: 1 } }] }],
      },
      { plugins: [...defaultPreset().filter((p) => p.name !== 'evm-state'), routesPlugin] },
    );
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });

  it('a POST route of a plugin is served by the plugin, with the core headers', async () => {
    const res = await svc.post('/custom', '{}');
    expect(res.json).to.deep.equal({ served: 'plugin-post' });
    expect(res.headers['x-svc-version']).to.be.a('string');
  });

  it('a GET route of a plugin is served by the plugin', async () => {
    const res = await svc.send('GET', '/custom-get');
    expect(res.json).to.deep.equal({ served: 'plugin-get' });
  });

  it('proxy calls on other paths still go through the pipeline', async () => {
    const res = await svc.post('/main/evm/1', { jsonrpc: '2.0', id: 5, method: 'net_version', params: [] });
    expect(res.json.id).to.equal(5);
    expect(res.json).to.have.property('result');
    expect(res.headers['x-svc-upstream']).to.equal('up');
  });
});
