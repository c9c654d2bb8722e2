/**
 * The bds plugin's transport against a fake BDS gRPC server (test/helpers/bds-server.ts) fed by a scripted node: who is blamed for
 * a cancelled call, how an answer is bounded before and while it is decoded and converted (the call's cap, the process's
 * response-bytes budget, the deadline), what a call refused before sending becomes, `grpc.headers` that cannot be sent, and a
 * closed transport.
 */
import { expect } from 'chai';
import { status as Status } from '@grpc/grpc-js';
import type { ResolvedUpstream } from 'svc-proxy/plugin';
import { ErrEndpointParamsUnsupported } from '../../../plugins/bds/errors.ts';
import { metadataOf } from '../../../plugins/bds/metadata.ts';
import { bdsRoot } from '../../../plugins/bds/proto.ts';
import { emptyJsonBytes, minJsonSize } from '../../../plugins/bds/size.ts';
import { BdsTransport, CONVERT_SLICE, DEFAULT_MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES } from '../../../plugins/bds/transport.ts';
import { RESPONSE_BYTES } from '../../../lib/body.ts';
import { DeadlineReason } from '../../../core/registry/deadline.ts';
import { SvcError } from '../../../core/wire/errors.ts';
import { startBdsServer, type BdsServer, type NodeRpc } from '../../helpers/bds-server.ts';
import { NO_CACHE, startSvc } from '../../helpers/svc.ts';

const H = (b: string) => `0x${b.repeat(32)}`;
const A = (b: string) => `0x${b.repeat(20)}`;

/** A log as a node writes it. */
function nodeLog(i: number): Record<string, unknown> {
  return {
    address: A('aa'),
    topics: [H('01')],
    data: H('02'),
    blockNumber: '0x3',
    blockHash: H('03'),
    transactionHash: H('04'),
    transactionIndex: '0x0',
    logIndex: `0x${i.toString(16)}`,
    removed: false,
  };
}

/** {@link nodeLog} as the BDS model. */
function wireLog(i: number): Record<string, unknown> {
  const b = (h: string) => Buffer.from(h.slice(2), 'hex');
  return {
    address: b(A('aa')),
    topics: [b(H('01'))],
    data: b(H('02')),
    blockNumber: '3',
    blockHash: b(H('03')),
    transactionHash: b(H('04')),
    transactionIndex: 0,
    logIndex: i,
  };
}

/** A node that answers the chain id and `logs` for any eth_getLogs. */
function scriptedNode(logs: () => unknown[]): NodeRpc {
  return async (method) => {
    if (method === 'eth_chainId') return '0x1';
    if (method === 'eth_getLogs') return logs();
    if (method === 'eth_getTransactionByHash') return null;
    return null;
  };
}

/** A GetLogsResponse of `n` empty logs: 2 bytes each on the wire. */
function emptyLogs(n: number): Buffer {
  const t = bdsRoot().lookupType('bds.evm.GetLogsResponse');
  return Buffer.from(t.encode(t.fromObject({ logs: Array.from({ length: n }, () => ({})) })).finish());
}

function upstream(endpoint: string, settings: Record<string, unknown> = {}): ResolvedUpstream {
  return { id: 'bds1', endpoint, vendor: 'unknown', chainId: 1, ignoreMethods: [], allowMethods: [], tags: [], headers: {}, settings };
}

const RANGE = [{ fromBlock: '0x1', toBlock: '0x3' }];

