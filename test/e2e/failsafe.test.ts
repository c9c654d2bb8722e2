/**
 * End-to-end failsafe behaviour: a real svc (default preset without
 * evm-state, see {@link FAILSAFE_PRESET}) in front of scriptable fake upstreams
 * (test/helpers/fault-server.ts) and, where a genuine EVM answer matters (reverts), anvil. Proves:
 * - every fault kind (reset, 5xx, garbage, wrong id, truncated JSON, hang/slow past the upstream
 *   timeout) is survived by sweeping to a healthy upstream; a dead primary is abandoned within
 *   one call, and by the selection policy after its errors;
 * - network retry is a new sweep over the ordered upstreams (reason `retry`) and never retries
 *   a revert or a client error; a rate-limited upstream is skipped to the next one;
 * - upstream-scope retry retries the same upstream, each try bounded by the upstream timeout;
 * - a slow upstream is hedged after the configured delay and the hedge wins (the loser's socket
 *   aborted); writes are never hedged; an empty hedge answer does not beat a pending non-empty one;
 * - the network timeout fails the call with ErrFailsafeTimeoutExceeded;
 * - the breaker opens, skips without dialling, half-opens and closes (injected clock), and does
 *   not count rate limits, timeouts, client errors, reverts or cancelled hedge legs;
 * - a custom TypeScript selection function takes effect; `networkDefaults`/`upstreamDefaults`
 *   failsafe lists apply;
 * - with one of three upstreams hanging, a client sees no failed call.
 *
 * Every timing is short (tens to hundreds of ms); the breaker's clock is injected and the
 * selection policy either ticks every 100 ms or is evaluated by hand, never on a 15 s tick.
 */
import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer, type FaultStep } from '../helpers/fault-server.ts';
import { freePort } from '../helpers/ports.ts';
import { NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { failsafePlugin, upstreamBreakers } from '../../plugins/failsafe/index.ts';
import { evaluateSelection, selectionState, type EvalFunc, type PolicyUpstream } from '../../plugins/selection/index.ts';
import type { Plugin } from '../../core/host/proxy.ts';
import { NOPE_REVERT_DATA, REVERT_INIT, deployDirect, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

/** One `X-SVC-Upstreams` segment. */
interface Seg {
  id: string;
  reason: string;
  outcome: string;
  ms: number;
  won: boolean;
}

/** `<id>=<reason>:<outcome>:<ms>[:won]` segments of `X-SVC-Upstreams`. */
function parseTrace(header: string | undefined): Seg[] {
  if (!header) return [];
  return header.split(';').map((seg) => {
    const eq = seg.lastIndexOf('=');
    const [reason, outcome, ms, won] = seg.slice(eq + 1).split(':');
    return { id: seg.slice(0, eq), reason: reason!, outcome: outcome!, ms: Number(ms), won: won === 'won' };
  });
}

/** The trace as `id=reason:outcome[:won]` strings (durations dropped). */
function shape(res: SvcResponse): string[] {
  return parseTrace(res.headers['x-svc-upstreams']).map((s) => `${s.id}=${s.reason}:${s.outcome}${s.won ? ':won' : ''}`);
}

/** A timed POST of one JSON-RPC call. */
async function call(svc: SvcHandle, method: string, params: unknown[] = [], headers?: Record<string, string>): Promise<{ res: SvcResponse; ms: number }> {
  const t0 = performance.now();
  const res = await svc.post(PATH, rpcBody(method, params), headers);
  return { res, ms: performance.now() - t0 };
}

/**
 * A fake upstream whose `eth_blockNumber` answer names it; `eth_getBalance` and `eth_gasPrice`
 * answer that same non-empty value (the built-in table answers them `null`, an empty result).
 */
function fault(blockNumber: string): Promise<FaultServer> {
  const named = new Set(['eth_blockNumber', 'eth_getBalance', 'eth_gasPrice']);
  return startFaultServer({ handler: (req) => (named.has(req.method) ? blockNumber : undefined) });
}

/**
 * The plugins of every svc here: the default preset without evm-state. Chain state is not the
 * subject: the fake upstreams tell themselves apart by their `eth_blockNumber` answers (0xa,
 * 0xb...), which tip enforcement would raise to the highest known head, and its state poller's
 * requests would consume the scripted fault steps and add calls and health samples.
 */
const FAILSAFE_PRESET = (): Plugin[] => presetWithout('evm-state');

/** An upstream entry that serves chain 31337 at once. */
function up(id: string, endpoint: string, failsafe?: unknown): Record<string, unknown> {
  return failsafe === undefined ? { id, endpoint, evm: { chainId: CHAIN } } : { id, endpoint, evm: { chainId: CHAIN }, failsafe };
}

/**
 * Starts svc with one project `main`, one network 31337 and the given upstreams. The selection
 * policy re-evaluates every hour unless `selectionPolicy` says otherwise, so the upstream order
 * stays the config order while a test scripts faults (health scores would reorder it on a tick).
 */
function start(
  upstreams: Array<Record<string, unknown>>,
  networkFailsafe?: unknown,
  opts: { plugins?: Plugin[]; upstreamDefaults?: unknown; selectionPolicy?: Record<string, unknown> } = {},
): Promise<SvcHandle> {
  const network: Record<string, unknown> = { architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: opts.selectionPolicy ?? { evalInterval: '1h' } };
  // No network policy unless the test gives one: `[]` turns the built-in defaults off.
  network.failsafe = networkFailsafe ?? [];
  const project: Record<string, unknown> = { id: 'main', networks: [network], upstreams };
  if (opts.upstreamDefaults !== undefined) project.upstreamDefaults = { failsafe: opts.upstreamDefaults };
  return startSvc(
    { ...NO_CACHE, logLevel: 'error', server: { includeErrorDetails: true }, projects: [project] },
    { plugins: opts.plugins ?? FAILSAFE_PRESET() },
  );
}

/** {@link FAILSAFE_PRESET} with the failsafe plugin on an injected breaker clock. */
function pluginsWithClock(now: () => number): Plugin[] {
  return FAILSAFE_PRESET().map((p) => (p.name === 'failsafe' ? failsafePlugin({ now }) : p));
}

/** Calls of one method a fake upstream received. */
function callsOf(fs: FaultServer, method: string): number {
  return fs.calls.filter((c) => c.method === method).length;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A plain HTTP upstream that answers every non-chain-id call after `delayMs` and records how
 * many requests were torn down by the client before their answer (aborted sockets).
 */
interface SlowServer {
  url: string;
  received: number;
  aborted: number;
  close(): Promise<void>;
}

async function startSlowServer(delayMs: number, result: string): Promise<SlowServer> {
  const state = { received: 0, aborted: 0 };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown; method: string };
      const answer = (r: unknown) => {
        if (res.destroyed) return;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: r }));
      };
      if (body.method === 'eth_chainId') return answer(`0x${CHAIN.toString(16)}`);
      state.received++;
      res.on('close', () => {
        if (!res.writableFinished) state.aborted++;
      });
      const t = setTimeout(() => answer(result), delayMs);
      res.on('close', () => clearTimeout(t));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get received() {
      return state.received;
    },
    get aborted() {
      return state.aborted;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

// ---------------------------------------------------------------------------------------

describe('e2e failsafe: every fault kind is survived by sweeping to a healthy upstream', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    // `a` has an upstream timeout so a hang becomes a timeout; no retries anywhere.
    svc = await start([up('a', a.url, [{ timeout: { duration: '150ms' } }]), up('b', b.url)]);
  });
  beforeEach(() => {
    a.reset();
    b.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await svc?.close();
  });

  const cases: Array<[string, FaultStep, string]> = [
    ['connection reset', { kind: 'reset' }, 'error'],
    ['HTTP 500', { kind: 'status', status: 500, body: 'internal server error' }, 'error'],
    [
      'HTTP 503 with a JSON-RPC error',
      { kind: 'status', status: 503, body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"service unavailable"}}' },
      'error',
    ],
    ['garbage (non-JSON) body', { kind: 'garbage' }, 'error'],
    ['an answer with the wrong id', { kind: 'wrongId' }, 'error'],
    ['truncated JSON', { kind: 'truncated' }, 'error'],
    ['a hang (ended by the upstream timeout)', { kind: 'hang' }, 'timeout'],
    ['a slow answer past the upstream timeout', { kind: 'delay', ms: 1000 }, 'timeout'],
  ];
  for (const [what, step, outcome] of cases) {
    it(`${what}: the call is answered by the next upstream`, async () => {
      a.script(step);
      const { res, ms } = await call(svc, 'eth_blockNumber');
      expect(res.status).to.equal(200);
      expect(res.json, res.text).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0xb' });
      expect(shape(res)).to.deep.equal([`a=primary:${outcome}`, 'b=sweep:success:won']);
      expect(res.headers['x-svc-upstream']).to.equal('b');
      expect(res.headers['x-svc-upstream-attempts']).to.equal('2');
      expect(callsOf(a, 'eth_blockNumber')).to.equal(1);
      expect(callsOf(b, 'eth_blockNumber')).to.equal(1);
      expect(ms).to.be.below(900);
    });
  }

  it('a healthy primary answers alone', async () => {
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result).to.equal('0xa');
    expect(shape(res)).to.deep.equal(['a=primary:success:won']);
    expect(callsOf(b, 'eth_blockNumber')).to.equal(0);
  });

  it('when every upstream fails the client gets ErrUpstreamsExhausted naming each cause', async () => {
    a.script({ kind: 'status', status: 500 });
    b.script({ kind: 'garbage' });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.error, res.text).to.be.an('object');
    expect(res.json.error.data.code).to.equal('ErrUpstreamsExhausted');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'b=sweep:error']);
  });
});

