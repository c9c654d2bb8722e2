/**
 * The dashboard and alert rules of deploy/ against a real Prometheus (Debian's `prometheus`
 * package): promtool accepts the rules; a Prometheus scraping svc (in front of two anvil nodes)
 * every second answers every dashboard query and every alert expression without error, with data
 * wherever the query's metrics exist; SvcUpstreamDown fires once an upstream is killed; last,
 * SvcDrainStuck fires, from svc's own lifecycle metrics, for a second svc process that got
 * SIGTERM and keeps draining (long waitBeforeShutdown) with a call in flight.
 */
import { expect } from 'chai';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { promtoolCheck, startPrometheus, type PrometheusHandle } from '../helpers/prometheus.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
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
  // The SvcDrainStuck test's own svc process, its hanging upstream and temp dir.
  let draining: SvcProcess | undefined;
  let hanging: FaultServer | undefined;
  let dir: string | undefined;
  const call = (method: string, params: unknown[], id = 1) => svc.post(PATH, { jsonrpc: '2.0', id, method, params });

  before(async () => {
    rules = (parse(await readFile(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
    // The test copy: `for:` and range windows shortened so a killed upstream fires within seconds,
    // and SvcDrainStuck's 60-s drain threshold cut to 3 s.
    const testRules = (await readFile(RULES, 'utf8'))
      .replace(/for: \S+/g, 'for: 0s')
      .replace(/\[(1m|5m)\]/g, '[5s]')
      .replace(/(\(svc_server_drain_started_timestamp_seconds\) > )60\b/, (_m, head: string) => `${head}3`);
    expect(testRules, 'the SvcDrainStuck threshold is shortened').to.include('(svc_server_drain_started_timestamp_seconds) > 3)');
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
    // The draining process would wait out its 10-min waitBeforeShutdown: end it at once.
    if (draining) {
      try {
        process.kill(draining.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await draining.stop();
    }
    await hanging?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    await prom?.stop();
    await svc?.close();
    await a?.stop();
    await b?.stop();
  });

  it('promtool check rules accepts deploy/prometheus/svc-alerts.yml, which has every alert of the operator kit', async () => {
    expect(await promtoolCheck('rules', RULES)).to.include('SUCCESS');
    expect(rules.map((r) => r.alert)).to.include.members([
      'SvcUpstreamDown',
      'SvcUpstreamErrorRatioHigh',
      'SvcUpstreamCordoned',
      'SvcStorageBreakerOpen',
      'SvcUpstreamHeadLag',
      'SvcCacheTierDegraded',
      'SvcDrainStuck',
    ]);
  });

  it('promtool check config accepts deploy/prometheus/prometheus.yml: a job scraping metrics.port at /metrics, with the alert rules loaded', async () => {
    const file = fileURLToPath(new URL('../../deploy/prometheus/prometheus.yml', import.meta.url));
    const out = await promtoolCheck('config', file);
    expect(out).to.match(/SUCCESS: 1 rule files found/);
    expect(out).to.match(/SUCCESS: 7 rules found/);
    const cfg = parse(await readFile(file, 'utf8')) as {
      scrape_configs: Array<{ job_name: string; metrics_path: string; static_configs: Array<{ targets: string[] }> }>;
    };
    const job = cfg.scrape_configs.find((j) => j.job_name === 'svc');
    expect(job?.metrics_path).to.equal('/metrics');
    expect(job?.static_configs[0]?.targets).to.deep.equal(['127.0.0.1:4001']);
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
    await waitFor(
      async () =>
        (await prom.query('sum(svc_network_request_received_total)')).length > 0 &&
        (await prom.query('count_over_time(svc_network_request_received_total[10s])')).every((x) => Number(x.value[1]) >= 3),
      8000,
    );
    const scraped = await (await fetch(svc.metricsUrl as string)).text();
    const present = new Set(
      scraped
        .split('\n')
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => l.split(/[{ ]/)[0]),
    );

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
      } else
        needFault.push(
          `${title}: ${metricsOf(expr)
            .filter((m) => !present.has(m))
            .join(', ')}`,
        );
    }
    console.log(
      `      dashboard queries with data: ${withData.length}/${queries.length}; needing a fault or feature to have data:\n        ${needFault.join('\n        ')}`,
    );
    // Traffic, latency, cache, selection, chain state and process panels all have data here.
    expect(withData.length).to.be.at.least(20);
    for (const title of [
      'Requests/s by network',
      'Network latency p50/p95/p99',
      'Upstream latency p50/p95/p99',
      'Cache hit ratio by policy',
      'Head lag (blocks)',
      'CPU per process',
      'Lifecycle and in-flight requests',
    ])
      expect(withData).to.include(title);
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
    const byName = await prom.query(
      expand('sum by (error) (rate(svc_upstream_request_errors_total{network=~"$network", upstream=~"$upstream"}[$__rate_interval]))'),
    );
    expect(byName.map((x) => x.metric.error)).to.include('ErrEndpointServerSideException');
    // Calls still succeed through the other upstream.
    expect((await call('eth_chainId', [])).json.result).to.equal('0x7a69');
  });

  // Last: it adds a target and drains a process, which the tests above must not see.
  it('SvcDrainStuck fires, from the lifecycle metrics svc exports, for an svc that got SIGTERM and keeps draining, naming its in-flight requests', async function () {
    this.timeout(60_000);
    await ensureBuilt();
    hanging = await startFaultServer();
    dir = await mkdtemp(join(tmpdir(), 'svc-prom-drain-'));
    draining = await spawnSvc(dir, 'draining', {
      logLevel: 'warn',
      metrics: { enabled: true },
      // A drain far longer than the (shortened) threshold: the process stays in `draining`.
      server: { waitBeforeShutdown: '10m', waitAfterShutdown: '10s' },
      projects: [{ id: 'drain', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [{ id: 'slow', endpoint: hanging.url }] }],
    });
    const instance = new URL(draining.metricsUrl).host;
    const of = `{instance="${instance}"}`;
    const value = async (expr: string) => {
      const r = await prom.query(expr);
      return r.length === 1 ? Number(r[0]?.value[1]) : undefined;
    };
    const state = async () => (await prom.query(`svc_server_lifecycle_state${of} == 1`)).map((x) => x.metric.state);
    await prom.addTarget(instance);

    // Serving: the state gauge says so and the drain start is 0, so the alert stays silent.
    await waitFor(async () => (await state()).join() === 'serving', 8000);
    expect(await value(`svc_server_drain_started_timestamp_seconds${of}`)).to.equal(0);
    expect(await value(`count(svc_server_lifecycle_state${of})`), 'one series per state').to.equal(4);

    // One call held in flight: the upstream stops answering (eth_call's attempt timeout is 30 s).
    hanging.setDefault({ kind: 'hang' });
    const held = fetch(`${draining.url}/drain/evm/31337`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ to: `0x${'11'.repeat(20)}`, data: '0x' }, 'latest'] }),
    }).catch(() => undefined);
    await waitFor(async () => (await value(`svc_server_inflight_requests${of}`)) === 1, 8000);

    const signalledAt = Date.now() / 1000;
    process.kill(draining.pid, 'SIGTERM');
    // The metrics listener keeps answering while draining: the scrape sees the new state and start.
    await waitFor(async () => (await state()).join() === 'draining', 8000);
    expect(await value(`svc_server_drain_started_timestamp_seconds${of}`)).to.be.within(signalledAt - 1, signalledAt + 3);
    expect(await value(`svc_server_inflight_requests${of}`)).to.equal(1);

    await waitFor(async () => (await prom.alerts()).some((x) => x.labels.alertname === 'SvcDrainStuck' && x.state === 'firing'), 15_000);
    const firing = (await prom.alerts()).filter((x) => x.labels.alertname === 'SvcDrainStuck');
    // Only the draining process: the svc under test serves (its drain start is 0).
    expect(firing.map((x) => x.labels.instance)).to.deep.equal([instance]);
    expect(firing[0]?.labels).to.include({ severity: 'warning' });
    expect(firing[0]?.annotations.summary).to.equal(`svc ${instance} does not finish draining`);
    expect(firing[0]?.annotations.description).to.match(/began draining \d+(\.\d+)?s ago and still runs: state draining, 1 HTTP requests in flight\./);
    expect(Number(firing[0]?.value)).to.be.above(3);
    void held;
  });
});
