/**
 * End-to-end integrity directive (spec §2.8 #10, §6, §7) through the real
 * server: an honest anvil node, a tampering upstream (a node:http proxy in front of the same node
 * that rewrites chosen answers) and a node on another fork (a second anvil whose blocks 1 and 2
 * are empty). A tampered or forked answer never reaches a client that asked for `intrinsic` or
 * above: it gets the honest upstream's answer, or the error when no upstream passes.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { clone, flip, logInit, mineChain, TOPIC0, TOPIC1, type ChainData } from '../unit/plugins/integrity/chain.ts';

const CHAIN = 31337;
type Tamper = (params: any, result: any) => unknown;

/** A JSON-RPC proxy to `target` that rewrites the result of the methods in `tamper`. */
async function startTamperer(target: string, tamper: Map<string, Tamper>): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const up = (await (await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json()) as any;
      const req0 = JSON.parse(body);
      const fix = (q: any, a: any) => {
        const t = tamper.get(q.method);
        return t && a.result !== undefined ? { ...a, result: t(q.params, clone(a.result)) } : a;
      };
      const out = Array.isArray(req0) ? (up as any[]).map((a, i) => fix(req0[i], a)) : fix(req0, up);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(out));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** Sum of `svc_upstream_request_retries_total{reason="integrity_validation"}` over all label sets. */
