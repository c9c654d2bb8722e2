/**
 * The admin's DNS-rebinding guard (plugins/admin/host-guard.ts) and which operator changes are
 * replayed on other workers and replicas (plugins/admin/methods.ts replayNeeded), then the guard
 * on a real svc: an admin guarded only by a network strategy answers under an IP address,
 * localhost or an `admin.allowedHosts` name, and refuses another name with HTTP 403 on /admin and
 * /admin/ui alike; with a secret strategy any Host passes.
 */
import { expect } from 'chai';
import { hostAllowed, hostnameOf } from '../../../../plugins/admin/host-guard.ts';
import { replayNeeded } from '../../../../plugins/admin/methods.ts';
import type { PluginHost } from '../../../../core/plugin-api.ts';
import { AUTH_SERVICE } from 'svc-proxy/plugins/auth';
import { startSvc, type SvcHandle } from '../../../helpers/svc.ts';

describe('admin: DNS-rebinding guard and replays', () => {
  describe('hostAllowed', () => {
    const ambient = { allowedHosts: [] as string[], ambientOnly: true };
    it('reads the hostname of a Host header (port, IPv6 brackets, case)', () => {
      expect(hostnameOf('Ops.Example:4000')).to.equal('ops.example');
      expect(hostnameOf('[::1]:4000')).to.equal('::1');
      expect(hostnameOf('127.0.0.1')).to.equal('127.0.0.1');
    });
    it('with only network strategies: IP literals and localhost pass, other names do not', () => {
      for (const h of ['127.0.0.1:4000', '10.0.0.5', '[::1]:4000', 'localhost:4000', '']) expect(hostAllowed(h, ambient), h).to.equal(true);
      for (const h of ['evil.example:4000', 'evil.example', 'localhost.evil.example', '127.0.0.1.nip.io', 'x'.repeat(300)])
        expect(hostAllowed(h, ambient), h).to.equal(false);
    });
    it('admin.allowedHosts: exact names and *.subdomains, case-insensitive, trailing dot ignored', () => {
      const s = { allowedHosts: ['ops.example', '*.svc.internal'], ambientOnly: true };
      expect(hostAllowed('OPS.example:4000', s)).to.equal(true);
      expect(hostAllowed('ops.example.', s)).to.equal(true);
      expect(hostAllowed('a.svc.internal', s)).to.equal(true);
      expect(hostAllowed('svc.internal', s)).to.equal(false);
      expect(hostAllowed('evilops.example', s)).to.equal(false);
    });
    it('off with a credential the page cannot send (secret, JWT...) unless allowedHosts is set', () => {
      expect(hostAllowed('evil.example', { allowedHosts: [], ambientOnly: false })).to.equal(true);
      expect(hostAllowed('evil.example', { allowedHosts: ['ops.example'], ambientOnly: false })).to.equal(false);
    });
  });

  describe('replayNeeded', () => {
    const hostWith = (shared: boolean | undefined): PluginHost =>
      ({
        services: { get: (k: unknown) => (k === AUTH_SERVICE && shared !== undefined ? { apiKeys: () => ({ shared }) } : undefined) },
      }) as unknown as PluginHost;
    const key = [{ projectId: 'main', connectorId: 'keys', apiKey: 'k' }];
    it('cordons are always replayed (each process keeps its own)', () => {
      expect(replayNeeded(hostWith(true), 'svc_cordonUpstream', [{ projectId: 'main', upstream: 'a' }])).to.equal(true);
      expect(replayNeeded(hostWith(true), 'svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a' }])).to.equal(true);
    });
    it('API-key changes only for the memory driver, never for a shared store (a replay could bring back a deleted key)', () => {
      for (const m of ['svc_addApiKey', 'svc_updateApiKey', 'svc_deleteApiKey']) {
        expect(replayNeeded(hostWith(false), m, key), m).to.equal(true);
        expect(replayNeeded(hostWith(true), m, key), m).to.equal(false);
        expect(replayNeeded(hostWith(undefined), m, key), m).to.equal(false);
      }
    });
  });

  describe('on a running svc', function () {
    this.timeout(20_000);
    let svc: SvcHandle | undefined;
    afterEach(async () => {
      await svc?.close();
      svc = undefined;
    });
    const call = (host: string) => svc!.post('/admin', { jsonrpc: '2.0', id: 1, method: 'svc_taxonomy' }, { host });

    it('network strategy only: 403 under a foreign name on /admin and /admin/ui, 200 under the address or an allowed name', async () => {
      svc = await startSvc({
        metrics: { enabled: false },
        admin: { auth: { strategies: [{ type: 'network', network: { allowLocalhost: true } }] }, ui: { enabled: true }, allowedHosts: ['ops.example'] },
        projects: [{ id: 'main', upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 } }] }],
      });
      const port = new URL(svc.url).port;
      const refused = await call(`evil.example:${port}`);
      expect(refused.status).to.equal(403);
      expect(refused.json.error.message).to.contain('DNS-rebinding');
      expect((await call(`127.0.0.1:${port}`)).status).to.equal(200);
      expect((await call(`ops.example:${port}`)).status).to.equal(200);
      for (const path of ['/admin/ui', '/admin/ui/snapshot']) {
        expect((await svc.send('GET', path, undefined, { host: `evil.example:${port}` })).status, path).to.equal(403);
      }
      expect((await svc.send('GET', '/admin/ui/snapshot', undefined, { host: `127.0.0.1:${port}` })).status).to.equal(200);
    });

    it('a secret strategy: any Host passes (a rebinding page has no secret to send)', async () => {
      svc = await startSvc({
        metrics: { enabled: false },
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: 's3cret' } }] } },
        projects: [{ id: 'main', upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 } }] }],
      });
      const r = await svc.post('/admin', { jsonrpc: '2.0', id: 1, method: 'svc_taxonomy' }, { host: 'anything.example', 'x-svc-secret-token': 's3cret' });
      expect(r.status).to.equal(200);
    });
  });
});
