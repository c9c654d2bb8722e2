/**
 * A deadline is a timeout, not a cancellation (spec §4.7 #2, §4.5, §7): with the default config
 * and `server.maxTimeout: 500ms`, a call to an upstream that answers in 2 s ends with
 * `ErrEndpointRequestTimeout` whatever path it takes — the multiplexing leader, a follower that
 * joined it, multiplexing off, the outbound batch queue — and its `X-SVC-Upstreams` trace says
 * `timeout`, never a word outside the interface's vocabulary.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';

const CHAIN = 31337;
/**
 * `server.maxTimeout` of every svc here: short, so each test waits half a second rather than the
 * upstream's answer; long enough that a hedge (100 ms) and a follower (150 ms) start before it.
 */
const DEADLINE = '500ms';
/** How long the upstreams take to answer: well past the deadline (svc's close waits for an outbound batch that is still out). */
const UPSTREAM_MS = 2000;
const PATH = `/main/evm/${CHAIN}`;
/** The interface's trace outcomes (spec §4.5). */
const OUTCOMES = new Set(['success', 'timeout', 'exec_revert', 'rate_limited']);

function call(id: number, block = '0x1') {
  return { jsonrpc: '2.0', id, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', block] };
}

/** The outcome words of a response's trace. */
function outcomes(r: SvcResponse): string[] {
  const t = r.headers['x-svc-upstreams'];
  return t ? t.split(';').map((s) => s.split('=')[1]?.split(':')[1] ?? '') : [];
}

/** Asserts a single response is the deadline's timeout, with a trace in the spec's words. */
function expectTimeout(r: SvcResponse): void {
  expect(r.status, r.text).to.equal(200);
  expect(r.json.error?.data?.code, r.text).to.equal('ErrEndpointRequestTimeout');
  const o = outcomes(r);
  expect(o.length, `trace ${r.headers['x-svc-upstreams']}`).to.be.greaterThan(0);
  for (const w of o) expect(OUTCOMES.has(w), `trace ${r.headers['x-svc-upstreams']}`).to.equal(true);
  expect(o, `trace ${r.headers['x-svc-upstreams']}`).to.include('timeout');
}

/** Starts svc (default config but for the deadline) in front of one upstream answering every call in {@link UPSTREAM_MS}. */
async function start(up: FaultServer, network: object = {}, upstream: object = {}): Promise<SvcHandle> {
  up.setDefault({ kind: 'delay', ms: UPSTREAM_MS });
  return startSvc({
    ...NO_CACHE,
    logLevel: 'error',
    metrics: { enabled: false },
    server: { maxTimeout: DEADLINE },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, ...network }],
        upstreams: [{ id: 'slow', endpoint: up.url, evm: { chainId: CHAIN, statePollerInterval: 0 }, ...upstream }],
      },
    ],
  });
}

/** Starts svc in front of two upstreams answering every call in {@link UPSTREAM_MS}, with the network's own failsafe entries. */
async function startTwo(a: FaultServer, b: FaultServer, failsafe: object[], multiplexing: boolean): Promise<SvcHandle> {
  for (const up of [a, b]) up.setDefault({ kind: 'delay', ms: UPSTREAM_MS });
  return startSvc({
    ...NO_CACHE,
    logLevel: 'error',
    metrics: { enabled: false },
    server: { maxTimeout: DEADLINE },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe, multiplexing }],
        upstreams: [a, b].map((up, i) => ({ id: `slow${i}`, endpoint: up.url, evm: { chainId: CHAIN, statePollerInterval: 0 } })),
      },
    ],
  });
}

