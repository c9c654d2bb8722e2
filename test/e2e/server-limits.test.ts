/**
 * The client-facing server limits, against the real listener over raw TCP:
 * - `server.readTimeout` (default 30s): a request's headers and body must arrive within it,
 *   HTTP 408 after (Node's `requestTimeout`, with the expiry check tightened): a stalled body
 *   and a slowloris header trickle are both cut, and the server keeps serving;
 * - `server.maxConnections` (default 0 = unlimited): connections beyond it are dropped without
 *   an answer while the others stay open; once one closes, a new one is served;
 * - `server.keepAliveTimeout` (default 65s): an idle keep-alive connection is closed by svc;
 * - the resolved defaults and the options the Node server really runs with.
 */
import { expect } from 'chai';
import { connect, type Socket } from 'node:net';
import type { Server } from 'node:http';
import { httpServerOptions } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { createLogger } from '../../lib/logger.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });

/** A raw HTTP/1.1 POST of {@link BODY}, keep-alive. */
const RAW_REQUEST = `POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\nConnection: keep-alive\r\n\r\n${BODY}`;

/** A raw client connection: what it received, and when the server closed it. */
interface RawClient {
  socket: Socket;
  /** Everything received so far (latin1). */
  data(): string;
  /** True once the socket closed (either side). */
  isClosed(): boolean;
  /** Resolves with `performance.now()` at close. */
  closed: Promise<number>;
}

/** Opens a TCP connection to the server and resolves once connected. */
function rawClient(port: number): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let closedFlag = false;
    // A server that drops the connection may reset it: that is an outcome, not a test failure.
    socket.on('error', () => undefined);
    socket.on('data', (b: Buffer) => (received += b.toString('latin1')));
    const closed = new Promise<number>((r) =>
      socket.once('close', () => {
        closedFlag = true;
        r(performance.now());
      }),
    );
    socket.once('connect', () => resolve({ socket, data: () => received, isClosed: () => closedFlag, closed }));
    socket.once('error', reject);
  });
}

/** Sends {@link RAW_REQUEST} on a raw client and waits for the whole JSON-RPC answer. */
async function rawCall(c: RawClient): Promise<string> {
  const before = c.data().length;
  c.socket.write(RAW_REQUEST);
  await waitFor(() => /"result":"0x[0-9a-f]+"\}$/.test(c.data().slice(before)) || c.isClosed(), 3000);
  return c.data().slice(before);
}

/** Resolves after `ms`. */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The number of connections the Node server holds. */
function connections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
}

/** svc in front of a fault-server upstream with these `server` settings. */
async function svcWith(upstream: FaultServer, server: Record<string, unknown>): Promise<SvcHandle> {
  return startSvc({
    ...NO_CACHE,
    logLevel: 'error',
    server,
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
        upstreams: [{ id: 'up', endpoint: upstream.url, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
      },
    ],
  });
}

