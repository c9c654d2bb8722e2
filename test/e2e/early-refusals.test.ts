/**
 * Early refusals (spec §4.1, §4.2, §4.5, §5, §3.2) through the real server in front of a real
 * anvil: a request refused as a whole before any call was routed answers an array with one
 * error per element under its own id (the refusal's HTTP status kept), bounded by
 * `server.maxBatchSize`; a body refused for its size stays one object; and no early error, nor a
 * call refused by a client-side rate-limit budget, carries cost headers.
 */
import { expect } from 'chai';
import { createPublicClient, http, HttpRequestError } from 'viem';
import { foundry } from 'viem/chains';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';

const SECRET = 'early-refusal-secret-0123456789';
const COST_HEADERS = ['x-svc-calls', 'x-svc-billable', 'x-svc-methods', 'x-svc-credits', 'x-svc-credits-total', 'x-svc-credits-version'];
/** A mixed batch: two objects with ids, one without an id field, one element that is not an object. */
const MIXED = [rpcBody('eth_chainId', [], 11), rpcBody('eth_blockNumber', [], 'twelve'), { jsonrpc: '2.0', method: 'eth_chainId' }, 5];

/** The named error of an svc error body (`error.data.code` with includeErrorDetails). */
function errorName(e: any): string | undefined {
  return e?.error?.data?.code;
}

/** Asserts an array answer: one error per element, under the element's own id, all of `name` and `code`. */
function expectPerElement(res: SvcResponse, ids: unknown[], name: string): void {
  expect(res.json, res.text).to.be.an('array').with.length(ids.length);
  expect(res.json.map((e: { id: unknown }) => e.id)).to.deep.equal(ids);
  for (const e of res.json) {
    expect(e.jsonrpc).to.equal('2.0');
    expect(e.error.code).to.be.a('number');
    expect(errorName(e)).to.equal(name);
  }
}

function expectNoCostHeaders(res: SvcResponse): void {
  for (const h of COST_HEADERS) expect(res.headers[h], h).to.equal(undefined);
}

