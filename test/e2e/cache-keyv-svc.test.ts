/**
 * `driver: keyv` through a running svc against anvil: a memcached tier (@keyv/memcache) answers
 * a repeated call from the cache (X-SVC-Cache HIT, no upstream attempt), and with eRPC's
 * `failsafeForGets` a tier that stalls (memcached under SIGSTOP) costs a call the entry's
 * timeout, not the tier's longer `readTimeout`: the client gets its answer from anvil.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startMemcached, type MemcachedHandle } from '../helpers/memcached.ts';
import { startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const hex = (n: number) => `0x${n.toString(16)}`;

function config(anvilUrl: string, connector: object): object {
  return {
    logLevel: 'error',
    projects: [
      {
        id: 'main',
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
        upstreams: [{ id: 'anvil', endpoint: anvilUrl, evm: { chainId: CHAIN, statePollerInterval: '100ms' } }],
      },
    ],
    database: { evmJsonRpcCache: { connectors: [connector], policies: [{ connector: 'mc', finality: 'finalized' }] } },
  };
}

describe('e2e: driver keyv (memcached) through svc against anvil', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let mc: MemcachedHandle;
  let svc: SvcHandle | undefined;
  const call = (svcUrl: SvcHandle, n: number): Promise<SvcResponse> =>
    svcUrl.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: [hex(n), false] });

  before(async () => {
    [anvil, mc] = await Promise.all([startAnvil(), startMemcached()]);
    await anvil.rpc('anvil_mine', [hex(100)]);
    svc = await startSvc(
      config(anvil.url, {
        id: 'mc',
        driver: 'keyv',
        // The tier's own read deadline is the longest allowed; the failsafe entry shortens it for block reads.
        keyv: { adapter: '@keyv/memcache', uri: mc.address, readTimeout: '1s', breaker: { failureThreshold: 1000 } },
        failsafeForGets: { matchMethod: 'eth_getBlockByNumber', matchFinality: 'finalized', timeout: { duration: '150ms' }, retry: { maxAttempts: 2 } },
      }),
    );
  });
  after(async () => {
    try {
      process.kill(mc.pid, 'SIGCONT');
    } catch {
      /* gone */
    }
    await svc?.close();
    await Promise.all([mc?.stop(), anvil?.stop()]);
  });

  it('a repeated call is answered from memcached (HIT, no upstream attempt)', async () => {
    const s = svc as SvcHandle;
    // Wait until svc knows the finalized head (the block is then cacheable as finalized).
    let first: SvcResponse | undefined;
    await waitFor(async () => {
      first = await call(s, 10);
      return first.status === 200;
    });
    let hit: SvcResponse | undefined;
    await waitFor(async () => {
      hit = await call(s, 10);
      return hit.headers['x-svc-cache'] === 'HIT';
    }, 5000);
    expect(hit?.headers['x-svc-upstream-attempts']).to.equal('0');
    expect(hit?.json.result).to.deep.equal(first?.json.result);
  });

  it('memcached stalled (SIGSTOP): calls are answered from anvil within the failsafe timeout (150 ms), not the tier readTimeout (1 s)', async () => {
    const s = svc as SvcHandle;
    process.kill(mc.pid, 'SIGSTOP');
    try {
      for (let n = 20; n < 24; n++) {
        const t0 = Date.now();
        const r = await call(s, n);
        const took = Date.now() - t0;
        expect(r.status).to.equal(200);
        expect((r.json.result as { number: string }).number).to.equal(hex(n));
        expect(r.headers['x-svc-cache']).to.equal('MISS');
        // The first read waits on the stalled tier for the entry's 150 ms, unless the memcached
        // client already failed fast (on a busy machine it marks a server that was slow to answer
        // as down for a while): either way the call must not wait for the tier's 1 s readTimeout.
        // A timed-out try is not retried (eRPC retries connection failures only): one 150 ms wait, then anvil.
        expect(took, `call ${n}`).to.be.below(600);
      }
    } finally {
      process.kill(mc.pid, 'SIGCONT');
    }
  });
});
