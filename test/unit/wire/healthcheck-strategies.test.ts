/**
 * The healthcheck evaluation strategies (spec §4.3) over scripted upstreams: when each passes,
 * at the exact bounds (an error rate of exactly 90% or 100%, one upstream of n), and the messages
 * they give; the live `eth_chainId` probe, its timeout and the reuse of its answer.
 */
import { expect } from 'chai';
import type { Network, PluginHost, Project, Upstream } from '../../../core/plugin-api.ts';
import { CHAIN_STATE_SERVICE } from 'svc-proxy/plugins/evm-state';
import {
  CHAIN_ID_PROBE_TIMEOUT_MS,
  CHAIN_ID_PROBE_TTL_MS,
  ChainIdProbes,
  evaluate,
  isInitialized,
  type Member,
} from '../../../plugins/healthcheck/evaluate.ts';

interface Scripted {
  id: string;
  state?: string;
  /** Requests and error rate in the health window. */
  requests?: number;
  errorRate?: number;
  /** When set, a state poller runs for it and last polled at this time (0: never). */
  lastPollAt?: number;
  /** The chain id it answers eth_chainId with (hex), or an Error to reject. */
  chainId?: string | Error;
  /** Excluded by selection (the select hook drops it). */
  excluded?: boolean;
  cordoned?: boolean;
}

function world(list: Scripted[], opts: { noNetwork?: string[]; selectThrows?: boolean } = {}) {
  const network = { id: 'evm:1', chainId: 1, upstreams: [] as Upstream[] } as unknown as Network & { upstreams: Upstream[] };
  const ups = new Map<Upstream, Scripted>();
  for (const s of list) {
    const u = { id: s.id, state: s.state ?? 'ready' } as unknown as Upstream;
    ups.set(u, s);
    network.upstreams.push(u);
  }
  const calls: { id: string; method: string; timeout: number }[] = [];
  let selects = 0;
  const host = {
    services: {
      get: (k: unknown) => (k === CHAIN_STATE_SERVICE ? { of: () => ({ peek: (u: Upstream) => ({ lastPollAt: ups.get(u)?.lastPollAt }) }) } : undefined),
    },
    upstreamCall: (_n: Network, u: Upstream, method: string, _p: unknown[], timeout: number) => {
      calls.push({ id: u.id, method, timeout });
      const c = ups.get(u)?.chainId;
      return c instanceof Error ? Promise.reject(c) : Promise.resolve({ result: c });
    },
    internalContext: () => ({ ctx: {}, done: () => undefined }),
    hooks: {
      select: {
        call: (candidates: Upstream[]) => {
          selects++;
          if (opts.selectThrows) throw new Error('select failed');
          return candidates.filter((u) => !ups.get(u)?.excluded);
        },
      },
    },
  } as unknown as PluginHost;
  const project = {
    health: {
      snapshot: (id: string) => {
        const s = list.find((x) => x.id === id)!;
        return { requests: s.requests ?? 0, errorRate: s.errorRate ?? 0 };
      },
      isCordoned: (id: string, method: string) => method === '*' && list.find((x) => x.id === id)!.cordoned === true,
    },
  } as unknown as Project;
  const members: Member[] = [...ups.keys()].map((u) => (opts.noNetwork?.includes(u.id) ? { upstream: u } : { upstream: u, network }));
  const pollers = new Map<Upstream, unknown>([...ups].filter(([, s]) => s.lastPollAt !== undefined).map(([u]) => [u, {}]));
  return { host, project, members, pollers, calls, selects: () => selects, network };
}

async function verdict(list: Scripted[], strategy: Parameters<typeof evaluate>[3], opts: Parameters<typeof world>[1] = {}) {
  const w = world(list, opts);
  return evaluate(w.host, w.project, w.members, strategy, new ChainIdProbes(w.host), w.pollers);
}

