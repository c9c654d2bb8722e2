/**
 * End-to-end getLogs limits and splitting (spec §2.8 #8): anvil holds
 * logs spread over many blocks (two emitter contracts, empty blocks in between, blocks with
 * several logs); svc's only upstream is a small node:http gate in front of anvil that refuses
 * any eth_getLogs range wider than 8 blocks the way providers do (-32005 "query returned more
 * than 10000 results"). Proves:
 * - a refused range is split and merged into exactly what a direct eth_getLogs to anvil returns
 *   (whole chain, address and topic filters, `latest` resolved from the chain state, viem);
 * - a range over `getLogsMaxAllowedRange` is rejected before forwarding: -32012, HTTP 200;
 * - a part that fails fails the whole call (no partial result).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createPublicClient, http, type Address } from 'viem';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import type { Network } from '../../core/registry/project.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { ADDR0, creationCode, deployDirect, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** Widest range the gate lets through, blocks. */
const GATE_MAX_RANGE = 8;
const TOPIC_A = `0x${'a1'.repeat(32)}`;
const TOPIC_B = `0x${'b2'.repeat(32)}`;
const hex = (n: number) => `0x${n.toString(16)}`;
const word = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;

/**
 * Runtime of an emitter: copies the calldata to memory and emits it as the data of a LOG1 with
 * a fixed topic: `CALLDATASIZE PUSH1 0 PUSH1 0 CALLDATACOPY PUSH32 topic CALLDATASIZE PUSH1 0 LOG1 STOP`.
 */
function emitterRuntime(topic: string): string {
  return `0x366000600037` + `7f${topic.slice(2)}` + `36` + `6000` + `a1` + `00`;
}

interface Gate {
  url: string;
  /** eth_getLogs requests received, in arrival order. */
  calls: { params: unknown; outcome: 'refused' | 'failed' | 'forwarded' }[];
  /** A block whose (narrow enough) range answers -32000 instead. */
  failBlock?: number;
  close(): Promise<void>;
}

/**
 * A node:http gate in front of anvil: an eth_getLogs whose range is not two hex numbers at most
 * {@link GATE_MAX_RANGE} blocks apart is refused like a provider does; everything else is
 * forwarded to anvil as is.
 */
