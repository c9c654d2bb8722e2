/**
 * Shadow upstreams (spec §3.1) against the real server: a serving anvil node and
 * a shadow anvil node made to disagree with `anvil_setBalance`, then small node:http shadows in
 * front of anvil that delay or fail chosen methods. The client always gets the serving node's
 * answer; `svc_shadow_comparison_total` and `svc_shadow_dropped_total` are read from the metrics
 * URL; the mismatch log is read from the svc's own (debug-level) log lines.
 */
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { createServer, type Server } from 'node:http';
import { pino } from 'pino';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { listenOnLoopback } from '../helpers/ports.ts';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';
import { httpRequest, NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { createProxy } from '../../core/host/create.ts';
import { metricsAddress } from '../../plugins/metrics/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { shadowPlugin } from '../../plugins/shadow/index.ts';
import { ADDR0, ADDR1, ADDR2, DEV_BALANCE, PK0, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const network = { architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } };

/** Sum of the samples of a metric whose labels include every given `name="value"` pair. */
async function metric(url: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** Waits until a metric reaches at least `atLeast`. */
async function metricReaches(url: string, name: string, labels: Record<string, string>, atLeast: number, timeoutMs = 5000): Promise<void> {
  await waitFor(async () => (await metric(url, name, labels)) >= atLeast, timeoutMs);
}

const comparisons = (upstream: string, method: string, outcome: string) => ({ upstream, method, outcome });

/** A node:http shadow in front of an anvil node: forwards everything, delaying or failing the methods it is told to. */
interface FakeShadow {
  url: string;
  /** Methods received (every request, polls included). */
  seen: string[];
  /** Per method: answer after this many ms. */
  delayMs: Map<string, number>;
  /** Methods answered with a JSON-RPC error. */
  failing: Set<string>;
  close(): Promise<void>;
}

async function startFakeShadow(target: string): Promise<FakeShadow> {
  const seen: string[] = [];
  const delayMs = new Map<string, number>();
  const failing = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const call = JSON.parse(body) as { id: unknown; method: string };
        seen.push(call.method);
        const wait = delayMs.get(call.method) ?? 0;
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        res.setHeader('content-type', 'application/json');
        if (failing.has(call.method)) {
          res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32000, message: 'shadow says no' } }));
          return;
        }
        const upstream = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        res.end(await upstream.text());
      })().catch(() => res.destroy());
    });
  });
  const port = await listenOnLoopback(server as never, 'fake shadow');
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    delayMs,
    failing,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('e2e: shadow upstreams', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;

  before(async () => {
    cluster = await startAnvilCluster({ chainId: CHAIN, ids: ['serving', 'shadow'] });
  });
  after(async () => {
    await cluster?.stop();
  });

  describe('a serving anvil node and a shadow anvil node', () => {
    let svc: { url: string; metricsUrl: string; post(body: unknown, headers?: Record<string, string>): ReturnType<typeof httpRequest>; close(): Promise<void> };
    let proxy: ReturnType<typeof createProxy>;
    const logs: Array<{ level: number; msg: string; upstream?: string; method?: string; field?: string }> = [];

    before(async () => {
      // Built by hand (not startSvc) for a debug-level logger whose lines the test reads.
      const sink = new Writable({
        write(chunk: Buffer, _enc, cb) {
          for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) logs.push(JSON.parse(l));
          cb();
        },
      });
      proxy = createProxy({
        config: {
          logLevel: 'debug',
          ...NO_CACHE,
          projects: [
            {
              id: 'main',
              networks: [network],
              upstreams: cluster.upstreams({ evm: { statePollerInterval: '100ms' } }).map((u) => (u.id === 'shadow' ? { ...u, shadow: {} } : u)),
            },
          ],
        },
        plugins: defaultPreset(),
        logger: pino({ level: 'debug' }, sink),
        port: 0,
        host: '127.0.0.1',
        metricsPort: 0,
        probeBackoffMs: 50,
      });
      const addr = await proxy.start();
      const url = `http://127.0.0.1:${addr.port}`;
      svc = {
        url,
        metricsUrl: `http://127.0.0.1:${metricsAddress(proxy)!.port}/metrics`,
        post: (body, headers) => httpRequest('POST', `${url}${PATH}`, JSON.stringify(body), headers),
        close: () => proxy.close(),
      };
      const net = proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
      await waitFor(() => net.upstreams.length === 2 && net.upstreams.every((u) => u.state === 'ready'));
      // The shadow node now disagrees about ADDR1's balance.
      await cluster.node('shadow').rpc('anvil_setBalance', [ADDR1, '0x1']);
    });
    after(async () => {
      await svc?.close();
    });

    it('counts a match for an answer both nodes agree on, and serves it from the serving node', async () => {
      const before = await metric(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getBalance', 'match'));
      const r = await svc.post(rpcBody('eth_getBalance', [ADDR2, 'latest']));
      expect(BigInt(r.json.result)).to.equal(DEV_BALANCE);
      expect(r.headers['x-svc-upstream']).to.equal('serving');
      await metricReaches(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getBalance', 'match'), before + 1);
    });

    it('counts a mismatch for the changed balance, logs its field at debug level only, and the client gets the serving answer', async () => {
      const before = await metric(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getBalance', 'mismatch'));
      for (let i = 0; i < 3; i++) {
        const r = await svc.post(rpcBody('eth_getBalance', [ADDR1, 'latest']));
        expect(BigInt(r.json.result), 'served balance').to.equal(DEV_BALANCE);
        expect(r.headers['x-svc-upstream']).to.equal('serving');
      }
      await metricReaches(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getBalance', 'mismatch'), before + 3);
      const mismatch = logs.find((l) => l.upstream === 'shadow' && l.method === 'eth_getBalance' && l.field !== undefined);
      expect(mismatch, 'debug log of the mismatch').to.not.equal(undefined);
      expect(mismatch!.level).to.equal(20);
      expect(mismatch!.field).to.equal('$');
      expect(logs.filter((l) => l.level >= 30 && /^shadow/.test(l.msg ?? ''))).to.deep.equal([]);
    });

    it('never serves from the shadow, even when use-upstream names it', async () => {
      const r = await svc.post(rpcBody('eth_getBalance', [ADDR1, 'latest']), { 'x-svc-use-upstream': 'shadow' });
      expect(r.json.error, JSON.stringify(r.json)).to.not.equal(undefined);
      expect(r.json.result).to.equal(undefined);
      expect(r.headers['x-svc-upstream'] ?? '').to.not.include('shadow');
      const any = await svc.post(rpcBody('eth_getBalance', [ADDR1, 'latest']), { 'x-svc-use-upstream': '*' });
      expect(BigInt(any.json.result)).to.equal(DEV_BALANCE);
      expect(any.headers['x-svc-upstream']).to.equal('serving');
    });

    it('§3.1 ¶2 — still mirrors to a cordoned shadow (spec §3.1)', async () => {
      const health = proxy.projects.get('main')!.health;
      health.cordon('shadow', '*', 'test');
      try {
        const before = await metric(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getCode', 'match'));
        const r = await svc.post(rpcBody('eth_getCode', [ADDR2, 'latest']));
        expect(r.json.result).to.equal('0x');
        await metricReaches(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getCode', 'match'), before + 1);
      } finally {
        health.uncordon('shadow', '*');
      }
    });

    it("a shadow mined ahead does not move the network's head (its polls are read, its head is not counted)", async () => {
      const net = proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
      const st = chainStateOf(net);
      const shadowUp = net.upstreams.find((u) => u.id === 'shadow')!;
      await cluster.mine('shadow', 5);
      const shadowHead = await cluster.head('shadow');
      await waitFor(() => st.peek(shadowUp)?.latest === shadowHead);
      expect(st.highestLatest).to.equal(await cluster.head('serving'));
      const res = await svc.post({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
      expect(Number(res.json.result)).to.equal(await cluster.head('serving'));
    });

    it('never mirrors a broadcast', async () => {
      const raw = await privateKeyToAccount(PK0 as Hex).signTransaction({
        chainId: CHAIN,
        type: 'eip1559',
        to: ADDR2,
        value: 1n,
        nonce: 0,
        gas: 21000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      });
      const r = await svc.post(rpcBody('eth_sendRawTransaction', [raw]));
      expect(r.json.result).to.equal(keccak256(raw));
      // A later mirrored call is the barrier: its copy was scheduled after the broadcast's would have been.
      const total = await metric(svc.metricsUrl, 'svc_shadow_comparison_total', { upstream: 'shadow' });
      await svc.post(rpcBody('eth_getTransactionCount', [ADDR2, '0x0']));
      await metricReaches(svc.metricsUrl, 'svc_shadow_comparison_total', { upstream: 'shadow' }, total + 1);
      expect(await metric(svc.metricsUrl, 'svc_shadow_comparison_total', { method: 'eth_sendRawTransaction' })).to.equal(0);
      expect(await cluster.node('shadow').rpc('eth_getTransactionCount', [ADDR0, 'latest'])).to.equal('0x0');
      expect(await cluster.node('serving').rpc('eth_getTransactionCount', [ADDR0, 'latest'])).to.equal('0x1');
    });

    it('counts an error when the shadow node is stopped, and the client is unaffected', async () => {
      await cluster.stopNode('shadow');
      const before = await metric(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getBalance', 'error'));
      const r = await svc.post(rpcBody('eth_getBalance', [ADDR2, '0x0']));
      expect(BigInt(r.json.result)).to.equal(DEV_BALANCE);
      expect(r.headers['x-svc-upstream']).to.equal('serving');
      await metricReaches(svc.metricsUrl, 'svc_shadow_comparison_total', comparisons('shadow', 'eth_getBalance', 'error'), before + 1, 15_000);
    });
  });

  describe('node:http shadows that delay, fail or are never sampled', () => {
    let svc: SvcHandle;
    let slow: FakeShadow;
    let never: FakeShadow;
    let half: FakeShadow;
    /** The sample source: alternates 0.4 and 0.6, so a sampleRate of 0.5 copies every other call. */
    let draws = 0;
    const random = () => (draws++ % 2 === 0 ? 0.4 : 0.6);
    let url: string;

    before(async () => {
      const serving = cluster.node('serving').url;
      slow = await startFakeShadow(serving);
      never = await startFakeShadow(serving);
      half = await startFakeShadow(serving);
      svc = await startSvc(
        {
          logLevel: 'error',
          ...NO_CACHE,
          projects: [
            {
              id: 'main',
              networks: [network],
              upstreams: [
                { id: 'serving', endpoint: serving, evm: { chainId: CHAIN } },
                { id: 'slow', endpoint: slow.url, evm: { chainId: CHAIN }, shadow: { methods: 'eth_getBalance | eth_getCode' } },
                { id: 'never', endpoint: never.url, evm: { chainId: CHAIN }, shadow: { sampleRate: 0 } },
                { id: 'half', endpoint: half.url, evm: { chainId: CHAIN }, shadow: { sampleRate: 0.5, methods: 'eth_getStorageAt' } },
              ],
            },
          ],
        },
        { plugins: [...presetWithout('shadow'), shadowPlugin({ maxInFlight: 1, random })] },
      );
      url = svc.metricsUrl!;
      const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
      await waitFor(() => net.upstreams.length === 4 && net.upstreams.every((u) => u.state === 'ready'));
    });
    after(async () => {
      await svc?.close();
      await slow?.close();
      await never?.close();
      await half?.close();
    });

    it('sends a copy when the sample source draws below sampleRate', async () => {
      const storage = () => half.seen.filter((m) => m === 'eth_getStorageAt').length;
      for (let i = 0; i < 4; i++) {
        const r = await svc.post(PATH, rpcBody('eth_getStorageAt', [ADDR2, '0x0', 'latest']));
        expect(r.headers['x-svc-upstream']).to.equal('serving');
        if (i % 2 === 0) await metricReaches(url, 'svc_shadow_comparison_total', comparisons('half', 'eth_getStorageAt', 'match'), i / 2 + 1);
      }
      // Barrier: one copy at a time (maxInFlight 1), so a copy of the 4th call would be sent or dropped by now.
      const code = await metric(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getCode', 'match'));
      await svc.post(PATH, rpcBody('eth_getCode', [ADDR2, 'latest']));
      await metricReaches(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getCode', 'match'), code + 1);
      expect(storage()).to.equal(2);
      expect(await metric(url, 'svc_shadow_comparison_total', { upstream: 'half' })).to.equal(2);
      expect(await metric(url, 'svc_shadow_dropped_total', { upstream: 'half' })).to.equal(0);
    });

    it('copies only the methods its glob names, and nothing with sampleRate 0', async () => {
      const before = await metric(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getCode', 'match'));
      await svc.post(PATH, rpcBody('eth_getTransactionCount', [ADDR2, 'latest']));
      await svc.post(PATH, rpcBody('eth_getCode', [ADDR2, 'latest']));
      await metricReaches(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getCode', 'match'), before + 1);
      expect(slow.seen).to.include('eth_getCode');
      expect(slow.seen).to.not.include('eth_getTransactionCount');
      expect(never.seen.filter((m) => m === 'eth_getCode' || m === 'eth_getTransactionCount')).to.deep.equal([]);
      expect(await metric(url, 'svc_shadow_comparison_total', { upstream: 'never' })).to.equal(0);
      expect(await metric(url, 'svc_shadow_comparison_total', { method: 'eth_getTransactionCount' })).to.equal(0);
    });

    it('counts an error when the shadow answers one, and serves the serving answer', async () => {
      slow.failing.add('eth_getBalance');
      try {
        const before = await metric(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getBalance', 'error'));
        const r = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
        expect(BigInt(r.json.result)).to.equal(DEV_BALANCE);
        expect(r.headers['x-svc-upstream']).to.equal('serving');
        await metricReaches(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getBalance', 'error'), before + 1);
      } finally {
        slow.failing.delete('eth_getBalance');
      }
    });

    it('never delays the client for a slow shadow, and drops a copy beyond the bound', async () => {
      slow.delayMs.set('eth_getBalance', 1500);
      try {
        const matched = await metric(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getBalance', 'match'));
        const dropped = await metric(url, 'svc_shadow_dropped_total', { upstream: 'slow' });
        const t0 = Date.now();
        const r = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
        expect(Date.now() - t0, 'client latency, ms').to.be.below(700);
        expect(BigInt(r.json.result)).to.equal(DEV_BALANCE);
        // The one slot is taken by the slow copy: this call's copy is dropped and counted.
        await waitFor(() => slow.seen.filter((m) => m === 'eth_getBalance').length > 0);
        const t1 = Date.now();
        const second = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
        expect(Date.now() - t1, 'client latency, ms').to.be.below(700);
        expect(BigInt(second.json.result)).to.equal(DEV_BALANCE);
        expect(await metric(url, 'svc_shadow_dropped_total', { upstream: 'slow' })).to.equal(dropped + 1);
        expect(await metric(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getBalance', 'match'))).to.equal(matched);
        // The slow copy is still compared once it answers.
        await metricReaches(url, 'svc_shadow_comparison_total', comparisons('slow', 'eth_getBalance', 'match'), matched + 1);
      } finally {
        slow.delayMs.delete('eth_getBalance');
      }
    });
  });
});
