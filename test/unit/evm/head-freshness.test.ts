/**
 * Interpolation on quiet chains: a head is fresh when a poll or an answer
 * confirmed it recently (about two poll intervals, or two block times, whichever is larger),
 * not when it was first seen, so a devnet whose head does not move for a minute still has
 * `latest` interpolated; `finalized` is not gated by head freshness at all. The clock (`Date`)
 * is faked; sockets and timers stay real.
 */
import { expect } from 'chai';
import FakeTimers from '@sinonjs/fake-timers';
import { chainStateOf, NetworkChainState } from '../../../plugins/evm-state/chain.ts';
import type { Network } from '../../../core/registry/project.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { statePollerOf } from '../../../plugins/evm-state/index.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../../helpers/svc.ts';

const ADDR = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';

describe('head freshness', () => {
  describe('NetworkChainState', () => {
    const a = { id: 'a' } as Upstream;
    it('a head confirmed by every poll stays fresh for about two poll intervals after the last confirmation', () => {
      const clock = { t: 1_000_000 };
      const st = new NetworkChainState({ upstreams: [a] } as unknown as Network, () => clock.t);
      st.pollIntervalMs = 30_000;
      st.observeLatest(a, 100);
      expect(st.isHeadFresh()).to.equal(true);
      for (let i = 0; i < 4; i++) {
        clock.t += 30_000;
        st.confirmHead(100); // the same block, poll after poll
        expect(st.isHeadFresh(), `poll ${i}`).to.equal(true);
      }
      clock.t += 60_000;
      expect(st.isHeadFresh()).to.equal(true);
      clock.t += 1;
      expect(st.isHeadFresh()).to.equal(false);
      st.confirmHead(99); // a lagging upstream does not confirm the head
      expect(st.isHeadFresh()).to.equal(false);
      st.confirmHead(100);
      expect(st.isHeadFresh()).to.equal(true);
    });

    it('two block times when that is larger than two poll intervals; the fallback window when neither is known', () => {
      const clock = { t: 1_000_000 };
      const st = new NetworkChainState({ upstreams: [a] } as unknown as Network, () => clock.t);
      st.observeLatest(a, 1);
      clock.t += 2001;
      expect(st.isHeadFresh(2000)).to.equal(false);
      for (let n = 2; n <= 5; n++) {
        clock.t += 10_000;
        st.observeLatest(a, n);
      }
      st.pollIntervalMs = 1000;
      clock.t += 19_000;
      expect(st.isHeadFresh()).to.equal(true); // 2 × 10 s block time
      clock.t += 1001;
      expect(st.isHeadFresh()).to.equal(false);
    });
  });

  describe('in svc: a static-head upstream for over a minute (default preset, fake clock)', function () {
    this.timeout(15_000);
    let clock: ReturnType<typeof FakeTimers.install>;
    let up: FaultServer;
    let svc: SvcHandle;
    const lastParams = (method: string): unknown => [...up.calls].reverse().find((c) => c.method === method)?.params;

    before(async () => {
      clock = FakeTimers.install({ now: Date.now(), toFake: ['Date'] });
      // The fault server's built-in blocks: every tag answers block 0x10, forever.
      up = await startFaultServer({ handler: ({ method }) => (method === 'eth_getBalance' || method === 'eth_call' ? '0x1' : undefined) });
      svc = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337, fallbackFinalityDepth: 4 } }],
            upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: 31337 } }],
          },
        ],
      });
      const network = svc.proxy.projects.get('main')!.networks.get('evm:31337')!;
      await waitFor(() => chainStateOf(network).highestLatest === 16 && chainStateOf(network).highestFinalized > 0);
    });
    after(async () => {
      await svc?.close();
      await up?.close();
      clock?.uninstall();
    });

    const call = async (method: string, params: unknown[]) => {
      up.reset();
      const res = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method, params });
      expect(res.json.result, res.text).to.equal('0x1');
      return lastParams(method) as unknown[];
    };

    it('latest and finalized are interpolated 50 s after the head was first seen (polls every 30 s confirm it)', async () => {
      clock.tick(50_000);
      expect(await call('eth_getBalance', [ADDR, 'latest'])).to.deep.equal([ADDR, '0x10']);
      expect(await call('eth_call', [{ to: ADDR }, 'finalized'])).to.deep.equal([{ to: ADDR }, '0x10']);
    });

    it('without a confirming poll for over two intervals, latest passes through; finalized is still interpolated', async () => {
      clock.tick(45_000);
      expect(await call('eth_getBalance', [ADDR, 'latest'])).to.deep.equal([ADDR, 'latest']);
      expect(await call('eth_call', [{ to: ADDR }, 'finalized'])).to.deep.equal([{ to: ADDR }, '0x10']);
    });

    it('a poll that finds the same block confirms it: latest is interpolated again, 95 s into a head that never moved', async () => {
      const u = [...svc.proxy.projects.get('main')!.upstreams.values()][0]!;
      await statePollerOf(svc.proxy, u)!.poll();
      expect(await call('eth_getBalance', [ADDR, 'latest'])).to.deep.equal([ADDR, '0x10']);
    });
  });
});