describe('bds plugin: the transport against a BDS server', function () {
  this.timeout(20_000);
  let logs: unknown[] = [];
  let server: BdsServer;
  let t: BdsTransport;
  const send = (method: string, params: unknown, opts: { signal?: AbortSignal; maxResponseSize?: number } = {}) =>
    t.send({ method, params, signal: opts.signal ?? new AbortController().signal, maxResponseSize: opts.maxResponseSize ?? 64 * 1024 * 1024 });
  const failure = async (p: Promise<unknown>): Promise<SvcError> => {
    try {
      await p;
    } catch (e) {
      expect(e, String(e)).to.be.instanceOf(SvcError);
      return e as SvcError;
    }
    throw new Error('expected a rejection');
  };

  before(async () => {
    server = await startBdsServer(scriptedNode(() => logs));
    t = new BdsTransport(upstream(server.endpoint), { headers: {}, poolSize: 1 });
  });
  after(async () => {
    await t?.destroy();
    await server?.stop();
  });
  /** Bytes other suites hold in the process-wide budget: this suite's calls must give back exactly what they took. */
  let base = 0;
  let limit = 0;
  beforeEach(() => {
    base = RESPONSE_BYTES.inFlight;
    limit = RESPONSE_BYTES.limit;
  });
  afterEach(() => {
    server.faults.clear();
    logs = [];
    RESPONSE_BYTES.limit = limit;
  });

  it("a CANCELLED status from the server (a proxy's stream reset) is an upstream fault: retryable, so the call fails over", async () => {
    server.faults.set('GetLogs', { code: Status.CANCELLED, message: 'stream reset by the load balancer' });
    const e = await failure(send('eth_getLogs', RANGE));
    expect(e.name).to.equal('ErrEndpointServerSideException');
    expect((e.constructor as typeof SvcError).retryable).to.equal(true);
  });

  it("svc's own abort is a cancellation, its deadline a timeout", async () => {
    server.faults.set('GetLogs', { hang: true });
    const ac = new AbortController();
    const before = server.calls('GetLogs');
    const cancelled = send('eth_getLogs', RANGE, { signal: ac.signal });
    await waitUntil(() => server.calls('GetLogs') === before + 1);
    ac.abort();
    expect((await failure(cancelled)).name).to.equal('ErrCancelled');
    const late = new AbortController();
    const timedOut = send('eth_getLogs', RANGE, { signal: late.signal });
    await waitUntil(() => server.calls('GetLogs') === before + 2);
    late.abort(new DeadlineReason());
    expect((await failure(timedOut)).name).to.equal('ErrEndpointRequestTimeout');
  });

  it('an answer whose JSON would pass the cap is refused before it is decoded: by its bytes, and by its count of messages', async () => {
    // 60 KB of protobuf is at least 90 KB of JSON.
    server.faults.set('GetLogs', { raw: Buffer.concat([emptyLogs(1), Buffer.alloc(60_000, 0)]) });
    let e = await failure(send('eth_getLogs', RANGE, { maxResponseSize: 64 * 1024 }));
    expect(e.name).to.equal('ErrUpstreamMalformedResponse');
    expect(e.message).to.match(/larger than maxResponseSize \(65536 bytes; 60002 bytes of protobuf, at least \d+ bytes as JSON\)/);
    // 40 KB of empty logs would be over 6 MB of JSON objects.
    server.faults.set('GetLogs', { raw: emptyLogs(20_000) });
    e = await failure(send('eth_getLogs', RANGE, { maxResponseSize: 1024 * 1024 }));
    expect(e.message).to.match(/40000 bytes of protobuf, at least \d{7} bytes as JSON/);
    expect(RESPONSE_BYTES.inFlight).to.equal(base);
  });

  it("the least JSON size is a lower bound of svc's own conversion", () => {
    const type = bdsRoot().lookupType('bds.evm.GetLogsResponse');
    const bytes = emptyLogs(100);
    expect(minJsonSize(type, bytes)).to.equal(100 * emptyJsonBytes('bds.evm.Log'));
    expect(emptyJsonBytes('bds.evm.Log')).to.be.greaterThan(150);
    // Real logs: the bytes bound holds (their JSON is between two and three times their protobuf).
    const real = Buffer.from(type.encode(type.fromObject({ logs: Array.from({ length: 50 }, (_, i) => wireLog(i)) })).finish());
    const json = JSON.stringify(Array.from({ length: 50 }, (_, i) => nodeLog(i)));
    expect(json.length / real.length).to.be.within(2, 3);
    expect(minJsonSize(type, real)).to.be.below(json.length);
  });

  it("an answer's bytes count in the process's response-bytes budget (server.maxResponseBytesInFlight)", async () => {
    logs = [nodeLog(0)];
    RESPONSE_BYTES.limit = base + 16;
    const e = await failure(send('eth_getLogs', RANGE));
    expect(e.name).to.equal('ErrResponseBytesInFlightExceeded');
    expect(RESPONSE_BYTES.inFlight).to.equal(base);
    RESPONSE_BYTES.limit = base + 1024 * 1024;
    const ok = await send('eth_getLogs', RANGE);
    expect(ok.result).to.deep.equal([nodeLog(0)]);
    expect(RESPONSE_BYTES.inFlight).to.equal(base);
  });

  it('a long list is decoded and converted a slice at a time with its bytes held: a deadline passing meanwhile fails the attempt as a timeout', async () => {
    logs = Array.from({ length: CONVERT_SLICE * 20 }, (_, i) => nodeLog(i));
    const ac = new AbortController();
    let heldWhileConverting = 0;
    // Polls each turn of the event loop: the answer's bytes are taken when it is decoded, and stay taken while it is converted.
    const poll = () => {
      if (RESPONSE_BYTES.inFlight > base) {
        heldWhileConverting = RESPONSE_BYTES.inFlight - base;
        ac.abort(new DeadlineReason());
      } else if (!ac.signal.aborted) setImmediate(poll);
    };
    const p = send('eth_getLogs', RANGE, { signal: ac.signal, maxResponseSize: 256 * 1024 * 1024 });
    setImmediate(poll);
    const e = await failure(p);
    ac.abort();
    expect(e.name).to.equal('ErrEndpointRequestTimeout');
    expect(heldWhileConverting).to.be.greaterThan(CONVERT_SLICE * 20 * 100);
    expect(RESPONSE_BYTES.inFlight).to.equal(base);
  });

  it('a list that does not decode fails the attempt as malformed, its bytes released', async () => {
    server.faults.set('GetLogs', { raw: Buffer.from('0a05ffffffff'.repeat(8), 'hex') });
    const e = await failure(send('eth_getLogs', RANGE));
    expect(e.name).to.equal('ErrUpstreamMalformedResponse');
    expect(e.message).to.match(/malformed message: not a GetLogs response/);
    expect(RESPONSE_BYTES.inFlight).to.equal(base);
  });

  it('a converted list over the cap fails as the JSON grows, not after it is whole', async () => {
    // 50 logs: about 8.3 KB of protobuf, at least 12.5 KB of JSON by the estimate, 23 KB in fact.
    logs = Array.from({ length: 50 }, (_, i) => nodeLog(i));
    const e = await failure(send('eth_getLogs', RANGE, { maxResponseSize: 14_000 }));
    expect(e.message).to.match(/larger than maxResponseSize \(14000 bytes; over 14000 bytes as JSON\)/);
  });

  it('params BDS cannot carry are ErrEndpointParamsUnsupported (not the method), a method it lacks ErrEndpointUnsupported; nothing is sent', async () => {
    const n = server.calls();
    const tag = await failure(send('eth_getLogs', [{ fromBlock: 'latest' }]));
    expect(tag).to.be.instanceOf(ErrEndpointParamsUnsupported);
    expect(tag.name).to.equal('ErrEndpointParamsUnsupported');
    expect(tag.code).to.equal(-32601);
    expect((tag.constructor as typeof SvcError).retryable).to.equal(true);
    expect((await failure(send('eth_getTransactionByHash', [42]))).name).to.equal('ErrEndpointParamsUnsupported');
    expect((await failure(send('eth_getBalance', [A('aa'), 'latest']))).name).to.equal('ErrEndpointUnsupported');
    expect(server.calls()).to.equal(n);
  });

  it('a server refusing a block tag (UNSUPPORTED_BLOCK_TAG) refuses the params, not the method', async () => {
    server.faults.set('GetLogs', { code: Status.INVALID_ARGUMENT, message: 'no tags', bdsCode: 'UNSUPPORTED_BLOCK_TAG' });
    expect((await failure(send('eth_getLogs', RANGE))).name).to.equal('ErrEndpointParamsUnsupported');
  });

  it('eth_getLogs with both blockHash and a range is invalid params (-32602), as a node answers, without asking the server', async () => {
    const n = server.calls();
    for (const filter of [
      { blockHash: H('05'), fromBlock: '0x1' },
      { blockHash: H('05'), toBlock: 'latest' },
    ]) {
      const e = await failure(send('eth_getLogs', [filter]));
      expect(e.name).to.equal('ErrEndpointClientSideException');
      expect(e.code).to.equal(-32602);
      expect(e.message).to.equal('cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other');
    }
    expect(server.calls()).to.equal(n);
  });

  it('a closed transport fails a call with ErrEndpointServerSideException (the call goes elsewhere), never a raw error', async () => {
    const closed = new BdsTransport(upstream(server.endpoint), { headers: {}, poolSize: 1 });
    await closed.close();
    const e = await failure(closed.send({ method: 'eth_getLogs', params: RANGE, signal: new AbortController().signal, maxResponseSize: 1024 }));
    expect(e.name).to.equal('ErrEndpointServerSideException');
    expect(e.message).to.include('closed');
    // A channel shut down under the transport (grpc-js throws "Channel has been shut down" from makeUnaryRequest) fails the same way.
    const shut = new BdsTransport(upstream(server.endpoint), { headers: {}, poolSize: 1 });
    for (const c of (shut as unknown as { clients: Array<{ close(): void }> }).clients) c.close();
    const raw = await failure(shut.send({ method: 'eth_getLogs', params: RANGE, signal: new AbortController().signal, maxResponseSize: 1024 }));
    expect(raw.name).to.equal('ErrEndpointServerSideException');
    await shut.destroy();
  });
});