async function startGate(target: string): Promise<Gate> {
  const gate: Gate = { url: '', calls: [], close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const send = (body: string) => {
          if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end(body);
        };
        const doc = JSON.parse(text) as { id?: unknown; method?: string; params?: unknown[] };
        if (!Array.isArray(doc) && doc.method === 'eth_getLogs') {
          const f = (doc.params?.[0] ?? {}) as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
          const num = (v: unknown) => (typeof v === 'string' && /^0x[0-9a-f]+$/i.test(v) ? Number.parseInt(v, 16) : Number.NaN);
          const from = num(f.fromBlock);
          const to = num(f.toBlock);
          if (f.blockHash === undefined && !(to - from + 1 <= GATE_MAX_RANGE)) {
            gate.calls.push({ params: doc.params, outcome: 'refused' });
            send(
              JSON.stringify({
                jsonrpc: '2.0',
                id: doc.id,
                error: { code: -32005, message: 'query returned more than 10000 results. Try with this block range [0x1, 0x2]' },
              }),
            );
            return;
          }
          if (gate.failBlock !== undefined && from <= gate.failBlock && gate.failBlock <= to) {
            gate.calls.push({ params: doc.params, outcome: 'failed' });
            send(JSON.stringify({ jsonrpc: '2.0', id: doc.id, error: { code: -32000, message: 'internal error: database read failed' } }));
            return;
          }
          gate.calls.push({ params: doc.params, outcome: 'forwarded' });
        }
        const r = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
        send(await r.text());
      })().catch(() => {
        if (!res.destroyed) res.writeHead(502).end();
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  gate.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  gate.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return gate;
}

describe('e2e: eth_getLogs limits and splitting against anvil behind a range-refusing gate', function () {
  this.timeout(60_000);

  let anvil: AnvilHandle;
  let gate: Gate;
  let svc: SvcHandle;
  let network: Network;
  let emitterA: string;
  let emitterB: string;
  let head: number;

  const post = (method: string, params: unknown[], headers?: Record<string, string>) => svc.post(PATH, rpcBody(method, params), headers);

  before(async () => {
    anvil = await startAnvil();
    emitterA = (await deployDirect(anvil, creationCode(emitterRuntime(TOPIC_A)))).toLowerCase();
    emitterB = (await deployDirect(anvil, creationCode(emitterRuntime(TOPIC_B)))).toLowerCase();
    const hashes: string[] = [];
    const send = async (to: string, n: number) => {
      hashes.push((await anvil.rpc('eth_sendTransaction', [{ from: ADDR0, to, data: word(n), gas: '0x30000' }])) as string);
    };
    for (let i = 0; i < 24; i++) {
      await send(i % 3 === 0 ? emitterB : emitterA, i);
      if (i % 4 === 1) await anvil.rpc('anvil_mine', [hex((i % 5) + 2)]);
      if (i % 8 === 3) {
        // Three logs in one block.
        await anvil.rpc('evm_setAutomine', [false]);
        for (let k = 0; k < 3; k++) await send(k === 1 ? emitterB : emitterA, 1000 + i * 10 + k);
        await anvil.rpc('evm_mine', []);
        await anvil.rpc('evm_setAutomine', [true]);
      }
    }
    // anvil may hand out a hash a moment before the block holding it is mined.
    for (const h of hashes) await waitFor(async () => (await anvil.rpc('eth_getTransactionReceipt', [h])) !== null);
    // A busy anvil can mine two of the sends above into one block: empty blocks at the end keep
    // the span well over six times the gate's range whatever it did.
    await anvil.rpc('anvil_mine', [hex(GATE_MAX_RANGE)]);
    head = Number.parseInt((await anvil.rpc('eth_blockNumber')) as string, 16);

    gate = await startGate(anvil.url);
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN, getLogsMaxAllowedRange: 1000, getLogsSplitConcurrency: 4 } }],
            upstreams: [{ id: 'gate', endpoint: gate.url, evm: { chainId: CHAIN, statePollerInterval: '200ms' } }],
          },
        ],
      },
      { plugins: defaultPreset() },
    );
    network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    // The network head comes from the state poller (the chain is idle from here on).
    await waitFor(() => chainStateOf(network).highestLatest >= head, 10_000);
  });

  after(async () => {
    await svc?.close();
    await gate?.close();
    await anvil?.stop();
  });

  beforeEach(() => {
    if (gate) {
      gate.calls.length = 0;
      gate.failBlock = undefined;
    }
  });

  it('the chain has logs spread over far more blocks than the gate lets through', async () => {
    const all = (await anvil.rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(head) }])) as { blockNumber: string }[];
    expect(all.length).to.equal(24 + 3 * 3);
    expect(head).to.be.greaterThan(GATE_MAX_RANGE * 6);
    const blocks = new Set(all.map((l) => l.blockNumber));
    expect(blocks.size).to.be.lessThan(all.length);
  });

  it('a refused range is split and merged into exactly what anvil answers directly', async () => {
    const filter = { fromBlock: '0x0', toBlock: hex(head) };
    const res = await post('eth_getLogs', [filter]);
    expect(res.status).to.equal(200);
    expect(res.json.error).to.equal(undefined);
    expect(res.json.result).to.deep.equal(await anvil.rpc('eth_getLogs', [filter]));
    expect(gate.calls[0]!.outcome).to.equal('refused');
    const forwarded = gate.calls.filter((c) => c.outcome === 'forwarded');
    expect(forwarded.length).to.be.greaterThanOrEqual(Math.ceil((head + 1) / GATE_MAX_RANGE));
    // The leaves tile the range: every block asked exactly once.
    const ranges = forwarded
      .map((c) => (c.params as { fromBlock: string; toBlock: string }[])[0]!)
      .map((f) => [Number.parseInt(f.fromBlock, 16), Number.parseInt(f.toBlock, 16)] as const)
      .sort((a, b) => a[0] - b[0]);
    let next = 0;
    for (const [from, to] of ranges) {
      expect(from).to.equal(next);
      next = to + 1;
    }
    expect(next).to.equal(head + 1);
    expect(Number(res.headers['x-svc-upstream-attempts'])).to.equal(gate.calls.length);
  });

  it('address and topic filters survive the split', async () => {
    for (const filter of [
      { fromBlock: '0x1', toBlock: hex(head - 1), address: emitterB },
      { fromBlock: '0x0', toBlock: hex(head), address: [emitterA, emitterB], topics: [TOPIC_A] },
      { fromBlock: '0x3', toBlock: hex(head), topics: [[TOPIC_A, TOPIC_B]] },
    ]) {
      const res = await post('eth_getLogs', [filter]);
      const direct = (await anvil.rpc('eth_getLogs', [filter])) as unknown[];
      expect(direct.length, JSON.stringify(filter)).to.be.greaterThan(0);
      expect(res.json.result, JSON.stringify(filter)).to.deep.equal(direct);
    }
  });

  it('toBlock latest is resolved from the chain state and split like a number', async () => {
    const res = await post('eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }]);
    expect(res.json.result).to.deep.equal(await anvil.rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest' }]));
    expect(gate.calls.some((c) => c.outcome === 'forwarded')).to.equal(true);
  });

  it('a viem client reading through svc gets what it gets from anvil', async () => {
    const through = createPublicClient({ transport: http(`${svc.url}${PATH}`) });
    const direct = createPublicClient({ transport: http(anvil.url) });
    const args = { address: emitterA as Address, fromBlock: 0n, toBlock: BigInt(head) };
    const [a, b] = await Promise.all([through.getLogs(args), direct.getLogs(args)]);
    expect(a.length).to.be.greaterThan(0);
    expect(a).to.deep.equal(b);
  });

  it('§2.8 #8 — a range over getLogsMaxAllowedRange is rejected before forwarding: -32012, HTTP 200', async () => {
    const res = await post('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(1000) }]);
    expect(res.status).to.equal(200);
    expect(res.json.error.code).to.equal(-32012);
    expect(res.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedRange');
    expect(gate.calls).to.have.length(0);
    // Exactly the limit is accepted: refused by the gate, split up to the known head, merged.
    const ok = await post('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(999) }]);
    expect(ok.json.result).to.deep.equal(await anvil.rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(999) }]));
  });

  it('§2.8 #8 — a request cannot lift the limit with the enforce-getlogs-range header', async () => {
    const res = await post('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(5000) }], { 'X-SVC-Enforce-GetLogs-Range': 'false' });
    expect(res.json.error.code).to.equal(-32012);
    expect(gate.calls).to.have.length(0);
  });

  it('one failing part fails the whole call: no partial result', async () => {
    gate.failBlock = Math.floor(head / 2);
    // Not the cached answer of the same range an earlier test merged: the parts must be fetched.
    const res = await post('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(head) }], { 'X-SVC-Skip-Cache-Read': 'true' });
    expect(res.status).to.equal(200);
    expect(res.json.result).to.equal(undefined);
    expect(res.json.error).to.be.an('object');
    expect(res.json.error.message).to.match(/database read failed|ErrEndpointServerSideException/);
    expect(gate.calls.some((c) => c.outcome === 'failed')).to.equal(true);
  });

  it('a blockHash filter goes straight through', async () => {
    const logs = (await anvil.rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: hex(head) }])) as { blockHash: string }[];
    const blockHash = logs[logs.length - 1]!.blockHash;
    const res = await post('eth_getLogs', [{ blockHash }]);
    expect(res.json.result).to.deep.equal(await anvil.rpc('eth_getLogs', [{ blockHash }]));
    expect(gate.calls).to.have.length(1);
  });
});
