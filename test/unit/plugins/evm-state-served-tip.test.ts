/**
 * eRPC's served tip (`evm.servedTip.enabledFor`) in the evm-state plugin: the majority pick
 * (eRPC's PickServedTip: the floor(N/2)-th highest head), syncing upstreams left out, vouched
 * ones only once any is, `safe` selecting the finalized axis, and the config rewrites.
 */
import { expect } from 'chai';
import { loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import type { Network, Upstream } from '../../../core/plugin-api.ts';
import { UpstreamChainState } from '../../../plugins/evm-state/chain.ts';
import { majorityHead, majorityPick, servedTipOf } from '../../../plugins/evm-state/index.ts';
import { defaultPreset } from '../../../presets/default.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));

function states(...heads: Array<{ latest: number; finalized?: number; syncing?: boolean; vouched?: boolean }>) {
  const ups = heads.map((_h, i) => ({ id: `u${i}` }) as unknown as Upstream);
  const map = new Map<Upstream, UpstreamChainState>();
  heads.forEach((h, i) => {
    const s = new UpstreamChainState();
    s.latest = h.latest;
    s.finalized = h.finalized ?? 0;
    s.syncing = h.syncing ?? false;
    s.vouched = h.vouched ?? false;
    map.set(ups[i]!, s);
  });
  return { st: { peek: (u: Upstream) => map.get(u) }, ups };
}

const net = (enabledFor?: string[]) => ({ config: { settings: { evm: enabledFor ? { servedTip: { enabledFor } } : {} } } }) as unknown as Network;

describe('evm-state: served tip (eRPC parity)', () => {
  it('majorityPick: one head → it; two → the lower; three → the middle; four → the third; unknown heads left out', () => {
    expect(majorityPick([])).to.equal(0);
    expect(majorityPick([7])).to.equal(7);
    expect(majorityPick([10, 4])).to.equal(4);
    expect(majorityPick([10, 4, 8])).to.equal(8);
    expect(majorityPick([10, 9, 8, 1])).to.equal(8);
    expect(majorityPick([10, 9, 8, 7, 1])).to.equal(8);
    expect(majorityPick([0, 10, 4])).to.equal(4);
  });

  it('majorityHead: syncing upstreams are left out; once one is vouched, unvouched heads are too', () => {
    const a = states({ latest: 100 }, { latest: 90, syncing: true }, { latest: 95 });
    expect(majorityHead(a.st, a.ups, 'latest')).to.equal(95);
    const b = states({ latest: 100, vouched: true }, { latest: 90 }, { latest: 98, vouched: true });
    expect(majorityHead(b.st, b.ups, 'latest')).to.equal(98);
    const c = states({ latest: 100, finalized: 60 }, { latest: 90, finalized: 50 });
    expect(majorityHead(c.st, c.ups, 'finalized')).to.equal(50);
  });

  it('servedTipOf: off by default; `safe` turns on the finalized axis', () => {
    expect(servedTipOf(net())).to.equal(undefined);
    expect(servedTipOf(net([]))).to.equal(undefined);
    expect(servedTipOf(net(['latest']))).to.deep.equal({ latest: true, finalized: false });
    expect(servedTipOf(net(['safe']))).to.deep.equal({ latest: false, finalized: true });
  });

  it('config: tags in any case are lower-cased, clusterDelta is dropped with a line, networkDefaults is inherited', () => {
    const { config, rewrites } = loadConfigObject(
      {
        projects: [
          {
            id: 'p',
            networkDefaults: { evm: { servedTip: { enabledFor: ['Latest', 'SAFE'], clusterDelta: 3 } } },
            networks: [{ evm: { chainId: 1 } }],
            upstreams: [{ endpoint: 'http://127.0.0.1:8545' }],
          },
        ],
      },
      { fragments: FRAGMENTS, env: {} },
    );
    expect((config.projects[0]?.networks[0]?.settings.evm as { servedTip: unknown }).servedTip).to.deep.equal({ enabledFor: ['latest', 'safe'] });
    expect(rewrites.map((r) => r.path)).to.include.members([
      'projects[0].networkDefaults.evm.servedTip.clusterDelta',
      'projects[0].networkDefaults.evm.servedTip.enabledFor',
    ]);
  });
});