describe('e2e failsafe: a dead primary is abandoned within one call', function () {
  this.timeout(20_000);
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    b = await fault('0xb');
    const deadPort = await freePort();
    svc = await start(
      [up('dead', `http://127.0.0.1:${deadPort}`), up('b', b.url)],
      [{ matchMethod: '*', timeout: { duration: '2s' }, retry: { maxAttempts: 3, delay: '0ms' }, hedge: { delay: '100ms', maxCount: 1 } }],
    );
  });
  after(async () => {
    await b?.close();
    await svc?.close();
  });

  it('the refused connection is swept past at once: no retry round, no hedge; from the next call on it is ordered last', async () => {
    for (let i = 0; i < 5; i++) {
      const { res, ms } = await call(svc, 'eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xb');
      // The refusal makes `dead` unreachable (svc_upstream_up 0), which re-orders the network at once.
      expect(shape(res)).to.deep.equal(i === 0 ? ['dead=primary:error', 'b=sweep:success:won'] : ['b=primary:success:won']);
      expect(res.headers['x-svc-network-retries']).to.equal('0');
      expect(res.headers['x-svc-network-hedges']).to.equal('0');
      expect(ms).to.be.below(500);
    }
  });
});

describe('e2e failsafe: network retry', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    svc = await start(
      [up('a', a.url, [{ retry: { maxAttempts: 2, delay: '0ms' } }]), up('b', b.url)],
      [
        { matchMethod: 'eth_getBalance', retry: { maxAttempts: 2, delay: '150ms' } },
        { matchMethod: '*', timeout: { duration: '2s' }, retry: { maxAttempts: 3, delay: '0ms' } },
      ],
    );
  });
  beforeEach(() => {
    a.reset();
    b.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await svc?.close();
  });

  it('is a new sweep over the ordered upstreams (trace reason retry), counted in X-SVC-Network-Retries', async () => {
    // Upstream `a` retries once itself; then `b` fails; the second network round starts at `a` again.
    a.script({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    b.script({ kind: 'status', status: 502 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xa');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'a=retry:error', 'b=sweep:error', 'a=retry:success:won']);
    expect(res.headers['x-svc-network-retries']).to.equal('1');
    expect(res.headers['x-svc-network-attempts']).to.equal('2');
    expect(res.headers['x-svc-upstream-retries']).to.equal('1');
    expect(res.headers['x-svc-upstream']).to.equal('a');
  });

  it('a retry round sweeps on to the next upstream too', async () => {
    a.setDefault({ kind: 'reset' });
    b.script({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'a=retry:error', 'b=sweep:error', 'a=retry:error', 'a=retry:error', 'b=sweep:success:won']);
    expect(res.headers['x-svc-network-retries']).to.equal('1');
  });

  it('gives up after maxAttempts rounds with ErrUpstreamsExhausted', async () => {
    a.setDefault({ kind: 'status', status: 500 });
    b.setDefault({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.error, res.text).to.be.an('object');
    expect(res.json.error.data.code).to.equal('ErrUpstreamsExhausted');
    expect(res.headers['x-svc-network-retries']).to.equal('2');
    expect(res.headers['x-svc-network-attempts']).to.equal('3');
    expect(callsOf(a, 'eth_blockNumber')).to.equal(6);
    expect(callsOf(b, 'eth_blockNumber')).to.equal(3);
  });

  it('waits the configured delay between rounds', async () => {
    a.setDefault({ kind: 'status', status: 500 });
    b.script({ kind: 'status', status: 500 });
    const { res, ms } = await call(svc, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    expect(res.json, res.text).to.have.property('result');
    expect(shape(res).at(-1)).to.equal('b=sweep:success:won');
    expect(res.headers['x-svc-network-retries']).to.equal('1');
    expect(ms).to.be.at.least(140);
  });

  it('never retries a revert, on this upstream or another', async () => {
    a.script({ kind: 'rpcError', code: 3, message: 'execution reverted: nope', data: NOPE_REVERT_DATA });
    const { res } = await call(svc, 'eth_call', [{ to: '0x0000000000000000000000000000000000000001', data: '0x' }, 'latest']);
    expect(res.json.error, res.text).to.deep.equal({ code: 3, message: 'execution reverted: nope', data: NOPE_REVERT_DATA });
    expect(shape(res)).to.deep.equal(['a=primary:exec_revert']);
    expect(callsOf(a, 'eth_call')).to.equal(1);
    expect(callsOf(b, 'eth_call')).to.equal(0);
    expect(res.headers['x-svc-network-retries']).to.equal('0');
    expect(res.headers['x-svc-upstream-retries']).to.equal('0');
  });

  it('never retries a deterministic client error (invalid params)', async () => {
    a.script({ kind: 'rpcError', code: -32602, message: 'invalid argument 0: hex string has length 3' });
    const { res } = await call(svc, 'eth_getBalance', ['0x123', 'latest']);
    expect(res.json.error?.code, res.text).to.equal(-32602);
    expect(shape(res)).to.deep.equal(['a=primary:error']);
    expect(callsOf(a, 'eth_getBalance')).to.equal(1);
    expect(callsOf(b, 'eth_getBalance')).to.equal(0);
    expect(res.headers['x-svc-network-retries']).to.equal('0');
  });

  it('a rate-limited upstream is skipped to the next one (not retried on itself)', async () => {
    a.script({ kind: 'status', status: 429, body: 'Too Many Requests' });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['a=primary:rate_limited', 'b=sweep:success:won']);
    expect(callsOf(a, 'eth_blockNumber')).to.equal(1);
    expect(res.headers['x-svc-upstream-retries']).to.equal('0');
    expect(res.headers['x-svc-network-retries']).to.equal('0');
  });

  it('a JSON-RPC rate-limit error (-32005) is skipped the same way', async () => {
    a.script({ kind: 'rpcError', code: -32005, message: 'rate limit exceeded' });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['a=primary:rate_limited', 'b=sweep:success:won']);
  });
});

describe('e2e failsafe: upstream-scope retry', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let c: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await fault('0xa');
    c = await fault('0xc');
    b = await fault('0xb');
    svc = await start([
      // retry only
      up('a', a.url, [{ retry: { maxAttempts: 2, delay: '0ms' } }]),
      // the documented upstream shape: timeout + retry + breaker
      up('c', c.url, [
        {
          timeout: { duration: '500ms' },
          retry: { maxAttempts: 2 },
          circuitBreaker: {
            failureThresholdCount: 3,
            failureThresholdCapacity: 5,
            halfOpenAfter: '300ms',
            successThresholdCount: 2,
            successThresholdCapacity: 10,
          },
        },
      ]),
      up('b', b.url),
    ]);
  });
  beforeEach(() => {
    a.reset();
    b.reset();
    c.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await c?.close();
    await svc?.close();
  });

  it('retries the same upstream (trace reason retry) and counts it in X-SVC-Upstream-Retries', async () => {
    a.script({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xa');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'a=retry:success:won']);
    expect(res.headers['x-svc-upstream-retries']).to.equal('1');
    expect(res.headers['x-svc-upstream-attempts']).to.equal('2');
    expect(res.headers['x-svc-network-retries']).to.equal('0');
    expect(callsOf(a, 'eth_blockNumber')).to.equal(2);
    expect(callsOf(c, 'eth_blockNumber')).to.equal(0);
  });

  it('with timeout + retry + breaker on the upstream, the retry is traced the same way', async () => {
    c.script({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber', [], { 'X-SVC-Use-Upstream': 'c' });
    expect(res.json.result, res.text).to.equal('0xc');
    expect(callsOf(c, 'eth_blockNumber')).to.equal(2);
    expect(res.headers['x-svc-upstream-retries']).to.equal('1');
    expect(shape(res)).to.deep.equal(['c=primary:error', 'c=retry:success:won']);
  });

  it('the upstream timeout bounds each try: a hang times out and the same upstream is tried again', async () => {
    c.script({ kind: 'hang' });
    const { res, ms } = await call(svc, 'eth_blockNumber', [], { 'X-SVC-Use-Upstream': 'c|b' });
    expect(res.json.result, res.text).to.equal('0xc');
    expect(shape(res)).to.deep.equal(['c=primary:timeout', 'c=retry:success:won']);
    expect(res.headers['x-svc-upstream-retries']).to.equal('1');
    expect(ms).to.be.within(450, 1500);
    expect(callsOf(b, 'eth_blockNumber')).to.equal(0);
  });

  it('when every try of the upstream hangs, the call sweeps on to the next upstream', async () => {
    c.script({ kind: 'hang' }, { kind: 'hang' });
    const { res, ms } = await call(svc, 'eth_blockNumber', [], { 'X-SVC-Use-Upstream': 'c|b' });
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['c=primary:timeout', 'c=retry:timeout', 'b=sweep:success:won']);
    expect(ms).to.be.within(950, 2500);
  });

  it('after maxAttempts tries the sweep moves on to the next upstream', async () => {
    a.setDefault({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber', [], { 'X-SVC-Use-Upstream': 'a|b' });
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'a=retry:error', 'b=sweep:success:won']);
    expect(res.headers['x-svc-upstream-retries']).to.equal('1');
  });

  it('does not retry a revert', async () => {
    a.script({ kind: 'rpcError', code: 3, message: 'execution reverted', data: NOPE_REVERT_DATA });
    const { res } = await call(svc, 'eth_call', [{ to: '0x0000000000000000000000000000000000000001', data: '0x' }, 'latest']);
    expect(res.json.error?.code, res.text).to.equal(3);
    expect(callsOf(a, 'eth_call')).to.equal(1);
    expect(res.headers['x-svc-upstream-retries']).to.equal('0');
  });
});

describe('e2e failsafe: hedge', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let c: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    c = await fault('0xc');
    svc = await start(
      [up('a', a.url), up('b', b.url), up('c', c.url)],
      [
        { matchMethod: 'eth_getBalance', timeout: { duration: '3s' }, hedge: { delay: '100ms', maxCount: 2 } },
        { matchMethod: 'eth_gasPrice', timeout: { duration: '3s' }, hedge: { delay: '30ms', maxCount: 1 } },
        { matchMethod: '*', timeout: { duration: '2s' }, retry: { maxAttempts: 3, delay: '0ms' }, hedge: { delay: '100ms', maxCount: 1 } },
      ],
    );
  });
  beforeEach(() => {
    a.reset();
    b.reset();
    c.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await c?.close();
    await svc?.close();
  });

  it('a slow primary is hedged on the next upstream and the hedge wins', async () => {
    a.script({ kind: 'delay', ms: 1500 });
    const { res, ms } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=hedge:success:won']);
    expect(res.headers['x-svc-network-hedges']).to.equal('1');
    expect(res.headers['x-svc-upstream']).to.equal('b');
    const trace = parseTrace(res.headers['x-svc-upstreams']);
    expect(trace[0]!.ms, 'the primary was cut when the hedge won').to.be.below(800);
    expect(ms).to.be.within(90, 800);
    expect(callsOf(c, 'eth_blockNumber')).to.equal(0);
  });

  it('a fast primary is not hedged', async () => {
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result).to.equal('0xa');
    expect(shape(res)).to.deep.equal(['a=primary:success:won']);
    expect(res.headers['x-svc-network-hedges']).to.equal('0');
    await sleep(150);
    expect(callsOf(b, 'eth_blockNumber')).to.equal(0);
  });

  it('the primary wins when it answers before the hedge', async () => {
    a.script({ kind: 'delay', ms: 200 });
    b.script({ kind: 'delay', ms: 800 });
    const { res, ms } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xa');
    expect(shape(res)).to.deep.equal(['a=primary:success:won', 'b=hedge:timeout']);
    expect(res.headers['x-svc-network-hedges']).to.equal('1');
    expect(ms).to.be.below(700);
  });

  it('maxCount bounds the hedge legs; each starts on the next upstream', async () => {
    a.script({ kind: 'delay', ms: 1500 });
    b.script({ kind: 'delay', ms: 1500 });
    const { res, ms } = await call(svc, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    expect(res.json, res.text).to.have.property('result');
    expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=hedge:timeout', 'c=hedge:success:won']);
    expect(res.headers['x-svc-network-hedges']).to.equal('2');
    expect(ms).to.be.within(180, 1000);
  });

  it('a hedge leg starts once the configured delay has passed, not before and not much later', async () => {
    a.script({ kind: 'delay', ms: 600 });
    const { res } = await call(svc, 'eth_gasPrice');
    expect(res.json, res.text).to.have.property('result');
    expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=hedge:success:won']);
    // Arrival times stamped by the fault servers themselves (same process clock).
    const at = (srv: typeof a) => srv.calls.filter((c) => c.method === 'eth_gasPrice').map((c) => c.at)[0] as number;
    const gap = at(b) - at(a);
    // Configured `hedge.delay: 30ms`.
    expect(gap, `hedge leg started ${gap.toFixed(1)} ms after the primary`).to.be.within(20, 85);
  });

  it('a write method (eth_sendRawTransaction) is never hedged', async () => {
    const hash = `0x${'ab'.repeat(32)}`;
    a.script({ kind: 'delay', ms: 400, then: { kind: 'ok', result: hash } });
    const { res, ms } = await call(svc, 'eth_sendRawTransaction', ['0x02f86c']);
    expect(res.json.result, res.text).to.equal(hash);
    expect(shape(res)).to.deep.equal(['a=primary:success:won']);
    expect(res.headers['x-svc-network-hedges']).to.equal('0');
    expect(ms).to.be.at.least(380);
    expect(callsOf(b, 'eth_sendRawTransaction')).to.equal(0);
    expect(callsOf(c, 'eth_sendRawTransaction')).to.equal(0);
  });

  it('an empty answer from a hedge leg does not win over a pending non-empty one', async () => {
    const receipt = { transactionHash: `0x${'cd'.repeat(32)}`, status: '0x1', blockNumber: '0x10' };
    a.script({ kind: 'delay', ms: 400, then: { kind: 'ok', result: receipt } });
    b.script({ kind: 'ok', result: null });
    const { res } = await call(svc, 'eth_getTransactionReceipt', [receipt.transactionHash]);
    expect(res.json.result, res.text).to.deep.equal(receipt);
    expect(shape(res)).to.deep.equal(['a=primary:success:won', 'b=hedge:success']);
    expect(res.headers['x-svc-upstream']).to.equal('a');
  });

  it('an empty answer still wins when nothing else is pending', async () => {
    a.script({ kind: 'delay', ms: 300, then: { kind: 'ok', result: null } });
    b.script({ kind: 'ok', result: null });
    const { res } = await call(svc, 'eth_getTransactionReceipt', [`0x${'ef'.repeat(32)}`]);
    expect(res.json, res.text).to.deep.equal({ jsonrpc: '2.0', id: 1, result: null });
    expect(parseTrace(res.headers['x-svc-upstreams']).filter((s) => s.won)).to.have.length(1);
  });

  it('a revert on the primary settles the call at once; the hedge leg is cancelled', async () => {
    a.script({ kind: 'delay', ms: 250, then: { kind: 'rpcError', code: 3, message: 'execution reverted', data: NOPE_REVERT_DATA } });
    b.script({ kind: 'delay', ms: 1500 });
    const { res, ms } = await call(svc, 'eth_call', [{ to: '0x0000000000000000000000000000000000000001', data: '0x' }, 'latest']);
    expect(res.json.error, res.text).to.deep.equal({ code: 3, message: 'execution reverted', data: NOPE_REVERT_DATA });
    expect(shape(res)).to.deep.equal(['a=primary:exec_revert', 'b=hedge:timeout']);
    expect(ms).to.be.below(1000);
    expect(res.headers['x-svc-network-retries']).to.equal('0');
  });

  it('the losing leg is cancelled: its socket is aborted', async () => {
    const slow = await startSlowServer(2000, '0x5');
    const fast = await fault('0xf');
    const s2 = await start([up('slow', slow.url), up('fast', fast.url)], [{ matchMethod: '*', hedge: { delay: '100ms', maxCount: 1 } }]);
    try {
      const { res, ms } = await call(s2, 'eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xf');
      expect(shape(res)).to.deep.equal(['slow=primary:timeout', 'fast=hedge:success:won']);
      expect(ms).to.be.below(1000);
      expect(slow.received).to.equal(1);
      await waitFor(() => slow.aborted === 1, 1000);
    } finally {
      await slow.close();
      await fast.close();
      await s2.close();
    }
  });
});

