/**
 * eRPC's mirror prober (probeExcluded without reAdmitAfter): which calls are copied to an
 * excluded upstream (reads only), the sample rate and its minSamples floor per window, the
 * per-upstream bound of probes in flight, the timeout, and the pass-through while no probing
 * was asked for. A fake host records the copies; the clock and the dice are injected.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { CallContext, Network, PluginHost, RpcResult, Upstream } from 'svc-proxy/plugin';
import { createProbeCounter, ExcludedProber, probeable } from '../../../plugins/selection/prober.ts';
import type { ProbeSettings } from '../../../plugins/selection/memory.ts';

interface Sent {
  upstream: string;
  method: string;
  timeoutMs: number;
  settle: (ok: boolean) => void;
}

function fixture(opts: { random?: () => number; now?: () => number } = {}) {
  const sent: Sent[] = [];
  const registry = new Registry();
  const upstreams = [{ id: 'good' }, { id: 'bad' }, { id: 'worse' }] as unknown as Upstream[];
  const network = { id: 'evm:1', project: { id: 'main' }, upstreams } as unknown as Network;
  const host = {
    metrics: registry,
    isClosed: false,
    logger: pino({ level: 'silent' }),
    config: { server: { maxTimeoutMs: 30_000 } },
    upstreamCall: (_n: Network, u: Upstream, method: string, _p: unknown, timeoutMs: number) =>
      new Promise<RpcResult>((resolve, reject) =>
        sent.push({ upstream: u.id, method, timeoutMs, settle: (ok) => (ok ? resolve({ result: '0x1' } as unknown as RpcResult) : reject(new Error('down'))) }),
      ),
  } as unknown as PluginHost;
  const prober = new ExcludedProber(host, network, createProbeCounter(host), opts.random, opts.now);
  const probes = async () => {
    const m = await registry.getSingleMetric('svc_selection_probes_total')!.get();
    return Object.fromEntries(m.values.map((v) => [`${v.labels.upstream}/${v.labels.outcome}`, v.value]));
  };
  return { sent, prober, upstreams, probes };
}

const settings = (o: Partial<ProbeSettings> = {}): ProbeSettings => ({
  sampleRate: 1,
  minSamples: 0,
  minSamplesWindowMs: 60_000,
  maxConcurrent: 4,
  timeoutMs: 10_000,
  ...o,
});

/** Lets the copies scheduled with setImmediate start. */
const turn = () => new Promise<void>((r) => setImmediate(r));