async function integrityRetries(svc: SvcHandle): Promise<number> {
  const text = await (await fetch(svc.metricsUrl!)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('svc_upstream_request_retries_total{') && l.includes('reason="integrity_validation"'))
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe('e2e: integrity directive (intrinsic, corroborated, authoritative)', function () {
  this.timeout(60_000);

  let c: ChainData;
  let fork: AnvilHandle;
  let tamperer: { url: string; server: Server };
  let svc: SvcHandle;
  const tamper = new Map<string, Tamper>();

  const network = (extra: Record<string, unknown> = {}) => ({
    architecture: 'evm',
    evm: { chainId: CHAIN },
    selectionPolicy: { evalInterval: '1h' },
    ...extra,
  });
  const up = (id: string, endpoint: string) => ({ id, endpoint, evm: { chainId: CHAIN } });
  const rpc = (project: string, method: string, params: unknown[], headers: Record<string, string> = {}): Promise<SvcResponse> =>
    svc.post(`/${project}/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method, params }, headers);

  before(async () => {
    [c, fork] = await Promise.all([mineChain(), startAnvil({ chainId: CHAIN })]);
    // The fork's block 1 holds another log-emitting creation (same topics, another address); block 2 is empty.
    const [from] = await fork.rpc('eth_accounts');
    await fork.rpc('eth_sendTransaction', [{ from, data: logInit(TOPIC0, TOPIC1), gas: '0x30d40' }]);
    await fork.rpc('anvil_mine', ['0x1']);
    tamperer = await startTamperer(c.anvil.url, tamper);
    svc = await startSvc({
      logLevel: 'error',
      ...NO_CACHE,
      projects: [
        {
          // The tampering upstream comes first in config order.
          id: 'main',
          networks: [network({ integrity: { profiles: { indexer: { eth_getLogs: 'intrinsic', '*': 'off' } } } })],
          upstreams: [up('tamper', tamperer.url), up('honest', c.anvil.url)],
        },
        {
          id: 'locked',
          networks: [network({ directiveDefaults: { integrity: 'intrinsic' }, integrity: { headerMode: 'deny' } })],
          upstreams: [up('tamper', tamperer.url), up('honest', c.anvil.url)],
        },
        {
          // A node on another fork first; two honest upstreams (one node) after it.
          id: 'forky',
          networks: [network()],
          upstreams: [up('fork', fork.url), up('honest', c.anvil.url), up('honest-2', c.anvil.url)],
        },
      ],
    });
    for (const p of ['main', 'locked', 'forky']) {
      const net = svc.proxy.projects.get(p)!.networks.get(`evm:${CHAIN}`)!;
      await waitFor(() => net.upstreams.length >= 2 && net.upstreams.every((u) => u.state === 'ready'));
    }
  });

  afterEach(() => tamper.clear());
  after(async () => {
    await svc?.close();
    await new Promise((r) => tamperer?.server.close(r));
    await Promise.all([c?.anvil.stop(), fork?.stop()]);
  });

  describe('intrinsic', () => {
    it('a block whose hash does not match its header: unchecked it reaches the client, checked the honest block does', async () => {
      tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, stateRoot: flip(b.stateRoot) }));
      const plain = await rpc('main', 'eth_getBlockByNumber', ['0x1', false]);
      expect(plain.json.result.stateRoot).to.not.equal(c.block.stateRoot);
      expect(plain.headers['x-svc-integrity']).to.equal(undefined);

      const before = await integrityRetries(svc);
      const checked = await rpc('main', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'intrinsic' });
      expect(checked.json.result).to.deep.equal(c.blockHashes);
      expect(checked.headers['x-svc-integrity']).to.equal('intrinsic');
      expect(checked.headers['x-svc-upstream']).to.equal('honest');
      expect(checked.headers['x-svc-upstreams']).to.match(/^tamper=primary:error:\d+;honest=\w+:success:\d+:won$/);
      expect(await integrityRetries(svc)).to.equal(before + 1);
    });

    it('§2.8 #10 — the integrity query parameter works like the header', async () => {
      tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, stateRoot: flip(b.stateRoot) }));
      const checked = await svc.post(`/main/evm/${CHAIN}?integrity=intrinsic`, {
        jsonrpc: '2.0',
        id: 1,
        method: 'eth_getBlockByNumber',
        params: ['0x1', false],
      });
      expect(checked.json.result).to.deep.equal(c.blockHashes);
    });

    it('a receipt from another block is never served', async () => {
      const other = await c.anvil.rpc('eth_getTransactionReceipt', [c.block2.transactions[0].hash]);
      tamper.set('eth_getTransactionReceipt', () => other);
      const hash = c.tx.create!;
      const plain = await rpc('main', 'eth_getTransactionReceipt', [hash]);
      expect(plain.json.result.blockNumber).to.equal('0x2');
      const checked = await rpc('main', 'eth_getTransactionReceipt', [hash], { 'X-SVC-Integrity': 'intrinsic' });
      expect(checked.json.result.transactionHash).to.equal(hash);
      expect(checked.json.result.blockNumber).to.equal('0x1');
    });

    it('a log missing from its receipt bloom is never served', async () => {
      tamper.set('eth_getTransactionReceipt', (_p, r) => ({ ...r, logs: r.logs.map((l: any) => ({ ...l, topics: [l.topics[0], `0x${'99'.repeat(32)}`] })) }));
      const checked = await rpc('main', 'eth_getTransactionReceipt', [c.tx.create!], { 'X-SVC-Integrity': 'intrinsic' });
      expect(checked.json.result.logs[0].topics).to.deep.equal(c.logs[0]!.topics);
      expect(checked.headers['x-svc-upstream']).to.equal('honest');
    });

    it('a log outside the range is never served', async () => {
      tamper.set('eth_getLogs', (_p, logs) => [...logs, c.logs[1]]);
      const filter = { fromBlock: '0x1', toBlock: '0x1' };
      const plain = await rpc('main', 'eth_getLogs', [filter]);
      expect(plain.json.result).to.have.length(2);
      const checked = await rpc('main', 'eth_getLogs', [filter], { 'X-SVC-Integrity': 'intrinsic' });
      expect(checked.json.result).to.deep.equal([c.logs[0]]);
    });

    it('§7 ErrEndpointContentValidation — when no upstream passes, the client gets the error, never the answer', async () => {
      tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, hash: flip(b.hash) }));
      const r = await rpc('main', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'intrinsic', 'X-SVC-Use-Upstream': 'tamper' });
      expect(r.json.result).to.equal(undefined);
      expect(r.json.error.code).to.equal(-32603);
      expect(JSON.stringify(r.json.error)).to.include('block.hash');
      expect(r.headers['x-svc-error']).to.include('ErrEndpointContentValidation');
      expect(r.headers['x-svc-integrity']).to.equal('intrinsic');
    });

    it('an unknown level is refused (-32600 naming the levels), never served unchecked', async () => {
      tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, stateRoot: flip(b.stateRoot) }));
      const r = await rpc('main', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'paranoid' });
      expect(r.status).to.equal(400);
      expect(r.json.result).to.equal(undefined);
      expect(r.json.error.code).to.equal(-32600);
      expect(r.json.error.message).to.include('off, intrinsic, corroborated, authoritative');
    });
  });

  describe('headerMode and profiles', () => {
    it('§2.8 #10 — headerMode deny ignores the request: the configured level applies', async () => {
      tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, stateRoot: flip(b.stateRoot) }));
      const r = await rpc('locked', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'off' });
      expect(r.headers['x-svc-integrity']).to.equal('intrinsic');
      expect(r.json.result).to.deep.equal(c.blockHashes);
    });

    it('a profile applies its level per method; a batch header lists the distinct levels', async () => {
      tamper.set('eth_getLogs', (_p, logs) => [...logs, c.logs[1]]);
      tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, stateRoot: flip(b.stateRoot) }));
      const filter = { fromBlock: '0x1', toBlock: '0x1' };
      const logs = await rpc('main', 'eth_getLogs', [filter], { 'X-SVC-Integrity': 'indexer' });
      expect(logs.headers['x-svc-integrity']).to.equal('intrinsic');
      expect(logs.json.result).to.deep.equal([c.logs[0]]);
      const block = await rpc('main', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'indexer' });
      expect(block.headers['x-svc-integrity']).to.equal('off');
      const batch = await svc.post(
        `/main/evm/${CHAIN}`,
        [
          { jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params: [filter] },
          { jsonrpc: '2.0', id: 2, method: 'eth_getBlockByNumber', params: ['0x1', false] },
          { jsonrpc: '2.0', id: 3, method: 'eth_getLogs', params: [{ ...filter, toBlock: '0x2' }] },
        ],
        { 'X-SVC-Integrity': 'indexer' },
      );
      expect(batch.headers['x-svc-integrity']).to.equal('intrinsic,off');
      expect(batch.json[0].result).to.deep.equal([c.logs[0]]);
    });
  });

  describe('corroborated and authoritative', () => {
    it('without integrity the node on another fork answers', async () => {
      const r = await rpc('forky', 'eth_getBlockByNumber', ['0x1', false]);
      expect(r.headers['x-svc-upstream']).to.equal('fork');
      expect(r.json.result.hash).to.not.equal(c.block.hash);
    });

    it('intrinsic cannot tell a well-formed forked block apart', async () => {
      const r = await rpc('forky', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'intrinsic' });
      expect(r.headers['x-svc-upstream']).to.equal('fork');
    });

    it('corroborated catches the upstream on another fork and serves the confirmed block', async () => {
      const before = await integrityRetries(svc);
      const r = await rpc('forky', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'corroborated' });
      expect(r.headers['x-svc-integrity']).to.equal('corroborated');
      expect(r.headers['x-svc-upstream']).to.equal('honest');
      expect(r.json.result.hash).to.equal(c.block.hash);
      expect(await integrityRetries(svc)).to.equal(before + 1);
      const forkLogs = await rpc('forky', 'eth_getLogs', [c.logsFilter]);
      expect(forkLogs.json.result).to.have.length(1);
      expect(forkLogs.json.result[0].blockHash).to.not.equal(c.block.hash);
      const logs = await rpc('forky', 'eth_getLogs', [c.logsFilter], { 'X-SVC-Integrity': 'corroborated' });
      expect(logs.headers['x-svc-upstream']).to.equal('honest');
      expect(logs.json.result).to.deep.equal(c.logs);
    });

    it('authoritative: the forked hash loses the vote, the honest one wins', async () => {
      const r = await rpc('forky', 'eth_getBlockByNumber', ['0x2', false], { 'X-SVC-Integrity': 'authoritative' });
      expect(r.headers['x-svc-integrity']).to.equal('authoritative');
      expect(r.headers['x-svc-upstream']).to.equal('honest');
      expect(r.json.result.hash).to.equal(c.block2.hash);
    });

    it('the node on another fork alone (use-upstream) gives the client the error, not its block', async () => {
      const r = await rpc('forky', 'eth_getBlockByNumber', ['0x1', false], { 'X-SVC-Integrity': 'corroborated', 'X-SVC-Use-Upstream': 'fork' });
      expect(r.json.error.code).to.equal(-32603);
      expect(JSON.stringify(r.json.error)).to.include('corroborated');
    });
  });
});

describe('e2e: integrity skips cache reads', function () {
  this.timeout(60_000);
  let c: ChainData;
  let tamperer: { url: string; server: Server };
  let svc: SvcHandle;
  const tamper = new Map<string, Tamper>();

  before(async () => {
    c = await mineChain();
    tamperer = await startTamperer(c.anvil.url, tamper);
    svc = await startSvc({
      logLevel: 'error',
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'mem', driver: 'memory' }],
          policies: ['finalized', 'unfinalized', 'unknown'].map((finality) => ({ connector: 'mem', finality, method: 'eth_getBlockByNumber' })),
        },
      },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
          upstreams: [
            { id: 'tamper', endpoint: tamperer.url, evm: { chainId: CHAIN } },
            { id: 'honest', endpoint: c.anvil.url, evm: { chainId: CHAIN } },
          ],
        },
      ],
    });
    const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => net.upstreams.length === 2 && net.upstreams.every((u) => u.state === 'ready'));
  });
  after(async () => {
    await svc?.close();
    await new Promise((r) => tamperer?.server.close(r));
    await c?.anvil.stop();
  });

  it('a tampered answer cached by an unchecked call is not served to a checked one', async () => {
    tamper.set('eth_getBlockByNumber', (_p, b) => ({ ...b, stateRoot: flip(b.stateRoot) }));
    const body = { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['0x1', false] };
    const first = await svc.post(`/main/evm/${CHAIN}`, body);
    expect(first.json.result.stateRoot).to.not.equal(c.block.stateRoot);
    const cached = await svc.post(`/main/evm/${CHAIN}`, body);
    expect(cached.headers['x-svc-cache']).to.equal('HIT');
    const checked = await svc.post(`/main/evm/${CHAIN}`, body, { 'X-SVC-Integrity': 'intrinsic' });
    expect(checked.headers['x-svc-cache']).to.not.equal('HIT');
    expect(checked.json.result).to.deep.equal(c.blockHashes);
  });
});