describe('bds plugin: receive cap and metadata', () => {
  it('grpc.maxMessageSize (32 MiB by default, at most 100 MiB) and maxResponseSize cap what is received', async () => {
    const of = (settings: Record<string, unknown>, maxMessageSize?: number) =>
      new BdsTransport(upstream('grpc://127.0.0.1:1', settings), { headers: {}, poolSize: 1, maxMessageSize });
    const cases: Array<[BdsTransport, number]> = [
      [of({ maxResponseSize: 256 * 1024 * 1024 }), DEFAULT_MAX_MESSAGE_BYTES],
      [of({ maxResponseSize: 1024 }), 1024],
      [of({ maxResponseSize: 256 * 1024 * 1024 }, 64 * 1024 * 1024), 64 * 1024 * 1024],
      [of({}, 1024 * 1024 * 1024), MAX_MESSAGE_BYTES],
    ];
    for (const [t, want] of cases) {
      expect(t.maxMessageSize).to.equal(want);
      await t.destroy();
    }
  });

  it('a header that cannot be sent is refused naming the header, never quoting its value', () => {
    const secret = 'Bearer s3cret\u00e9-token';
    const bad: Array<Record<string, string>> = [
      { authorization: secret },
      { 'x-a': 'line\nbreak s3cret' },
      { connection: 'keep-alive' },
      { 'Transfer-Encoding': 'chunked' },
      { te: 'gzip' },
      { ':authority': 'evil.example' },
      { 'grpc-timeout': '1S' },
      { 'x-key-bin': 'AAAA' },
    ];
    for (const h of bad) {
      const name = Object.keys(h)[0] as string;
      expect(() => metadataOf(h), name)
        .to.throw(TypeError)
        .with.property('message')
        .that.includes(JSON.stringify(name))
        .and.not.match(/s3cret|keep-alive|chunked|gzip|evil|1S|AAAA/);
    }
    expect(metadataOf({ TE: 'trailers', Authorization: 'Bearer x' }).getMap()).to.deep.equal({ te: 'trailers', authorization: 'Bearer x' });
  });
});

