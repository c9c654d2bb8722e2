/**
 * Conformance, spec §3.1 (cordon states), §3.2 (process drain) and §3.3 (API key states): every
 * state-table row against a real svc in front of real anvil, observed through the admin
 * endpoint, /metrics, proxied calls and the healthcheck.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { ADMIN, ADMIN_H, rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';


/** Status and error name of a refused call (what the spec names), for exact assertions. */
async function refusal(r: Promise<{ status: number; json: { error?: { data?: { code?: string } } } }> | { status: number; json: { error?: { data?: { code?: string } } } }): Promise<{ status: number; code: string | undefined }> {
  const a = await r;
  return { status: a.status, code: a.json.error?.data?.code };
}

describe('conformance: §3.1 cordon, §3.2 drain, §3.3 API key states', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture();
  });
  after(() => f?.close());
  const net = () => `evm:${f.anvil.chainId}`;
  const cordon = (upstream: string, extra: Record<string, unknown> = {}) => f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream, ...extra }]);
  const uncordon = (upstream: string, extra: Record<string, unknown> = {}) => f.admin('svc_uncordonUpstream', [{ projectId: 'main', upstream, ...extra }]);
  const events = async (upstream: string, action: string) => (await f.metric('svc_upstream_cordon_event_total', { project: 'main', upstream, action })) ?? 0;
  const gauge = (upstream: string, method = '*', reason?: string) => f.metric('svc_upstream_cordoned', { project: 'main', upstream, method, ...(reason === undefined ? {} : { reason }) });
  const served = async (method = 'eth_blockNumber', params: unknown[] = []) => (await f.svc.post(f.path, rpc(method, params))).headers['x-svc-upstream'];
  /** Whether upstream `a` may serve the call: pinned to it with use-upstream (the score order of a and b is not the subject). */
  const aServes = async (method = 'eth_blockNumber', params: unknown[] = []) => (await f.svc.post(`${f.path}?use-upstream=a`, rpc(method, params))).headers['x-svc-upstream'] === 'a';

  describe('§3.1 cordon', () => {
    afterEach(async () => {
      await uncordon('a');
      await uncordon('a', { method: 'eth_getBalance' });
    });

    it('§3.1 not cordoned / svc_cordonUpstream — cordoned with its reason; gauge 1, cordon event +1, excluded on the request path at once and by the next evaluation (removeCordoned, cordoned)', async () => {
      const before = await events('a', 'cordon');
      const r = await cordon('a', { reason: 'disk full' });
      expect(r.json.result).to.deep.equal({ projectId: 'main', upstream: 'a', method: '*', cordoned: true, reason: 'disk full' });
      expect(await served(), 'request path, before any evaluation tick').to.equal('b');
      expect(await gauge('a', '*', 'disk full')).to.equal(1);
      expect(await events('a', 'cordon')).to.equal(before + 1);
      expect(await f.metric('svc_upstream_cordon_event_total', { project: 'main', network: net(), upstream: 'a', action: 'cordon' })).to.equal(before + 1);
      await waitFor(async () => {
        const p = JSON.stringify((await f.admin('svc_project', ['main'])).json.result);
        return /"step":"removeCordoned","upstream":"a","reason":"cordoned"/.test(p);
      }, 3000);
    });

    it('§3.1 cordoned / svc_cordonUpstream — already cordoned: only the reason is overwritten, no event counted', async () => {
      await cordon('a', { reason: 'first' });
      const before = await events('a', 'cordon');
      const r = await cordon('a', { reason: 'second' });
      expect(r.json.result.reason).to.equal('second');
      expect((await f.admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.cordoned).to.deep.equal([{ upstream: 'a', reason: 'second' }]);
      expect(await events('a', 'cordon')).to.equal(before);
      expect(await gauge('a', '*', 'second')).to.equal(1);
    });

    it('§3.1 cordoned / svc_uncordonUpstream — not cordoned: gauge 0, uncordon event +1, duration observed', async () => {
      await cordon('a');
      const before = await events('a', 'uncordon');
      const durations = (await f.metric('svc_upstream_cordon_duration_seconds_count', { project: 'main', upstream: 'a' })) ?? 0;
      const r = await uncordon('a');
      expect(r.json.result.cordoned).to.equal(false);
      expect(await gauge('a', '*', 'admin: manual cordon')).to.equal(0);
      expect(await events('a', 'uncordon')).to.equal(before + 1);
      expect(await f.metric('svc_upstream_cordon_duration_seconds_count', { project: 'main', network: net(), upstream: 'a' })).to.equal(durations + 1);
      // The ordered list is refreshed at the next evaluation tick (100 ms here).
      await waitFor(() => aServes(), 2000);
    });

    it('§3.1 not cordoned / svc_uncordonUpstream — an idempotent no-op', async () => {
      const before = await events('a', 'uncordon');
      const r = await uncordon('a');
      expect(r.json.result.cordoned).to.equal(false);
      expect(await events('a', 'uncordon')).to.equal(before);
      expect(await aServes()).to.equal(true);
    });

    it('§3.1 cordoned / process restart — the cordon is not persisted', async () => {
      const config = { ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } }, projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }] };
      const one = await startSvc(config);
      await one.post('/admin', rpc('svc_cordonUpstream', [{ projectId: 'p', upstream: 'x' }]), ADMIN_H);
      expect((await one.post('/admin', rpc('svc_listCordoned', [{ projectId: 'p' }]), ADMIN_H)).json.result.cordoned).to.have.length(1);
      await one.close();
      const two = await startSvc(config);
      try {
        expect((await two.post('/admin', rpc('svc_listCordoned', [{ projectId: 'p' }]), ADMIN_H)).json.result.cordoned).to.deep.equal([]);
        expect((await two.post(`/p/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []))).headers['x-svc-upstream']).to.equal('x');
      } finally {
        await two.close();
      }
    });

    it('§3.1 not cordoned / svc_cordonUpstream — a method scope excludes the upstream for that method only; * overrides it', async () => {
      await cordon('a', { method: 'eth_getBalance' });
      const bal = ['0x0000000000000000000000000000000000000001', 'latest'];
      expect(await served('eth_getBalance', bal)).to.equal('b');
      expect(await aServes('eth_getBalance', bal)).to.equal(false);
      expect(await aServes()).to.equal(true);
      await cordon('a');
      expect(await aServes()).to.equal(false);
      expect(await served()).to.equal('b');
    });
  });

  describe('§3.2 drain', () => {
    let s: SvcHandle;
    let slowUpstream: FaultServer;
    let done: Promise<void>;
    /** A call that stays in flight through draining and closing (the upstream answers it after 1.5 s). */
    let inFlight: Promise<{ status: number; result: unknown }>;
    before(async () => {
      slowUpstream = await startFaultServer({ chainId: f.anvil.chainId, scriptMethods: ['eth_getBalance'] });
      s = await startSvc({ ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, server: { waitBeforeShutdown: '400ms', waitAfterShutdown: '5s' }, projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: slowUpstream.url, evm: { chainId: f.anvil.chainId } }] }] });
    });
    after(async () => {
      await s?.close();
      await slowUpstream?.close();
    });

    it('§3.2 serving — SIGTERM: draining, and /healthcheck answers 503 at once though upstreams are healthy', async () => {
      // Ready first: the upstream is initialised once its chain id is confirmed and its first poll is in.
      await waitFor(async () => (await s.send('GET', '/healthcheck')).status === 200, 10_000);
      slowUpstream.script({ kind: 'delay', ms: 1500 });
      inFlight = s.post(`/p/evm/${f.anvil.chainId}`, rpc('eth_getBalance', [`0x${'00'.repeat(20)}`, 'latest'])).then((r) => ({ status: r.status, result: r.json?.result }));
      await waitFor(() => slowUpstream.calls.some((c) => c.method === 'eth_getBalance'), 5000);
      done = s.proxy.shutdown();
      expect(s.proxy.lifecycle).to.equal('draining');
      const r = await s.send('GET', '/healthcheck');
      expect(r.status).to.equal(503);
      expect(JSON.stringify(r.json)).to.match(/HealthcheckUnhealthy/);
    });

    it('§3.2 draining — after waitBeforeShutdown elapses: closing, new requests no longer accepted', async () => {
      await new Promise((r) => setTimeout(r, 100));
      expect(s.proxy.lifecycle, 'still inside waitBeforeShutdown').to.equal('draining');
      await waitFor(() => s.proxy.lifecycle !== 'draining', 2000);
      // A call is still in flight, so the listener stays open through closing: a new request is refused, not served.
      expect(s.proxy.lifecycle).to.equal('closing');
      const r = await s.post(`/p/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []));
      expect(r.status).to.equal(503);
      expect(r.json?.result, 'not served as a normal call').to.equal(undefined);
      expect(r.json?.error?.data?.code).to.equal('ErrServiceShuttingDown');
      expect(r.headers.connection).to.equal('close');
    });

    it('§3.2 closing — after waitAfterShutdown elapses (at the latest): stopped, the listener is closed', async () => {
      // The call in flight when the drain began finished normally.
      expect(await inFlight).to.deep.equal({ status: 200, result: '0x0' });
      await done;
      expect(s.proxy.lifecycle).to.equal('stopped');
      const r = await s.send('GET', '/healthcheck').catch((e: Error) => e);
      expect(r).to.be.instanceOf(Error);
    });
  });

  describe('§3.3 API key', () => {
    const KEY = 'k_state_0123456789abcdef0123456789abcdef';
    const keyCall = (key: string) => f.svc.post(`/keys/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []), { authorization: `Bearer ${key}` });
    const p = (extra: Record<string, unknown>) => [{ projectId: 'keys', connectorId: 'mem', ...extra }];

    it('§3.3 absent — svc_addApiKey: present and enabled unless given false', async () => {
      expect(await refusal(keyCall(KEY))).to.deep.equal({ status: 401, code: 'ErrAuthUnauthorized' });
      await f.admin('svc_addApiKey', p({ apiKey: KEY, userId: 'u' }));
      expect((await keyCall(KEY)).json.result).to.match(/^0x/);
      await f.admin('svc_addApiKey', p({ apiKey: `${KEY}-off`, userId: 'u', enabled: false }));
      const listed = (await f.admin('svc_listApiKeys', p({}))).json.result.apiKeys as Array<{ key: string; enabled: boolean }>;
      expect(listed.find((k) => k.key === `${KEY}-off`)?.enabled).to.equal(false);
      expect(await refusal(keyCall(`${KEY}-off`))).to.deep.equal({ status: 401, code: 'ErrAuthUnauthorized' });
    });

    it('§3.3 present / svc_updateApiKey with enabled — enabled or disabled', async () => {
      await f.admin('svc_updateApiKey', p({ apiKey: KEY, updates: { enabled: false } }));
      expect(await refusal(keyCall(KEY))).to.deep.equal({ status: 401, code: 'ErrAuthUnauthorized' });
      await f.admin('svc_updateApiKey', p({ apiKey: KEY, updates: { enabled: true } }));
      expect((await keyCall(KEY)).json.result).to.match(/^0x/);
    });

    it('§3.3 present / svc_deleteApiKey — absent', async () => {
      const r = await f.admin('svc_deleteApiKey', p({ apiKey: KEY }));
      expect(r.json.result).to.deep.equal({ success: true, apiKey: KEY, userId: 'u' });
      expect((await f.admin('svc_listApiKeys', p({}))).json.result.apiKeys.map((k: { key: string }) => k.key)).not.to.include(KEY);
      expect(await refusal(keyCall(KEY))).to.deep.equal({ status: 401, code: 'ErrAuthUnauthorized' });
    });
  });
});