describe('e2e: early refusals answer batch clients and bill nothing', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const up = () => [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } }];
  const net = () => [{ architecture: 'evm', evm: { chainId: anvil.chainId } }];
  const hour = (maxCount: number) => ({ method: '*', maxCount, period: 'hour' });

  before(async () => {
    anvil = await startAnvil();
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: { costHeaders: true, includeErrorDetails: true, maxBodySize: '4kb', maxBatchSize: 4 },
      rateLimiters: {
        budgets: [
          { id: 'one', rules: [hour(1)] },
          { id: 'none', rules: [hour(0)] },
          { id: 'oneBatch', rules: [hour(1)] },
        ],
      },
      projects: [
        { id: 'main', networks: net(), upstreams: up() },
        { id: 'sec', networks: net(), upstreams: up(), auth: { strategies: [{ type: 'secret', secret: { value: SECRET } }] } },
        { id: 'one', rateLimitBudget: 'one', networks: net(), upstreams: up() },
        { id: 'none', rateLimitBudget: 'none', networks: net(), upstreams: up() },
        { id: 'oneb', rateLimitBudget: 'oneBatch', networks: net(), upstreams: up() },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  describe('an array refused as a whole gets one error per element', () => {
    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — an array to an unknown chain gets one error per element with its id, HTTP 404', async () => {
      const res = await svc.post('/main/evm/999', [rpcBody('eth_chainId', [], 11), rpcBody('eth_chainId', [], 12)]);
      expect(res.status).to.equal(404);
      expectPerElement(res, [11, 12], 'ErrNetworkNotSupported');
      expectNoCostHeaders(res);
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — an element that is not an object, or has no id, gets id null in its place', async () => {
      const res = await svc.post('/main/evm/999', MIXED);
      expect(res.status).to.equal(404);
      expectPerElement(res, [11, 'twelve', null, null], 'ErrNetworkNotSupported');
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — an array to an unknown network alias gets one error per element, HTTP 404', async () => {
      const res = await svc.post('/main/nosuchalias', [rpcBody('eth_chainId', [], 'a'), rpcBody('eth_chainId', [], 'b')]);
      expect(res.status).to.equal(404);
      expectPerElement(res, ['a', 'b'], 'ErrNetworkNotSupported');
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — an array to an unknown project gets one error per element with its id', async () => {
      const res = await svc.post(`/nosuch/evm/${anvil.chainId}`, [rpcBody('eth_chainId', [], 1), rpcBody('eth_chainId', [], 2), rpcBody('eth_chainId', [], 3)]);
      expect(res.status).to.equal(404);
      expectPerElement(res, [1, 2, 3], 'ErrProjectNotFound');
      expectNoCostHeaders(res);
    });

    it('§5 #2 — an array without the project secret gets one -32016 error per element with its id, HTTP 401', async () => {
      const res = await svc.post(`/sec/evm/${anvil.chainId}`, [rpcBody('eth_chainId', [], 1), rpcBody('eth_chainId', [], 'two'), 7]);
      expect(res.status).to.equal(401);
      expect(res.json.map((e: { id: unknown }) => e.id)).to.deep.equal([1, 'two', null]);
      for (const e of res.json) {
        expect(e.error.code).to.equal(-32016);
        expect(errorName(e)).to.equal('ErrAuthUnauthorized');
      }
      expectNoCostHeaders(res);
      // The same array with the secret is served.
      const ok = await svc.post(`/sec/evm/${anvil.chainId}?secret=${SECRET}`, [rpcBody('eth_chainId', [], 1), rpcBody('eth_chainId', [], 'two')]);
      expect(ok.status).to.equal(200);
      expect(ok.json.map((e: { result: string }) => e.result)).to.deep.equal(['0x7a69', '0x7a69']);
    });

    it('§4.2 #3 — a batch over its project budget stays HTTP 200 and each element carries 429 ErrProjectRateLimitRuleExceeded under its own id', async () => {
      const res = await svc.post(`/none/evm/${anvil.chainId}`, [rpcBody('eth_blockNumber', [], 'x'), rpcBody('eth_blockNumber', [], 'y')]);
      expect(res.status).to.equal(200);
      expect(res.json.map((e: { id: unknown }) => e.id)).to.deep.equal(['x', 'y']);
      for (const e of res.json) {
        expect(e.error.code).to.equal(-32005);
        expect(errorName(e)).to.equal('ErrProjectRateLimitRuleExceeded');
      }
      // No element was routed: no cost header counts them.
      expectNoCostHeaders(res);
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — the element array is bounded: an array over server.maxBatchSize to an unknown chain stays one object with id null', async () => {
      const res = await svc.post(
        '/main/evm/999',
        [1, 2, 3, 4, 5].map((i) => rpcBody('eth_chainId', [], i)),
      );
      expect(res.status).to.equal(404);
      expect(res.json).to.not.be.an('array');
      expect(res.json.id).to.equal(null);
      expect(errorName(res.json)).to.equal('ErrNetworkNotSupported');
    });

    it('§4.2 #4 — an empty array refused as a whole stays one error object with id null', async () => {
      const res = await svc.post('/main/evm/999', []);
      expect(res.status).to.equal(404);
      expect(res.json).to.include({ jsonrpc: '2.0', id: null });
      expect(errorName(res.json)).to.equal('ErrNetworkNotSupported');
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — a single call refused as a whole keeps its own id', async () => {
      const res = await svc.post('/main/evm/999', rpcBody('eth_chainId', [], 42));
      expect(res.status).to.equal(404);
      expect(res.json.id).to.equal(42);
      expect(errorName(res.json)).to.equal('ErrNetworkNotSupported');
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — over-size refusals that cannot be split stay one object: a body over server.maxBodySize (413) and a batch over server.maxBatchSize (400)', async () => {
      const big = [1, 2].map((i) => ({ ...rpcBody('eth_chainId', [], i), pad: 'p'.repeat(3000) }));
      const tooLarge = await svc.post(`/main/evm/${anvil.chainId}`, big);
      expect(tooLarge.status).to.equal(413);
      expect(tooLarge.json).to.include({ id: null });
      expectNoCostHeaders(tooLarge);
      const tooMany = await svc.post(
        `/main/evm/${anvil.chainId}`,
        [1, 2, 3, 4, 5].map((i) => rpcBody('eth_chainId', [], i)),
      );
      expect(tooMany.status).to.equal(400);
      expect(tooMany.json).to.include({ id: null });
      expect(tooMany.json.error.code).to.equal(-32600);
      expectNoCostHeaders(tooMany);
    });

    it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — a viem batch client to an unknown chain gets an HTTP 404 error for every call, not a hang or a crash', async () => {
      const client = createPublicClient({ chain: foundry, transport: http(`${svc.url}/main/evm/999`, { batch: true, retryCount: 0 }) });
      const out = await Promise.allSettled([client.getChainId(), client.getBlockNumber()]);
      for (const o of out) {
        expect(o.status).to.equal('rejected');
        const err = (o as PromiseRejectedResult).reason as Error & { walk: (f: (e: unknown) => boolean) => unknown };
        const http404 = err.walk((e) => e instanceof HttpRequestError) as HttpRequestError | undefined;
        expect(http404?.status).to.equal(404);
      }
    });
  });

  describe('cost headers on early errors', () => {
    it('§4.5 X-SVC-Calls — absent on an early error that routed no call: a single call refused by the project budget (429)', async () => {
      const first = await svc.post(`/one/evm/${anvil.chainId}`, rpcBody('eth_blockNumber', [], 1));
      expect(first.status).to.equal(200);
      expect(first.headers['x-svc-calls']).to.equal('1');
      expect(first.headers['x-svc-billable']).to.equal('1');
      const refused = await svc.post(`/one/evm/${anvil.chainId}`, rpcBody('eth_blockNumber', [], 2));
      expect(refused.status).to.equal(429);
      expect(errorName(refused.json)).to.equal('ErrProjectRateLimitRuleExceeded');
      expectNoCostHeaders(refused);
    });

    it('§4.5 X-SVC-Calls — a batch counts only its routed calls: an element refused by the project budget is left out', async () => {
      const res = await svc.post(`/oneb/evm/${anvil.chainId}`, [rpcBody('eth_blockNumber', [], 1), rpcBody('eth_blockNumber', [], 2)]);
      expect(res.status).to.equal(200);
      const names = res.json.map((e: unknown) => errorName(e) ?? 'ok').sort();
      expect(names).to.deep.equal(['ErrProjectRateLimitRuleExceeded', 'ok']);
      expect(res.headers['x-svc-calls']).to.equal('1');
      expect(res.headers['x-svc-billable']).to.equal('1');
      expect(res.headers['x-svc-methods']).to.equal('eth_blockNumber');
    });

    it('§4.5 X-SVC-Calls — absent on every early error: unknown project, unknown chain, auth refusal, unparsable body, invalid request', async () => {
      const answers = await Promise.all([
        svc.post(`/nosuch/evm/${anvil.chainId}`, rpcBody('eth_chainId', [], 1)),
        svc.post('/main/evm/999', rpcBody('eth_chainId', [], 1)),
        svc.post(`/sec/evm/${anvil.chainId}`, rpcBody('eth_chainId', [], 1)),
        svc.post(`/main/evm/${anvil.chainId}`, '{"jsonrpc":'),
        svc.post(`/main/evm/${anvil.chainId}`, { jsonrpc: '2.0', id: 1 }),
      ]);
      expect(answers.map((a) => a.status)).to.deep.equal([404, 404, 401, 400, 400]);
      for (const a of answers) expectNoCostHeaders(a);
    });
  });
});