describe('e2e failsafe: network timeout', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    svc = await start(
      [up('a', a.url), up('b', b.url)],
      [{ matchMethod: '*', timeout: { duration: '250ms' }, retry: { maxAttempts: 3, delay: '0ms' }, hedge: { delay: '100ms', maxCount: 1 } }],
    );
  });
  beforeEach(() => {
    a.reset();
    b.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await svc?.close();
  });

  it('fails the call with ErrFailsafeTimeoutExceeded at the deadline when nothing answers', async () => {
    a.setDefault({ kind: 'hang' });
    b.setDefault({ kind: 'hang' });
    const { res, ms } = await call(svc, 'eth_blockNumber');
    expect(res.json.error, res.text).to.be.an('object');
    expect(res.json.error.code).to.equal(-32603);
    expect(res.json.error.data.code).to.equal('ErrFailsafeTimeoutExceeded');
    expect(ms).to.be.within(230, 1200);
    expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=hedge:timeout']);
    // The deadline is not retried.
    expect(res.headers['x-svc-network-retries']).to.equal('0');
  });

  it('answers normally within the deadline', async () => {
    a.script({ kind: 'delay', ms: 50 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xa');
  });
});

describe('e2e failsafe: circuit breaker (injected clock)', function () {
  this.timeout(20_000);
  const clock = { t: 1_000_000 };
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;
  const breakerOf = () => {
    const u = svc.proxy.projects.get('main')!.upstreams.get('a')!;
    const list = upstreamBreakers(svc.proxy, u);
    expect(list).to.have.length(1);
    return list[0]!;
  };
  const fail500 = async (n: number) => {
    for (let i = 0; i < n; i++) {
      a.script({ kind: 'status', status: 500 });
      const { res } = await call(svc, 'eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xb');
    }
  };

  beforeEach(async () => {
    clock.t = 1_000_000;
    a = await fault('0xa');
    b = await fault('0xb');
    svc = await start(
      [
        up('a', a.url, [
          {
            timeout: { duration: '400ms' },
            circuitBreaker: {
              failureThresholdCount: 3,
              failureThresholdCapacity: 5,
              halfOpenAfter: '300ms',
              successThresholdCount: 2,
              successThresholdCapacity: 10,
            },
          },
        ]),
        up('b', b.url),
      ],
      [{ matchMethod: 'eth_getBalance', hedge: { delay: '100ms', maxCount: 1 } }],
      { plugins: pluginsWithClock(() => clock.t) },
    );
  });
  afterEach(async () => {
    await a?.close();
    await b?.close();
    await svc?.close();
  });

  it('opens after failureThresholdCount failures, skips the upstream without dialling, half-opens after halfOpenAfter and closes after successThresholdCount successes', async () => {
    await fail500(2);
    expect(breakerOf().state).to.equal('closed');
    await fail500(1);
    expect(breakerOf().state).to.equal('open');
    expect(callsOf(a, 'eth_blockNumber')).to.equal(3);

    // Open: `a` is skipped without a request; the trace shows only the dialled attempt.
    for (let i = 0; i < 3; i++) {
      const { res } = await call(svc, 'eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['b=sweep:success:won']);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
    }
    expect(callsOf(a, 'eth_blockNumber'), 'no request reached the open upstream').to.equal(3);

    // Not yet: 299 ms later it is still open.
    clock.t += 299;
    await call(svc, 'eth_blockNumber');
    expect(callsOf(a, 'eth_blockNumber')).to.equal(3);

    // Half-open: trial calls go through.
    clock.t += 1;
    let r = await call(svc, 'eth_blockNumber');
    expect(r.res.json.result).to.equal('0xa');
    expect(shape(r.res)).to.deep.equal(['a=primary:success:won']);
    expect(breakerOf().state).to.equal('half-open');
    r = await call(svc, 'eth_blockNumber');
    expect(r.res.json.result).to.equal('0xa');
    expect(breakerOf().state).to.equal('closed');
    expect(callsOf(a, 'eth_blockNumber')).to.equal(5);
  });

  it('a failure while half-open reopens it', async () => {
    await fail500(3);
    expect(breakerOf().state).to.equal('open');
    clock.t += 300;
    await fail500(1);
    expect(breakerOf().state).to.equal('open');
    expect(callsOf(a, 'eth_blockNumber')).to.equal(4);
    await call(svc, 'eth_blockNumber');
    expect(callsOf(a, 'eth_blockNumber'), 'reopened: skipped again').to.equal(4);
  });

  it('counts transport faults, malformed answers, unauthorised and billing answers as failures', async () => {
    const kinds: FaultStep[][] = [
      [{ kind: 'reset' }, { kind: 'garbage' }, { kind: 'status', status: 401, body: 'unauthorized' }],
      [{ kind: 'status', status: 402, body: 'payment required' }, { kind: 'truncated' }, { kind: 'wrongId' }],
    ];
    for (const steps of kinds) {
      a.script(...steps);
      for (let i = 0; i < 2; i++) expect((await call(svc, 'eth_blockNumber')).res.json.result).to.equal('0xb');
      expect(breakerOf().state).to.equal('closed');
      expect((await call(svc, 'eth_blockNumber')).res.json.result).to.equal('0xb');
      expect(breakerOf().state, JSON.stringify(steps)).to.equal('open');
      // Close it again for the next group: half-open, two successes.
      clock.t += 300;
      a.reset();
      await call(svc, 'eth_blockNumber');
      await call(svc, 'eth_blockNumber');
      expect(breakerOf().state).to.equal('closed');
    }
  });

  it('does not count rate limits, timeouts, client errors, reverts or cancelled hedge legs', async () => {
    const n = 4; // above failureThresholdCount (3) and most of the ring
    for (let i = 0; i < n; i++) a.script({ kind: 'status', status: 429 });
    for (let i = 0; i < n; i++) expect((await call(svc, 'eth_blockNumber')).res.json.result).to.equal('0xb');
    expect(breakerOf().state, 'rate limits').to.equal('closed');

    for (let i = 0; i < n; i++) a.script({ kind: 'hang' });
    for (let i = 0; i < n; i++) expect((await call(svc, 'eth_blockNumber')).res.json.result).to.equal('0xb');
    expect(breakerOf().state, 'timeouts').to.equal('closed');

    for (let i = 0; i < n; i++) a.script({ kind: 'rpcError', code: -32602, message: 'invalid argument 0' });
    for (let i = 0; i < n; i++) expect((await call(svc, 'eth_getBlockByNumber', ['0xzz', false])).res.json.error?.code).to.equal(-32602);
    expect(breakerOf().state, 'client errors').to.equal('closed');

    for (let i = 0; i < n; i++) a.script({ kind: 'rpcError', code: 3, message: 'execution reverted', data: NOPE_REVERT_DATA });
    for (let i = 0; i < n; i++)
      expect((await call(svc, 'eth_call', [{ to: '0x0000000000000000000000000000000000000001' }, 'latest'])).res.json.error?.code).to.equal(3);
    expect(breakerOf().state, 'reverts').to.equal('closed');

    for (let i = 0; i < n; i++) a.script({ kind: 'delay', ms: 1000, then: { kind: 'status', status: 500 } });
    for (let i = 0; i < n; i++) {
      const { res } = await call(svc, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
      expect(shape(res)).to.deep.equal(['a=primary:timeout', 'b=hedge:success:won']);
    }
    await sleep(50);
    expect(breakerOf().state, 'cancelled hedge legs').to.equal('closed');

    // Sanity: the same breaker does open on real failures.
    a.reset();
    await fail500(3);
    expect(breakerOf().state).to.equal('open');
  });

  it('reverts count as breaker successes: they slide failures out of the ring', async () => {
    // F F R R R F: with reverts counted as successes the ring [F F S S S] then F slides out one F.
    a.script({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    await call(svc, 'eth_blockNumber');
    await call(svc, 'eth_blockNumber');
    for (let i = 0; i < 3; i++) a.script({ kind: 'rpcError', code: 3, message: 'execution reverted', data: NOPE_REVERT_DATA });
    for (let i = 0; i < 3; i++) await call(svc, 'eth_call', [{ to: '0x0000000000000000000000000000000000000001' }, 'latest']);
    await fail500(1);
    expect(breakerOf().state).to.equal('closed');
  });
});

describe('e2e failsafe: reverts from a real node (anvil) are not retried elsewhere', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let b: FaultServer;
  let svc: SvcHandle;
  let revertAddr: string;

  before(async () => {
    anvil = await startAnvil();
    revertAddr = await deployDirect(anvil, REVERT_INIT);
    b = await fault('0xb');
    svc = await start(
      [up('anvil', anvil.url, [{ timeout: { duration: '2s' }, retry: { maxAttempts: 3, delay: '0ms' } }]), up('b', b.url)],
      [{ matchMethod: '*', timeout: { duration: '3s' }, retry: { maxAttempts: 3, delay: '0ms' }, hedge: { delay: '100ms', maxCount: 1 } }],
    );
  });
  after(async () => {
    await b?.close();
    await svc?.close();
    await anvil?.stop();
  });

  for (const method of ['eth_call', 'eth_estimateGas']) {
    it(`${method}: the revert reaches the client intact after exactly one attempt`, async () => {
      b.reset();
      const params = method === 'eth_call' ? [{ to: revertAddr, data: '0x' }, 'latest'] : [{ to: revertAddr, data: '0x' }];
      const { res } = await call(svc, method, params);
      expect(res.json.error, res.text).to.be.an('object');
      expect(res.json.error.code).to.equal(3);
      expect(res.json.error.data).to.equal(NOPE_REVERT_DATA);
      expect(shape(res)).to.deep.equal(['anvil=primary:exec_revert']);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
      expect(res.headers['x-svc-upstream-retries']).to.equal('0');
      expect(res.headers['x-svc-network-retries']).to.equal('0');
      await sleep(150);
      expect(callsOf(b, method), 'never sent to another upstream').to.equal(0);
    });
  }
});

describe('e2e failsafe: with one of three upstreams hanging, a client sees no failed call', function () {
  this.timeout(30_000);
  let hang: FaultServer;
  let b: FaultServer;
  let c: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    hang = await fault('0x0');
    hang.setDefault({ kind: 'hang' });
    b = await fault('0xb');
    c = await fault('0xc');
    svc = await start(
      [up('hang', hang.url), up('b', b.url), up('c', c.url)],
      [
        // No hedge for this method: the upstream timeout alone must carry the call past the hang.
        { matchMethod: 'eth_getBalance', timeout: { duration: '2s' }, retry: { maxAttempts: 3, delay: '0ms' } },
        { matchMethod: '*', timeout: { duration: '2s' }, retry: { maxAttempts: 3, delay: '0ms' }, hedge: { delay: '100ms', maxCount: 1 } },
      ],
      { upstreamDefaults: [{ timeout: { duration: '150ms' } }] },
    );
  });
  after(async () => {
    await hang?.close();
    await b?.close();
    await c?.close();
    await svc?.close();
  });

  it('40 concurrent calls (hedged) all succeed', async () => {
    const results = await Promise.all(Array.from({ length: 40 }, () => call(svc, 'eth_blockNumber')));
    for (const { res } of results) {
      expect(res.status).to.equal(200);
      expect(res.json.result, res.text).to.be.oneOf(['0xb', '0xc']);
      expect(res.json.error).to.equal(undefined);
    }
    expect(callsOf(hang, 'eth_blockNumber')).to.be.greaterThan(0);
    const slowest = Math.max(...results.map((r) => r.ms));
    expect(slowest).to.be.below(1500);
  });

  it('30 sequential calls of mixed methods all succeed', async () => {
    const methods: Array<[string, unknown[]]> = [
      ['eth_blockNumber', []],
      ['eth_getBlockByNumber', ['latest', false]],
      ['eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']],
    ];
    for (let i = 0; i < 30; i++) {
      const [m, p] = methods[i % methods.length]!;
      const { res } = await call(svc, m, p);
      expect(res.status).to.equal(200);
      expect(res.json.error, `${m}: ${res.text}`).to.equal(undefined);
      expect(res.json).to.have.property('result');
    }
  });

  it('a batch of 30 calls has no failed element', async () => {
    const res = await svc.post(
      PATH,
      Array.from({ length: 30 }, (_, i) =>
        rpcBody(i % 2 ? 'eth_blockNumber' : 'eth_getBalance', i % 2 ? [] : ['0x0000000000000000000000000000000000000001', 'latest'], i),
      ),
    );
    expect(res.status).to.equal(200);
    expect(res.json).to.have.length(30);
    for (const el of res.json as Array<{ id: number; error?: unknown; result?: unknown }>) expect(el.error, JSON.stringify(el)).to.equal(undefined);
  });
});