describe('e2e: a call that reaches its deadline is a timeout', function () {
  this.timeout(20_000);
  let up: FaultServer;
  let svc: SvcHandle | undefined;
  beforeEach(async () => {
    // scriptBatch: a batch body waits like a single call does.
    up = await startFaultServer({ chainId: CHAIN, scriptBatch: true });
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await up?.close();
  });

  it('§4.7 #2 — multiplexing on (the default): the leader gets ErrEndpointRequestTimeout at server.maxTimeout, trace "timeout"', async () => {
    svc = await start(up);
    const t0 = performance.now();
    const r = await svc.post(PATH, call(1));
    expect(performance.now() - t0, 'answered at the deadline, not after the upstream').to.be.below(UPSTREAM_MS - 100);
    expectTimeout(r);
  });

  it('§4.7 #2 — multiplexing off: ErrEndpointRequestTimeout, trace "timeout"', async () => {
    svc = await start(up, { multiplexing: false });
    expectTimeout(await svc.post(PATH, call(2)));
  });

  it('§4.7 #2 — a follower joining a leader: both get ErrEndpointRequestTimeout, traces "timeout"', async () => {
    svc = await start(up);
    const leader = svc.post(PATH, call(3));
    await new Promise((r) => setTimeout(r, 150));
    const follower = svc.post(PATH, call(4));
    const [a, b] = await Promise.all([leader, follower]);
    expectTimeout(a);
    expectTimeout(b);
    // One upstream execution served both.
    expect(up.calls.filter((c) => c.method === 'eth_getBalance' && c.params && (c.params as unknown[])[1] === '0x1').length).to.be.at.most(2);
  });

  it('§4.7 #2 — outbound batching on (jsonRpc.supportsBatch): the batch deadline fails the call with ErrEndpointRequestTimeout', async () => {
    svc = await start(up, {}, { jsonRpc: { supportsBatch: true, batchMaxSize: 10, batchMaxWait: '20ms' } });
    expectTimeout(await svc.post(PATH, call(5)));
  });

  it('§4.7 #2 — outbound batching on, multiplexing off: ErrEndpointRequestTimeout', async () => {
    svc = await start(up, { multiplexing: false }, { jsonRpc: { supportsBatch: true, batchMaxSize: 10, batchMaxWait: '20ms' } });
    expectTimeout(await svc.post(PATH, call(6)));
  });

  it('§4.5 X-SVC-Upstreams — a client batch of two calls over the deadline: each element is ErrEndpointRequestTimeout, the trace says "timeout"', async () => {
    svc = await start(up);
    const r = await svc.post(PATH, [call(7, '0x7'), call(8, '0x8')]);
    expect(r.status).to.equal(200);
    for (const e of r.json as Array<{ error?: { data?: { code?: string } } }>) expect(e.error?.data?.code, r.text).to.equal('ErrEndpointRequestTimeout');
    for (const w of outcomes(r)) expect(OUTCOMES.has(w), r.headers['x-svc-upstreams']).to.equal(true);
  });

  for (const mux of [true, false]) {
    it(`§4.7 #2 — hedges (multiplexing ${mux ? 'on' : 'off'}): both legs still in flight at the deadline, the call is ErrEndpointRequestTimeout, every trace word "timeout"`, async () => {
      const b = await startFaultServer({ chainId: CHAIN });
      try {
        svc = await startTwo(up, b, [{ matchMethod: '*', timeout: { duration: '10s' }, hedge: { delay: '100ms', maxCount: 1 } }], mux);
        const r = await svc.post(PATH, call(9));
        expectTimeout(r);
        expect(r.headers['x-svc-upstreams']).to.match(/=primary:timeout:\d+;.*=hedge:timeout:\d+$/);
      } finally {
        await b.close();
      }
    });

    it(`§4.7 #2 — consensus (multiplexing ${mux ? 'on' : 'off'}): every participant still in flight at the deadline, the call is ErrEndpointRequestTimeout`, async () => {
      const b = await startFaultServer({ chainId: CHAIN });
      try {
        svc = await startTwo(up, b, [{ matchMethod: '*', consensus: { maxParticipants: 2, agreementThreshold: 2 } }], mux);
        expectTimeout(await svc.post(PATH, call(10)));
      } finally {
        await b.close();
      }
    });
  }
});
