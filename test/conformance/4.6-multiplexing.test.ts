/**
 * Conformance of multiplexing (docs/interface.md §4.6). A gate upstream holds its eth_getBalance
 * answers until the test releases them, so followers can join a leader in flight; a real anvil
 * node backs the cache case. §4.6 #2 is a declared deviation (the key also holds the directives
 * that change where an answer comes from); its id part is tested here. §4.6 #6 is unit-level:
 * params from an HTTP body are always JSON, so unhashable params only come from plugins.
 */
import { expect } from 'chai';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { MULTIPLEX_SERVICE, multiplexKey, type MultiplexService } from '../../plugins/multiplex/index.ts';

const ADDR = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';

/** A fake upstream of chain `chainId` whose eth_getBalance answers wait for `release`. */
async function startGate(chainId: number) {
  const held: Array<{ id: unknown; res: ServerResponse }> = [];
  let received = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const { id, method } = JSON.parse(Buffer.concat(chunks).toString()) as { id: unknown; method: string };
      const send = (body: object) => res.end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
      if (method === 'eth_chainId') return send({ result: `0x${chainId.toString(16)}` });
      if (method !== 'eth_getBalance') return send({ result: '0x1' });
      received++;
      held.push({ id, res });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    received: () => received,
    reset: () => (received = 0),
    release(result: unknown) {
      for (const { id, res } of held.splice(0)) if (!res.destroyed) res.end(JSON.stringify({ jsonrpc: '2.0', id, result }));
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('conformance §4.6: multiplexing', function () {
  this.timeout(20_000);
  let g1: Awaited<ReturnType<typeof startGate>>;
  let g2: Awaited<ReturnType<typeof startGate>>;
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  const mux = () => svc.proxy.services.require<MultiplexService>(MULTIPLEX_SERVICE);
  const network = (chain: number) => svc.proxy.projects.get('main')!.networks.get(`evm:${chain}`)!;
  const balance = (id: unknown, block: string) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [ADDR, block] });
  const followers = async (): Promise<number> => {
    const text = await (await fetch(svc.metricsUrl!)).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith('svc_network_multiplexed_request_total{'))
      .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };

  before(async () => {
    [g1, g2, anvil] = await Promise.all([startGate(1), startGate(10), startAnvil({ chainId: 31337 })]);
    svc = await startSvc({
      logLevel: 'error',
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'mem', driver: 'memory' }],
          // Every finality: the node's finalized block may not be known yet right after start.
          policies: ['finalized', 'unfinalized', 'realtime', 'unknown'].map((finality) => ({
            connector: 'mem',
            finality,
            method: 'eth_getBlockByNumber',
            ttl: '1m',
          })),
        },
      },
      projects: [
        {
          id: 'main',
          networks: [1, 10, 31337].map((chainId) => ({ architecture: 'evm', evm: { chainId } })),
          upstreams: [
            { id: 'g1', endpoint: g1.url, evm: { chainId: 1, statePollerInterval: 0 } },
            { id: 'g2', endpoint: g2.url, evm: { chainId: 10, statePollerInterval: 0 } },
            { id: 'anvil', endpoint: anvil.url, evm: { chainId: 31337 } },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([g1?.close(), g2?.close(), anvil?.stop()]);
  });
  beforeEach(() => {
    g1.reset();
    g2.reset();
  });

  it('§4.6 #1 — applies at the network before upstream selection: a follower joins while the leader is at the upstream and never reaches one', async () => {
    const leader = svc.post('/main/evm/1', balance(1, '0x11'));
    await waitFor(() => g1.received() === 1);
    const follower = svc.post('/main/evm/1', balance(2, '0x11'));
    await waitFor(() => mux().waiting(network(1)) === 1);
    expect(mux().inFlight(network(1))).to.equal(1);
    g1.release('0x5');
    const [l, f] = await Promise.all([leader, follower]);
    expect([l.json.result, f.json.result]).to.deep.equal(['0x5', '0x5']);
    expect(g1.received()).to.equal(1);
    // Static answers never wait for anything: eth_chainId is answered with nothing in flight.
    expect((await svc.post('/main/evm/1', { jsonrpc: '2.0', id: 3, method: 'eth_chainId', params: [] })).json.result).to.equal('0x1');
  });

  it('§4.6 #2 — the JSON-RPC id is not part of the key; the method is', async () => {
    expect(multiplexKey('eth_getBalance', [ADDR, '0x1'])).to.equal(multiplexKey('eth_getBalance', [ADDR, '0x1']));
    expect(multiplexKey('eth_getBalance', [ADDR, '0x1'])).not.to.equal(multiplexKey('eth_getCode', [ADDR, '0x1']));
    expect(multiplexKey('eth_getBalance', [ADDR, '0x1'])).not.to.equal(multiplexKey('eth_getBalance', [ADDR, '0x2']));
    const calls = [svc.post('/main/evm/1', balance('a', '0x12')), svc.post('/main/evm/1', balance(99, '0x12'))];
    await waitFor(() => mux().waiting(network(1)) === 1);
    g1.release('0x6');
    const rs = await Promise.all(calls);
    expect(rs.map((r) => r.json.id)).to.deep.equal(['a', 99]);
    expect(g1.received()).to.equal(1);
  });

  it('§4.6 #3 — the scope is one network: the same call on two networks is two upstream calls', async () => {
    const calls = [svc.post('/main/evm/1', balance(1, '0x13')), svc.post('/main/evm/10', balance(2, '0x13'))];
    await waitFor(() => g1.received() === 1 && g2.received() === 1);
    expect(mux().waiting(network(1)) + mux().waiting(network(10))).to.equal(0);
    g1.release('0x7');
    g2.release('0x8');
    const rs = await Promise.all(calls);
    expect(rs.map((r) => r.json.result)).to.deep.equal(['0x7', '0x8']);
  });

  it("§4.6 #4 — followers get a deep copy of the leader's result under their own id, with the leader's metadata", async () => {
    const leader = svc.post('/main/evm/1', balance('L', '0x14'));
    await waitFor(() => g1.received() === 1);
    const f1 = svc.post('/main/evm/1', balance('F1', '0x14'));
    const f2 = svc.post('/main/evm/1', balance('F2', '0x14'));
    await waitFor(() => mux().waiting(network(1)) === 2);
    g1.release({ nested: { value: '0x9' } });
    const [l, a, b] = await Promise.all([leader, f1, f2]);
    expect(a.json).to.deep.equal({ jsonrpc: '2.0', id: 'F1', result: { nested: { value: '0x9' } } });
    expect(b.json).to.deep.equal({ jsonrpc: '2.0', id: 'F2', result: { nested: { value: '0x9' } } });
    expect(l.json.id).to.equal('L');
    for (const f of [a, b]) {
      expect(f.headers['x-svc-upstream']).to.equal(l.headers['x-svc-upstream']);
      expect(f.headers['x-svc-upstream-attempts']).to.equal(l.headers['x-svc-upstream-attempts']);
      expect(f.headers['x-svc-upstream-retries']).to.equal(l.headers['x-svc-upstream-retries']);
      expect(f.headers['x-svc-upstream-hedges']).to.equal(l.headers['x-svc-upstream-hedges']);
      expect(f.headers['x-svc-cache']).to.equal(l.headers['x-svc-cache']);
    }
  });

  it("§4.6 #5 — a follower's X-SVC-Skip-Cache-Read has no effect; a leader's cache hit is delivered to every follower", async () => {
    const leader = svc.post('/main/evm/1', balance(1, '0x15'));
    await waitFor(() => g1.received() === 1);
    const follower = svc.post('/main/evm/1', balance(2, '0x15'), { 'x-svc-skip-cache-read': 'true' });
    await waitFor(() => mux().waiting(network(1)) === 1);
    g1.release('0xa');
    const [l, f] = await Promise.all([leader, follower]);
    expect(f.json.result).to.equal(l.json.result);
    expect(g1.received()).to.equal(1);
    // A cached answer on anvil: three identical calls in one batch start together, the leader's
    // cache hit reaches both followers.
    const path = '/main/evm/31337';
    const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'eth_getBlockByNumber', params: ['0x0', false] });
    await svc.post(path, call(0));
    await waitFor(async () => (await svc.post(path, call(0))).headers['x-svc-cache'] === 'HIT');
    const before = await followers();
    const batch = await svc.post(path, [call(1), call(2), call(3)]);
    expect(batch.headers['x-svc-cache']).to.equal('HIT');
    expect(batch.json.map((e: { id: number }) => e.id)).to.deep.equal([1, 2, 3]);
    expect(new Set(batch.json.map((e: { result: unknown }) => JSON.stringify(e.result))).size).to.equal(1);
    expect((await followers()) - before).to.equal(2);
  });

  it('§4.6 #6 — params that cannot be serialised give no key: the call bypasses multiplexing silently (no error)', () => {
    // Only a plugin can put such params on a call; JSON bodies always serialise.
    expect(multiplexKey('eth_call', () => 1)).to.equal(undefined);
    expect(multiplexKey('eth_call', Symbol('x'))).to.equal(undefined);
    const throwing = {
      toJSON: () => {
        throw new Error('no');
      },
    };
    expect(() => multiplexKey('eth_call', [throwing])).not.to.throw();
    expect(multiplexKey('eth_call', [throwing])).to.equal(undefined);
    expect(multiplexKey('eth_call', [{ a: 1 }])).to.be.a('string');
  });
});