describe('e2e failsafe + selection: a dead primary is abandoned by the policy after its errors', function () {
  this.timeout(20_000);
  let b: FaultServer;
  let svc: SvcHandle | undefined;
  let deadUrl: string;
  const NET = `evm:${CHAIN}`;

  before(async () => {
    b = await fault('0xb');
    deadUrl = `http://127.0.0.1:${await freePort()}`;
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    b.reset();
  });
  after(async () => {
    await b?.close();
  });

  it('on a short evalInterval, the next tick after its errors puts the healthy upstream first; the dead one is no longer dialled', async () => {
    svc = await start([up('dead', deadUrl), up('b', b.url)], undefined, { selectionPolicy: { evalInterval: '100ms' } });
    expect(selectionState(svc.proxy, 'main', NET)!.order).to.deep.equal(['dead', 'b']);
    // Within one call the dead primary is swept past.
    const first = await call(svc, 'eth_blockNumber');
    expect(first.res.json.result, first.res.text).to.equal('0xb');
    expect(shape(first.res)).to.deep.equal(['dead=primary:error', 'b=sweep:success:won']);
    // By the policy: the next evaluation tick demotes it.
    await waitFor(() => selectionState(svc!.proxy, 'main', NET)!.order[0] === 'b', 2000);
    for (let i = 0; i < 5; i++) {
      const { res } = await call(svc, 'eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xb');
      expect(shape(res)).to.deep.equal(['b=primary:success:won']);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
    }
  });

  it('after more than 10 requests at an error rate above 0.7 the default policy excludes it (step excludeErrorRate)', async () => {
    // A node that is there and fails every call (HTTP 500): a refused one would be moved last
    // by its first refusal (demoteDown) and never reach 11 requests.
    const failing = await fault('0xd');
    failing.setDefault({ kind: 'status', status: 500, body: 'internal server error' });
    svc = await start([up('dead', failing.url), up('b', b.url)], undefined, { selectionPolicy: { evalInterval: '1h' } });
    try {
      for (let i = 0; i < 11; i++) {
        const { res } = await call(svc, 'eth_blockNumber');
        expect(shape(res)).to.deep.equal(['dead=primary:error', 'b=sweep:success:won']);
      }
      // A manual evaluation stands in for the tick.
      expect(await evaluateSelection(svc.proxy, 'main', NET)).to.equal(true);
      const st = selectionState(svc.proxy, 'main', NET)!;
      expect(st.order).to.deep.equal(['b']);
      expect(st.excluded.dead).to.match(/^errorRate 1\.00 > 0\.7 over 11 requests$/);
      for (let i = 0; i < 3; i++) {
        const { res } = await call(svc, 'eth_blockNumber');
        expect(shape(res)).to.deep.equal(['b=primary:success:won']);
      }
    } finally {
      await failing.close();
    }
  });
});

