/**
 * Conformance, spec §8 (limits): observable limits through a real svc in front of real anvil;
 * the zero-config timings (30 s, 130 s, 1 h...) are too long to wait for, so their values are
 * checked on the constants the code uses, and the batch grace window on the queue itself.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import FakeTimers from '@sinonjs/fake-timers';
import { expect } from 'chai';
import { ErrEndpointServerSideException, ErrResponseBytesInFlightExceeded } from '../../core/errors.ts';
import { DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT, RESPONSE_BYTES } from '../../lib/body.ts';
import { BatchQueue, type QueuedCall } from '../../plugins/batching/queue.ts';
import { BOOTSTRAP_BACKOFF_FACTOR, BOOTSTRAP_FIRST_RETRY_MS, BOOTSTRAP_MAX_RETRY_MS, bootstrapRetryDelayMs, FIRST_REQUEST_POLL_MS, FIRST_REQUEST_WAIT_MS } from '../../plugins/providers/index.ts';
import { readSelectionSettings } from '../../plugins/selection/index.ts';
import { HYPER_PROBE_TIMEOUT_MS } from '../../plugins/vendor-hyper/index.ts';
import { CatalogSource, DEFAULT_RECHECK_INTERVAL_MS } from '../../plugins/vendor-repository/index.ts';
import { createLogger } from '../../lib/logger.ts';
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
    const config = { ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } }, projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId } }] }] };
    const list = async (s: Awaited<ReturnType<typeof startSvc>>) => (await s.post('/admin', rpc('svc_listCordoned', [{ projectId: 'p' }]), ADMIN_H)).json.result.cordoned;
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
      await f.admin('svc_addApiKey', [{ projectId: 'keys', connectorId: 'mem', apiKey: `k_page_${String(i).padStart(3, '0')}_0123456789abcdef0123456789`, userId: `u${i}` }]);
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
    const s = await startSvc({ ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'p', upstreams: [{ id: 'x', endpoint: f.anvil.url, evm: { chainId: f.anvil.chainId }, jsonRpc: { supportsBatch: true } }] }] });
    try {
      expect(s.proxy.config.warnings.some((w) => /supportsBatch is on with batchMaxSize 0 and batchMaxWait 0/.test(w))).to.equal(true);
    } finally {
      await s.close();
    }
    const batches: string[][] = [];
    const q = new BatchQueue({ maxSize: 0, maxWaitMs: 0, send: async (cs) => (batches.push(cs.map((c) => c.id)), cs.map(() => new ErrEndpointServerSideException('x'))) });
    const call = (id: string): QueuedCall => ({ id, method: 'm', params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
    await Promise.allSettled([q.add(call('1')), q.add(call('2'))]);
    expect(batches).to.deep.equal([['1'], ['2']]);
  });

  it('§8 Outbound batch failure grace window — 5 ms before a shared transport failure reaches the queued calls', async () => {
    const down = new ErrEndpointServerSideException('connection reset');
    const q = new BatchQueue({ maxSize: 2, maxWaitMs: 1000, send: async (cs) => cs.map(() => down) });
    const call = (id: string): QueuedCall => ({ id, method: 'm', params: [], deadline: Date.now() + 10_000, signal: new AbortController().signal });
    const t0 = performance.now();
    const rs = await Promise.allSettled([q.add(call('a')), q.add(call('b'))]);
    const took = performance.now() - t0;
    expect(took).to.be.at.least(4);
    expect(took).to.be.below(100);
    expect(rs.map((r) => (r as PromiseRejectedResult).reason)).to.deep.equal([down, down]);
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

  it('§8 Zero-config first-request wait — up to 30 s, polling every 200 ms', () => {
    expect(FIRST_REQUEST_WAIT_MS).to.equal(30_000);
    expect(FIRST_REQUEST_POLL_MS).to.equal(200);
  });

  it('§8 Zero-config bootstrap retry backoff — factor 1.5, from 3 s up to 130 s', () => {
    expect(BOOTSTRAP_BACKOFF_FACTOR).to.equal(1.5);
    expect(BOOTSTRAP_FIRST_RETRY_MS).to.equal(3000);
    expect(BOOTSTRAP_MAX_RETRY_MS).to.equal(130_000);
    // The waits the bootstrapper uses after the 1st, 2nd, ... failure: ×1.5 from 3 s, capped.
    const waits = Array.from({ length: 12 }, (_, i) => Math.round(bootstrapRetryDelayMs(i + 1)));
    expect(waits).to.deep.equal([3000, 4500, 6750, 10125, 15188, 22781, 34172, 51258, 76887, 115330, 130000, 130000]);
  });

  it('§8 Zero-config live chain probe timeout — 10 s', () => {
    expect(HYPER_PROBE_TIMEOUT_MS).to.equal(10_000);
  });

  it('§8 Catalog recheck interval — 1 h', async () => {
    expect(DEFAULT_RECHECK_INTERVAL_MS).to.equal(3_600_000);
    // By behaviour: the catalog is fetched once, served from memory until an hour has passed, then fetched again.
    let fetches = 0;
    const server = createServer((_req, res) => {
      fetches++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"1":{"endpoints":["https://rpc.example/"]}}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const clock = FakeTimers.install({ toFake: ['Date'], now: 1_000_000 });
    try {
      const source = new CatalogSource(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, DEFAULT_RECHECK_INTERVAL_MS);
      const quiet = createLogger('silent');
      expect((await source.get(quiet))?.get(1)).to.deep.equal(['https://rpc.example/']);
      clock.tick(3_600_000 - 1);
      await source.get(quiet);
      expect(fetches, 'within the hour: from memory').to.equal(1);
      clock.tick(1);
      await source.get(quiet);
      expect(fetches, 'an hour later: fetched again').to.equal(2);
    } finally {
      clock.uninstall();
      server.close();
    }
  });
});