describe('e2e: server limits', function () {
  this.timeout(15_000);

  let upstream: FaultServer;
  const open: RawClient[] = [];
  const raw = async (port: number) => {
    const c = await rawClient(port);
    open.push(c);
    return c;
  };
  const portOf = (svc: SvcHandle) => Number(new URL(svc.url).port);

  before(async () => {
    upstream = await startFaultServer({ chainId: CHAIN });
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.socket.destroy();
  });
  after(async () => {
    await upstream?.close();
  });

  describe('server.readTimeout 500ms', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await svcWith(upstream, { readTimeout: '500ms' });
    });
    after(async () => {
      await svc?.close();
    });

    it('runs the Node server with requestTimeout 500 and a check interval well under it', () => {
      const s = svc.proxy.server!;
      expect(s.requestTimeout).to.equal(500);
      expect(s.headersTimeout).to.equal(500);
      expect(httpServerOptions(svc.proxy.config.server).connectionsCheckingInterval).to.equal(125);
    });

    it('a body that stops arriving (Content-Length 100, 10 bytes sent) gets HTTP 408 and the connection is closed, within ~2 s', async () => {
      const c = await raw(portOf(svc));
      const t0 = performance.now();
      c.socket.write(`POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jsonrpc"`);
      const at = await Promise.race([c.closed, sleep(2500).then(() => -1)]);
      expect(at, 'the server closed the connection').to.be.greaterThan(0);
      const elapsed = at - t0;
      expect(elapsed, 'not before the read timeout').to.be.greaterThan(400);
      expect(elapsed, 'soon after the read timeout').to.be.lessThan(2000);
      expect(c.data()).to.match(/^HTTP\/1\.1 408 /);
      expect(upstream.calls.filter((x) => x.method === 'eth_blockNumber')).to.have.length(0);
    });

    it('a slowloris client (headers one byte every 200 ms) is cut with HTTP 408 within ~2 s', async () => {
      const c = await raw(portOf(svc));
      const head = `POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Padding: ${'p'.repeat(40)}\r\n`;
      const t0 = performance.now();
      let sent = 0;
      while (!c.isClosed() && sent < head.length && performance.now() - t0 < 3000) {
        c.socket.write(head[sent++]!);
        await sleep(200);
      }
      expect(c.isClosed(), 'the server closed the connection').to.equal(true);
      const elapsed = (await c.closed) - t0;
      expect(elapsed).to.be.greaterThan(400).and.lessThan(2000);
      expect(sent, 'the headers never completed').to.be.lessThan(head.length);
      expect(c.data()).to.match(/^HTTP\/1\.1 408 /);
    });

    it('after both, a normal request is served (raw keep-alive and undici)', async () => {
      const c = await raw(portOf(svc));
      expect(await rawCall(c)).to.match(/^HTTP\/1\.1 200 /);
      const r = await svc.post(PATH, BODY);
      expect(r.status).to.equal(200);
      expect(r.json.result).to.equal('0x10');
    });

    it('on a keep-alive connection idle longer than readTimeout, the next request is served (idle is not reading)', async () => {
      const c = await raw(portOf(svc));
      expect(await rawCall(c)).to.match(/^HTTP\/1\.1 200 /);
      await sleep(900);
      expect(c.isClosed(), 'still open: keepAliveTimeout is 65 s').to.equal(false);
      expect(await rawCall(c)).to.match(/^HTTP\/1\.1 200 .*"result":"0x10"\}$/s);
    });

    it('on a keep-alive connection, a second request whose body stalls gets HTTP 408', async () => {
      const c = await raw(portOf(svc));
      const first = await rawCall(c);
      expect(first).to.match(/^HTTP\/1\.1 200 /);
      const t0 = performance.now();
      c.socket.write(`POST ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jsonrpc"`);
      const at = await Promise.race([c.closed, sleep(2500).then(() => -1)]);
      expect(at, 'the server closed the connection').to.be.greaterThan(0);
      expect(at - t0)
        .to.be.greaterThan(400)
        .and.lessThan(2000);
      expect(c.data().slice(first.length)).to.match(/^HTTP\/1\.1 408 /);
    });

    it('a request received in time is answered even when the upstream takes longer than readTimeout', async () => {
      upstream.script({ kind: 'delay', ms: 900 });
      const c = await raw(portOf(svc));
      const t0 = performance.now();
      const answer = await rawCall(c);
      expect(answer).to.match(/^HTTP\/1\.1 200 .*"result":"0x10"\}$/s);
      expect(performance.now() - t0).to.be.greaterThan(850);
      expect(upstream.pendingSteps()).to.equal(0);
    });

    it('a request whose headers and body arrive slowly but within the timeout is served', async () => {
      const c = await raw(portOf(svc));
      const cut = RAW_REQUEST.length - 10;
      c.socket.write(RAW_REQUEST.slice(0, cut));
      await sleep(200);
      c.socket.write(RAW_REQUEST.slice(cut));
      await waitFor(() => /"result":"0x10"\}$/.test(c.data()), 2000);
      expect(c.data()).to.match(/^HTTP\/1\.1 200 /);
    });
  });

  describe('server.maxConnections 2', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await svcWith(upstream, { maxConnections: 2 });
    });
    after(async () => {
      await svc?.close();
    });

    it('sets the Node server maxConnections', () => {
      expect(svc.proxy.server!.maxConnections).to.equal(2);
    });

    it('with two idle keep-alive connections held, a third is closed without an answer; after one is released a request succeeds', async () => {
      const port = portOf(svc);
      const a = await raw(port);
      const b = await raw(port);
      expect(await rawCall(a)).to.match(/^HTTP\/1\.1 200 /);
      expect(await rawCall(b)).to.match(/^HTTP\/1\.1 200 /);
      expect(await connections(svc.proxy.server!)).to.equal(2);

      const third = await raw(port);
      third.socket.write(RAW_REQUEST);
      const at = await Promise.race([third.closed, sleep(2000).then(() => -1)]);
      expect(at, 'the third connection was closed by the server').to.be.greaterThan(0);
      expect(third.data(), 'no answer on the dropped connection').to.equal('');
      // The two held connections are untouched and still serve.
      expect(a.isClosed() || b.isClosed()).to.equal(false);
      expect(await rawCall(a)).to.match(/^HTTP\/1\.1 200 /);

      b.socket.destroy();
      await waitFor(async () => (await connections(svc.proxy.server!)) === 1, 2000);
      const c = await raw(port);
      expect(await rawCall(c)).to.match(/^HTTP\/1\.1 200 .*"result":"0x10"\}$/s);
    });
  });

  describe('server.keepAliveTimeout 300ms', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await svcWith(upstream, { keepAliveTimeout: '300ms' });
    });
    after(async () => {
      await svc?.close();
    });

    it('runs the Node server with keepAliveTimeout 300', () => {
      expect(svc.proxy.server!.keepAliveTimeout).to.equal(300);
    });

    // Node closes an idle keep-alive socket at keepAliveTimeout plus its own fixed 1 s grace
    // (HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER in node:_http_server), so ~1.3 s here.
    it('an idle keep-alive connection is closed by the server within ~1.5 s of its last answer (300 ms + Node’s 1 s grace)', async () => {
      const c = await raw(portOf(svc));
      const answer = await rawCall(c);
      expect(answer).to.match(/^HTTP\/1\.1 200 /);
      expect(answer.toLowerCase()).to.include('connection: keep-alive');
      const t0 = performance.now();
      const at = await Promise.race([c.closed, sleep(2500).then(() => -1)]);
      expect(at, 'the server closed the idle connection').to.be.greaterThan(0);
      expect(c.data()).to.equal(answer, 'nothing more was sent before the close');
      expect(at - t0)
        .to.be.greaterThan(250)
        .and.lessThan(2000);
    });
  });

  describe('defaults', () => {
    it('resolve to readTimeout 30s, keepAliveTimeout 65s, maxConnections 0 (unlimited)', () => {
      const proxy = createProxy({ config: {}, plugins: defaultPreset(), logger: createLogger('silent') });
      expect(proxy.config.server.readTimeoutMs).to.equal(30_000);
      expect(proxy.config.server.keepAliveTimeoutMs).to.equal(65_000);
      expect(proxy.config.server.maxConnections).to.equal(0);
      const o = httpServerOptions(proxy.config.server);
      expect(o).to.deep.include({ requestTimeout: 30_000, headersTimeout: 30_000, keepAliveTimeout: 65_000, connectionsCheckingInterval: 1000 });
    });

    it('a started svc runs its Node server with requestTimeout 30000, keepAliveTimeout 65000 and no connection cap', async () => {
      const svc = await svcWith(upstream, {});
      try {
        const s = svc.proxy.server!;
        expect(s.requestTimeout).to.equal(30_000);
        expect(s.headersTimeout).to.equal(30_000);
        expect(s.keepAliveTimeout).to.equal(65_000);
        expect(s.maxConnections ?? 0, 'unset: unlimited').to.be.oneOf([0, Infinity]);
        expect((await svc.post(PATH, BODY)).json.result).to.equal('0x10');
      } finally {
        await svc.close();
      }
    });

    it('readTimeout 0 turns the request timeout off (headers keep Node’s 60 s)', () => {
      const proxy = createProxy({ config: { server: { readTimeout: 0 } }, plugins: defaultPreset(), logger: createLogger('silent') });
      expect(httpServerOptions(proxy.config.server)).to.deep.include({ requestTimeout: 0, headersTimeout: 60_000 });
    });
  });
});
