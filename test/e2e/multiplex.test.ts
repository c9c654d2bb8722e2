/**
 * Multiplexing (spec §2.7, §3.4, §4.6) against the real server: a fake
 * upstream holds its answers until the test releases them, so followers can be counted while
 * the leader's call is in flight.
 */
import { expect } from 'chai';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { request } from 'undici';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { MULTIPLEX_SERVICE, multiplexKey, type MultiplexService } from '../../plugins/multiplex/index.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const ADDR = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';

/** A fake upstream whose `eth_getBalance` / `eth_call` answers wait for {@link Gate.release}. */
interface Gate {
  url: string;
  /** Held calls per method received so far. */
  received: Map<string, number>;
  /** Answers every held call with `result` (or `error`). */
  release(answer?: { result?: unknown; error?: { code: number; message: string } }): void;
  close(): Promise<void>;
}

async function startGate(): Promise<Gate> {
  const held: Array<{ id: unknown; res: ServerResponse }> = [];
  const received = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const { id, method } = JSON.parse(Buffer.concat(chunks).toString()) as { id: unknown; method: string };
      const send = (body: object) => res.end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
      if (method === 'eth_chainId') return send({ result: `0x${CHAIN.toString(16)}` });
      if (method === 'eth_getBalance' || method === 'eth_call') {
        received.set(method, (received.get(method) ?? 0) + 1);
        held.push({ id, res });
        return;
      }
      send({ result: null });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    received,
    release(answer = { result: '0x64' }) {
      for (const { id, res } of held.splice(0)) if (!res.destroyed) res.end(JSON.stringify({ jsonrpc: '2.0', id, ...answer }));
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('e2e: multiplexing (spec §4.6)', function () {
  this.timeout(30_000);
  let gate: Gate;
  let svc: SvcHandle;
  let off: SvcHandle;

  const config = (multiplexing?: boolean) => ({
    logLevel: 'error',
    server: { batchConcurrency: 1000 },
    projects: [
      {
        id: 'main',
        networkDefaults: multiplexing === undefined ? {} : { multiplexing },
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
        upstreams: [{ id: 'gate', endpoint: gate.url, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
      },
    ],
  });
  const network = (h: SvcHandle) => h.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
  const mux = (h: SvcHandle) => h.proxy.services.require<MultiplexService>(MULTIPLEX_SERVICE);
  const balance = (id: number | string, block = '0x1') => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [ADDR, block] });

  before(async () => {
    gate = await startGate();
    svc = await startSvc(config());
    off = await startSvc(config(false));
  });
  after(async () => {
    await svc?.close();
    await off?.close();
    await gate?.close();
  });
  beforeEach(() => gate.received.clear());

  it('1,000 identical calls cost exactly one upstream call; each caller gets its own id', async () => {
    const batch = Array.from({ length: 1000 }, (_, i) => balance(i + 1));
    const pending = svc.post(PATH, batch);
    await waitFor(() => mux(svc).waiting(network(svc)) === 999 && gate.received.get('eth_getBalance') === 1, 10_000);
    gate.release({ result: '0x64' });
    const res = await pending;
    expect(res.status).to.equal(200);
    const answers = res.json as Array<{ id: number; result: string }>;
    expect(answers.map((a) => a.id)).to.deep.equal(batch.map((b) => b.id));
    expect(answers.every((a) => a.result === '0x64')).to.equal(true);
    expect(gate.received.get('eth_getBalance')).to.equal(1);
    expect(mux(svc).inFlight(network(svc))).to.equal(0);
    const metrics = await (await fetch(svc.metricsUrl!)).text();
    expect(metrics).to.match(/svc_network_multiplexed_request_total\{[^}]*category="eth_getBalance"[^}]*\} 999/);
  });

  it('the key is the method and the canonical params: not the id, not the key order of objects', async () => {
    expect(multiplexKey('eth_call', [{ to: ADDR, data: '0x1' }, 'latest'])).to.equal(multiplexKey('eth_call', [{ data: '0x1', to: ADDR }, 'latest']));
    expect(multiplexKey('eth_call', [{ to: ADDR }])).not.to.equal(multiplexKey('eth_getBalance', [{ to: ADDR }]));
    const a = svc.post(PATH, { jsonrpc: '2.0', id: 'a', method: 'eth_call', params: [{ to: ADDR, data: '0x1' }, '0x5'] });
    const b = svc.post(PATH, { jsonrpc: '2.0', id: 'b', method: 'eth_call', params: [{ data: '0x1', to: ADDR }, '0x5'] });
    await waitFor(() => mux(svc).waiting(network(svc)) === 1);
    // The leader's request must be held upstream before it is answered (under load it may lag the follower).
    await waitFor(() => gate.received.get('eth_call') === 1);
    gate.release({ result: '0xabc' });
    const [ra, rb] = await Promise.all([a, b]);
    expect([ra.json.id, rb.json.id]).to.deep.equal(['a', 'b']);
    expect([ra.json.result, rb.json.result]).to.deep.equal(['0xabc', '0xabc']);
    expect(gate.received.get('eth_call')).to.equal(1);
    // Followers carry the leader's metadata in their headers.
    expect(rb.headers['x-svc-upstream']).to.equal('gate');
    expect(rb.headers['x-svc-upstream-attempts']).to.equal('1');
  });

  it('a call asking for an integrity level, skipping consensus or pinning an upstream never joins a call that did not', async () => {
    const plain = svc.post(PATH, balance('plain', '0x8'));
    await waitFor(() => gate.received.get('eth_getBalance') === 1);
    const strict = svc.post(PATH, balance('strict', '0x8'), { 'x-svc-integrity': 'intrinsic' });
    const skip = svc.post(PATH, balance('skip', '0x8'), { 'x-svc-skip-consensus': 'true' });
    const pinned = svc.post(PATH, balance('pinned', '0x8'), { 'x-svc-use-upstream': 'gate' });
    await waitFor(() => gate.received.get('eth_getBalance') === 4);
    expect(mux(svc).waiting(network(svc))).to.equal(0);
    gate.release({ result: '0x9' });
    const answers = await Promise.all([plain, strict, skip, pinned]);
    expect(answers.map((a) => a.json.result)).to.deep.equal(['0x9', '0x9', '0x9', '0x9']);
  });

  it("a follower's skip-cache-read has no effect: it shares the leader's call and carries its cache outcome", async () => {
    const leader = svc.post(PATH, balance('leader', '0x7'));
    await waitFor(() => gate.received.get('eth_getBalance') === 1);
    const follower = svc.post(PATH, balance('follower', '0x7'), { 'x-svc-skip-cache-read': 'true' });
    await waitFor(() => mux(svc).waiting(network(svc)) === 1);
    gate.release({ result: '0x9' });
    const [l, f] = await Promise.all([leader, follower]);
    expect([l.json.result, f.json.result]).to.deep.equal(['0x9', '0x9']);
    expect(gate.received.get('eth_getBalance')).to.equal(1);
    expect(f.headers['x-svc-cache']).to.equal(l.headers['x-svc-cache']);
  });

  it("the leader's error reaches every follower the same way", async () => {
    const calls = [svc.post(PATH, balance(1, '0x2')), svc.post(PATH, balance(2, '0x2')), svc.post(PATH, balance(3, '0x2'))];
    await waitFor(() => mux(svc).waiting(network(svc)) === 2);
    // The leader's request must be held upstream before it is answered (under load it may lag the followers).
    await waitFor(() => gate.received.get('eth_getBalance') === 1);
    gate.release({ error: { code: -32602, message: 'invalid argument 1: nope' } });
    const answers = await Promise.all(calls);
    for (const [i, r] of answers.entries()) {
      expect(r.json.id).to.equal(i + 1);
      expect(r.json.error).to.deep.include({ code: -32602, message: 'invalid argument 1: nope' });
    }
    expect(gate.received.get('eth_getBalance')).to.equal(1);
  });

  it("the leader's client leaving does not cancel the shared call while a follower waits", async () => {
    const ac = new AbortController();
    const leader = request(`${svc.url}${PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(balance(1, '0x3')),
      signal: ac.signal,
    }).catch(() => 'aborted');
    await waitFor(() => gate.received.get('eth_getBalance') === 1);
    const follower = svc.post(PATH, balance(2, '0x3'));
    await waitFor(() => mux(svc).waiting(network(svc)) === 1);
    ac.abort();
    expect(await leader).to.equal('aborted');
    await new Promise((r) => setTimeout(r, 50));
    gate.release({ result: '0x7' });
    const r = await follower;
    expect(r.json).to.deep.equal({ jsonrpc: '2.0', id: 2, result: '0x7' });
    expect(gate.received.get('eth_getBalance')).to.equal(1);
  });

  it('a call after the entry closed is a new leader; multiplexing: false sends every call', async () => {
    const first = svc.post(PATH, balance(1, '0x4'));
    await waitFor(() => gate.received.get('eth_getBalance') === 1);
    gate.release({ result: '0x1' });
    await first;
    const second = svc.post(PATH, balance(2, '0x4'));
    await waitFor(() => gate.received.get('eth_getBalance') === 2);
    gate.release({ result: '0x1' });
    expect((await second).json.result).to.equal('0x1');

    gate.received.clear();
    const both = [off.post(PATH, balance(1, '0x5')), off.post(PATH, balance(2, '0x5'))];
    await waitFor(() => gate.received.get('eth_getBalance') === 2);
    gate.release({ result: '0x2' });
    const rs = await Promise.all(both);
    expect(rs.map((r) => r.json.result)).to.deep.equal(['0x2', '0x2']);
    expect(mux(off).inFlight(network(off))).to.equal(0);
  });
});
