/**
 * The §6 metrics by value: each driven by a scenario on a real server and
 * asserted as a delta (N calls, +N), not only by name. Fake upstreams; the response cache is off
 * so every call reaches an upstream.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const PATH = '/main/evm/1';

/** Sum of the samples of a metric whose labels include every given label (Prometheus text format). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const open = line.indexOf('{');
    const labelText = open === name.length ? line.slice(open + 1, line.lastIndexOf('}')) : '';
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe('e2e: metrics by value (spec §6)', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let svc: SvcHandle;
  const scrape = async () => (await fetch(svc.metricsUrl as string)).text();
  const call = (method: string, params: unknown[], id = 1) => svc.post(PATH, { jsonrpc: '2.0', id, method, params });

  before(async () => {
    a = await startFaultServer({ chainId: 1 });
    svc = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: true, port: 0 },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 1 }, selectionPolicy: { evalInterval: '100ms' } }],
          upstreams: [{ id: 'a', endpoint: a.url, evm: { chainId: 1 } }],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await a?.close();
  });

  it('N calls: svc_network_request_received_total, svc_network_request_duration_seconds, svc_upstream_request_total and its duration histogram each +N', async () => {
    const before = await scrape();
    const N = 5;
    for (let i = 0; i < N; i++) expect((await call('eth_getBalance', [`0x${(i + 1).toString(16).padStart(40, '0')}`, '0x10'])).status).to.equal(200);
    const after = await scrape();
    const by = { project: 'main', network: 'evm:1', category: 'eth_getBalance' };
    const delta = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    expect(delta('svc_network_request_received_total', by)).to.equal(N);
    expect(delta('svc_network_request_duration_seconds_count', by)).to.equal(N);
    expect(delta('svc_upstream_request_total', { ...by, upstream: 'a' })).to.equal(N);
    expect(delta('svc_upstream_request_duration_seconds_count', { ...by, upstream: 'a' })).to.equal(N);
    // The histogram's +Inf bucket counts the same calls, with a finality label that is never empty.
    expect(delta('svc_network_request_duration_seconds_bucket', { ...by, le: '+Inf' })).to.equal(N);
    expect(after).to.match(/^svc_network_request_duration_seconds_count\{[^}]*category="eth_getBalance"[^}]*finality="[a-z]+"[^}]*\} \d+$/m);
  });

  it('an upstream error: svc_upstream_request_errors_total{error} +1', async () => {
    const before = await scrape();
    a.script({ kind: 'status', status: 500 });
    const r = await call('eth_getCode', ['0x0000000000000000000000000000000000000009', '0x10']);
    expect(r.status).to.be.oneOf([200, 500, 502, 503]);
    const after = await scrape();
    const labels = { upstream: 'a', category: 'eth_getCode', error: 'ErrEndpointServerSideException' };
    expect(sample(after, 'svc_upstream_request_errors_total', labels) - sample(before, 'svc_upstream_request_errors_total', labels)).to.be.at.least(1);
  });

  it('4 identical concurrent calls: one upstream request, svc_network_multiplexed_request_total +3', async () => {
    const before = await scrape();
    a.setDefault({ kind: 'delay', ms: 200 });
    try {
      const rs = await Promise.all([1, 2, 3, 4].map((id) => call('eth_getStorageAt', ['0x0000000000000000000000000000000000000007', '0x0', '0x10'], id)));
      for (const r of rs) expect(r.status).to.equal(200);
    } finally {
      a.setDefault({ kind: 'ok' });
    }
    const after = await scrape();
    const labels = { network: 'evm:1', category: 'eth_getStorageAt' };
    expect(sample(after, 'svc_network_multiplexed_request_total', labels) - sample(before, 'svc_network_multiplexed_request_total', labels)).to.equal(3);
    expect(sample(after, 'svc_upstream_request_total', labels) - sample(before, 'svc_upstream_request_total', labels)).to.equal(1);
  });

  it('selection: svc_selection_score per upstream and svc_selection_excluded_seconds 0 while selectable', async () => {
    let text = '';
    await waitFor(async () => (text = await scrape()).includes('svc_selection_score{'));
    expect(text).to.match(/^svc_selection_score\{project="main",network="evm:1",method="\*",upstream="a"\} [0-9.e+-]+$/m);
    expect(sample(text, 'svc_selection_excluded_seconds', { upstream: 'a' })).to.equal(0);
  });

  it('cordons (the tracker the admin cordon methods will drive): gauge 1 then 0, one event per real edge, the duration on uncordon', async () => {
    const health = svc.proxy.projects.get('main')!.health;
    const before = await scrape();
    const ev = (t: string, action: string) => sample(t, 'svc_upstream_cordon_event_total', { upstream: 'a', action, network: 'evm:1' });
    expect(health.cordon('a', '*', 'maintenance')).to.equal(true);
    expect(health.cordon('a', '*', 'maintenance')).to.equal(false); // not an edge
    const on = await scrape();
    expect(sample(on, 'svc_upstream_cordoned', { upstream: 'a', method: '*', reason: 'maintenance' })).to.equal(1);
    expect(ev(on, 'cordon') - ev(before, 'cordon')).to.equal(1);
    health.uncordon('a', '*');
    health.uncordon('a', '*'); // not an edge
    const off = await scrape();
    expect(sample(off, 'svc_upstream_cordoned', { upstream: 'a', method: '*', reason: 'maintenance' })).to.equal(0);
    expect(ev(off, 'uncordon') - ev(before, 'uncordon')).to.equal(1);
    expect(
      sample(off, 'svc_upstream_cordon_duration_seconds_count', { upstream: 'a' }) -
        sample(before, 'svc_upstream_cordon_duration_seconds_count', { upstream: 'a' }),
    ).to.equal(1);
  });

  it('process metrics (prom-client defaults): CPU seconds and resident memory', async () => {
    const text = await scrape();
    expect(sample(text, 'process_cpu_user_seconds_total')).to.be.greaterThan(0);
    expect(sample(text, 'process_resident_memory_bytes')).to.be.greaterThan(0);
  });

  describe('failsafe, chain state and cache metrics', () => {
    let slow: FaultServer;
    let fast: FaultServer;
    let s2: SvcHandle;
    const scrape2 = async () => (await fetch(s2.metricsUrl as string)).text();
    before(async () => {
      // The state pollers (every 100 ms) must not take the 500s scripted for the test's own calls.
      const scriptMethods = ['eth_getCode', 'eth_getStorageAt'];
      slow = await startFaultServer({ chainId: 1, scriptMethods });
      fast = await startFaultServer({ chainId: 1, scriptMethods });
      s2 = await startSvc({
        metrics: { enabled: true, port: 0 },
        projects: [
          {
            id: 'main',
            networks: [
              {
                architecture: 'evm',
                evm: { chainId: 1 },
                failsafe: [
                  { matchMethod: 'eth_getCode', retry: { maxAttempts: 2 } },
                  { matchMethod: 'eth_getStorageAt', hedge: { delay: '50ms', maxCount: 1 } },
                ],
              },
            ],
            upstreamDefaults: { evm: { statePollerInterval: '100ms' } },
            upstreams: [
              { id: 'slow', endpoint: slow.url, evm: { chainId: 1 } },
              { id: 'fast', endpoint: fast.url, evm: { chainId: 1 } },
            ],
          },
        ],
      });
    });
    after(async () => {
      await s2?.close();
      await slow?.close();
      await fast?.close();
    });
    const by = (category: string) => ({ project: 'main', network: 'evm:1', category });

    it('a network retry round: svc_network_request_retries_total +1; a hedge leg: svc_network_hedges_total +1', async () => {
      const before = await scrape2();
      slow.script({ kind: 'status', status: 500 });
      fast.script({ kind: 'status', status: 500 });
      const r = await s2.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_getCode', params: ['0x0000000000000000000000000000000000000009', '0x10'] });
      expect(r.json.error).to.equal(undefined);
      slow.setDefault({ kind: 'delay', ms: 400 });
      try {
        const h = await s2.post(PATH, {
          jsonrpc: '2.0',
          id: 2,
          method: 'eth_getStorageAt',
          params: ['0x0000000000000000000000000000000000000009', '0x0', '0x10'],
        });
        expect(h.json.error).to.equal(undefined);
      } finally {
        slow.setDefault({ kind: 'ok' });
      }
      const after = await scrape2();
      expect(
        sample(after, 'svc_network_request_retries_total', by('eth_getCode')) - sample(before, 'svc_network_request_retries_total', by('eth_getCode')),
      ).to.equal(1);
      expect(sample(after, 'svc_network_hedges_total', by('eth_getStorageAt')) - sample(before, 'svc_network_hedges_total', by('eth_getStorageAt'))).to.equal(
        1,
      );
    });

    it('the state poller gauges: latest and finalized block, zero lags, not syncing', async () => {
      let text = '';
      await waitFor(async () => sample((text = await scrape2()), 'svc_upstream_latest_block', { upstream: 'fast' }) > 0);
      const up = { project: 'main', network: 'evm:1', upstream: 'fast' };
      // The fake upstream's head and its `finalized` tag are both block 0x10.
      expect(sample(text, 'svc_upstream_latest_block', up)).to.equal(16);
      expect(sample(text, 'svc_upstream_finalized_block', up)).to.equal(16);
      expect(sample(text, 'svc_upstream_block_head_lag', up)).to.equal(0);
      expect(sample(text, 'svc_upstream_finalization_lag', up)).to.equal(0);
      expect(sample(text, 'svc_upstream_syncing', up)).to.equal(0);
    });

    it('the cache: a miss and a write, then a hit (svc_cache_* +1 each)', async () => {
      const before = await scrape2();
      const body = { jsonrpc: '2.0', id: 3, method: 'eth_getBlockByNumber', params: ['0x5', false] };
      await s2.post(PATH, body);
      await waitFor(
        async () =>
          sample(await scrape2(), 'svc_cache_set_success_total', { category: 'eth_getBlockByNumber' }) >
          sample(before, 'svc_cache_set_success_total', { category: 'eth_getBlockByNumber' }),
      );
      const hit = await s2.post(PATH, body);
      expect(hit.headers['x-svc-cache']).to.equal('HIT');
      const after = await scrape2();
      const d = (name: string) => sample(after, name, { category: 'eth_getBlockByNumber' }) - sample(before, name, { category: 'eth_getBlockByNumber' });
      expect(d('svc_cache_get_miss_total')).to.equal(1);
      expect(d('svc_cache_set_success_total')).to.equal(1);
      expect(d('svc_cache_get_hit_total')).to.equal(1);
    });
  });
});
