/**
 * Small deviations from the interface document, through the real server (spec §2.8 #10, §4.4,
 * §4.7 #4, §7): admin methods that take no params refuse extra ones, `svc_project` latencies are
 * milliseconds, an unknown integrity level is refused instead of silently ignored, and a single
 * object answering an outbound batch names the request ids svc sent.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

const ADMIN = 'admin-secret-small-deviations-0123';
const H = { 'x-svc-secret-token': ADMIN };
const A = 31337;
const B = 31338;
const BATCH_CHAIN = 31339;
const SLOW_CHAIN = 31340;
/** Delay of the slow upstream, ms: its p50 must read as tens of milliseconds, not hundredths. */
const SLOW_MS = 40;
const rpc = (method: string, params?: unknown, id: unknown = 1) => ({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

/** An upstream that answers every batch with one object (id 12) and records the ids it was sent. */
async function startSingleObjectUpstream(): Promise<{ url: string; server: Server; batches: number[][] }> {
  const batches: number[][] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const doc = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: number; method: string } | Array<{ id: number }>;
      res.setHeader('content-type', 'application/json');
      if (!Array.isArray(doc)) {
        const result = doc.method === 'eth_chainId' ? `0x${BATCH_CHAIN.toString(16)}` : '0x1';
        return res.end(JSON.stringify({ jsonrpc: '2.0', id: doc.id, result }));
      }
      batches.push(doc.map((e) => e.id));
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 12, result: '0x1' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, batches };
}