async function waitUntil(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).to.equal(true);
}

describe('bds plugin: autoIgnoreUnsupportedMethods', function () {
  this.timeout(20_000);

  it("one call's params BDS cannot carry do not switch the method off on the upstream; a method BDS lacks does", async () => {
    const server = await startBdsServer(scriptedNode(() => [nodeLog(0)]));
    const svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
          upstreams: [{ id: 'bds', endpoint: server.endpoint, evm: { chainId: 1 }, autoIgnoreUnsupportedMethods: true }],
        },
      ],
    });
    try {
      const path = '/main/evm/1';
      const body = (method: string, params: unknown[]) => ({ jsonrpc: '2.0', id: 1, method, params });
      const tagged = await svc.post(path, body('eth_getLogs', [{ fromBlock: 'latest', toBlock: 'latest' }]));
      expect(tagged.json.error, JSON.stringify(tagged.json)).to.not.equal(undefined);
      expect(tagged.headers['x-svc-error']).to.include('ErrEndpointParamsUnsupported');
      const served = await svc.post(path, body('eth_getLogs', RANGE));
      expect(served.json.result, JSON.stringify(served.json)).to.deep.equal([nodeLog(0)]);
      expect(server.calls('GetLogs')).to.equal(1);
      // A method BDS has no RPC for is the method's answer: ignored from then on, as for an HTTP node.
      await svc.post(path, body('eth_getBalance', [A('aa'), 'latest']));
      expect(svc.proxy.projects.get('main')?.upstreams.get('bds')?.supportsMethod('eth_getBalance')).to.equal(false);
      expect(svc.proxy.projects.get('main')?.upstreams.get('bds')?.supportsMethod('eth_getLogs')).to.equal(true);
    } finally {
      await svc.close();
      await server.stop();
    }
  });
});
