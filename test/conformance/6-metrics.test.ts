/**
 * Conformance, spec §6 (events: Prometheus metrics): each metric row read from /metrics of a
 * real svc in front of real anvil (and a slow scripted upstream for multiplexing).
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

const SECRET = 'metrics-secret-0123456789abcdef';

describe('conformance: §6 metrics', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  let slow: FaultServer;
  before(async () => {
    slow = await startFaultServer();
    slow.setDefault({ kind: 'delay', ms: 150, then: { kind: 'ok', result: '0x2a' } });
    f = await startCoreFixture({}, {}, (anvil) => [
      {
        id: 'sec',
        networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
        upstreams: [{ id: 'u', endpoint: anvil.url, evm: { chainId: anvil.chainId } }],
        auth: { strategies: [{ type: 'secret', secret: { value: SECRET, id: 'ops' } }] },
      },
      {
        id: 'slow',
        networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
        upstreams: [{ id: 's', endpoint: slow.url, evm: { chainId: anvil.chainId, statePollerInterval: 0 } }],
      },
    ]);
  });
  after(async () => {
    await f?.close();
    await slow?.close();
  });
  const net = () => `evm:${f.anvil.chainId}`;
  const cordon = (method = '*') => f.admin('svc_cordonUpstream', [{ projectId: 'main', upstream: 'a', method, reason: 'metrics' }]);
  const uncordon = (method = '*') => f.admin('svc_uncordonUpstream', [{ projectId: 'main', upstream: 'a', method }]);
  const count = async (name: string, labels: Record<string, string>) => (await f.metric(name, labels)) ?? 0;
  /** Sum over every series of `name` carrying the given labels. */
  const total = async (name: string, labels: Record<string, string>) =>
    (await f.scrape())
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

  it('§6 svc_upstream_cordoned — gauge {project, upstream, method, reason}: 1 while cordoned, else 0', async () => {
    await cordon('eth_call');
    expect(await f.metric('svc_upstream_cordoned', { project: 'main', upstream: 'a', method: 'eth_call', reason: 'metrics' })).to.equal(1);
    await uncordon('eth_call');
    expect(await f.metric('svc_upstream_cordoned', { project: 'main', upstream: 'a', method: 'eth_call', reason: 'metrics' })).to.equal(0);
  });

  it('§6 svc_upstream_cordon_event_total — counter {project, network, upstream, action}: only real off-to-on / on-to-off edges', async () => {
    const labels = (action: string) => ({ project: 'main', network: net(), upstream: 'a', action });
    const [c0, u0] = [await count('svc_upstream_cordon_event_total', labels('cordon')), await count('svc_upstream_cordon_event_total', labels('uncordon'))];
    await cordon();
    await cordon();
    await uncordon();
    await uncordon();
    expect(await count('svc_upstream_cordon_event_total', labels('cordon'))).to.equal(c0 + 1);
    expect(await count('svc_upstream_cordon_event_total', labels('uncordon'))).to.equal(u0 + 1);
  });

  it('§6 svc_upstream_cordon_duration_seconds — histogram {project, network, upstream}: observed on every uncordon', async () => {
    const labels = { project: 'main', network: net(), upstream: 'a' };
    const n0 = await count('svc_upstream_cordon_duration_seconds_count', labels);
    await cordon();
    await new Promise((r) => setTimeout(r, 50));
    await uncordon();
    expect(await count('svc_upstream_cordon_duration_seconds_count', labels)).to.equal(n0 + 1);
    expect(await count('svc_upstream_cordon_duration_seconds_sum', labels)).to.be.greaterThan(0.04);
  });

  it('§6 svc_selection_excluded_seconds — gauge {upstream}: climbs each evaluation tick while excluded', async () => {
    await cordon();
    try {
      await new Promise((r) => setTimeout(r, 250));
      const first = await count('svc_selection_excluded_seconds', { upstream: 'a' });
      await new Promise((r) => setTimeout(r, 250));
      const second = await count('svc_selection_excluded_seconds', { upstream: 'a' });
      expect(first).to.be.greaterThan(0);
      expect(second).to.be.greaterThan(first);
      expect(await count('svc_selection_excluded_seconds', { upstream: 'b' })).to.equal(0);
    } finally {
      await uncordon();
    }
  });

  it('§6 svc_network_multiplexed_request_total — counter {project, network, category, finality, user, agent_name}: once per follower', async () => {
    const labels = { project: 'slow', network: net(), category: 'eth_getBalance' };
    const n0 = await count('svc_network_multiplexed_request_total', labels);
    const call = (id: number) => f.svc.post(`/slow/evm/${f.anvil.chainId}`, rpc('eth_getBalance', ['0x0000000000000000000000000000000000000001', '0x1'], id));
    const leader = call(0);
    await new Promise((r) => setTimeout(r, 40));
    await Promise.all([leader, call(1), call(2), call(3)]);
    expect(await count('svc_network_multiplexed_request_total', labels)).to.equal(n0 + 3);
    const line = (await f.scrape()).split('\n').find((l) => l.startsWith('svc_network_multiplexed_request_total{') && l.includes('project="slow"')) ?? '';
    for (const l of ['project', 'network', 'category', 'finality', 'user', 'agent_name']) expect(line).to.include(`${l}="`);
  });

  it('§6 svc_upstream_request_total — counter {project, vendor, network, upstream, ...}: +1 per upstream request', async () => {
    const labels = { project: 'main', network: net(), upstream: 'b' };
    const n0 = await count('svc_upstream_request_total', { ...labels, category: 'eth_getCode' });
    for (let i = 0; i < 3; i++) await f.svc.post(`${f.path}?use-upstream=b`, rpc('eth_getCode', [`0x${(i + 1).toString(16).padStart(40, '0')}`, 'latest']));
    expect(await count('svc_upstream_request_total', { ...labels, category: 'eth_getCode' })).to.equal(n0 + 3);
    const line = (await f.scrape()).split('\n').find((l) => l.startsWith('svc_upstream_request_total{') && l.includes('upstream="b"')) ?? '';
    expect(line).to.include('vendor="');
  });

  it('§6 svc_upstream_request_duration_seconds — histogram {project, vendor, network, upstream}: each upstream call', async () => {
    const labels = { project: 'main', network: net(), upstream: 'b', category: 'eth_getCode' };
    const n0 = await total('svc_upstream_request_duration_seconds_count', labels);
    await f.svc.post(`${f.path}?use-upstream=b`, rpc('eth_getCode', ['0x00000000000000000000000000000000000000ff', 'latest']));
    expect(await total('svc_upstream_request_duration_seconds_count', labels)).to.equal(n0 + 1);
    expect((await f.scrape()).split('\n').find((l) => l.startsWith('svc_upstream_request_duration_seconds_count{') && l.includes('upstream="b"'))).to.include(
      'vendor="',
    );
  });

  it('§6 svc_selection_score — gauge {project, network, method, upstream}: a score per upstream', async () => {
    await f.svc.post(f.path, rpc('eth_blockNumber', []));
    const a = await f.metric('svc_selection_score', { project: 'main', network: net(), upstream: 'a' });
    const b = await f.metric('svc_selection_score', { project: 'main', network: net(), upstream: 'b' });
    expect(a).to.be.a('number');
    expect(b).to.be.a('number');
    expect((await f.scrape()).split('\n').find((l) => l.startsWith('svc_selection_score{') && l.includes('upstream="a"'))).to.include('method="');
  });

  it('§6 svc_auth_secret_requests_total — counter {secret_id}: +1 per secret-authenticated request', async () => {
    const n0 = await count('svc_auth_secret_requests_total', { secret_id: 'ops' });
    await f.svc.post(`/sec/evm/${f.anvil.chainId}?secret=${SECRET}`, rpc('eth_blockNumber', []));
    await f.svc.post(`/sec/evm/${f.anvil.chainId}`, rpc('eth_blockNumber', []), { 'x-svc-secret-token': SECRET });
    expect(await count('svc_auth_secret_requests_total', { secret_id: 'ops' })).to.equal(n0 + 2);
    expect(await f.scrape()).not.to.include(SECRET);
  });
});
