/**
 * A provider's network filter (plugins/providers/bootstrap.ts `networkFilter`): `onlyNetworks`
 * admits, `ignoreNetworks` excludes (eRPC's `providers[].ignoreNetworks`), globs both, the
 * exclusion wins; and the schema accepts `ignoreNetworks` where eRPC writes it.
 */
import { expect } from 'chai';
import { loadConfigObject } from '../../../config/load.ts';
import type { PluginHost, Project } from '../../../core/plugin-api.ts';
import { createLogger } from '../../../lib/logger.ts';
import { MAX_DECLINED_TASKS, ProjectBootstrap } from '../../../plugins/providers/bootstrap.ts';
import { networkFilter, providersOf, providersPlugin, upstreamIdOf, type Vendor } from '../../../plugins/providers/index.ts';

describe('providers: onlyNetworks and ignoreNetworks', () => {
  it('no lists: every network', () => {
    const f = networkFilter({});
    expect(f('evm:1')).to.equal(true);
    expect(f('evm:137')).to.equal(true);
  });

  it('ignoreNetworks alone: every network but the listed ones (exact ids, as eRPC writes them)', () => {
    const f = networkFilter({ ignoreNetworks: ['evm:137', 'evm:56'] });
    expect(f('evm:1')).to.equal(true);
    expect(f('evm:137')).to.equal(false);
    expect(f('evm:56')).to.equal(false);
    expect(f('evm:1370')).to.equal(true);
  });

  it('ignoreNetworks takes globs, like onlyNetworks', () => {
    const f = networkFilter({ ignoreNetworks: ['evm:4*'] });
    expect(f('evm:42161')).to.equal(false);
    expect(f('evm:43114')).to.equal(false);
    expect(f('evm:10')).to.equal(true);
  });

  it('both lists: the admitted networks minus the ignored ones (the exclusion wins)', () => {
    const f = networkFilter({ onlyNetworks: ['evm:1', 'evm:10', 'evm:137'], ignoreNetworks: ['evm:137'] });
    expect(f('evm:1')).to.equal(true);
    expect(f('evm:10')).to.equal(true);
    expect(f('evm:137')).to.equal(false);
    expect(f('evm:8453')).to.equal(false);
  });

  it('empty lists mean no filter', () => {
    expect(networkFilter({ onlyNetworks: [], ignoreNetworks: [] })('evm:5')).to.equal(true);
  });

  it('the config accepts providers[].ignoreNetworks and the resolved provider carries it', () => {
    const { config } = loadConfigObject(
      { projects: [{ id: 'main', providers: [{ id: 'p', vendor: 'repository', ignoreNetworks: ['evm:137'] }] }] },
      { fragments: [providersPlugin().schema ?? {}] },
    );
    const [p] = providersOf(config.projects[0]!.settings);
    expect(p?.ignoreNetworks).to.deep.equal(['evm:137']);
  });

  it('refuses a non-list ignoreNetworks, naming its path', () => {
    expect(() =>
      loadConfigObject(
        { projects: [{ id: 'main', providers: [{ id: 'p', vendor: 'repository', ignoreNetworks: 'evm:137' }] }] },
        { fragments: [providersPlugin().schema ?? {}] },
      ),
    ).to.throw(/ignoreNetworks/);
  });
});

describe('providers: upstreamIdTemplate placeholders', () => {
  it('<PROVIDER>, <VENDOR>, <NETWORK> and <EVM_CHAIN_ID>, as eRPC replaces them', () => {
    expect(upstreamIdOf('<PROVIDER>-<NETWORK>', { id: 'paid', vendor: 'alchemy' }, 1)).to.equal('paid-evm:1');
    expect(upstreamIdOf('<VENDOR>-<EVM_CHAIN_ID>', { id: 'paid', vendor: 'alchemy' }, 137)).to.equal('alchemy-137');
    expect(upstreamIdOf('<PROVIDER>/<VENDOR>/<NETWORK>/<EVM_CHAIN_ID>', { id: 'p', vendor: 'v' }, 10)).to.equal('p/v/evm:10/10');
  });
});

describe('providers: chains no vendor serves, bounded', () => {
  it(`remembers at most ${MAX_DECLINED_TASKS} "not served" answers; the oldest is forgotten and asked again`, async () => {
    const asked: number[] = [];
    const vendor: Vendor = {
      name: 'none',
      async upstreamsFor(chainId) {
        asked.push(chainId);
        return [];
      },
    };
    const host = { logger: createLogger('silent') } as unknown as PluginHost;
    const project = { id: 'p', upstreams: new Map() } as unknown as Project;
    const b = new ProjectBootstrap(host, project, providersOf({ providers: [{ id: 'x', vendor: 'none' }] }), new Map([['none', vendor]]));
    for (let c = 1; c <= MAX_DECLINED_TASKS + 1; c++) b.start(c);
    await new Promise((r) => setImmediate(r));
    expect(asked).to.have.length(MAX_DECLINED_TASKS + 1);
    expect(b.declined(MAX_DECLINED_TASKS + 1)).to.deep.equal([`provider x (vendor none) does not serve evm:${MAX_DECLINED_TASKS + 1}`]);
    expect(b.declined(2)).to.deep.equal(['provider x (vendor none) does not serve evm:2']);
    // Chain 1 was the oldest: forgotten, so a new request asks the vendor again.
    expect(b.declined(1)).to.deep.equal([]);
    b.start(2);
    b.start(1);
    await new Promise((r) => setImmediate(r));
    expect(asked.slice(MAX_DECLINED_TASKS + 1)).to.deep.equal([1]);
    b.close();
  });
});
