/**
 * Inbound batches and single calls as served (core/http/serve.ts; spec §4.1, §4.2): the answer text
 * of a batch (one string while small, streamed element by element past 64 KiB or around raw
 * bytes), the caller's id on every answer, id null and -32603 for svc's own failure (§4.2 #6),
 * the body field `networkId`, and a body refused as a whole. Served through `serveJsonRpc`, the
 * entry other transports use, against a scripted network handler.
 */
import { expect } from 'chai';
import { AsyncSeriesHook, SyncHook, SyncWaterfallHook } from 'tapable';
import type { CallContext, Directives, ExecutionRecord } from '../../../core/pipeline/context.ts';
import type { Admission } from '../../../core/pipeline/hooks.ts';
import { getEventListeners } from 'node:events';
import { ErrEndpointRequestTimeout, ErrInternal, ErrUpstreamsExhausted } from '../../../core/wire/errors.ts';
import { RpcResult } from '../../../core/wire/jsonrpc.ts';
import type { Proxy } from '../../../core/host/proxy.ts';
import { serveJsonRpc, smallBatchText, streamArray, type CallAnswer } from '../../../core/http/serve.ts';
import { installCallChain } from '../../../core/pipeline/chains.ts';
import type { Network } from '../../../core/registry/project.ts';

const rec = {} as ExecutionRecord;
const answer = (text: CallAnswer['text']): CallAnswer => ({ text, status: 200, record: rec });

/** A proxy whose one network answers each method as scripted. */
function fakeProxy(script: Record<string, (ctx: CallContext) => Promise<RpcResult>>, server: Record<string, unknown> = {}) {
  const done: string[] = [];
  const errors: unknown[] = [];
  const logged: Array<[unknown, string]> = [];
  const network = { id: 'evm:1' } as Network;
  installCallChain(network, (ctx: CallContext) =>
    (script[ctx.request.method] ?? (() => Promise.reject(new Error(`no script for ${ctx.request.method}`))))(ctx),
  );
  const callDone = new SyncHook<[CallContext]>(['ctx']);
  callDone.tap('t', (ctx) => void done.push(ctx.request.method));
  const proxy = {
    config: {
      server: { maxBodySize: 1 << 20, maxJsonDepth: 16, maxBatchSize: 10, batchConcurrency: 2, maxTimeoutMs: 5000, includeErrorDetails: false, ...server },
    },
    logger: { error: (o: unknown, msg: string) => void (errors.push(o), logged.push([o, msg])) },
    hooks: { directives: new SyncWaterfallHook<[Directives, CallContext]>(['d', 'ctx']), callDone, admit: new AsyncSeriesHook<[Admission]>(['admission']) },
    getNetwork: async (_p: unknown, id: string) => (id === 'evm:1' ? network : undefined),
  } as unknown as Proxy;
  const info = { headers: {}, query: {}, remoteAddress: '127.0.0.1', clientAddress: '127.0.0.1', host: 'localhost', path: '/' };
  const serve = (body: string, withNetwork = true, signal?: AbortSignal) =>
    serveJsonRpc(proxy, {
      target: { project: { id: 'main', networks: new Map([[network.id, network]]) }, ...(withNetwork ? { network } : {}) } as never,
      info: info as never,
      body,
      signal,
    });
  return { serve, done, errors, logged, proxy };
}

/** Every ctx.signal a scripted method saw, and the most calls it had in flight at once. */
function tracker() {
  const signals: AbortSignal[] = [];
  let now = 0;
  let most = 0;
  const run = (ctx: CallContext): Promise<RpcResult> => {
    signals.push(ctx.signal);
    now++;
    most = Math.max(most, now);
    return new Promise((resolve) =>
      setImmediate(() => {
        now--;
        resolve(new RpcResult(1));
      }),
    );
  };
  return { run, signals, most: () => most };
}

const ok = (v: unknown) => async () => new RpcResult(v);

