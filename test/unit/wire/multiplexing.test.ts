/**
 * Multiplexing (spec §2.7, §3.4, §4.6) through the plugin's `call` tap with a scripted inner
 * handler: one execution per key while it is in flight, followers' deep copies and the leader's
 * metadata, the follower counter and its labels, the switch, internal calls, params that cannot
 * be hashed, and each participant's own deadline or cancellation.
 */
import { getEventListeners } from 'node:events';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import type { CallContext, ExecutionRecord } from '../../../core/pipeline/context.ts';
import { newExecutionRecord } from '../../../core/pipeline/context.ts';
import { ErrCancelled, ErrEndpointRequestTimeout, ErrInternal } from '../../../core/wire/errors.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import type { CallHandler, Network, PluginHost } from '../../../core/plugin-api.ts';
import { markProvenance } from 'svc-proxy/plugins/multiplex';
import { DeadlineReason } from '../../../core/registry/transport.ts';
import { MULTIPLEX_SERVICE, multiplexPlugin, type MultiplexService } from '../../../plugins/multiplex/index.ts';

interface Gate {
  resolve(v: RpcResult): void;
  reject(e: unknown): void;
  ctx: CallContext;
}

function setUp(settings: Record<string, unknown> = {}) {
  const metrics = new Registry();
  let tap: ((inner: CallHandler, network: Network) => CallHandler) | undefined;
  let service: MultiplexService | undefined;
  const host = {
    metrics,
    methodLabel: { value: (m: string) => m },
    hooks: { call: { tap: (_o: unknown, f: typeof tap) => (tap = f) } },
    services: { provide: (k: unknown, v: MultiplexService) => k === MULTIPLEX_SERVICE && (service = v) },
  } as unknown as PluginHost;
  const plugin = multiplexPlugin();
  expect(plugin.name).to.equal('multiplex');
  plugin.apply(host);
  const gates: Gate[] = [];
  const inner: CallHandler = (ctx) => new Promise<RpcResult>((resolve, reject) => gates.push({ resolve, reject, ctx }));
  const network = { id: 'evm:1', config: { settings } } as unknown as Network;
  const handler = tap!(inner, network);
  const call = (params: unknown, extra: Partial<CallContext> & { id?: string } = {}) => {
    const c = new AbortController();
    const ctx = {
      project: { id: 'main' },
      request: { method: 'eth_getBalance', params, idRaw: extra.id ?? '1' },
      http: { query: {}, headers: { 'user-agent': 'viem/2.0.0' } },
      signal: c.signal,
      record: newExecutionRecord('eth_getBalance'),
      internal: false,
      state: new Map(),
      directives: {},
      ...extra,
    } as unknown as CallContext;
    return { ctx, abort: (r?: unknown) => c.abort(r), result: handler(ctx) };
  };
  const followers = async () => (await metrics.getMetricsAsJSON()).find((m) => m.name === 'svc_network_multiplexed_request_total')?.values ?? [];
  return { call, gates, network, handler, inner, service: service as MultiplexService, followers };
}