describe('selection: probeExcluded mirror prober', () => {
  it('copies reads only: never a write, signature, subscription, bundle, filter or node administration', () => {
    for (const m of [
      'eth_call',
      'eth_getBalance',
      'eth_blockNumber',
      'eth_getLogs',
      'net_version',
      'web3_clientVersion',
      'debug_traceTransaction',
      'trace_block',
    ])
      expect(probeable(m), m).to.equal(true);
    for (const m of [
      'eth_sendRawTransaction',
      'eth_sendTransaction',
      'eth_sendBundle',
      'eth_callBundle',
      'eth_sendPrivateTransaction',
      'eth_cancelPrivateTransaction',
      'eth_sendUserOperation',
      'eth_sign',
      'eth_signTypedData_v4',
      'personal_sign',
      'personal_sendTransaction',
      'eth_subscribe',
      'eth_unsubscribe',
      'eth_newFilter',
      'eth_getFilterChanges',
      'eth_uninstallFilter',
      'eth_submitWork',
      'anvil_mine',
      'evm_snapshot',
      'admin_addPeer',
      'debug_setHead',
      'vendor_custom',
    ])
      expect(probeable(m), m).to.equal(false);
  });

  it('sends one copy per excluded upstream of an answered client call, bounded by its timeout; internal calls and idle probers pass through', async () => {
    const { sent, prober, upstreams, probes } = fixture();
    const inner = async () => ({ result: '0x2' }) as unknown as RpcResult;
    const handler = prober.wrap(inner);
    const call = (method: string, internal = false) => handler({ internal, request: { method, params: [] } } as unknown as CallContext);
    await call('eth_call');
    await turn();
    expect(sent, 'no settings yet').to.have.length(0);
    prober.update(settings({ timeoutMs: 2_000 }), [upstreams[1]!, upstreams[2]!]);
    expect(prober.active).to.equal(true);
    await call('eth_call', true);
    await call('eth_sendRawTransaction');
    await turn();
    expect(sent).to.have.length(0);
    expect(await call('eth_call')).to.deep.equal({ result: '0x2' });
    await turn();
    expect(sent.map((s) => `${s.upstream}:${s.method}:${s.timeoutMs}`)).to.deep.equal(['bad:eth_call:2000', 'worse:eth_call:2000']);
    sent[0]!.settle(true);
    sent[1]!.settle(false);
    await turn();
    expect(await probes()).to.deep.equal({ 'bad/ok': 1, 'worse/error': 1 });
    prober.update(undefined, [upstreams[1]!]);
    expect(prober.active).to.equal(false);
  });

  it('samples at sampleRate, except while an upstream got fewer than minSamples probes in the current window', async () => {
    let now = 120_000;
    let dice = 0.5;
    const { sent, prober, upstreams } = fixture({ random: () => dice, now: () => now });
    prober.update(settings({ sampleRate: 0.1, minSamples: 3, minSamplesWindowMs: 60_000 }), [upstreams[1]!]);
    for (let i = 0; i < 5; i++) prober.offer('eth_call', []);
    await turn();
    expect(sent, 'the floor: 3 probes in the window, then the dice (0.5 >= 0.1)').to.have.length(3);
    dice = 0.05;
    prober.offer('eth_call', []);
    await turn();
    expect(sent).to.have.length(4);
    for (const s of sent) s.settle(true);
    await turn();
    dice = 0.5;
    now += 60_000;
    for (let i = 0; i < 5; i++) prober.offer('eth_call', []);
    await turn();
    expect(sent, 'a new window: the floor again').to.have.length(7);
    for (const s of sent.slice(4)) s.settle(true);
  });

  it("an upstream with routing.probe: off gets no probe (eRPC's opt-out)", async () => {
    const { sent, prober, upstreams } = fixture();
    const optedOut = { id: 'quiet', config: { settings: { routing: { probe: 'off' } } } } as unknown as Upstream;
    upstreams.push(optedOut);
    prober.update(settings(), [optedOut, upstreams[1]!]);
    prober.offer('eth_call', []);
    await turn();
    expect(sent.map((s) => s.upstream)).to.deep.equal(['bad']);
    sent[0]!.settle(true);
  });

  it('at most maxConcurrent probes in flight per upstream; one more is counted busy, a slot frees when a probe settles', async () => {
    const { sent, prober, upstreams, probes } = fixture();
    prober.update(settings({ maxConcurrent: 2 }), [upstreams[1]!]);
    for (let i = 0; i < 5; i++) prober.offer('eth_getBalance', []);
    await turn();
    expect(sent).to.have.length(2);
    expect(await probes()).to.deep.equal({ 'bad/busy': 3 });
    sent[0]!.settle(true);
    await turn();
    prober.offer('eth_getBalance', []);
    await turn();
    expect(sent).to.have.length(3);
    prober.stop();
    prober.offer('eth_getBalance', []);
    await turn();
    expect(sent, 'stopped').to.have.length(3);
    for (const s of sent.slice(1)) s.settle(true);
  });

  it("under a narrower evalScope, a call a scope served is copied to that scope's exclusions; other calls to the network's", async () => {
    const { sent, prober, upstreams } = fixture();
    const [, bad, worse] = upstreams;
    const scope = prober.scope('eth_call\u0000unknown');
    expect(prober.active).to.equal(false);
    scope.update(settings(), [worse!]);
    expect(prober.active).to.equal(true);
    prober.offer('eth_call', [], 'eth_call\u0000unknown');
    // The network's own evaluation excluded nothing: a call it served gets no copy.
    prober.offer('eth_getBalance', []);
    // A scope that excluded nothing (or asked for no probes) copies nothing of its calls.
    prober.offer('eth_getLogs', [], 'eth_getLogs\u0000unknown');
    prober.update(settings(), [bad!]);
    prober.offer('eth_getBalance', []);
    await turn();
    expect(sent.map((x) => `${x.method}>${x.upstream}`)).to.deep.equal(['eth_call>worse', 'eth_getBalance>bad']);
    // A dropped scope's calls are copied no more.
    scope.stop();
    prober.offer('eth_call', [], 'eth_call\u0000unknown');
    await turn();
    expect(sent).to.have.length(2);
    for (const x of sent) x.settle(true);
  });
});
