/**
 * Config hot reload (docs/operations.md "Config reload"), in process: a running svc in front of
 * real anvil nodes, under a steady load of real clients (viem and ethers), takes a new config
 * through `reloadConfig()` (what SIGHUP, `svc reload` and admin `svc_reloadConfig` run): an
 * upstream added serves, one removed drains and stops serving, a failsafe policy changed takes
 * effect on a new network chain, a config that does not validate is refused whole; no call
 * fails, and an upstream that did not change keeps its object (health window, breakers,
 * connections).
 */
import { expect } from 'chai';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JsonRpcProvider } from 'ethers';
import { createPublicClient, http, webSocket } from 'viem';
import { foundry } from 'viem/chains';
import { ConfigError } from '../../config/load.ts';
import { validateConfig } from '../../core/host/validate.ts';
import type { ReloadReport } from '../../core/host/reload.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

type Cfg = { projects: Array<Record<string, unknown>>; admin?: unknown; server?: unknown };

/** The config the test edits between reloads (as a file would hold it). */
function config(upstreams: Array<{ id: string; endpoint: string }>, failsafe?: unknown): Cfg {
  return {
    // Removed upstreams close maxTimeout + 1 s after they leave.
    server: { maxTimeout: '1s' },
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: 31337 }, ...(failsafe ? { failsafe } : {}) }],
        upstreams: upstreams.map((u) => ({ ...u, evm: { chainId: 31337 } })),
      },
    ],
  };
}