describe('wire: multiplexing (spec §4.6)', () => {
  it('identical calls in flight share one execution; each follower gets a deep copy and the leader metadata', async () => {
    const w = setUp();
    const leader = w.call(['0xa', 'latest']);
    const follower = w.call(['0xa', 'latest'], { id: '2' });
    expect(w.gates).to.have.length(1);
    expect([w.service.inFlight(w.network), w.service.waiting(w.network)]).to.deep.equal([1, 1]);
    // The leader's record, as the inner chain fills it.
    const rec: ExecutionRecord = leader.ctx.record;
    rec.upstream = 'up-a';
    rec.upstreamAttempts = 2;
    rec.networkAttempts = 1;
    rec.attempts = [{ upstreamId: 'up-a', outcome: 'success' } as never];
    rec.slots = new Map([[Symbol.for('x'), 3]]);
    const value = { balance: '0x1', nested: [1] };
    w.gates[0]!.resolve(new RpcResult(value));
    const [a, b] = await Promise.all([leader.result, follower.result]);
    expect(a.result).to.equal(value);
    expect(b.result).to.deep.equal(value);
    expect(b.result).to.not.equal(value);
    const f = follower.ctx.record;
    expect([f.upstream, f.upstreamAttempts, f.networkAttempts, f.attempts]).to.deep.equal(['up-a', 2, 1, [{ upstreamId: 'up-a', outcome: 'success' }]]);
    expect(f.attempts[0]).to.not.equal(rec.attempts[0]);
    expect(f.slots?.get(Symbol.for('x'))).to.equal(3);
    expect(f.slots).to.not.equal(rec.slots);
    expect([w.service.inFlight(w.network), w.service.waiting(w.network)]).to.deep.equal([0, 0]);
  });

  it('the follower counter: +1 per follower, with project, network, category, finality, user and agent labels', async () => {
    const w = setUp();
    const leader = w.call([1]);
    const f1 = w.call([1], { identity: { userId: 'alice' } } as never);
    const f2 = w.call([1], { http: { query: { 'user-agent': 'ethers/6.0.0' }, headers: {} } } as never);
    w.gates[0]!.resolve(new RpcResult('0x0'));
    await Promise.all([leader.result, f1.result, f2.result]);
    const values = (await w.followers()).map((v) => [v.labels, v.value]);
    expect(values).to.have.length(2);
    expect(values.map(([l]) => l)).to.deep.include.members([
      { project: 'main', network: 'evm:1', category: 'eth_getBalance', finality: 'unknown', user: 'alice', agent_name: 'viem' },
      { project: 'main', network: 'evm:1', category: 'eth_getBalance', finality: 'unknown', user: 'anonymous', agent_name: 'ethers' },
    ]);
    expect(values.every(([, v]) => v === 1)).to.equal(true);
  });

  it('other params or another provenance is another execution; a call after the entry closed leads anew', async () => {
    const w = setUp();
    const a = w.call([1]);
    w.call([2]);
    expect(w.gates).to.have.length(2);
    const state = new Map();
    const pinnedCtx = { state } as unknown as CallContext;
    markProvenance(pinnedCtx, 'use-upstream', 'a');
    w.call([1], { state });
    expect(w.gates).to.have.length(3);
    w.gates[0]!.resolve(new RpcResult(1));
    await a.result;
    w.call([1]);
    expect(w.gates).to.have.length(4);
  });

  it('the leader error reaches every follower, with the leader metadata', async () => {
    const w = setUp();
    const leader = w.call([1]);
    const follower = w.call([1]);
    leader.ctx.record.upstream = 'up-b';
    const err = new ErrEndpointRequestTimeout('slow');
    w.gates[0]!.reject(err);
    const results = await Promise.allSettled([leader.result, follower.result]);
    expect(results.map((r) => (r as PromiseRejectedResult).reason)).to.deep.equal([err, err]);
    expect(follower.ctx.record.upstream).to.equal('up-b');
    expect(w.service.waiting(w.network)).to.equal(0);
  });

  it('multiplexing off (networks[].multiplexing false), internal calls and unhashable params go straight through', async () => {
    const off = setUp({ multiplexing: false });
    off.call([1]);
    off.call([1]);
    expect(off.gates).to.have.length(2);
    const on = setUp({ multiplexing: true });
    on.call([1]);
    on.call([1]);
    expect(on.gates).to.have.length(1);
    const w = setUp();
    w.call([1], { internal: true });
    w.call([1], { internal: true });
    const unhashable = [
      {
        get x(): never {
          throw new Error('cannot be read');
        },
      },
    ];
    w.call(unhashable);
    w.call(unhashable);
    expect(w.gates).to.have.length(4);
    expect(w.service.inFlight(w.network)).to.equal(0);
  });

  it("a follower's own deadline ends its wait with ErrEndpointRequestTimeout, its cancellation with ErrCancelled; the shared execution goes on", async () => {
    const w = setUp();
    const leader = w.call([1]);
    const late = w.call([1]);
    const gone = w.call([1]);
    late.abort(new DeadlineReason('call exceeded server.maxTimeout (10 ms)'));
    gone.abort('the client left');
    const deadlineErr = await late.result.catch((e: unknown) => e);
    const cancelErr = await gone.result.catch((e: unknown) => e);
    expect(deadlineErr).to.be.instanceOf(ErrEndpointRequestTimeout);
    expect((deadlineErr as Error).message).to.equal('call deadline (server.maxTimeout) passed while waiting for a multiplexed answer');
    expect(cancelErr).to.be.instanceOf(ErrCancelled);
    expect((cancelErr as Error).message).to.equal('call cancelled while waiting for a multiplexed answer');
    expect(w.gates[0]!.ctx.signal.aborted).to.equal(false);
    w.gates[0]!.resolve(new RpcResult(1));
    expect((await leader.result).result).to.equal(1);
  });

  it('an Error as the abort reason is that error; the shared execution is cancelled only when every participant left', async () => {
    const w = setUp();
    const leader = w.call([1]);
    const follower = w.call([1]);
    const shared = w.gates[0]!.ctx.signal;
    leader.abort(new ErrInternal('leader gone'));
    expect(((await leader.result.catch((e: unknown) => e)) as Error).message).to.equal('leader gone');
    expect(shared.aborted).to.equal(false);
    follower.abort(new Error('plain'));
    const e = await follower.result.catch((x: unknown) => x);
    expect(e).to.be.instanceOf(ErrInternal);
    expect((e as Error).message).to.equal('internal error: plain');
    expect(shared.aborted).to.equal(true);
  });

  it('a follower whose signal is already aborted fails at once and does not join', async () => {
    const w = setUp();
    w.call([1]);
    const c = new AbortController();
    c.abort('the client left');
    const early = w.call([1], { signal: c.signal });
    expect(await early.result.catch((e: unknown) => e)).to.be.instanceOf(ErrCancelled);
    expect(w.gates[0]!.ctx.signal.aborted).to.equal(false);
  });

  it('calls of the same provenance share only when method and params match too', async () => {
    const w = setUp();
    const pinned = () => {
      const state = new Map();
      markProvenance({ state } as unknown as CallContext, 'use-upstream', 'a');
      return state;
    };
    w.call([1], { state: pinned() });
    w.call([2], { state: pinned() });
    expect(w.gates, 'other params, same provenance: two executions').to.have.length(2);
    w.call([1], { state: pinned() });
    expect(w.gates, 'same params and provenance: shared').to.have.length(2);
  });

  it('a leader whose signal is already aborted cancels the execution it started (nobody waits for it)', async () => {
    const w = setUp();
    const c = new AbortController();
    c.abort('the client left');
    const early = w.call([1], { signal: c.signal });
    expect(await early.result.catch((e: unknown) => e)).to.be.instanceOf(ErrCancelled);
    expect(w.gates).to.have.length(1);
    expect(w.gates[0]!.ctx.signal.aborted).to.equal(true);
  });

  it('a follower that leaves early stops counting as waiting; every participant leaves no listener on its signal', async () => {
    const w = setUp();
    const leader = w.call([1]);
    const follower = w.call([1]);
    const gone = w.call([1]);
    expect(w.service.waiting(w.network)).to.equal(2);
    gone.abort('the client left');
    await gone.result.catch(() => undefined);
    expect([w.service.inFlight(w.network), w.service.waiting(w.network)]).to.deep.equal([1, 1]);
    w.gates[0]!.resolve(new RpcResult(1));
    await Promise.all([leader.result, follower.result]);
    expect(getEventListeners(leader.ctx.signal, 'abort')).to.have.length(0);
    expect(getEventListeners(follower.ctx.signal, 'abort')).to.have.length(0);
    // The same after a failed execution.
    const l2 = w.call([2]);
    const f2 = w.call([2]);
    w.gates[1]!.reject(new ErrInternal('boom'));
    await Promise.all([l2.result.catch(() => undefined), f2.result.catch(() => undefined)]);
    expect(getEventListeners(l2.ctx.signal, 'abort')).to.have.length(0);
    expect(getEventListeners(f2.ctx.signal, 'abort')).to.have.length(0);
  });
});
