/**
 * Inbound batches and single calls as served (core/serve.ts; spec §4.1, §4.2): the answer text
 * of a batch (one string while small, streamed element by element past 64 KiB or around raw
 * bytes), the caller's id on every answer, id null and -32603 for svc's own failure (§4.2 #6),
 * the body field `networkId`, and a body refused as a whole. Served through `serveJsonRpc`, the
 * entry other transports use, against a scripted network handler.
 */
import { expect } from 'chai';
import { SyncHook, SyncWaterfallHook } from 'tapable';
import type { CallContext, Directives, ExecutionRecord } from '../../../core/context.ts';
import { ErrEndpointRequestTimeout, ErrUpstreamsExhausted } from '../../../core/errors.ts';
import { RpcResult } from '../../../core/jsonrpc.ts';
import type { Proxy } from '../../../core/proxy.ts';
import { serveJsonRpc, smallBatchText, streamArray, type CallAnswer } from '../../../core/serve.ts';

const rec = {} as ExecutionRecord;
const answer = (text: CallAnswer['text']): CallAnswer => ({ text, status: 200, record: rec });

/** A proxy whose one network answers each method as scripted. */
function fakeProxy(script: Record<string, (ctx: CallContext) => Promise<RpcResult>>, server: Record<string, unknown> = {}) {
  const done: string[] = [];
  const errors: unknown[] = [];
  const network = { id: 'evm:1', handler: (ctx: CallContext) => (script[ctx.request.method] ?? (() => Promise.reject(new Error(`no script for ${ctx.request.method}`))))(ctx) };
  const callDone = new SyncHook<[CallContext]>(['ctx']);
  callDone.tap('t', (ctx) => void done.push(ctx.request.method));
  const proxy = {
    config: { server: { maxBodySize: 1 << 20, maxJsonDepth: 16, maxBatchSize: 10, batchConcurrency: 2, maxTimeoutMs: 5000, includeErrorDetails: false, ...server } },
    logger: { error: (o: unknown) => void errors.push(o) },
    hooks: { directives: new SyncWaterfallHook<[Directives, CallContext]>(['d', 'ctx']), callDone },
    getNetwork: async (_p: unknown, id: string) => (id === 'evm:1' ? network : undefined),
  } as unknown as Proxy;
  const info = { headers: {}, query: {}, remoteAddress: '127.0.0.1', clientAddress: '127.0.0.1', host: 'localhost', path: '/' };
  const serve = (body: string, withNetwork = true, signal?: AbortSignal) =>
    serveJsonRpc(proxy, { target: { project: { id: 'main' }, ...(withNetwork ? { network } : {}) } as never, info: info as never, body, signal });
  return { serve, done, errors };
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
      expect(JSON.parse(unknown.body).error).to.deep.equal({ code: -32602, message: 'network "evm:2" is not supported by project main' });
      const none = await serve('{"jsonrpc":"2.0","id":1,"method":"a"}', false);
      expect(none.status).to.equal(404);
      expect(JSON.parse(none.body).error.message).to.equal('no network: call /main/evm/<chainId> or set the body field networkId');
      const malformed = await serve('{"jsonrpc":"2.0","id":1,"method":"a","networkId":"evm:x"}', false);
      expect(JSON.parse(malformed.body).error.message).to.equal('network "evm:x" is not supported by project main');
    });

    it('a body that is not JSON: one error, id null, HTTP 400', async () => {
      const { serve } = fakeProxy({});
      const out = await serve('[{"jsonrpc"');
      expect(out).to.deep.equal({ body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"failed to parse json-rpc request"}}', batch: false, status: 400, records: [] });
    });

    it('a body over server.maxBodySize: HTTP 413 naming the limit', async () => {
      const { serve } = fakeProxy({}, { maxBodySize: 10 });
      const out = await serve('{"jsonrpc":"2.0","id":1,"method":"a"}');
      expect(out.status).to.equal(413);
      expect(JSON.parse(out.body)).to.deep.equal({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'request body exceeds server.maxBodySize (10 bytes)' } });
      const { serve: exact } = fakeProxy({ a: ok(1) }, { maxBodySize: 37 });
      expect((await exact('{"jsonrpc":"2.0","id":1,"method":"a"}')).status).to.equal(200);
    });

    it('a batch over server.maxBatchSize: one error for the whole body (id null), the limit named', async () => {
      const { serve } = fakeProxy({ a: ok(1) }, { maxBatchSize: 2 });
      const out = await serve(JSON.stringify([1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'a' }))));
      expect(out).to.deep.equal({ body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch of 3 requests exceeds server.maxBatchSize (2)"}}', batch: false, status: 400, records: [] });
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
