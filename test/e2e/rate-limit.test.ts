/**
 * Rate-limit budgets on real servers in front of anvil. Every rule uses
 * `period: hour`, so no window can roll over during a test. Two `svc start` processes share one
 * real Redis for the shared-store case; stalling that Redis (SIGSTOP) shows the per-process
 * fallback.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';

const rpc = (id: number | string = 1, method = 'eth_blockNumber', params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });
const hour = (maxCount: number, extra: object = {}) => ({ method: '*', maxCount, period: 'hour', ...extra });

describe('e2e: rate-limit budgets', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  const up = (id = 'anvil', extra: object = {}) => ({ id, endpoint: anvil.url, evm: { chainId: anvil.chainId }, ...extra });
  const net = () => ({ architecture: 'evm', evm: { chainId: anvil.chainId } });

  before(async () => {
    anvil = await startAnvil();
  });
  after(() => anvil?.stop());

  describe('in one process', () => {
    let svc: SvcHandle;
    const path = (p: string) => `/${p}/evm/${anvil.chainId}`;
    before(async () => {
      svc = await startSvc({
        ...NO_CACHE,
        metrics: { enabled: true, port: 0 },
        rateLimiters: {
          budgets: [
            { id: 'two', rules: [hour(2)] },
            { id: 'zero', rules: [hour(0)] },
            { id: 'blockOnly', rules: [hour(1, { method: 'eth_blockNumber' })] },
            { id: 'perUser', rules: [hour(1, { perUser: true })] },
            { id: 'keyBudget', rules: [hour(3, { perUser: true })] },
            // Upstream budgets count svc's own traffic too (the state poller): this one counts only eth_getBalance.
            { id: 'upstreamOne', rules: [hour(1, { method: 'eth_getBalance' })] },
          ],
        },
        projects: [
          { id: 'proj', rateLimitBudget: 'two', networks: [net()], upstreams: [up()] },
          { id: 'zero', rateLimitBudget: 'zero', networks: [net()], upstreams: [up()] },
          { id: 'net', networks: [{ ...net(), rateLimitBudget: 'blockOnly' }], upstreams: [up()] },
          {
            id: 'users',
            networks: [net()],
            upstreams: [up()],
            auth: {
              strategies: [
                { type: 'secret', secret: { value: 'alice-secret-0123456789', id: 'alice' }, rateLimitBudget: 'perUser' },
                { type: 'secret', secret: { value: 'bob-secret-0123456789', id: 'bob' }, rateLimitBudget: 'perUser' },
              ],
            },
          },
          {
            id: 'ups',
            networks: [net()],
            upstreams: [up('limited', { rateLimitBudget: 'upstreamOne' }), up('spare')],
          },
        ],
      });
    });
    after(() => svc?.close());

    it('a project budget: over it a single call is HTTP 429, -32005 "rate-limit exceeded", ErrProjectRateLimitRuleExceeded', async () => {
      expect((await svc.post(path('proj'), rpc())).status).to.equal(200);
      expect((await svc.post(path('proj'), rpc())).status).to.equal(200);
      const r = await svc.post(path('proj'), rpc(9));
      expect(r.status).to.equal(429);
      expect(r.json.id).to.equal(9);
      expect(r.json.error.code).to.equal(-32005);
      expect(r.json.error.message).to.equal('rate-limit exceeded');
      expect(JSON.stringify(r.json.error)).to.include('ErrProjectRateLimitRuleExceeded');
      // What refused and when to come back: the budget, its rule and window, RFC 9110 Retry-After.
      const wait = Number(r.headers['retry-after']);
      expect(wait).to.be.within(1, 3600);
      expect(r.json.error.data.details).to.deep.include({ budget: 'two', method: '*', maxCount: 2, period: 'hour', per: '', retryAfterSeconds: wait });
    });

    it('in a batch only the elements over budget fail; the batch stays HTTP 200', async () => {
      const r = await svc.post(path('net'), [rpc(1), rpc(2, 'eth_chainId'), rpc(3)]);
      expect(r.status).to.equal(200);
      const byId = new Map(r.json.map((e: { id: number }) => [e.id, e]));
      const errors = [1, 3].map((id) => (byId.get(id) as { error?: { code: number } }).error?.code);
      // The network budget counts eth_blockNumber only: one of the two passes, the other is refused.
      expect(errors.filter((c) => c === -32005)).to.have.length(1);
      expect((byId.get(2) as { result?: string }).result).to.match(/^0x/);
      expect(JSON.stringify(r.json)).to.include('ErrNetworkRateLimitRuleExceeded');
    });

    it('maxCount 0 always rejects', async () => {
      expect((await svc.post(path('zero'), rpc())).status).to.equal(429);
    });

    it("a strategy's budget counts per user (ErrAuthRateLimitRuleExceeded): alice over hers does not stop bob", async () => {
      const as = (who: string) => svc.post(path('users'), rpc(), { 'x-svc-secret-token': `${who}-secret-0123456789` });
      expect((await as('alice')).status).to.equal(200);
      const over = await as('alice');
      expect(over.status).to.equal(429);
      expect(JSON.stringify(over.json.error)).to.include('ErrAuthRateLimitRuleExceeded');
      expect((await as('bob')).status).to.equal(200);
    });

    it('an upstream over its budget is skipped undialled (trace rate_limited) and not counted against its health', async () => {
      const first = await svc.post(path('ups'), rpc(1, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']));
      expect(first.headers['x-svc-upstream']).to.equal('limited');
      const second = await svc.post(path('ups'), rpc(2, 'eth_getBalance', ['0x0000000000000000000000000000000000000002', 'latest']));
      expect(second.status).to.equal(200);
      expect(second.headers['x-svc-upstream']).to.equal('spare');
      expect(second.headers['x-svc-upstreams']).to.match(/limited=primary:rate_limited:/);
      const h = svc.proxy.projects.get('ups')!.health.snapshot('limited');
      expect(h.errorRate).to.equal(0);
      expect(h.throttleRate).to.equal(0);
      const metrics = await (await fetch(svc.metricsUrl as string)).text();
      expect(metrics).to.match(/svc_rate_limited_total\{project="ups",scope="upstream",budget="upstreamOne"\} 1/);
    });

    it('a budget id that is not declared is a config error naming the path', async () => {
      const e = await startSvc({ projects: [{ id: 'p', rateLimitBudget: 'ghost', upstreams: [up()] }] }).then(
        async (s) => {
          await s.close();
          return undefined;
        },
        (err: Error) => err,
      );
      expect(e?.message).to.match(/projects\[0\]\.rateLimitBudget/);
    });
  });

  describe('two svc processes sharing a Redis store', () => {
    let redis: RedisHandle;
    let dir: string;
    let a: SvcProcess;
    let b: SvcProcess;
    before(async () => {
      await ensureBuilt();
      redis = await startRedis();
      dir = mkdtempSync(join(tmpdir(), 'svc-rl-'));
      const config = {
        ...NO_CACHE,
        logLevel: 'warn',
        rateLimiters: { store: { driver: 'redis', redis: { uri: redis.url } }, budgets: [{ id: 'shared', rules: [hour(4)] }] },
        projects: [{ id: 'main', rateLimitBudget: 'shared', networks: [net()], upstreams: [up()] }],
      };
      [a, b] = await Promise.all([spawnSvc(dir, 'a', config), spawnSvc(dir, 'b', config)]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await redis?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });
    const post = (p: SvcProcess) => httpRequest('POST', `${p.url}/main/evm/${anvil.chainId}`, JSON.stringify(rpc()), { 'content-type': 'application/json' });

    it('reject together: four calls across both use the budget up, the fifth on either is 429', async () => {
      const statuses = [];
      for (const p of [a, b, a, b]) statuses.push((await post(p)).status);
      expect(statuses).to.deep.equal([200, 200, 200, 200]);
      expect((await post(a)).status).to.equal(429);
      expect((await post(b)).status).to.equal(429);
    });

    it('with Redis stalled past 1 s each process falls back to its own counter, logged and counted; no call hangs', async () => {
      process.kill(redis.pid, 'SIGSTOP');
      try {
        const t0 = Date.now();
        const r = await post(a);
        // A fresh per-process window: the call is admitted, within about the 1 s store timeout.
        expect(r.status).to.equal(200);
        expect(Date.now() - t0).to.be.below(3000);
        const metrics = await (await fetch(a.metricsUrl)).text();
        expect(metrics).to.match(/svc_rate_limit_store_fallback_total [1-9]/);
        expect(a.logs()).to.include('rate-limit store (redis) failed or was slow');
        expect(a.logs()).not.to.include(String(redis.port));
      } finally {
        process.kill(redis.pid, 'SIGCONT');
      }
    });
  });
});
