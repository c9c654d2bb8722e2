/**
 * The chain id re-check of the state poller (spec §1.2): an upstream whose `eth_chainId` answer
 * changes leaves every network at once, loudly, and its answers still in flight are refused; an
 * unreadable answer changes nothing.
 */
import { expect } from 'chai';
import { Registry } from 'prom-client';
import type { PluginHost } from '../../../core/host/host.ts';
import type { Network } from '../../../core/registry/project.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { chainChanged, chainIdCheck, chainIdOf } from '../../../plugins/evm-state/chain-id.ts';

function fixture() {
  const left: string[] = [];
  const errors: string[] = [];
  const u = { id: 'u', chainId: 31337, config: { chainId: 31337 }, state: 'ready' } as unknown as Upstream;
  const members = new Set<Upstream>([u]);
  const network = { id: 'evm:31337', removeUpstream: (x: Upstream) => members.delete(x) } as unknown as Network;
  const project = { id: 'main', networks: new Map([['evm:31337', network]]) };
  (network as unknown as { project: unknown }).project = project;
  const metrics = new Registry();
  const host = {
    metrics,
    logger: { error: (_o: unknown, msg: string) => errors.push(msg) },
    hooks: { upstreamLeft: { call: (x: Upstream, n: Network) => left.push(`${x.id}@${n.id}`) } },
  } as unknown as PluginHost;
  return { u, network, members, left, errors, metrics, check: chainIdCheck(host) };
}

describe('chain id re-check (spec §1.2)', () => {
  it('reads hex quantities only', () => {
    expect(chainIdOf('0x7a69')).to.equal(31337);
    for (const bad of [null, 1, '7a69', '0x', '0x0', `0x${'f'.repeat(16)}`, { result: '0x1' }]) expect(chainIdOf(bad), JSON.stringify(bad)).to.equal(undefined);
  });

  it('the same chain, or an unreadable answer, changes nothing', () => {
    const f = fixture();
    expect(f.check.check(f.network, f.u, '0x7a69')).to.equal(false);
    expect(f.check.check(f.network, f.u, 'garbage')).to.equal(false);
    expect(f.u.state).to.equal('ready');
    expect(f.members.has(f.u)).to.equal(true);
    expect(chainChanged(f.u)).to.equal(false);
  });

  it('another chain: out of every network at once, an error line, the counter, and its answers refused from then on', async () => {
    const f = fixture();
    expect(f.check.check(f.network, f.u, '0x1')).to.equal(true);
    expect(f.u.state).to.equal('failed');
    expect(f.members.has(f.u)).to.equal(false);
    expect(f.left).to.deep.equal(['u@evm:31337']);
    expect(f.errors).to.deep.equal(['upstream u now serves chain 1, not 31337: taken out of service']);
    expect(chainChanged(f.u)).to.equal(true);
    const values = (await f.metrics.getSingleMetric('svc_upstream_chain_changed_total')!.get()).values;
    expect(values.map((v) => [v.labels.upstream, v.value])).to.deep.equal([['u', 1]]);
    // Once out, a second detection is not counted again.
    expect(f.check.check(f.network, f.u, '0x1')).to.equal(false);
  });
});