describe('e2e: early refusals while draining', function () {
  this.timeout(30_000);
  let up: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    up = await startFaultServer({ chainId: 1 });
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: { costHeaders: true, includeErrorDetails: true, waitBeforeShutdown: '0ms', waitAfterShutdown: '10s' },
      projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: [{ id: 'slow', endpoint: up.url, evm: { chainId: 1 } }] }],
    });
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });

  it('§3.2 draining — an array sent once new requests are refused gets one 503 ErrServiceShuttingDown per element with its id, Connection: close, no cost headers', async () => {
    up.setDefault({ kind: 'delay', ms: 800, then: { kind: 'ok', result: '0x1' } });
    const inFlight = svc.post('/main/evm/1', rpcBody('eth_getBalance', [`0x${'1'.padStart(40, '0')}`, 'latest'], 1));
    await waitFor(() => up.calls.some((c) => c.method === 'eth_getBalance'));
    const drained = svc.proxy.shutdown();
    await waitFor(() => svc.proxy.lifecycle === 'closing');
    const res = await svc.post('/main/evm/1', [rpcBody('eth_chainId', [], 21), rpcBody('eth_blockNumber', [], 22), 'x']);
    expect(res.status).to.equal(503);
    expect(res.headers.connection).to.equal('close');
    expect(res.json.map((e: { id: unknown }) => e.id)).to.deep.equal([21, 22, null]);
    for (const e of res.json) expect(errorName(e)).to.equal('ErrServiceShuttingDown');
    expectNoCostHeaders(res);
    expect((await inFlight).json.result).to.equal('0x1');
    await drained;
  });
});
