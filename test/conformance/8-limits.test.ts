/**
 * Conformance, spec §8 (limits): observable limits through a real svc in front of real anvil;
 * the zero-config timings (30 s, 130 s, 1 h...) are too long to wait for: the first-request wait,
 * the bootstrap backoff and the catalog recheck are driven on a fake clock through the code that
 * schedules them (the providers plugin on a fake host, its bootstrap tasks, the repository vendor
 * with a real catalog server); the probe timeout is checked on the constant the code uses, and
 * the batch grace window on the queue itself, on a fake clock too.
 */
import { createServer, type Server } from 'node:http';
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { ErrEndpointServerSideException, ErrResponseBytesInFlightExceeded } from '../../core/wire/errors.ts';
import { DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT, RESPONSE_BYTES } from '../../lib/body.ts';
import { BatchQueue, type QueuedCall } from '../../plugins/batching/queue.ts';
import type { PluginHost, Project } from '../../core/plugin-api.ts';
import type { Vendor } from 'svc-proxy/plugins/providers';
import { ProjectBootstrap } from '../../plugins/providers/bootstrap.ts';
import {
  BOOTSTRAP_BACKOFF_FACTOR,
  BOOTSTRAP_FIRST_RETRY_MS,
  BOOTSTRAP_MAX_RETRY_MS,
  FIRST_REQUEST_POLL_MS,
  FIRST_REQUEST_WAIT_MS,
  providersPlugin,
} from '../../plugins/providers/index.ts';
import { readSelectionSettings } from '../../plugins/selection/index.ts';
import { HYPER_PROBE_TIMEOUT_MS } from '../../plugins/vendor-hyper/index.ts';
import { DEFAULT_RECHECK_INTERVAL_MS, repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { NO_CACHE, startSvc } from '../helpers/svc.ts';
import { ADMIN, ADMIN_H, rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

describe('conformance: §8 limits', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture();
  });
  after(() => f?.close());

  it('§8 Cordon persistence — in-process only: a restarted process has no cordon', async () => {
    const config = {
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }],
    };
    const list = async (s: Awaited<ReturnType<typeof startSvc>>) =>
      (await s.post('/admin', rpc('svc_listCordoned', [{ projectId: 'p' }]), ADMIN_H)).json.result.cordoned;
    const one = await startSvc(config);
    await one.post('/admin', rpc('svc_cordonUpstream', [{ projectId: 'p', upstream: 'x', reason: 'before restart' }]), ADMIN_H);
    expect(await list(one)).to.deep.equal([{ upstream: 'x', reason: 'before restart' }]);
    await one.close();
    const two = await startSvc(config);
    try {
      expect(await list(two)).to.deep.equal([]);
    } finally {
      await two.close();
    }
  });

  it('§8 Selection evaluation interval default — 15s', () => {
    expect(readSelectionSettings(undefined, 'selectionPolicy').evalIntervalMs).to.equal(15_000);
    expect(readSelectionSettings({}, 'selectionPolicy').evalIntervalMs).to.equal(15_000);
    expect(readSelectionSettings({ evalInterval: 100 }, 'selectionPolicy').evalIntervalMs).to.equal(100);
  });

  it('§8 svc_listApiKeys default page size — 50', async () => {
    for (let i = 0; i < 51; i++) {
      await f.admin('svc_addApiKey', [
        { projectId: 'keys', connectorId: 'mem', apiKey: `k_page_${String(i).padStart(3, '0')}_0123456789abcdef0123456789`, userId: `u${i}` },
      ]);
    }
    const first = (await f.admin('svc_listApiKeys', [{ projectId: 'keys', connectorId: 'mem' }])).json.result;
    expect(first.totalReturned).to.equal(50);
    expect(first.apiKeys).to.have.length(50);
    expect(first.hasMore).to.equal(true);
    const second = (await f.admin('svc_listApiKeys', [{ projectId: 'keys', connectorId: 'mem', paginationToken: first.nextToken }])).json.result;
    expect(second.apiKeys).to.have.length(1);
    expect(second.hasMore).to.equal(false);
  });

  it('§8 Outbound batch size / wait — no usable defaults: supportsBatch with either at 0 is warned about, and every call flushes alone', async () => {
    const s = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId }, jsonRpc: { supportsBatch: true } }] }],
    });
    try {
      expect(s.proxy.config.warnings.some((w) => /supportsBatch is on with batchMaxSize 0 and batchMaxWait 0/.test(w))).to.equal(true);
    } finally {
      await s.close();
    }
    const batches: string[][] = [];
    const q = new BatchQueue({
      maxSize: 0,
      maxWaitMs: 0,
      send: async (cs) => (batches.push(cs.map((c) => c.id)), cs.map(() => new ErrEndpointServerSideException('x'))),
    });
    const call = (id: string): QueuedCall => ({ id, method: 'm', params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
    await Promise.allSettled([q.add(call('1')), q.add(call('2'))]);
    expect(batches).to.deep.equal([['1'], ['2']]);
  });

  it('§8 Outbound batch failure grace window — 5 ms before a shared transport failure reaches the queued calls', async () => {
    const down = new ErrEndpointServerSideException('connection reset');
    const q = new BatchQueue({ maxSize: 2, maxWaitMs: 1000, send: async (cs) => cs.map(() => down) });
    const call = (id: string): QueuedCall => ({ id, method: 'm', params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
    // A fake clock: a real 5 ms timer may fire early against performance.now() (libuv reads its
    // loop clock once per turn) and late on a busy machine.
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      let settled = false;
      const all = Promise.allSettled([q.add(call('a')), q.add(call('b'))]).then((rs) => {
        settled = true;
        return rs;
      });
      await clock.tickAsync(4);
      expect(settled, '4 ms after the flush').to.equal(false);
      await clock.tickAsync(1);
      expect(settled, '5 ms after the flush').to.equal(true);
      const rs = await all;
      expect(rs).to.have.length(2);
      expect(rs.map((r) => (r as PromiseRejectedResult).reason)).to.deep.equal([down, down]);
    } finally {
      clock.uninstall();
    }
  });

  it('§8 Batch trace segments in X-SVC-Upstreams — at most 50, the overflow counted in X-SVC-Upstreams-Truncated', async () => {
    const batch = Array.from({ length: 60 }, (_, i) => rpc('eth_getBalance', [`0x${(i + 1).toString(16).padStart(40, '0')}`, 'latest'], i));
    const r = await f.svc.post(f.path, batch);
    expect(r.json).to.have.length(60);
    expect(r.headers['x-svc-upstreams']!.split(';')).to.have.length(50);
    expect(r.headers['x-svc-upstreams-truncated']).to.equal('10');
  });

  it('§8 Admin CORS preflight max age default — 3600 seconds', async () => {
    // The admin's CORS allows no origin unless listed (a declared deviation): the max age is
    // read on a preflight svc grants, from an origin the config lists and nothing else.
    const svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] }, cors: { allowedOrigins: ['https://ops.example'] } },
      projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }],
    });
    try {
      const r = await svc.send('OPTIONS', '/admin', undefined, { origin: 'https://ops.example', 'access-control-request-method': 'POST' });
      expect(r.headers['access-control-allow-origin']).to.equal('https://ops.example');
      expect(r.headers['access-control-max-age']).to.equal('3600');
    } finally {
      await svc.close();
    }
  });

  it('§8 Upstream answer bytes read and parsed at once (server.maxResponseBytesInFlight) default — 512 MiB; past it a call gets HTTP 503, -32005', async () => {
    // The default a server without the setting runs with (the fixture's svc sets none).
    expect(RESPONSE_BYTES.limit).to.equal(512 * 1024 * 1024);
    expect(DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT).to.equal(512 * 1024 * 1024);
    // Past the bound: the call's error is -32005 with HTTP 503 (the e2e response-bytes-bound test
    // drives real answers past a smaller bound).
    expect(ErrResponseBytesInFlightExceeded.defaultCode).to.equal(-32005);
    expect(ErrResponseBytesInFlightExceeded.httpStatus).to.equal(503);
  });

  it('§8 Zero-config first-request wait — up to 30 s, polling every 200 ms', async () => {
    expect(FIRST_REQUEST_WAIT_MS).to.equal(30_000);
    expect(FIRST_REQUEST_POLL_MS).to.equal(200);
    // By behaviour: the providers plugin on a fake host, with a vendor that never answers (its
    // bootstrap task keeps running), asked for a chain on a fake clock. Each look at the
    // project's networks is a poll.
    const taps: Record<string, (...args: any[]) => any> = {};
    const hook = (name: string) => ({
      tap: (_n: unknown, fn: (...args: any[]) => any) => (taps[name] = fn),
      tapPromise: (_n: unknown, fn: (...args: any[]) => any) => (taps[name] = fn),
    });
    let providers: { registerVendor(v: Vendor): void } | undefined;
    const host = {
      logger: { warn() {}, error() {}, info() {}, debug() {} },
      isClosed: false,
      services: { provide: (_k: unknown, v: typeof providers) => (providers = v) },
      hooks: {
        config: hook('config'),
        configured: hook('configured'),
        project: hook('project'),
        resolveNetwork: hook('resolveNetwork'),
        shutdown: hook('shutdown'),
      },
    } as unknown as PluginHost;
    providersPlugin().apply(host);
    providers!.registerVendor({ name: 'silent', upstreamsFor: () => new Promise(() => {}) });
    const polls: number[] = [];
    const networks = new Map();
    const get = networks.get.bind(networks);
    networks.get = (k: string) => (polls.push(Date.now()), get(k));
    const project = {
      id: 'z',
      config: { settings: { providers: [{ id: 'public', vendor: 'silent' }] } },
      networks,
      upstreams: new Map(),
    } as unknown as Project;
    await taps.project!(project);
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const wait = async (deadline: number) => {
        polls.length = 0;
        const start = Date.now();
        let ended: number | undefined;
        void Promise.resolve(taps.resolveNetwork!(project, 'evm:1', deadline)).then(
          () => (ended = Date.now() - start),
          () => (ended = Date.now() - start),
        );
        return { ended: () => ended, polls: () => [...new Set(polls.map((t) => t - start))] };
      };
      const w = await wait(Number.POSITIVE_INFINITY);
      await clock.tickAsync(29_999);
      expect(w.ended(), 'still waiting just before 30 s').to.equal(undefined);
      await clock.tickAsync(1);
      expect(w.ended(), 'gives up at 30 s').to.equal(30_000);
      expect(w.polls()).to.deep.equal(Array.from({ length: 151 }, (_, i) => i * 200));
      // Bounded by the request's own deadline.
      const short = await wait(Date.now() + 1000);
      await clock.tickAsync(1000);
      expect(short.ended(), 'gives up at the deadline').to.equal(1000);
      expect(short.polls()).to.deep.equal([0, 200, 400, 600, 800, 1000]);
    } finally {
      clock.uninstall();
      await taps.shutdown?.();
    }
  });

  it('§8 Zero-config bootstrap retry backoff — factor 1.5, from 3 s up to 130 s', async () => {
    expect(BOOTSTRAP_BACKOFF_FACTOR).to.equal(1.5);
    expect(BOOTSTRAP_FIRST_RETRY_MS).to.equal(3000);
    expect(BOOTSTRAP_MAX_RETRY_MS).to.equal(130_000);
    // By behaviour: a provider whose vendor always fails is retried by the bootstrap tasks on a
    // fake clock; the gaps between the vendor's calls are the backoff.
    const clock = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const asked: number[] = [];
      const vendor: Vendor = {
        name: 'down',
        upstreamsFor: async () => {
          asked.push(Date.now());
          throw new Error('catalog unreachable');
        },
      };
      const quiet = { warn() {}, error() {}, info() {}, debug() {} };
      const host = { logger: quiet } as unknown as PluginHost;
      const project = { id: 'z', upstreams: new Map() } as unknown as Project;
      const b = new ProjectBootstrap(
        host,
        project,
        [{ id: 'public', vendor: 'down', settings: {}, upstreamIdTemplate: '<PROVIDER>', overrides: {} }],
        new Map([['down', vendor]]),
      );
      expect(b.start(1), 'the first task runs at once').to.equal(true);
      await clock.tickAsync(0);
      expect(asked).to.deep.equal([0]);
      const retries = 12;
      for (let i = 0; i < retries; i++) await clock.nextAsync();
      b.close();
      expect(asked).to.have.length(retries + 1);
      const gaps = asked.slice(1).map((t, i) => t - asked[i]!);
      // 3 s, then x1.5 each time, never above 130 s (timers count whole milliseconds).
      const expected = Array.from({ length: retries }, (_, i) => Math.min(130_000, 3000 * 1.5 ** i));
      expect(gaps).to.have.length(retries);
      gaps.forEach((g, i) => expect(g, `gap ${i + 1}`).to.be.closeTo(expected[i]!, 1));
      expect(gaps.slice(0, 3)).to.deep.equal([3000, 4500, 6750]);
      expect(gaps.slice(-2), 'capped').to.deep.equal([130_000, 130_000]);
      expect(clock.countTimers(), 'close() stops the retries').to.equal(0);
    } finally {
      clock.uninstall();
    }
  });

  it('§8 Zero-config live chain probe timeout — 10 s', () => {
    expect(HYPER_PROBE_TIMEOUT_MS).to.equal(10_000);
  });

  it('§8 Catalog recheck interval — 1 h', async () => {
    expect(DEFAULT_RECHECK_INTERVAL_MS).to.equal(3_600_000);
    // By behaviour: the repository vendor in front of a real catalog server that counts fetches,
    // with only Date faked (the catalog's age is read from Date.now; the fetch runs on real I/O).
    let hits = 0;
    const catalog: Server = createServer((_q, res) => {
      hits++;
      res.end(JSON.stringify({ '1': { endpoints: ['https://one.example/rpc'] }, '10': { endpoints: ['https://ten.example/rpc'] } }));
    });
    await new Promise<void>((r) => catalog.listen(0, '127.0.0.1', () => r()));
    let vendor: Vendor | undefined;
    const host = { services: { get: () => ({ registerVendor: (v: Vendor) => (vendor = v) }) } } as unknown as PluginHost;
    repositoryVendorPlugin({ env: {} }).apply(host);
    const quiet = { warn() {}, error() {}, info() {}, debug() {} } as unknown as Parameters<Vendor['upstreamsFor']>[2]['logger'];
    // A recheckInterval in the settings (as YAML would give it) is ignored (spec §2.10).
    const settings = { repositoryUrl: `http://127.0.0.1:${(catalog.address() as { port: number }).port}/`, recheckInterval: '1s' };
    const ask = async (chainId: number) => (await vendor!.upstreamsFor(chainId, settings, { id: 'public', logger: quiet })).map((u) => u.endpoint);
    const clock = FakeTimers.install({ toFake: ['Date'] });
    try {
      expect(await ask(1)).to.deep.equal(['https://one.example/rpc']);
      expect(hits, 'fetched on the first request').to.equal(1);
      clock.tick(3_600_000 - 1);
      expect(await ask(10), 'served from the catalog fetched 1 ms short of an hour ago').to.deep.equal(['https://ten.example/rpc']);
      expect(hits).to.equal(1);
      clock.tick(2);
      await ask(10);
      expect(hits, 'fetched again once older than an hour').to.equal(2);
      clock.tick(3_600_000 - 2);
      await ask(1);
      expect(hits, 'the hour counts from the new fetch').to.equal(2);
    } finally {
      clock.uninstall();
      catalog.closeAllConnections();
      await new Promise((r) => catalog.close(r));
    }
  });
});
