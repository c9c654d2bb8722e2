/**
 * Hostile class 4: errors a client causes are facts about its request, never the upstream's
 * fault (docs/http-interface.md "What counts against an upstream"). The attacker floods svc with calls
 * every node must refuse (an unknown tracer, invalid params, reverts, garbage transactions),
 * hoping to open the upstreams' circuit breakers, drive up their error rates (and so what other
 * clients are routed to), or make svc walk every upstream for each bad call. None of it may
 * open a breaker, count in `svc_upstream_request_errors_total`, move an error rate, or, for an
 * error two upstreams agree on, reach a third upstream.
 */
import { expect } from 'chai';
import { upstreamBreakers } from '../../plugins/failsafe/index.ts';
import { MAIN, NODE_IDS, REVERTER } from './config.ts';
import { useDeployment, type SvcResponse } from './harness.ts';
import { chaosClass, scale } from './summary.ts';
import { ADDR0, ADDR1 } from '../e2e/fixtures.ts';

/** Upstream ids dialled for a call, from `X-SVC-Upstreams` (`<id>=<reason>:<outcome>:<ms>[:won]`). */
function dialled(res: SvcResponse): string[] {
  const h = res.headers['x-svc-upstreams'];
  return h ? h.split(';').map((seg) => seg.slice(0, seg.lastIndexOf('='))) : [];
}

/** Methods the EVM state poller calls too (its attempts count in the same health cells). */
const POLLED = new Set(['eth_getBlockByNumber', 'eth_blockNumber', 'eth_syncing', 'eth_chainId']);

/** The `error` label values of a timeout (the request's own, or a failsafe timeout policy's). */
const NOT_TIMEOUTS = { error: ['ErrEndpointRequestTimeout', 'ErrFailsafeTimeoutExceeded'] } as const;

describe('chaos [4] client-caused errors: never charged to an upstream', function () {
  this.timeout(180_000);
  const cls = chaosClass(4, 'client-caused errors vs breakers and error metrics');
  const dep = useDeployment();
  let errorsBefore = 0;
  /** A transaction of this class's own (an earlier class's may have been reorged away). */
  let txHash = '';

  const breakers = () => {
    const out: Record<string, string> = {};
    for (const u of dep().proxy.projects.get('main')!.upstreams.values())
      out[u.id] = upstreamBreakers(dep().proxy, u)
        .map((b) => b.state)
        .join(',');
    return out;
  };
  const allClosed = Object.fromEntries(NODE_IDS.map((id) => [id, 'closed']));
  /**
   * No breaker opened, no client-caused error counted as an upstream error, and the attacked methods'
   * error rates untouched. Timeouts are left out of the count: no client causes one (an unknown
   * tracer, a revert or bad params is answered at once), while svc's own state polls, and any call,
   * can genuinely time out on a machine loaded by a parallel test run or a busy core. Every other
   * error name counts, so a client-caused error charged under any name still fails this.
   */
  const unharmed = async (what: string, methods: readonly string[]) => {
    expect(breakers(), `breakers after ${what}`).to.deep.equal(allClosed);
    expect(await dep().metric('svc_upstream_request_errors_total', { project: 'main' }, NOT_TIMEOUTS), `errors counted after ${what}`).to.equal(errorsBefore);
    const health = dep().proxy.projects.get('main')!.health;
    // Methods svc's own state poller also calls are covered by the error counter above instead.
    for (const id of NODE_IDS)
      for (const m of methods) if (!POLLED.has(m)) expect(health.snapshot(id, m).errorRate, `error rate of ${id} for ${m} after ${what}`).to.equal(0);
  };

  before(async () => {
    txHash = (await dep().mineTx({ from: ADDR0, to: ADDR1, value: '0x1' })).hash;
    await dep().settled();
    expect(breakers()).to.deep.equal(allClosed);
    errorsBefore = await dep().metric('svc_upstream_request_errors_total', { project: 'main' }, NOT_TIMEOUTS);
  });

  it('a flood of debug_traceTransaction calls with unknown tracers opens no breaker, counts no upstream error and never reaches a third upstream', async () => {
    const n = scale(32);
    const params = (i: number) => [txHash, { tracer: `noSuchTracer${i % 7}` }];
    const nodeError = await dep()
      .node('a')
      .rpc('debug_traceTransaction', params(0))
      .then(
        () => undefined,
        (e: { code: number; message: string }) => ({ code: e.code, message: e.message }),
      );
    expect(nodeError?.message).to.match(/noSuchTracer0 is not defined/);
    const thirdBefore = await dep().metric('svc_upstream_request_total', { project: 'main', upstream: 'c', category: 'debug_traceTransaction' });
    // One after the other, then concurrently.
    const one = async (i: number) => {
      const res = await dep().rpc('debug_traceTransaction', params(i));
      cls.attack();
      expect(res.json?.error?.code, res.text).to.equal(nodeError!.code);
      expect(res.json.error.message).to.match(/is not defined/);
      const ids = dialled(res);
      expect(ids.length, `call ${i}: ${res.headers['x-svc-upstreams']}`).to.be.within(1, 2);
      expect(ids, `call ${i}`).to.not.include('c');
    };
    for (let i = 0; i < n; i++) await one(i);
    await Promise.all(Array.from({ length: n }, (_, i) => one(n + i)));
    // And in one batch, every element an unknown tracer.
    const batch = await dep().post(
      MAIN,
      Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'debug_traceTransaction', params: params(i) })),
    );
    cls.attack(n);
    expect(batch.json).to.have.length(n);
    for (const el of batch.json as Array<{ error?: { code: number } }>) expect(el.error?.code).to.equal(nodeError!.code);
    await unharmed(`${3 * n} unknown-tracer calls`, ['debug_traceTransaction']);
    expect(
      await dep().metric('svc_upstream_request_total', { project: 'main', upstream: 'c', category: 'debug_traceTransaction' }),
      'requests that reached the third upstream',
    ).to.equal(thirdBefore);
    // The upstreams still serve.
    expect((await dep().rpc('eth_getTransactionByHash', [txHash])).json?.result?.hash).to.equal(txHash);
  });

  it('reverts, invalid params and garbage transactions open no breaker and count no upstream error', async () => {
    const calls: Array<[string, unknown[]]> = [
      ['eth_call', [{ to: REVERTER, data: '0x' }, 'latest']],
      ['eth_estimateGas', [{ to: REVERTER, data: '0x' }]],
      ['eth_getBalance', ['0xzz', 'latest']],
      ['eth_getTransactionCount', ['0x00000000000000000000000000000000000000aa', 'not-a-block']],
      ['eth_getBlockByNumber', ['0x1', 'yes']],
      ['eth_sendRawTransaction', ['0x1234']],
      ['debug_traceCall', [{ to: REVERTER, data: '0x' }, 'latest', { tracer: 'noSuchTracer' }]],
      ['debug_traceTransaction', [txHash, { tracer: 'callTracer', tracerConfig: { onlyTopCall: 'yes' } }]],
    ];
    const errors: string[] = [];
    for (let i = 0; i < scale(6); i++) {
      await Promise.all(
        calls.map(async ([method, params]) => {
          const res = await dep().rpc(method, params);
          cls.attack();
          if (res.json?.error === undefined) errors.push(`${method} answered ${res.text.slice(0, 120)}`);
        }),
      );
    }
    expect(errors, 'every one of these calls is an error the node gives').to.deep.equal([]);
    await unharmed('reverts, invalid params and garbage', [...new Set(calls.map(([m]) => m))]);
  });
});
