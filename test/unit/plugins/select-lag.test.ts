/**
 * The lag a pinned call reports (select plugin, `X-SVC-Upstream-Lag`): how far the answering
 * upstream's latest block is behind the network's highest, from the chain state. End to end over
 * two anvil nodes: test/e2e/pinned-lag.test.ts.
 */
import { expect } from 'chai';
import { NetworkChainState } from '../../../plugins/evm-state/chain.ts';
import type { Network } from '../../../core/registry/project.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { upstreamLagOf } from '../../../plugins/select/index.ts';
import { CHAIN_STATE_SERVICE } from 'svc-proxy/plugins/evm-state';
import type { PluginHost } from '../../../core/plugin-api.ts';

describe('select plugin: upstream lag of a pinned call', () => {
  const lead = { id: 'lead' } as Upstream;
  const lag = { id: 'lag' } as Upstream;
  const fresh = { id: 'fresh' } as Upstream;
  const network = { id: 'evm:1', upstreams: [lead, lag, fresh] } as unknown as Network;

  function host(): { st: NetworkChainState; proxy: PluginHost } {
    const st = new NetworkChainState(network, () => 0);
    // The evm-state plugin's service, as networkChainState finds it.
    return { st, proxy: { services: { get: (k: unknown) => (k === CHAIN_STATE_SERVICE ? { of: () => st } : undefined) } } as unknown as PluginHost };
  }

  it('is the distance to the highest latest block of the network', () => {
    const { st, proxy } = host();
    st.of(lead).advanceLatest(120);
    st.of(lag).advanceLatest(115);
    expect(upstreamLagOf(proxy, { network }, lag)).to.equal(5);
    expect(upstreamLagOf(proxy, { network }, lead)).to.equal(0);
  });

  it('is 0 for an upstream never observed (no guess), and never negative', () => {
    const { st, proxy } = host();
    st.of(lead).advanceLatest(120);
    expect(upstreamLagOf(proxy, { network }, fresh)).to.equal(0);
    // Ahead of the counted head (e.g. not counted itself): not a lag.
    st.countedUpstreams = () => [lead];
    st.of(lag).advanceLatest(130);
    expect(upstreamLagOf(proxy, { network }, lag)).to.equal(0);
  });

  it('a node polled at genesis is known: its lag counts', () => {
    const { st, proxy } = host();
    st.of(lead).advanceLatest(3);
    st.of(lag).lastPollAt = 1;
    expect(upstreamLagOf(proxy, { network }, lag)).to.equal(3);
  });
});
