/**
 * The dashboard and alert rules of deploy/ against a real Prometheus (Debian's `prometheus`
 * package): promtool accepts the rules; a Prometheus scraping svc (in front of two anvil nodes)
 * every second answers every dashboard query and every alert expression without error, with data
 * wherever the query's metrics exist; SvcUpstreamDown fires once an upstream is killed.
 */
import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { promtoolCheckRules, startPrometheus, type PrometheusHandle } from '../helpers/prometheus.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const RULES = fileURLToPath(new URL('../../deploy/prometheus/svc-alerts.yml', import.meta.url));
const DASHBOARD = fileURLToPath(new URL('../../deploy/grafana/svc-dashboard.json', import.meta.url));
const PATH = '/main/evm/31337';

interface Rule {
  alert: string;
  expr: string;
  for?: string;
}

/** Grafana's template variables, as the dashboard's "All" selection expands them. */
function expand(expr: string): string {
  return expr.replaceAll('$__rate_interval', '10s').replaceAll('$network', '.*').replaceAll('$upstream', '.*');
}

/** Metric names a PromQL expression reads (svc's own and prom-client's process defaults). */
function metricsOf(expr: string): string[] {
  return [...expr.matchAll(/\b(?:svc|process|nodejs|kube)_[a-z0-9_]+/g)].map((m) => m[0]);
}

describe('e2e: Grafana dashboard and Prometheus alert rules on a real Prometheus', function () {
  this.timeout(40_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let svc: SvcHandle;
  let prom: PrometheusHandle;
  let rules: Rule[];
  const call = (method: string, params: unknown[], id = 1) => svc.post(PATH, { jsonrpc: '2.0', id, method, params });

  before(async () => {
    rules = (parse(await readFile(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
    // The test copy: `for:` and range windows shortened so a killed upstream fires within seconds.
    const testRules = (await readFile(RULES, 'utf8')).replace(/for: \S+/g, 'for: 0s').replace(/\[(1m|5m)\]/g, '[5s]');
    [a, b] = await Promise.all([startAnvil(), startAnvil()]);
    // anvil's finalized block trails latest by 64: with 120 blocks, 0..56 are finalized (cacheable).
    await Promise.all([a, b].map((n) => n.rpc('anvil_mine', ['0x78'])));
    svc = await startSvc({
      metrics: { enabled: true, port: 0 },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 }, selectionPolicy: { evalInterval: '200ms' } }],
          upstreams: [
            { id: 'a', endpoint: a.url, evm: { statePollerInterval: '500ms' } },
            { id: 'b', endpoint: b.url, evm: { statePollerInterval: '500ms' } },
          ],
        },
      ],
    });
    prom = await startPrometheus({ target: new URL(svc.metricsUrl as string).host, rules: testRules });
  });
  after(async () => {
    await prom?.stop();
    await svc?.close();
    await a?.stop();
    await b?.stop();
  });

  it('promtool check rules accepts deploy/prometheus/svc-alerts.yml, which has every alert of the operator kit', async () => {
    expect(await promtoolCheckRules(RULES)).to.include('SUCCESS');
    expect(rules.map((r) => r.alert)).to.include.members(['SvcUpstreamDown', 'SvcUpstreamErrorRatioHigh', 'SvcUpstreamCordoned', 'SvcStorageBreakerOpen', 'SvcUpstreamHeadLag', 'SvcCacheTierDegraded', 'SvcDrainStuck']);
  });

  it('under load, every dashboard query and alert expression evaluates, with data wherever its metrics exist', async () => {
    const load = async () => {
      for (let i = 0; i < 5; i++) {
        await Promise.all([
          call('eth_blockNumber', []),
          call('eth_chainId', []),
          call('eth_getBalance', [`0x${(i + 1).toString(16).padStart(40, '0')}`, 'latest']),
          call('eth_getBlockByNumber', ['0xa', false]), // finalized: a miss, then cache hits
        ]);
      }
    };
    await waitFor(async () => (await prom.query('svc_upstream_finalized_block > 0')).length === 2, 8000);
    // Load over three seconds so every counter has several 1-s samples inside the 10-s windows.
    for (let s = 0; s < 3; s++) {
      await load();
      await new Promise((r) => setTimeout(r, 1000));
    }
    await waitFor(async () => (await prom.query('sum(svc_network_request_received_total)')).length > 0 && (await prom.query('count_over_time(svc_network_request_received_total[10s])')).every((x) => Number(x.value[1]) >= 3), 8000);
    const scraped = await (await fetch(svc.metricsUrl as string)).text();
    const present = new Set(scraped.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]));

    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, expr: expand(t.expr) })));
    expect(queries.length).to.be.at.least(30);
    const withData: string[] = [];
    const needFault: string[] = [];
    for (const { title, expr } of queries) {
      const result = await prom.query(expr); // throws on a parse or evaluation error
      const metricsExist = metricsOf(expr).every((m) => present.has(m));
      if (metricsExist) {
        expect(result, `${title}: ${expr}`).to.not.be.empty;
        withData.push(title);
      } else needFault.push(`${title}: ${metricsOf(expr).filter((m) => !present.has(m)).join(', ')}`);
    }
    console.log(`      dashboard queries with data: ${withData.length}/${queries.length}; needing a fault or feature to have data:\n        ${needFault.join('\n        ')}`);
    // Traffic, latency, cache, selection, chain state and process panels all have data here.
    expect(withData.length).to.be.at.least(20);
    for (const title of ['Requests/s by network', 'Network latency p50/p95/p99', 'Upstream latency p50/p95/p99', 'Cache hit ratio by policy', 'Head lag (blocks)', 'CPU per process']) expect(withData).to.include(title);
    for (const r of rules) await prom.query(r.expr);
  });

  it('SvcUpstreamDown fires for the upstream that is killed, and only for it', async () => {
    expect((await prom.alerts()).filter((x) => x.labels.alertname === 'SvcUpstreamDown')).to.be.empty;
    await a.stop();
    // The state poller keeps probing the dead upstream every 500 ms; its errors fill the window.
    await waitFor(async () => (await prom.alerts()).some((x) => x.labels.alertname === 'SvcUpstreamDown' && x.state === 'firing'), 15_000);
    const firing = (await prom.alerts()).filter((x) => x.labels.alertname === 'SvcUpstreamDown' && x.state === 'firing');
    expect(firing.map((x) => x.labels.upstream)).to.deep.equal(['a']);
    expect(firing[0].labels).to.include({ project: 'main', network: 'evm:31337', severity: 'critical' });
    // The dashboard's errors-by-name panel now has data, named by the spec's error names.
    const byName = await prom.query(expand('sum by (error) (rate(svc_upstream_request_errors_total{network=~"$network", upstream=~"$upstream"}[$__rate_interval]))'));
    expect(byName.map((x) => x.metric.error)).to.include('ErrEndpointServerSideException');
    // Calls still succeed through the other upstream.
    expect((await call('eth_chainId', [])).json.result).to.equal('0x7a69');
  });
});
