/**
 * eRPC's metrics options on a real /metrics scrape: `histogramBuckets` (the latency histograms'
 * buckets), `histogramDropLabels` with a `histogramLabelOverrides` entry (histograms lose the
 * labels, series summed; counters keep them), and `errorLabelMode: verbose` (the error label
 * carries the cleaned upstream message). Two anvil nodes serve one network; a scripted fake
 * upstream on another network supplies the upstream error.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

/** Every sample line of a metric (`name{labels} value`), as [labels text, value]. */
function lines(text: string, name: string): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    out.push([line.slice(name.length + 1, line.lastIndexOf('}')), Number(line.slice(line.lastIndexOf(' ') + 1))]);
  }
  return out;
}

describe('e2e: metrics histogram options and error labels (eRPC keys)', function () {
  this.timeout(20_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let flaky: FaultServer;
  let svc: SvcHandle;
  const scrape = async () => (await fetch(svc.metricsUrl as string)).text();

  before(async () => {
    [a, b, flaky] = await Promise.all([startAnvil(), startAnvil(), startFaultServer({ chainId: 1 })]);
    svc = await startSvc({
      ...NO_CACHE,
      metrics: {
        enabled: true,
        port: 0,
        errorLabelMode: 'verbose',
        histogramBuckets: '0.05,0.5,5,30',
        histogramDropLabels: ['upstream', 'vendor', 'finality'],
        histogramLabelOverrides: { network_request_duration_seconds: ['finality'] },
      },
      projects: [
        {
          id: 'main',
          upstreams: [
            { id: 'node-a', endpoint: a.url, evm: { chainId: 31337 } },
            { id: 'node-b', endpoint: b.url, evm: { chainId: 31337 } },
            { id: 'flaky', endpoint: flaky.url, evm: { chainId: 1 } },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([a?.stop(), b?.stop(), flaky?.close()]);
  });

  it('histogramBuckets: the latency histograms have exactly the configured buckets', async () => {
    // Three calls pinned to each node, so both have series to merge.
    for (let i = 0; i < 6; i++) {
      const body = { jsonrpc: '2.0', id: i, method: 'eth_getBalance', params: [`0x${(i + 1).toString(16).padStart(40, '0')}`, 'latest'] };
      const r = await svc.post('/main/evm/31337', body, { 'X-SVC-Use-Upstream': i % 2 ? 'node-b' : 'node-a' });
      expect(r.status).to.equal(200);
    }
    const text = await scrape();
    for (const name of ['svc_upstream_request_duration_seconds_bucket', 'svc_network_request_duration_seconds_bucket']) {
      const les = new Set(lines(text, name).map(([l]) => /le="([^"]+)"/.exec(l)?.[1]));
      expect([...les], name).to.deep.equal(['0.05', '0.5', '5', '30', '+Inf']);
    }
  });

  it("histogramDropLabels: histograms lose upstream/vendor/finality and the two nodes' series are summed; counters keep them; the override keeps finality on network_request_duration_seconds", async () => {
    const text = await scrape();
    const up = lines(text, 'svc_upstream_request_duration_seconds_count').filter(([l]) => l.includes('category="eth_getBalance"'));
    expect(up).to.have.length(1);
    expect(up[0]![0]).to.equal('project="main",network="evm:31337",category="eth_getBalance"');
    expect(up[0]![1]).to.equal(6);
    // Every histogram line (the health plugin's cordon durations included) is free of the dropped labels.
    expect(text).to.not.match(/^svc_[a-z_]+_seconds_(bucket|sum|count)\{[^}]*(upstream|vendor)="/m);
    const net = lines(text, 'svc_network_request_duration_seconds_count').filter(([l]) => l.includes('category="eth_getBalance"'));
    expect(net).to.have.length(1);
    expect(net[0]![0]).to.match(/^project="main",network="evm:31337",category="eth_getBalance",finality="[a-z]+"$/);
    // The counter still tells the two nodes apart.
    const byNode = lines(text, 'svc_upstream_request_total').filter(([l]) => l.includes('category="eth_getBalance"'));
    expect(byNode.map(([l]) => /upstream="([^"]+)"/.exec(l)?.[1]).sort()).to.deep.equal(['node-a', 'node-b']);
    expect(byNode.reduce((s, [, v]) => s + v, 0)).to.equal(6);
  });

  it('errorLabelMode verbose: the error label is the name and the upstream message, hashes, addresses and numbers masked', async () => {
    flaky.script({ kind: 'status', status: 503, body: 'backend 10.2.3.4 overloaded at block 0xdeadbeef, retry after 1500 ms' });
    await svc.post('/main/evm/1', { jsonrpc: '2.0', id: 1, method: 'eth_getCode', params: ['0x0000000000000000000000000000000000000009', '0x10'] });
    const errors = lines(await scrape(), 'svc_upstream_request_errors_total').filter(([l]) => l.includes('upstream="flaky"'));
    expect(errors).to.have.length.at.least(1);
    const label = /error="([^"]+)"/.exec(errors[0]![0])?.[1] ?? '';
    expect(label).to.equal('ErrEndpointServerSideException backend X.X.X.X overloaded at block 0xREDACTED retry after XX ms');
  });
});