describe('e2e failsafe + selection: a custom TypeScript selection function takes effect', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let c: FaultServer;
  let svc: SvcHandle | undefined;
  const NET = `evm:${CHAIN}`;

  /** Newest first (ids descending), never `a`; honours cordons. */
  const newestFirst: EvalFunc = (upstreams) =>
    upstreams
      .removeCordoned()
      .filter((u: PolicyUpstream) => u.id !== 'a')
      .sort((x: PolicyUpstream, y: PolicyUpstream) => y.id.localeCompare(x.id));
  /** The same order, but cordons are ignored (no removeCordoned()). */
  const ignoresCordons: EvalFunc = (upstreams) => [...upstreams].filter((u) => u.id !== 'a').sort((x, y) => y.id.localeCompare(x.id));

  const startWith = (evalFunc: EvalFunc) =>
    start([up('a', a.url), up('b', b.url), up('c', c.url)], [{ matchMethod: '*', retry: { maxAttempts: 2, delay: '0ms' } }], {
      selectionPolicy: { evalInterval: '1h', evalFunc },
    });

  before(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    c = await fault('0xc');
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    a.reset();
    b.reset();
    c.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await c?.close();
  });

  it("calls follow the function's order and never reach the upstream it leaves out", async () => {
    svc = await startWith(newestFirst);
    expect(selectionState(svc.proxy, 'main', NET)).to.deep.include({ order: ['c', 'b'], custom: true });
    for (let i = 0; i < 3; i++) {
      const { res } = await call(svc, 'eth_blockNumber');
      expect(res.json.result, res.text).to.equal('0xc');
      expect(shape(res)).to.deep.equal(['c=primary:success:won']);
    }
    expect(callsOf(a, 'eth_blockNumber')).to.equal(0);
  });

  it("the failsafe sweeps and retries over the function's order only", async () => {
    svc = await startWith(newestFirst);
    c.script({ kind: 'status', status: 500 });
    let { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['c=primary:error', 'b=sweep:success:won']);

    c.setDefault({ kind: 'status', status: 500 });
    b.setDefault({ kind: 'status', status: 500 });
    ({ res } = await call(svc, 'eth_blockNumber'));
    expect(res.json.error?.data?.code, res.text).to.equal('ErrUpstreamsExhausted');
    expect(shape(res)).to.deep.equal(['c=primary:error', 'b=sweep:error', 'c=retry:error', 'b=sweep:error']);
    expect(callsOf(a, 'eth_blockNumber'), 'the excluded upstream is not a fallback').to.equal(0);
  });

  it('a function that calls removeCordoned() drops a new cordon at once', async () => {
    svc = await startWith(newestFirst);
    svc.proxy.projects.get('main')!.health.cordon('c', '*', 'e2e');
    const { res } = await call(svc, 'eth_blockNumber');
    expect(shape(res)).to.deep.equal(['b=primary:success:won']);
    expect(callsOf(c, 'eth_blockNumber')).to.equal(0);
  });

  it('§3.1 ¶3 — a function that does not call removeCordoned() keeps a cordoned upstream in rotation (spec §3.1)', async () => {
    svc = await startWith(ignoresCordons);
    expect(selectionState(svc.proxy, 'main', NET)!.order).to.deep.equal(['c', 'b']);
    svc.proxy.projects.get('main')!.health.cordon('c', '*', 'e2e');
    await evaluateSelection(svc.proxy, 'main', NET);
    const { res } = await call(svc, 'eth_blockNumber');
    expect(shape(res)).to.deep.equal(['c=primary:success:won']);
  });
});