describe('wire: healthcheck strategies (spec §4.3)', () => {
  it('no upstream: unhealthy for every strategy', async () => {
    for (const s of ['any:initializedUpstreams', 'all:errorRateBelow90', 'any:evm:eth_chainId', 'all:activeUpstreams'] as const) {
      expect(await verdict([], s)).to.deep.equal({ healthy: false, message: 'no upstreams configured' });
    }
  });

  describe('any:initializedUpstreams', () => {
    it('ready with no poller, or ready and polled once, counts; not ready, never polled or without a network does not', async () => {
      const w = world([{ id: 'a' }, { id: 'b', lastPollAt: 5 }, { id: 'c', lastPollAt: 0 }, { id: 'd', state: 'probing' }, { id: 'e' }], { noNetwork: ['e'] });
      expect(w.members.map((m) => isInitialized(w.host, m, w.pollers))).to.deep.equal([true, true, false, false, false]);
      expect(isInitialized(w.host, w.members[1]!, undefined)).to.equal(true);
      expect(await verdict([{ id: 'a' }, { id: 'c', lastPollAt: 0 }], 'any:initializedUpstreams')).to.deep.equal({
        healthy: true,
        message: '1 / 2 upstreams initialized',
      });
      expect(
        await verdict(
          [
            { id: 'c', lastPollAt: 0 },
            { id: 'd', state: 'probing' },
          ],
          'any:initializedUpstreams',
        ),
      ).to.deep.equal({ healthy: false, message: 'no upstream initialized yet (0 / 2)' });
    });
  });

  describe('error-rate strategies', () => {
    it('any:errorRateBelow90: one upstream below 90% is enough; exactly 90% is not below', async () => {
      expect(
        await verdict(
          [
            { id: 'a', requests: 10, errorRate: 1 },
            { id: 'b', requests: 10, errorRate: 0.89 },
          ],
          'any:errorRateBelow90',
        ),
      ).to.deep.equal({ healthy: true, message: '1 / 2 upstreams with traffic have an error rate below 90%' });
      expect(await verdict([{ id: 'a', requests: 10, errorRate: 0.9 }], 'any:errorRateBelow90')).to.deep.equal({
        healthy: false,
        message: '0 / 1 upstreams with traffic have an error rate below 90%',
      });
    });

    it('all:errorRateBelow90: every upstream with data must be below', async () => {
      expect(
        await verdict(
          [
            { id: 'a', requests: 1, errorRate: 0 },
            { id: 'b', requests: 1, errorRate: 0.95 },
          ],
          'all:errorRateBelow90',
        ),
      ).to.deep.include({ healthy: false });
      expect(
        await verdict(
          [
            { id: 'a', requests: 1, errorRate: 0 },
            { id: 'b', requests: 1, errorRate: 0.5 },
          ],
          'all:errorRateBelow90',
        ),
      ).to.deep.include({ healthy: true });
    });

    it('the 100% strategies: 99% passes, exactly 100% does not', async () => {
      expect(await verdict([{ id: 'a', requests: 3, errorRate: 0.99 }], 'any:errorRateBelow100')).to.deep.equal({
        healthy: true,
        message: '1 / 1 upstreams with traffic have an error rate below 100%',
      });
      expect(await verdict([{ id: 'a', requests: 3, errorRate: 1 }], 'any:errorRateBelow100')).to.deep.include({ healthy: false });
      expect(
        await verdict(
          [
            { id: 'a', requests: 3, errorRate: 0.99 },
            { id: 'b', requests: 3, errorRate: 1 },
          ],
          'all:errorRateBelow100',
        ),
      ).to.deep.equal({ healthy: false, message: '1 / 2 upstreams with traffic have an error rate below 100%' });
    });

    it('an initialised upstream without traffic counts as 0%; one with neither traffic nor initialisation does not count', async () => {
      expect(await verdict([{ id: 'idle' }, { id: 'bad', requests: 4, errorRate: 1 }], 'any:errorRateBelow90')).to.deep.equal({
        healthy: true,
        message: '1 / 2 upstreams with traffic have an error rate below 90%',
      });
      expect(
        await verdict(
          [
            { id: 'new', state: 'probing' },
            { id: 'ok', requests: 4, errorRate: 0 },
          ],
          'all:errorRateBelow90',
        ),
      ).to.deep.equal({ healthy: true, message: '1 / 1 upstreams with traffic have an error rate below 90%' });
      expect(await verdict([{ id: 'new', state: 'probing' }], 'any:errorRateBelow90')).to.deep.equal({
        healthy: false,
        message: 'no error rate data available yet',
      });
    });
  });

  describe('eth_chainId strategies', () => {
    it('any: one upstream answering the expected chain id; all: every one', async () => {
      const list: Scripted[] = [
        { id: 'a', chainId: '0x1' },
        { id: 'b', chainId: '0x2' },
        { id: 'c', chainId: new Error('down') },
      ];
      expect(await verdict(list, 'any:evm:eth_chainId')).to.deep.equal({ healthy: true, message: '1 / 3 upstreams passed (2 failed)' });
      expect(await verdict(list, 'all:evm:eth_chainId')).to.deep.equal({ healthy: false, message: '1 / 3 upstreams passed (2 failed)' });
      expect(
        await verdict(
          [
            { id: 'a', chainId: '0x1' },
            { id: 'b', chainId: '0x01' },
          ],
          'all:evm:eth_chainId',
        ),
      ).to.deep.equal({ healthy: true, message: '2 / 2 upstreams passed (0 failed)' });
      expect(await verdict([{ id: 'a', chainId: '0x2' }], 'any:evm:eth_chainId')).to.deep.include({ healthy: false });
    });

    it('a non-string answer or an upstream without a network fails the probe', async () => {
      const w = world(
        [
          { id: 'n', chainId: 1 as unknown as string },
          { id: 'x', chainId: '0x1' },
        ],
        { noNetwork: ['x'] },
      );
      const probes = new ChainIdProbes(w.host);
      expect(await probes.check(w.members[0]!)).to.equal(false);
      expect(await probes.check(w.members[1]!)).to.equal(false);
    });

    it(`the probe is eth_chainId with a ${CHAIN_ID_PROBE_TIMEOUT_MS} ms timeout; its answer is reused for ${CHAIN_ID_PROBE_TTL_MS} ms`, async () => {
      expect([CHAIN_ID_PROBE_TIMEOUT_MS, CHAIN_ID_PROBE_TTL_MS]).to.deep.equal([5000, 5000]);
      const w = world([
        { id: 'a', chainId: '0x1' },
        { id: 'b', chainId: '0x1' },
      ]);
      let now = 1000;
      const probes = new ChainIdProbes(w.host, () => now);
      expect(await probes.check(w.members[0]!)).to.equal(true);
      expect(w.calls).to.deep.equal([{ id: 'a', method: 'eth_chainId', timeout: 5000 }]);
      now += CHAIN_ID_PROBE_TTL_MS - 1;
      await probes.check(w.members[0]!);
      expect(w.calls).to.have.length(1);
      now += 1;
      await probes.check(w.members[0]!);
      expect(w.calls).to.have.length(2);
      // A stale entry of another upstream is dropped and probed anew.
      await probes.check(w.members[1]!);
      now += CHAIN_ID_PROBE_TTL_MS;
      await probes.check(w.members[0]!);
      await probes.check(w.members[1]!);
      expect(w.calls.map((c) => c.id)).to.deep.equal(['a', 'a', 'b', 'a', 'b']);
    });
  });

  describe('all:activeUpstreams', () => {
    it('every upstream initialised, selected and not cordoned for every method', async () => {
      expect(await verdict([{ id: 'a' }, { id: 'b' }], 'all:activeUpstreams')).to.deep.equal({ healthy: true, message: 'all 2 upstreams active' });
      expect(await verdict([{ id: 'a' }, { id: 'b', cordoned: true }], 'all:activeUpstreams')).to.deep.equal({
        healthy: false,
        message: '1 / 2 upstreams active (initialized, not cordoned, not excluded)',
      });
      expect(await verdict([{ id: 'a', excluded: true }, { id: 'b' }], 'all:activeUpstreams')).to.deep.include({ healthy: false });
      expect(await verdict([{ id: 'a', state: 'probing' }, { id: 'b' }], 'all:activeUpstreams')).to.deep.include({ healthy: false });
      expect(await verdict([{ id: 'a' }, { id: 'b' }], 'all:activeUpstreams', { noNetwork: ['b'] })).to.deep.include({ healthy: false });
    });

    it('selection runs once per network; a failing select hook makes nothing active', async () => {
      const w = world([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
      await evaluate(w.host, w.project, w.members, 'all:activeUpstreams', new ChainIdProbes(w.host), w.pollers);
      expect(w.selects()).to.equal(1);
      expect(await verdict([{ id: 'a' }], 'all:activeUpstreams', { selectThrows: true })).to.deep.equal({
        healthy: false,
        message: '0 / 1 upstreams active (initialized, not cordoned, not excluded)',
      });
    });

    it('selection is asked as for a plain read (eth_blockNumber, no params) over a copy of the upstream list, and its context is released', async () => {
      const w = world([{ id: 'a' }, { id: 'b' }]);
      const asked: Array<[string, unknown]> = [];
      let released = 0;
      const h = w.host as unknown as { internalContext: unknown; hooks: { select: { call: (c: Upstream[], ctx: unknown) => Upstream[] } } };
      h.internalContext = (_n: Network, method: string, params: unknown) => {
        asked.push([method, params]);
        return { ctx: { method }, done: () => void released++ };
      };
      // A select tap that reorders the list it is given in place (as a policy may).
      h.hooks.select.call = (candidates: Upstream[]) => candidates.reverse();
      const before = [...w.network.upstreams];
      await evaluate(w.host, w.project, w.members, 'all:activeUpstreams', new ChainIdProbes(w.host), w.pollers);
      expect(asked).to.deep.equal([['eth_blockNumber', []]]);
      expect(released).to.equal(1);
      expect(w.network.upstreams, "the network's own list untouched").to.deep.equal(before);
    });
  });
});
