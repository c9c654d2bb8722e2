import { expect } from 'chai';
import picomatch from 'picomatch';
import { createLogger } from '../../../lib/logger.ts';
import type { Proxy } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { normaliseNetworkId, resolveTarget, type AliasMatcher } from '../../../core/http/routing.ts';
import { ErrNetworkNotSupported, ErrProjectNotFound } from '../../../core/wire/errors.ts';
import { defaultPreset } from '../../../presets/default.ts';

function matchers(rules: Array<AliasMatcher['rule'] & { matchDomain: string }>): AliasMatcher[] {
  return rules.map((rule) => ({ rule, match: picomatch(rule.matchDomain, { nocase: true, dot: true }) }));
}

describe('routing and aliases (spec §4.1)', () => {
  let proxy: Proxy;
  before(async () => {
    proxy = createProxy({
      config: {
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            networks: [
              { architecture: 'evm', evm: { chainId: 1 }, alias: 'mainnet' },
              { architecture: 'evm', evm: { chainId: 10 } },
            ],
          },
          { id: 'other', networks: [{ architecture: 'evm', evm: { chainId: 137 }, alias: 'polygon' }] },
        ],
      },
      // Routing only: without providers, these upstream-less projects are not zero-config.
      plugins: defaultPreset().filter((p) => !['providers', 'vendor-repository', 'vendor-hyper', 'vendors'].includes(p.name)),
      logger: createLogger('silent'),
      port: 0,
      host: '127.0.0.1',
    });
    await proxy.start();
  });
  after(() => proxy.close());

  it('/<project>/evm/<chainId>', async () => {
    const t = await resolveTarget(proxy, ['main', 'evm', '10'], 'localhost', []);
    expect(t.project.id).to.equal('main');
    expect(t.network?.id).to.equal('evm:10');
  });

  it('/<project>/<alias>', async () => {
    const t = await resolveTarget(proxy, ['other', 'polygon'], 'localhost', []);
    expect(t.network?.id).to.equal('evm:137');
  });

  it('/<project> leaves the network to the body networkId', async () => {
    const t = await resolveTarget(proxy, ['main'], 'localhost', []);
    expect(t.network).to.equal(undefined);
  });

  it('unknown project: ErrProjectNotFound (404)', async () => {
    const err = await resolveTarget(proxy, ['nope', 'evm', '1'], 'localhost', []).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ErrProjectNotFound);
    expect((err as ErrProjectNotFound).httpStatus).to.equal(404);
  });

  it('unknown chain or alias: ErrNetworkNotSupported (404)', async () => {
    for (const seg of [
      ['main', 'evm', '999'],
      ['main', 'nosuchalias'],
      ['main', 'evm', 'abc'],
    ]) {
      const err = await resolveTarget(proxy, seg, 'localhost', []).catch((e: unknown) => e);
      expect(err, seg.join('/')).to.be.instanceOf(ErrNetworkNotSupported);
      expect((err as ErrNetworkNotSupported).httpStatus).to.equal(404);
    }
  });

  it('a configured project id wins over aliasing rules', async () => {
    const t = await resolveTarget(proxy, ['main', 'evm', '1'], 'rpc.example.com', matchers([{ matchDomain: '*', serveProject: 'other' }]));
    expect(t.project.id).to.equal('main');
  });

  it('/evm/<chainId> through a rule serving a project', async () => {
    const t = await resolveTarget(proxy, ['evm', '1'], 'rpc.example.com', matchers([{ matchDomain: '*.example.com', serveProject: 'main' }]));
    expect(t.network?.id).to.equal('evm:1');
  });

  it('/<chainId> through a rule serving project and architecture; a numeric segment is a chain id only after aliasing', async () => {
    const t = await resolveTarget(
      proxy,
      ['137'],
      'polygon.example.com',
      matchers([{ matchDomain: 'polygon.*', serveProject: 'other', serveArchitecture: 'evm' }]),
    );
    expect(t.network?.id).to.equal('evm:137');
    // without a rule serving the architecture, "1" is an alias lookup and fails
    const err = await resolveTarget(proxy, ['1'], 'x.example.com', matchers([{ matchDomain: '*', serveProject: 'main' }])).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ErrNetworkNotSupported);
  });

  it('/ on a domain aliased to project, architecture and chain', async () => {
    const t = await resolveTarget(
      proxy,
      [],
      'eth.example.com',
      matchers([{ matchDomain: 'eth.example.com', serveProject: 'main', serveArchitecture: 'evm', serveChain: 1 }]),
    );
    expect(t.network?.id).to.equal('evm:1');
  });

  it('rules match on Host: a non-matching host gets ErrProjectNotFound', async () => {
    const err = await resolveTarget(proxy, ['evm', '1'], 'other.org', matchers([{ matchDomain: '*.example.com', serveProject: 'main' }])).catch(
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(ErrProjectNotFound);
  });

  it('body networkId forms', () => {
    expect(normaliseNetworkId('evm:1')).to.equal('evm:1');
    expect(normaliseNetworkId('evm:0x89')).to.equal('evm:137');
    expect(normaliseNetworkId('evm:abc')).to.equal(undefined);
    expect(normaliseNetworkId('solana:1')).to.equal(undefined);
  });
});

describe('upstream pools (one keep-alive pool per upstream origin)', () => {
  it('upstreams of the same origin share one pool; another origin gets its own', async () => {
    const proxy = createProxy({
      config: {
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            upstreams: [
              { id: 'a', endpoint: 'http://127.0.0.1:9/v1/key-a', evm: { chainId: 1 } },
              { id: 'b', endpoint: 'http://127.0.0.1:9/v1/key-b', evm: { chainId: 1 } },
              { id: 'c', endpoint: 'http://localhost:9/', evm: { chainId: 1 } },
            ],
          },
        ],
      },
      plugins: defaultPreset().filter((p) => p.name !== 'evm-state'),
      logger: createLogger('silent'),
      port: 0,
      host: '127.0.0.1',
    });
    await proxy.start();
    try {
      expect([...proxy.pools.keys()].sort()).to.deep.equal(['http://127.0.0.1:9', 'http://localhost:9']);
    } finally {
      await proxy.close();
    }
  });
});