describe('e2e failsafe: networkDefaults.failsafe and upstreamDefaults.failsafe', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let other: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await fault('0xa');
    b = await fault('0xb');
    other = await startFaultServer({ chainId: 31338 });
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        server: { includeErrorDetails: true },
        projects: [
          {
            id: 'main',
            networkDefaults: { failsafe: [{ matchMethod: '*', retry: { maxAttempts: 2, delay: '0ms' } }], selectionPolicy: { evalInterval: '1h' } },
            upstreamDefaults: { failsafe: [{ retry: { maxAttempts: 2, delay: '0ms' } }] },
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [
              up('a', a.url),
              // Its own failsafe list replaces the default one: no upstream retry.
              up('b', b.url, [{ timeout: { duration: '1s' } }]),
              // Serves an undeclared chain: that network is created from networkDefaults.
              { id: 'other', endpoint: other.url, evm: { chainId: 31338 } },
            ],
          },
        ],
      },
      { plugins: FAILSAFE_PRESET() },
    );
  });
  beforeEach(() => {
    a.reset();
    b.reset();
    other.reset();
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await other?.close();
    await svc?.close();
  });

  it('an upstream inherits upstreamDefaults.failsafe', async () => {
    a.script({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'a=retry:success:won']);
  });

  it("a declared network inherits networkDefaults.failsafe; an upstream's own list replaces the default", async () => {
    a.setDefault({ kind: 'status', status: 500 });
    b.script({ kind: 'status', status: 500 });
    const { res } = await call(svc, 'eth_blockNumber');
    expect(res.json.result, res.text).to.equal('0xb');
    expect(shape(res)).to.deep.equal(['a=primary:error', 'a=retry:error', 'b=sweep:error', 'a=retry:error', 'a=retry:error', 'b=sweep:success:won']);
    expect(res.headers['x-svc-network-retries']).to.equal('1');
  });

  it('a network created on demand for an undeclared chain gets networkDefaults.failsafe', async () => {
    // `other` fails once and upstream-retries once (upstreamDefaults), then the network retry round succeeds.
    other.script({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    const res = await svc.post('/main/evm/31338', rpcBody('eth_blockNumber', []));
    expect(res.json.result, res.text).to.equal('0x10');
    expect(shape(res)).to.deep.equal(['other=primary:error', 'other=retry:error', 'other=retry:success:won']);
    expect(res.headers['x-svc-network-retries']).to.equal('1');
  });
});