describe('e2e: small deviations (admin params, latency units, unknown integrity levels, single-object batch answers)', function () {
  this.timeout(60_000);
  let anvilA: AnvilHandle;
  let anvilB: AnvilHandle;
  let slow: FaultServer;
  let single: Awaited<ReturnType<typeof startSingleObjectUpstream>>;
  let svc: SvcHandle;
  const admin = (method: string, params?: unknown) => svc.post('/admin', rpc(method, params), H);

  before(async () => {
    [anvilA, anvilB, slow, single] = await Promise.all([
      startAnvil({ chainId: A }),
      startAnvil({ chainId: B }),
      startFaultServer({ chainId: SLOW_CHAIN }),
      startSingleObjectUpstream(),
    ]);
    slow.setDefault({ kind: 'delay', ms: SLOW_MS });
    const net = (chainId: number, extra: Record<string, unknown> = {}) => ({
      architecture: 'evm',
      evm: { chainId },
      selectionPolicy: { evalInterval: '1h' },
      ...extra,
    });
    svc = await startSvc({
      logLevel: 'error',
      ...NO_CACHE,
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      projects: [
        {
          id: 'main',
          networks: [
            net(A, { integrity: { headerMode: 'allow', profiles: { indexer: { eth_getLogs: 'intrinsic', '*': 'off' } } } }),
            net(B, { integrity: { headerMode: 'deny' } }),
          ],
          upstreams: [
            { id: 'a', endpoint: anvilA.url, evm: { chainId: A } },
            { id: 'b', endpoint: anvilB.url, evm: { chainId: B } },
          ],
        },
        { id: 'slow', networks: [net(SLOW_CHAIN)], upstreams: [{ id: 'slow', endpoint: slow.url, evm: { chainId: SLOW_CHAIN, statePollerInterval: 0 } }] },
        {
          id: 'batch',
          networks: [net(BATCH_CHAIN)],
          upstreams: [
            {
              id: 'single',
              endpoint: single.url,
              evm: { chainId: BATCH_CHAIN, statePollerInterval: 0 },
              jsonRpc: { supportsBatch: true, batchMaxSize: 3, batchMaxWait: '20ms' },
            },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([anvilA?.stop(), anvilB?.stop(), slow?.close()]);
    single?.server.closeAllConnections();
    await new Promise((r) => single?.server.close(r));
  });

  describe('admin methods that take no params', () => {
    for (const method of ['svc_taxonomy', 'svc_config']) {
      it(`§4.4 ${method} — extra params are InvalidRequest`, async () => {
        for (const params of [['main'], [{}], { projectId: 'main' }, 'main', 1]) {
          const r = await admin(method, params);
          expect(r.status, JSON.stringify(params)).to.equal(400);
          expect(r.json.error.code, JSON.stringify(params)).to.equal(-32600);
          expect(r.json.error.message).to.match(/^InvalidRequest: requires params: /);
        }
        // No params, in every spelling of "none", still answers.
        for (const params of [undefined, null, [], {}]) {
          const r = await admin(method, params);
          expect(r.status, JSON.stringify(params)).to.equal(200);
          expect(r.json.result).to.be.an('object');
        }
      });
    }

    it('§4.4 svc_project — latencyMs fields hold milliseconds', async () => {
      for (let i = 0; i < 5; i++) {
        const r = await svc.post(`/slow/evm/${SLOW_CHAIN}`, rpc('eth_blockNumber', [], i));
        expect(r.status).to.equal(200);
      }
      const r = await admin('svc_project', ['slow']);
      const up = r.json.result.networks[0].upstreams.find((u: { id: string }) => u.id === 'slow');
      for (const q of ['p50', 'p90', 'p99']) {
        // Each answer took at least SLOW_MS; in seconds the value would be 0.04.
        expect(up.latencyMs[q], q).to.be.within(SLOW_MS * 0.9, 2_000);
      }
    });
  });

  describe('unknown integrity levels', () => {
    const path = `/main/evm/${A}`;

    it('§2.8 #10 — an unknown integrity level is refused naming the valid ones', async () => {
      for (const [q, headers] of [
        ['', { 'x-svc-integrity': 'intrinsict' }],
        ['?integrity=bogus', {}],
      ] as Array<[string, Record<string, string>]>) {
        const r = await svc.post(path + q, rpc('eth_blockNumber', []), headers);
        expect(r.status).to.equal(400);
        expect(r.json.error.code).to.equal(-32600);
        expect(r.json.error.message).to.include('off, intrinsic, corroborated, authoritative');
        expect(r.json.error.message).to.include('indexer');
        expect(r.json.error.message).to.include(`evm:${A}`);
      }
      // The HTTP status of svc's other invalid directive: a use-upstream selector over 256 characters.
      const longSelector = await svc.post(path, rpc('eth_blockNumber', []), { 'x-svc-use-upstream': 'x'.repeat(300) });
      const unknown = await svc.post(path, rpc('eth_blockNumber', []), { 'x-svc-integrity': 'bogus' });
      expect(unknown.status).to.equal(longSelector.status);
      expect(unknown.json.error.code).to.equal(longSelector.json.error.code);
      // A long value is echoed bounded.
      const long = await svc.post(path, rpc('eth_blockNumber', []), { 'x-svc-integrity': 'z'.repeat(5000) });
      expect(long.status).to.equal(400);
      expect(long.json.error.message.length).to.be.below(400);
    });

    it('§2.8 #10 — known levels (any case) and profiles still serve; headerMode deny ignores an unknown value', async () => {
      for (const value of ['Intrinsic', 'off', 'indexer', '']) {
        const r = await svc.post(path, rpc('eth_blockNumber', []), { 'x-svc-integrity': value });
        expect(r.status, value).to.equal(200);
        expect(r.json.result, value).to.match(/^0x/);
      }
      const denied = await svc.post(`/main/evm/${B}`, rpc('eth_blockNumber', []), { 'x-svc-integrity': 'bogus' });
      expect(denied.status).to.equal(200);
      expect(denied.json.result).to.match(/^0x/);
    });

    it('§2.8 #10 — in a batch an unknown level fails only the elements on a network that honours it', async () => {
      const body = [
        { ...rpc('eth_blockNumber', [], 1), networkId: `evm:${A}` },
        { ...rpc('eth_blockNumber', [], 2), networkId: `evm:${B}` },
      ];
      const r = await svc.post('/main', body, { 'x-svc-integrity': 'bogus' });
      expect(r.status).to.equal(200);
      expect(r.json).to.have.length(2);
      expect(r.json[0].id).to.equal(1);
      expect(r.json[0].error.code).to.equal(-32600);
      expect(r.json[0].error.message).to.include('authoritative');
      expect(r.json[1].id).to.equal(2);
      expect(r.json[1].result).to.match(/^0x/);
    });
  });

  describe('outbound batches', () => {
    it('§4.7 #4 — a single object answering a batch names the queued request ids', async () => {
      single.batches.length = 0;
      const calls = [1, 2, 3].map((i) => rpc('web3_sha3', [`0x0${i}`], i));
      const r = await svc.post(`/batch/evm/${BATCH_CHAIN}`, calls);
      expect(r.status).to.equal(200);
      expect(r.json).to.have.length(3);
      const sent = new Set(single.batches.flat());
      expect(sent.size).to.be.at.least(3);
      for (const a of r.json as Array<{ error?: { message: string } }>) {
        expect(a.error, JSON.stringify(a)).to.be.an('object');
        const m = a.error!.message;
        expect(m).to.not.include('NaN');
        const named = /answered a batch of (\d+) requests \(ids? ([\d, ]+)\) with a single object \(id 12\)/.exec(m);
        expect(named, m).to.not.equal(null);
        const ids = named![2]!.split(', ').map(Number);
        expect(ids).to.have.length(Number(named![1]));
        for (const id of ids) expect(sent.has(id), `${id} in ${[...sent].join(',')}`).to.equal(true);
      }
    });
  });
});
