/**
 * `server.workers` (docs/operations.md "Workers"): `svc start` with two worker processes behind
 * one port, in front of two anvil nodes. Each call is sent on a new connection (`Connection:
 * close`), so the primary hands the connections to both workers in turn. Asserted from the
 * client's side: both workers serve; a cordon set through `/admin` (taken by one worker) holds
 * on every worker; a project budget counts every worker's calls once (the primary keeps the
 * counters); an svc-managed filter made through one worker is polled through the other (the
 * primary keeps filters); `/metrics` on the primary sums the workers; a worker that dies is replaced; SIGTERM
 * drains every worker and the primary exits 0.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { spawnSvc, type SvcProcess, listeningPids } from '../helpers/svc-process.ts';
import { waitFor } from '../helpers/svc.ts';

const ADMIN = 'admin-secret-workers-0123456789';
const BUDGET = 25;

describe('e2e: server.workers (node:cluster workers behind one port)', function () {
  this.timeout(60_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let svc: SvcProcess;
  let dir: string;

  /** One call on its own connection; status, answer and the upstream that served it. */
  async function call(
    project: string,
    method = 'eth_blockNumber',
  ): Promise<{ status: number; body: { result?: unknown; error?: { message: string } }; upstream: string | undefined }> {
    const r = await request(`${svc.url}/${project}/evm/31337`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }),
    });
    const body = (await r.body.json()) as { result?: unknown; error?: { message: string } };
    return { status: r.statusCode, body, upstream: r.headers['x-svc-upstream'] as string | undefined };
  }

  async function admin(method: string, params: unknown[]): Promise<{ result?: unknown; error?: unknown }> {
    const r = await request(`${svc.url}/admin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-svc-secret-token': ADMIN, connection: 'close' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await r.body.json()) as { result?: unknown; error?: unknown };
  }

  before(async () => {
    [a, b] = await Promise.all([startAnvil(), startAnvil()]);
    dir = mkdtempSync(join(tmpdir(), 'svc-workers-'));
    const upstreams = [
      { id: 'a', endpoint: a.url, evm: { chainId: 31337 } },
      { id: 'b', endpoint: b.url, evm: { chainId: 31337 } },
    ];
    svc = await spawnSvc(dir, 'workers', {
      logLevel: 'info',
      server: { workers: 2, waitBeforeShutdown: '0s', waitAfterShutdown: '2s' },
      metrics: { enabled: true },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      rateLimiters: { budgets: [{ id: 'small', rules: [{ method: '*', maxCount: BUDGET, period: 'hour' }] }] },
      projects: [
        { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams },
        { id: 'metered', rateLimitBudget: 'small', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams },
        // One node: the filter test reads one chain (two independent anvil nodes are two chains).
        { id: 'single', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [upstreams[0]] },
      ],
    });
    // Both workers are up once both logged that they listen.
    await waitFor(() => listeningPids(svc.logs()).length >= 2, 20_000);
  });

  after(async () => {
    await svc?.stop();
    await Promise.all([a?.stop(), b?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs two workers, each in its own process, and serves calls on the one port', async () => {
    const pids = listeningPids(svc.logs());
    expect(new Set(pids).size).to.equal(2);
    expect(pids).to.not.include(svc.pid);
    for (let i = 0; i < 6; i++) {
      const r = await call('main');
      expect(r.status).to.equal(200);
      expect(r.body.result).to.match(/^0x/);
    }
  });

  it('a cordon set through /admin (taken by one worker) holds on every worker', async () => {
    // Find the upstream the workers prefer, then cordon it through one admin call.
    const preferred = (await call('main')).upstream as string;
    expect(['a', 'b']).to.include(preferred);
    const other = preferred === 'a' ? 'b' : 'a';
    expect((await admin('svc_cordonUpstream', [{ projectId: 'main', upstream: preferred, reason: 'workers test' }])).error).to.equal(undefined);
    // The replay reaches the other worker over IPC: give it a moment, then every call avoids the cordon.
    await waitFor(async () => (await call('main')).upstream === other && (await call('main')).upstream === other, 5000);
    for (let i = 0; i < 10; i++) expect((await call('main')).upstream).to.equal(other);
    expect((await admin('svc_uncordonUpstream', [{ projectId: 'main', upstream: preferred }])).error).to.equal(undefined);
  });

  it('a project budget counts the calls of every worker once: exactly maxCount calls pass', async () => {
    let ok = 0;
    let limited = 0;
    for (let i = 0; i < BUDGET + 10; i++) {
      const r = await call('metered');
      if (r.status === 200 && r.body.result !== undefined) ok++;
      else if (r.status === 429) limited++;
    }
    expect(ok).to.equal(BUDGET);
    expect(limited).to.equal(10);
  });

  it('a filter made through one worker is polled through the other: every new block once, never filter not found', async () => {
    const rpc = async (method: string, params: unknown[]) => {
      const r = await request(`${svc.url}/single/evm/31337`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      return (await r.body.json()) as { result?: unknown; error?: { message: string } };
    };
    const made = await rpc('eth_newBlockFilter', []);
    expect(made.error).to.equal(undefined);
    const id = made.result as string;
    const mined: string[] = [];
    const seen: string[] = [];
    // Each poll on its own connection: the primary hands them to both workers in turn.
    for (let i = 0; i < 6; i++) {
      await a.rpc('evm_mine', []);
      mined.push(((await a.rpc('eth_getBlockByNumber', ['latest', false])) as { hash: string }).hash);
      const polled = await rpc('eth_getFilterChanges', [id]);
      expect(polled.error, `poll ${i}`).to.equal(undefined);
      seen.push(...(polled.result as string[]));
    }
    // A poll may read a head a moment old (the latest block is cached briefly): the rest comes with the next polls.
    await waitFor(async () => {
      const polled = await rpc('eth_getFilterChanges', [id]);
      expect(polled.error).to.equal(undefined);
      seen.push(...(polled.result as string[]));
      return seen.length >= mined.length;
    }, 10_000);
    expect(seen).to.deep.equal(mined);
    expect((await rpc('eth_uninstallFilter', [id])).result).to.equal(true);
    expect((await rpc('eth_getFilterChanges', [id])).error?.message).to.match(/filter not found/);
  });

  it('/metrics on the primary sums the workers', async () => {
    const before = await (await fetch(svc.metricsUrl)).text();
    const count = (text: string) => {
      let n = 0;
      for (const line of text.split('\n'))
        if (line.startsWith('svc_network_request_received_total{') && line.includes('project="main"')) n += Number(line.split(' ').pop());
      return n;
    };
    const n0 = count(before);
    for (let i = 0; i < 8; i++) await call('main');
    const after = await (await fetch(svc.metricsUrl)).text();
    expect(count(after) - n0).to.equal(8);
  });

  it('a worker that dies is replaced, and calls keep being served', async () => {
    const [victim] = listeningPids(svc.logs());
    process.kill(victim as number, 'SIGKILL');
    await waitFor(() => svc.logs().includes('worker died: starting a replacement') && listeningPids(svc.logs()).length >= 3, 20_000);
    for (let i = 0; i < 6; i++) expect((await call('main')).status).to.equal(200);
  });

  it('SIGTERM drains every worker and the primary exits 0', async () => {
    await svc.stop();
    expect(svc.logs()).to.include('every worker exited');
    expect(svc.logs()).to.match(/"exitCode":0/);
  });
});