describe('wire: inbound batches and calls as served (spec §4.2)', () => {
  describe('the batch answer text', () => {
    it('a small batch is one string: elements in order, comma-joined, in brackets', () => {
      expect(smallBatchText([answer('{"a":1}'), answer('{"b":2}')])).to.equal('[{"a":1},{"b":2}]');
      expect(smallBatchText([])).to.equal('[]');
    });

    it('up to 64 KiB of answer is one string; one character more streams', () => {
      // Brackets (2) plus each element and its separator: 2 + (65533 + 1) = 65536.
      expect(smallBatchText([answer('x'.repeat(65533))])).to.have.length(65535);
      expect(smallBatchText([answer('x'.repeat(65534))])).to.equal(undefined);
      expect(smallBatchText([answer('x'.repeat(32766)), answer('y'.repeat(32766))])).to.have.length(65535);
      expect(smallBatchText([answer('x'.repeat(32766)), answer('y'.repeat(32767))])).to.equal(undefined);
    });

    it('an element holding raw result bytes always streams', () => {
      expect(smallBatchText([answer('{}'), answer(['{"result":', Buffer.from('1'), '}'])])).to.equal(undefined);
    });

    it('the stream writes the same array, piece by piece', () => {
      const bytes = Buffer.from('[1]');
      const pieces = [...streamArray([answer('{"a":1}'), answer(['{"r":', bytes, '}']), answer('{"c":3}')])];
      expect(pieces).to.deep.equal(['[{"a":1}', ',', '{"r":', bytes, '}', ',{"c":3}', ']']);
      expect([...streamArray([answer(['{"r":', bytes, '}'])])]).to.deep.equal(['[', '{"r":', bytes, '}', ']']);
      expect([...streamArray([])]).to.deep.equal(['[', ']']);
    });
  });

  describe('serveJsonRpc', () => {
    it('admit: the session and transport reach it; the identity it sets is what the calls run as; the headers of its tasks come back', async () => {
      const { serve, proxy } = fakeProxy({ who: async (ctx) => new RpcResult(ctx.identity?.userId ?? 'nobody') });
      const hooks = (proxy as unknown as { hooks: { admit: AsyncSeriesHook<[Admission]> } }).hooks;
      const seen: Admission[] = [];
      hooks.admit.tapPromise('t', async (a) => {
        seen.push(a);
        a.identity = { userId: 'payer', strategy: 'x402' };
        a.onAnswered((records, sink) => sink.set('X-Receipt', String(records.length)));
      });
      const out = await serve('[{"jsonrpc":"2.0","id":1,"method":"who"},{"jsonrpc":"2.0","id":2,"method":"who"}]');
      expect(JSON.parse(out.body).map((a: { result: string }) => a.result)).to.deep.equal(['payer', 'payer']);
      expect(out.headers).to.deep.equal({ 'X-Receipt': '2' });
      expect([seen[0]!.transport, seen[0]!.batch, seen[0]!.calls.length]).to.deep.equal(['websocket', true, 2]);
    });

    it('admit: a refusal with an answer of its own is the whole output, with its status and headers, for a batch too', async () => {
      const { serve, proxy, done } = fakeProxy({ a: ok(1) });
      const hooks = (proxy as unknown as { hooks: { admit: AsyncSeriesHook<[Admission]> } }).hooks;
      hooks.admit.tapPromise('t', async () => {
        throw new ErrInternal('pay', { answer: { body: '{"x402Version":1}', headers: { 'PAYMENT-REQUIRED': 'abc' } } });
      });
      for (const [body, batch] of [
        ['{"jsonrpc":"2.0","id":1,"method":"a"}', false],
        ['[{"jsonrpc":"2.0","id":1,"method":"a"}]', true],
      ] as const) {
        const out = await serve(body);
        expect(out).to.deep.equal({ body: '{"x402Version":1}', batch, status: 500, records: [], headers: { 'PAYMENT-REQUIRED': 'abc' } });
      }
      expect(done).to.deep.equal([]);
    });

    it('a single call: its answer with the caller id as sent, HTTP 200, one record routed', async () => {
      const { serve, done } = fakeProxy({ eth_chainId: ok('0x1') });
      const out = await serve('{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_chainId"}');
      expect(out.body).to.equal('{"jsonrpc":"2.0","id":12345678901234567890,"result":"0x1"}');
      expect([out.batch, out.status, out.records.length, out.records[0]!.routed]).to.deep.equal([false, 200, 1, true]);
      expect(done).to.deep.equal(['eth_chainId']);
    });

    it('a batch: answers in request order, over the batch concurrency too, HTTP 200 even when elements fail', async () => {
      const { serve } = fakeProxy({ a: ok(1), b: async () => Promise.reject(new ErrEndpointRequestTimeout('slow')), c: ok('x') });
      const body = JSON.stringify(['a', 'b', 'c', 'a'].map((method, id) => ({ jsonrpc: '2.0', id, method })));
      const out = await serve(body);
      expect(out.batch).to.equal(true);
      expect(out.status).to.equal(200);
      expect(JSON.parse(out.body)).to.deep.equal([
        { jsonrpc: '2.0', id: 0, result: 1 },
        { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'slow' } },
        { jsonrpc: '2.0', id: 2, result: 'x' },
        { jsonrpc: '2.0', id: 3, result: 1 },
      ]);
      expect(out.records).to.have.length(4);
    });

    it("svc's own failure in one element: id null and -32603 (§4.2 #6), logged, the others served", async () => {
      const { serve, errors } = fakeProxy({ a: ok(1), boom: async () => Promise.reject(new TypeError('bug')) });
      const out = await serve('[{"jsonrpc":"2.0","id":1,"method":"boom"},{"jsonrpc":"2.0","id":2,"method":"a"}]');
      expect(JSON.parse(out.body)).to.deep.equal([
        { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'internal error: bug' } },
        { jsonrpc: '2.0', id: 2, result: 1 },
      ]);
      expect(errors).to.have.length(1);
      expect(out.records[0]!.error?.name).to.equal('ErrInternal');
    });

    it("a single call's status is its error's HTTP status; an exhausted error with one cause is shown as that cause", async () => {
      const { serve } = fakeProxy({ t: async () => Promise.reject(new ErrUpstreamsExhausted([new ErrEndpointRequestTimeout('upstream a timed out')])) });
      const out = await serve('{"jsonrpc":"2.0","id":"q","method":"t"}');
      expect(out.body).to.equal('{"jsonrpc":"2.0","id":"q","error":{"code":-32603,"message":"upstream a timed out"}}');
      expect(out.status).to.equal(200);
      const boom = fakeProxy({ boom: async () => Promise.reject(new Error('bug')) });
      expect((await boom.serve('{"jsonrpc":"2.0","id":1,"method":"boom"}')).status).to.equal(500);
    });

    it('an invalid element is answered with -32600 and its id, and never reaches the network', async () => {
      const { serve, done } = fakeProxy({ a: ok(1) });
      const out = await serve('[{"jsonrpc":"1.0","id":5,"method":"a"},{"jsonrpc":"2.0","id":6,"method":"a"}]');
      expect(JSON.parse(out.body)[0]).to.deep.equal({ jsonrpc: '2.0', id: 5, error: { code: -32600, message: 'invalid request: "jsonrpc" must be "2.0"' } });
      expect(done).to.deep.equal(['a']);
    });

    it('without a network in the path, the body field networkId names it (evm:<chainId>)', async () => {
      const { serve } = fakeProxy({ a: ok(1) });
      expect((await serve('{"jsonrpc":"2.0","id":1,"method":"a","networkId":"evm:1"}', false)).body).to.equal('{"jsonrpc":"2.0","id":1,"result":1}');
      const unknown = await serve('{"jsonrpc":"2.0","id":1,"method":"a","networkId":"evm:2"}', false);
      expect(unknown.status).to.equal(404);
      // The 404 names what the project serves, so a client that guessed the chain id sees the right path.
      expect(JSON.parse(unknown.body).error).to.deep.equal({ code: -32602, message: 'network "evm:2" is not supported by project main; served: /main/evm/1' });
      const none = await serve('{"jsonrpc":"2.0","id":1,"method":"a"}', false);
      expect(none.status).to.equal(404);
      expect(JSON.parse(none.body).error.message).to.equal('no network: call /main/evm/<chainId> or set the body field networkId');
      const malformed = await serve('{"jsonrpc":"2.0","id":1,"method":"a","networkId":"evm:x"}', false);
      expect(JSON.parse(malformed.body).error.message).to.equal('network "evm:x" is not supported by project main; served: /main/evm/1');
    });

    it('a body that is not JSON: one error, id null, HTTP 400', async () => {
      const { serve } = fakeProxy({});
      const out = await serve('[{"jsonrpc"');
      expect(out).to.deep.equal({
        body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"failed to parse json-rpc request"}}',
        batch: false,
        status: 400,
        records: [],
      });
    });

    it('a body over server.maxBodySize: HTTP 413 naming the limit', async () => {
      const { serve } = fakeProxy({}, { maxBodySize: 10 });
      const out = await serve('{"jsonrpc":"2.0","id":1,"method":"a"}');
      expect(out.status).to.equal(413);
      expect(JSON.parse(out.body)).to.deep.equal({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32600, message: 'request body exceeds server.maxBodySize (10 bytes)' },
      });
      const { serve: exact } = fakeProxy({ a: ok(1) }, { maxBodySize: 37 });
      expect((await exact('{"jsonrpc":"2.0","id":1,"method":"a"}')).status).to.equal(200);
    });

    it('a batch over server.maxBatchSize: one error for the whole body (id null), the limit named', async () => {
      const { serve } = fakeProxy({ a: ok(1) }, { maxBatchSize: 2 });
      const out = await serve(JSON.stringify([1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'a' }))));
      expect(out).to.deep.equal({
        body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 3 requests exceeds server.maxBatchSize (2)"}}',
        batch: false,
        status: 400,
        records: [],
      });
      const atLimit = await serve(JSON.stringify([1, 2].map((id) => ({ jsonrpc: '2.0', id, method: 'a' }))));
      expect(atLimit.status).to.equal(200);
    });

    it('the transport closing while calls run: each ends cancelled with "the transport closed"', async () => {
      const c = new AbortController();
      const { serve } = fakeProxy({
        a: (ctx) =>
          new Promise((_r, reject) => {
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
            setImmediate(() => c.abort());
          }),
      });
      const out = await serve('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"a"}]', true, c.signal);
      expect(JSON.parse(out.body).map((e: { id: number; error: { message: string } }) => [e.id, e.error.message])).to.deep.equal([
        [1, 'the transport closed'],
        [2, 'the transport closed'],
      ]);
    });

    it('an empty batch is refused as a whole: one error (id null, -32600), not an empty array', async () => {
      const { serve, done } = fakeProxy({ a: ok(1) });
      const out = await serve('[]');
      expect(out).to.deep.equal({
        body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: empty batch"}}',
        batch: false,
        status: 400,
        records: [],
      });
      expect(done).to.deep.equal([]);
    });

    it('a batch within batchConcurrency shares one signal and deadline; a larger one gives each call its own, at most batchConcurrency in flight', async () => {
      const within = tracker();
      const { serve } = fakeProxy({ a: within.run }, { batchConcurrency: 2 });
      await serve(JSON.stringify([1, 2].map((id) => ({ jsonrpc: '2.0', id, method: 'a' }))));
      expect(within.signals).to.have.length(2);
      expect(within.signals[0]).to.equal(within.signals[1]);
      expect(within.most()).to.equal(2);
      const over = tracker();
      const { serve: serveOver } = fakeProxy({ a: over.run }, { batchConcurrency: 2 });
      const out = await serveOver(JSON.stringify([1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'a' }))));
      expect(JSON.parse(out.body)).to.have.length(3);
      expect(over.signals).to.have.length(3);
      // The first two run at once on signals of their own (a later call may reuse a recycled controller).
      expect(over.signals[0]).to.not.equal(over.signals[1]);
      expect(over.most()).to.equal(2);
    });

    it('an answer holding raw result bytes is written as text, bytes in place', async () => {
      const { serve } = fakeProxy({ a: async () => RpcResult.fromBytes({ x: 1 }, Buffer.from('{"x":1}')) });
      const single = await serve('{"jsonrpc":"2.0","id":7,"method":"a"}');
      expect(single.body).to.equal('{"jsonrpc":"2.0","id":7,"result":{"x":1}}');
      const batch = await serve('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"a"}]');
      expect(batch.body).to.equal('[{"jsonrpc":"2.0","id":1,"result":{"x":1}},{"jsonrpc":"2.0","id":2,"result":{"x":1}}]');
    });

    it("svc's own failure logs the original exception's stack (the cause of an internal error) and the method", async () => {
      const { serve, logged } = fakeProxy({
        a: async () => {
          throw new Error('plain bug');
        },
        b: async () => {
          throw new ErrInternal('wrapped', { cause: new Error('the cause') });
        },
      });
      await serve('{"jsonrpc":"2.0","id":1,"method":"a"}');
      await serve('{"jsonrpc":"2.0","id":2,"method":"b"}');
      expect(logged).to.have.length(2);
      const [plain, wrapped] = logged as Array<[{ err: string; method: string }, string]>;
      expect(plain[1]).to.equal('internal failure serving a call');
      expect(plain[0].method).to.equal('a');
      expect(plain[0].err).to.match(/^Error: plain bug\n\s+at /);
      expect(wrapped[0].method).to.equal('b');
      expect(wrapped[0].err).to.match(/^Error: the cause\n\s+at /);
    });

    it('a transport that stays open keeps no listener once its body is answered', async () => {
      const c = new AbortController();
      const { serve } = fakeProxy({ a: ok(1) });
      await serve('{"jsonrpc":"2.0","id":1,"method":"a"}', true, c.signal);
      await serve('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"a"}]', true, c.signal);
      expect(getEventListeners(c.signal, 'abort')).to.have.length(0);
    });

    it('an internal error with no cause is logged with its own stack', async () => {
      const { serve, logged } = fakeProxy({
        a: async () => {
          throw new ErrInternal('no cause here');
        },
      });
      await serve('{"jsonrpc":"2.0","id":1,"method":"a"}');
      expect(logged).to.have.length(1);
      expect((logged[0]![0] as { err: string }).err).to.match(/^ErrInternal: no cause here\n\s+at /);
    });

    it("svc's own failure before any call ran: a batch gets the error once per element with its id, a single call with its id", async () => {
      const { serve, proxy } = fakeProxy({ a: ok(1) });
      // A config read that throws once the body is parsed stands for any bug at that point.
      Object.defineProperty(proxy.config.server, 'batchConcurrency', {
        get() {
          throw new Error('broken');
        },
      });
      const batch = await serve('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":"two","method":"a"}]');
      expect(batch.batch).to.equal(true);
      expect(batch.status).to.equal(500);
      expect(JSON.parse(batch.body)).to.deep.equal([
        { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'internal error: broken' } },
        { jsonrpc: '2.0', id: 'two', error: { code: -32603, message: 'internal error: broken' } },
      ]);
      // A batch of exactly server.maxBatchSize (10) is within bounds: still one error per element.
      const full = await serve(JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'a' }))));
      expect(full.batch).to.equal(true);
      expect((JSON.parse(full.body) as Array<{ id: number }>).map((e) => e.id)).to.deep.equal(Array.from({ length: 10 }, (_, i) => i));
      const single = await serve('{"jsonrpc":"2.0","id":5,"method":"a"}');
      expect(JSON.parse(single.body)).to.deep.equal({ jsonrpc: '2.0', id: 5, error: { code: -32603, message: 'internal error: broken' } });
    });

    it('the transport closed before the body is served: no call runs on a signal of its own', async () => {
      const c = new AbortController();
      c.abort();
      const seen: boolean[] = [];
      const { serve } = fakeProxy({
        a: (ctx) => {
          seen.push(ctx.signal.aborted);
          return ctx.signal.aborted ? Promise.reject(ctx.signal.reason) : Promise.resolve(new RpcResult(1));
        },
      });
      const out = await serve('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"a"}]', true, c.signal);
      expect(seen).to.deep.equal([true, true]);
      expect(getEventListeners(c.signal, 'abort'), 'no listener left on the transport').to.have.length(0);
      expect(JSON.parse(out.body).map((e: { id: number; error: { message: string } }) => [e.id, e.error.message])).to.deep.equal([
        [1, 'the transport closed'],
        [2, 'the transport closed'],
      ]);
    });

    it('the transport closing while a batch over batchConcurrency runs: elements still waiting for a slot start cancelled', async () => {
      const c = new AbortController();
      const started: Array<[number, boolean]> = [];
      const { serve } = fakeProxy(
        {
          a: (ctx) => {
            started.push([Number(ctx.request.idRaw), ctx.signal.aborted]);
            if (ctx.signal.aborted) return Promise.reject(ctx.signal.reason);
            return new Promise((_r, reject) => {
              ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
              if (started.length === 2) setImmediate(() => c.abort());
            });
          },
        },
        { batchConcurrency: 2 },
      );
      const body = JSON.stringify([1, 2, 3, 4].map((id) => ({ jsonrpc: '2.0', id, method: 'a' })));
      const out = await serve(body, true, c.signal);
      expect(getEventListeners(c.signal, 'abort'), 'no listener left on the transport').to.have.length(0);
      expect(started).to.deep.equal([
        [1, false],
        [2, false],
        [3, true],
        [4, true],
      ]);
      const answers = JSON.parse(out.body) as Array<{ id: number; error: { message: string } }>;
      expect(answers).to.have.length(4);
      expect(answers.map((e) => [e.id, e.error.message])).to.deep.equal([1, 2, 3, 4].map((id) => [id, 'the transport closed']));
    });
  });
});
