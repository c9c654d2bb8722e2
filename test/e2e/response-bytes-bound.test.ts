/**
 * End-to-end: the global bound on response bytes in flight (`server.maxResponseBytesInFlight`,
 * spec §8). An upstream streams 30 MB answers to `eth_call` slowly; six run at once under a
 * 64 MiB bound. Calls past the bound get HTTP 503 / -32005 `ErrResponseBytesInFlightExceeded`,
 * memory growth stays bounded, and small calls (alone or in the same batch) are still served.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { builtinResult } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT, RESPONSE_BYTES } from '../../lib/body.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const BIG = 30 * 1024 * 1024;
const MIB = 1024 * 1024;

/** An upstream answering `eth_call` with a BIG-byte result sent 1 MiB every 10 ms; everything else small. */
async function startBigUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as
        | { id: unknown; method: string; params: unknown }
        | Array<{ id: unknown; method: string; params: unknown }>;
      const one = (r: { id: unknown; method: string; params: unknown }) =>
        JSON.stringify({ jsonrpc: '2.0', id: r.id, result: r.method === 'eth_getBalance' ? '0x1' : builtinResult(r.method, r.params, CHAIN) });
      if (Array.isArray(body) || body.method !== 'eth_call') {
        const text = Array.isArray(body) ? `[${body.map(one).join(',')}]` : one(body);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      const head = Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(body.id)},"result":"0x`);
      const tail = Buffer.from('"}');
      const hexLen = BIG - head.length - tail.length;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': BIG });
      res.write(head);
      let sent = 0;
      const chunk = Buffer.alloc(MIB, 0x61);
      const tick = () => {
        if (res.destroyed) return;
        const n = Math.min(MIB, hexLen - sent);
        if (n <= 0) return void res.end(tail);
        res.write(n === MIB ? chunk : chunk.subarray(0, n));
        sent += n;
        setTimeout(tick, 10);
      };
      tick();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('e2e: global bound on response bytes in flight', function () {
  this.timeout(60_000);

  let up: { url: string; server: Server };
  let svc: SvcHandle;
  const path = `/main/evm/${CHAIN}`;

  before(async () => {
    up = await startBigUpstream();
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: { maxResponseBytesInFlight: '64MiB' },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [{ id: 'big', endpoint: up.url, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
        },
      ],
    });
  });

  after(async () => {
    await svc?.close();
    // The bound is per process: later suites in this process get the default back.
    RESPONSE_BYTES.limit = DEFAULT_MAX_RESPONSE_BYTES_IN_FLIGHT;
    up?.server.closeAllConnections();
    await new Promise((r) => up?.server.close(r));
  });

  it('refuses calls past the bound with 503 / -32005, keeps memory bounded and serves small calls', async () => {
    expect((await svc.post(path, rpcBody('eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']))).json.result).to.equal('0x1');
    global.gc?.();
    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const call = (i: number) =>
      svc.post(path, rpcBody('eth_call', [{ to: '0x0000000000000000000000000000000000000001', data: `0x${i.toString(16).padStart(8, '0')}` }, 'latest'], i));
    const bigCalls = [1, 2, 3, 4, 5, 6].map(call);
    // While the big answers stream, a small call and a batch mixing both are served.
    await new Promise((r) => setTimeout(r, 100));
    const small = await svc.post(path, rpcBody('eth_getBalance', ['0x0000000000000000000000000000000000000002', 'latest'], 7));
    const batch = await svc.post(path, [
      rpcBody('eth_call', [{ to: '0x0000000000000000000000000000000000000001', data: '0x09' }, 'latest'], 8),
      rpcBody('eth_getBalance', ['0x0000000000000000000000000000000000000003', 'latest'], 9),
    ]);
    const results = await Promise.all(bigCalls);
    clearInterval(sampler);
    expect(small.status).to.equal(200);
    expect(small.json.result).to.equal('0x1');
    const batchSmall = (batch.json as Array<{ id: number; result?: unknown }>).find((e) => e.id === 9);
    expect(batchSmall?.result, batch.text.slice(0, 300)).to.equal('0x1');
    const served = results.filter((r) => r.status === 200 && typeof r.json?.result === 'string');
    const refused = results.filter((r) => r.json?.error?.code === -32005);
    expect(served.length, 'at least one big answer is served').to.be.at.least(1);
    expect(refused.length, 'calls past the bound are refused').to.be.at.least(3);
    for (const r of refused) {
      expect(r.status).to.equal(503);
      expect(r.json.error.message).to.match(/maxResponseBytesInFlight/);
    }
    // 6 × 30 MB unbounded costs several hundred MB (buffer, text, parsed value); bounded, about 2 at once.
    expect((peak - base) / MIB, 'RSS growth, MiB').to.be.below(400);
    // Every byte taken was given back.
    expect(RESPONSE_BYTES.inFlight).to.equal(0);
  });
});