describe('e2e: config hot reload under load', function () {
  this.timeout(60_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let svc: SvcHandle;
  let current: unknown;

  before(async () => {
    [a, b] = await Promise.all([startAnvil(), startAnvil()]);
    await Promise.all([a.rpc('anvil_mine', ['0x5']), b.rpc('anvil_mine', ['0x5'])]);
    current = config([{ id: 'a', endpoint: a.url }]);
    svc = await startSvc(current as object);
    svc.proxy.setConfigSource(() => validateConfig({ config: structuredClone(current), plugins: defaultPreset() }));
  });
  after(async () => {
    await svc?.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  /** viem and ethers clients calling in a loop until stopped; resolves with every failure. */
  function load(): () => Promise<{ failures: string[]; calls: number }> {
    let stop = false;
    const failures: string[] = [];
    let calls = 0;
    const viem = createPublicClient({ chain: foundry, transport: http(`${svc.url}/main/evm/31337`, { retryCount: 0 }) });
    const ethers = new JsonRpcProvider(`${svc.url}/main/evm/31337`, 31337, { staticNetwork: true, batchMaxCount: 1 });
    const loop = async (f: () => Promise<unknown>) => {
      while (!stop) {
        await f().then(
          () => calls++,
          (e: unknown) => failures.push(String((e as Error).message ?? e).slice(0, 200)),
        );
        // A client answer served from its own cache settles without I/O: let timers run.
        await new Promise((r) => setImmediate(r));
      }
    };
    const loops = [
      loop(() => viem.getBlockNumber({ cacheTime: 0 })),
      loop(() => ethers.getBalance('0x0000000000000000000000000000000000000001', 'latest')),
      loop(() => viem.getChainId()),
    ];
    return async () => {
      stop = true;
      await Promise.all(loops);
      ethers.destroy();
      return { failures, calls };
    };
  }

  /** The upstream that answered a fresh call (`X-SVC-Upstream`). */
  async function servedBy(selector?: string): Promise<string | undefined> {
    const r = await svc.post(
      '/main/evm/31337',
      { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['latest', false] },
      { 'x-svc-skip-cache-read': 'true', ...(selector ? { 'x-svc-use-upstream': selector } : {}) },
    );
    expect(r.status, r.text).to.equal(200);
    return r.headers['x-svc-upstream'];
  }

  it('adds an upstream, changes a failsafe policy, removes an upstream and refuses a broken config, dropping no call', async () => {
    const stop = load();
    await new Promise((r) => setTimeout(r, 300));
    const project = () => svc.proxy.projects.get('main')!;
    const aBefore = project().upstreams.get('a')!;
    const requestsBefore = project().health.snapshot('a').requests;
    expect(requestsBefore).to.be.greaterThan(0);

    // 1. Add b.
    current = config([
      { id: 'a', endpoint: a.url },
      { id: 'b', endpoint: b.url },
    ]);
    let report: ReloadReport = await svc.proxy.reloadConfig();
    expect(report.changed).to.equal(true);
    expect(report.upstreams.added).to.deep.equal(['main/b']);
    expect(report.upstreams.kept).to.equal(1);
    // The network's upstreams changed: its chain is built anew (plugins compose per upstream set).
    expect(report.networks.changed).to.deep.equal(['main/evm:31337']);
    // a kept its object (breakers, connections, chain state) and its health window.
    expect(project().upstreams.get('a')).to.equal(aBefore);
    expect(project().health.snapshot('a').requests).to.be.at.least(requestsBefore);
    await waitFor(async () => (await servedBy('b')) === 'b', 5000);

    // 2. Change the network's failsafe policy: the network's chain is built anew.
    const netBefore = project().networks.get('evm:31337');
    current = config(
      [
        { id: 'a', endpoint: a.url },
        { id: 'b', endpoint: b.url },
      ],
      [{ matchMethod: '*', timeout: { duration: '7s' }, retry: { maxAttempts: 4 } }],
    );
    report = await svc.proxy.reloadConfig();
    expect(report.networks.changed).to.deep.equal(['main/evm:31337']);
    expect(report.upstreams.kept).to.equal(2);
    const netAfter = project().networks.get('evm:31337')!;
    expect(netAfter).to.not.equal(netBefore);
    expect(JSON.stringify(netAfter.config.settings.failsafe)).to.contain('7000');
    expect(netAfter.upstreams.map((u) => u.id)).to.deep.equal(['a', 'b']);
    expect(project().upstreams.get('a')).to.equal(aBefore);
    // The new network starts with the heads the old one knew.
    expect(networkChainState(svc.proxy, netAfter).highestLatest).to.be.greaterThan(0);

    // 3. Remove a: it leaves the rotation at once, b serves everything.
    current = config([{ id: 'b', endpoint: b.url }], [{ matchMethod: '*', timeout: { duration: '7s' }, retry: { maxAttempts: 4 } }]);
    report = await svc.proxy.reloadConfig();
    expect(report.upstreams.removed).to.deep.equal(['main/a']);
    expect(project().upstreams.has('a')).to.equal(false);
    for (let i = 0; i < 5; i++) expect(await servedBy()).to.equal('b');

    // 4. A broken config is refused whole, with svc validate's messages; the running one serves on.
    current = { projects: [{ id: 'main', upstreams: [{ id: 'b', endpoint: 42 }] }] };
    const refused = await svc.proxy.reloadConfig().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).to.be.instanceOf(ConfigError);
    expect((refused as ConfigError).problems.map((p) => p.path).join(' ')).to.contain('endpoint');
    expect(project().upstreams.has('b')).to.equal(true);
    expect(await servedBy()).to.equal('b');

    const { failures, calls } = await stop();
    expect(failures, failures.slice(0, 3).join('\n')).to.deep.equal([]);
    expect(calls).to.be.greaterThan(20);
    // a drained: its keep-alive pool (no other upstream on its origin) is closed.
    await waitFor(() => !svc.proxy.pools.has(new URL(a.url).origin), 5000);
    expect(svc.proxy.pools.has(new URL(b.url).origin)).to.equal(true);
    // Its metric series went with it (the selection score; breakers dropped).
    const metrics = await svc.proxy.metrics.metrics();
    expect(metrics.split('\n').filter((l) => l.startsWith('svc_selection_score{') && l.includes('upstream="a"'))).to.deep.equal([]);
    expect(metrics.split('\n').some((l) => l.startsWith('svc_selection_score{') && l.includes('upstream="b"'))).to.equal(true);
  });

  it('a WebSocket newHeads subscription keeps delivering after a reload rebuilds its network', async () => {
    const ws = createPublicClient({ chain: foundry, transport: webSocket(`${svc.url.replace('http', 'ws')}/main/evm/31337`, { retryCount: 0 }) });
    const heads: number[] = [];
    const errors: string[] = [];
    const unwatch = ws.watchBlocks({ onBlock: (blk) => heads.push(Number(blk.number)), onError: (e) => errors.push(e.message) });
    try {
      // Mined until one arrives: the subscription is set up asynchronously.
      const mine = () => Promise.all([a.rpc('anvil_mine', ['0x1']), b.rpc('anvil_mine', ['0x1'])]);
      await waitFor(async () => heads.length > 0 || (await mine(), false), 10_000).catch((e: Error) => {
        throw new Error(`${e.message}: ${errors.join('; ')}`);
      });
      current = config([{ id: 'b', endpoint: b.url }], [{ matchMethod: '*', timeout: { duration: '8s' } }]);
      const report = await svc.proxy.reloadConfig();
      expect(report.networks.changed).to.deep.equal(['main/evm:31337']);
      const top = Math.max(...heads);
      await waitFor(async () => heads.some((h) => h > top) || (await mine(), false), 10_000);
    } finally {
      unwatch();
      await ws.transport
        .getRpcClient()
        .then((c) => c.close())
        .catch(() => undefined);
    }
  });

  it('refuses a config that changes a key read only at start, naming it, and changes nothing', async () => {
    const before = svc.proxy.projects.get('main')!.networks.get('evm:31337');
    const good = current;
    current = {
      ...(good as object),
      server: { maxTimeout: '45s' },
      rateLimiters: { budgets: [{ id: 'tight', rules: [{ method: '*', maxCount: 1, period: 'second' }] }] },
    };
    const refused = await svc.proxy.reloadConfig().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).to.be.instanceOf(ConfigError);
    const paths = (refused as ConfigError).problems.map((p) => p.path);
    expect(paths).to.include('server.maxTimeoutMs');
    expect(paths).to.include('rateLimiters');
    expect((refused as ConfigError).problems[0]!.message).to.contain('restart');
    expect(svc.proxy.projects.get('main')!.networks.get('evm:31337')).to.equal(before);
    expect(svc.proxy.config.server.maxTimeoutMs).to.not.equal(45_000);
    // A project added is read at start by auth, CORS and rate limits: refused too.
    current = {
      ...(good as object),
      projects: [
        ...(good as Cfg).projects,
        { id: 'two', auth: { strategies: [{ type: 'secret', secret: { value: 'x' } }] }, upstreams: [{ id: 'c', endpoint: b.url, evm: { chainId: 31337 } }] },
      ],
    };
    const added = await svc.proxy.reloadConfig().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((added as ConfigError).problems.map((p) => p.path)).to.deep.equal(['projects.two (added)']);
    expect(svc.proxy.projects.has('two')).to.equal(false);
    current = good;
    expect((await svc.proxy.reloadConfig()).changed).to.equal(false);
  });

  it('a call in flight on an upstream the reload replaces finishes, and counts in no health window of its successor', async () => {
    // A node that answers eth_getBalance after 400 ms (anything else at once, from anvil b).
    const slow = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const call = JSON.parse(body) as { id: unknown; method: string; params: unknown[] };
        const answer = (result: unknown) => res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result }));
        if (call.method !== 'eth_getBalance') return void b.rpc(call.method, call.params).then(answer, () => answer(null));
        setTimeout(() => answer('0x1'), 400);
      });
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    try {
      const cfg = (ignoreMethods: string[]) => ({
        server: { maxTimeout: '1s' },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: [{ id: 's', endpoint: url, evm: { chainId: 31337 }, ignoreMethods }],
          },
        ],
      });
      current = cfg(['debug_*']);
      await svc.proxy.reloadConfig();
      const inFlight = svc.post(
        '/main/evm/31337',
        { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000002', 'latest'] },
        { 'x-svc-skip-cache-read': 'true' },
      );
      await new Promise((r) => setTimeout(r, 100));
      current = cfg(['trace_*']);
      const report = await svc.proxy.reloadConfig();
      expect(report.upstreams.changed).to.deep.equal(['main/s']);
      const r = await inFlight;
      expect(r.json.result, r.text).to.equal('0x1');
      expect(svc.proxy.projects.get('main')!.health.snapshot('s', 'eth_getBalance').requests).to.equal(0);
    } finally {
      slow.closeAllConnections();
      await new Promise((r) => slow.close(() => r(undefined)));
    }
  });

  it("a shadow upstream added by a reload gets its copies (the network's chain is built anew for it)", async () => {
    // A recording node: every JSON-RPC method it receives (the copies), answered from anvil b.
    const seen: string[] = [];
    const rec = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const call = JSON.parse(body) as { id: unknown; method: string; params: unknown[] };
        seen.push(call.method);
        void b.rpc(call.method, call.params).then(
          (result) => res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result })),
          () => res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: null })),
        );
      });
    });
    await new Promise<void>((r) => rec.listen(0, '127.0.0.1', () => r()));
    const recUrl = `http://127.0.0.1:${(rec.address() as AddressInfo).port}`;
    try {
      const withShadow = config([{ id: 'b', endpoint: b.url }]);
      (withShadow.projects[0]!.upstreams as object[]).push({ id: 'sh', endpoint: recUrl, evm: { chainId: 31337 }, shadow: { methods: 'eth_getBalance' } });
      current = withShadow;
      const report = await svc.proxy.reloadConfig();
      expect(report.upstreams.added).to.include('main/sh');
      await waitFor(async () => {
        const r = await svc.post(
          '/main/evm/31337',
          { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000003', 'latest'] },
          { 'x-svc-skip-cache-read': 'true' },
        );
        expect(r.headers['x-svc-upstream']).to.equal('b');
        return seen.includes('eth_getBalance');
      }, 5000);
    } finally {
      current = config([{ id: 'b', endpoint: b.url }]);
      await svc.proxy.reloadConfig();
      rec.closeAllConnections();
      await new Promise((r) => rec.close(() => r(undefined)));
    }
  });

  it("a changed upstream without a configured chain id serves its predecessor's chain while its probe runs: the network never goes empty", async () => {
    const noChain = (ignoreMethods?: string[]) => ({
      server: { maxTimeout: '1s' },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [{ id: 'b', endpoint: b.url, ...(ignoreMethods ? { ignoreMethods } : {}) }],
        },
      ],
    });
    current = noChain();
    await svc.proxy.reloadConfig();
    await waitFor(() => svc.proxy.projects.get('main')!.upstreams.get('b')!.state === 'ready');
    current = noChain(['debug_*']);
    const report = await svc.proxy.reloadConfig();
    expect(report.upstreams.changed).to.deep.equal(['main/b']);
    // At once, before the new upstream's probe could answer.
    expect(
      svc.proxy.projects
        .get('main')!
        .networks.get('evm:31337')!
        .upstreams.map((u) => u.id),
    ).to.deep.equal(['b']);
    const r = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }, { 'x-svc-skip-cache-read': 'true' });
    expect(r.json.result).to.equal('0x7a69');
  });
});
