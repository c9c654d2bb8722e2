/**
 * eRPC's vendor endpoint shortcuts (plugins/vendors/shortcuts.ts): an upstream `endpoint:
 * <vendor>://...` becomes a provider of that vendor with the settings eRPC's
 * buildProviderSettings derives, the upstream's other keys as `overrides["*"]`; `envio` is svc's
 * `hyper`; an unknown scheme is a problem naming the path, never a crash.
 */
import { expect } from 'chai';
import { normalizeVendorShortcuts, shortcutProvider, type ConfigDocument } from '../../../plugins/vendors/index.ts';

/** Runs the rewrite; returns the document, the rewrites and the problems. */
function run(doc: ConfigDocument) {
  const rewrites: Array<{ path: string; from: unknown; to: unknown }> = [];
  const problems: Array<{ path: string; message: string }> = [];
  normalizeVendorShortcuts(doc, {
    rewrite: (path, from, to) => rewrites.push({ path, from, to }),
    problem: (path, message) => problems.push({ path, message }),
  });
  return { doc, rewrites, problems };
}

describe('vendor endpoint shortcuts (eRPC shapes)', () => {
  it('settings per vendor, as eRPC derives them from the URL', () => {
    expect(shortcutProvider('alchemy://AbC_123')).to.deep.equal({ vendor: 'alchemy', settings: { apiKey: 'AbC_123' } });
    expect(shortcutProvider('evm+infura://k')).to.deep.equal({ vendor: 'infura', settings: { apiKey: 'k' } });
    for (const v of [
      'drpc',
      'blastapi',
      'ankr',
      'blockpi',
      'dwellir',
      'llama',
      'onfinality',
      'etherspot',
      'pimlico',
      'conduit',
      'tenderly',
      'satelink',
      'blockdaemon',
    ]) {
      expect(shortcutProvider(`${v}://KEY`), v).to.deep.equal({ vendor: v, settings: { apiKey: 'KEY' } });
    }
    expect(shortcutProvider('thirdweb://CID')).to.deep.equal({ vendor: 'thirdweb', settings: { clientId: 'CID' } });
    expect(shortcutProvider('envio://rpc.hypersync.xyz')).to.deep.equal({ vendor: 'hyper', settings: { rootDomain: 'rpc.hypersync.xyz' } });
    expect(shortcutProvider('quicknode://QK?tagIds=1,2&tagLabels=prod')).to.deep.equal({
      vendor: 'quicknode',
      settings: { apiKey: 'QK', tagIds: [1, 2], tagLabels: 'prod' },
    });
    expect(shortcutProvider('quicknode://QK?tagIds=7&tagLabels=a,b')).to.deep.equal({
      vendor: 'quicknode',
      settings: { apiKey: 'QK', tagIds: 7, tagLabels: ['a', 'b'] },
    });
    expect(shortcutProvider('chainstack://CK?project=p1&region=eu')).to.deep.equal({
      vendor: 'chainstack',
      settings: { apiKey: 'CK', project: 'p1', region: 'eu' },
    });
    expect(shortcutProvider('goldsky://S3C?tier=premium')).to.deep.equal({ vendor: 'goldsky', settings: { secret: 'S3C', tier: 'premium' } });
    expect(shortcutProvider('routemesh://rm.example/rpc/1/RK')).to.deep.equal({ vendor: 'routemesh', settings: { baseURL: 'rm.example', apiKey: 'RK' } });
    expect(shortcutProvider('erpc://erpc.example/main/evm?secret=x')).to.deep.equal({
      vendor: 'erpc',
      settings: { endpoint: 'https://erpc.example/main/evm', secret: 'x' },
    });
    expect(shortcutProvider('repository://catalog.example/v1?x=1')).to.deep.equal({
      vendor: 'repository',
      settings: { repositoryUrl: 'https://catalog.example/v1?x=1' },
    });
    expect(shortcutProvider('superchain://github.com/acme/reg')).to.deep.equal({ vendor: 'superchain', settings: { registryUrl: 'github.com/acme/reg' } });
    expect(shortcutProvider('repository://evm-public-endpoints.erpc.cloud')).to.deep.equal({
      vendor: 'repository',
      settings: { repositoryUrl: 'https://evm-public-endpoints.erpc.cloud/' },
    });
  });

  it('an upstream shortcut becomes a provider: id from the upstream or <vendor>-<n>, the other keys as overrides["*"]', () => {
    const { doc, rewrites, problems } = run({
      projects: [
        {
          id: 'main',
          upstreams: [
            { endpoint: 'alchemy://K1', failsafe: [{ timeout: { duration: '5s' } }] },
            { id: 'plain', endpoint: 'http://127.0.0.1:8545' },
            { endpoint: 'alchemy://K2' },
            { id: 'paid-infura', endpoint: 'infura://K3', tags: ['tier:paid'] },
          ],
          providers: [{ id: 'hyperrpc', vendor: 'envio' }],
        },
      ],
    });
    expect(problems).to.deep.equal([]);
    const p = (doc.projects as Array<Record<string, unknown>>)[0]!;
    expect(p.upstreams).to.deep.equal([{ id: 'plain', endpoint: 'http://127.0.0.1:8545' }]);
    expect(p.providers).to.deep.equal([
      { id: 'hyperrpc', vendor: 'hyper' },
      {
        id: 'alchemy-1',
        vendor: 'alchemy',
        settings: { apiKey: 'K1' },
        upstreamIdTemplate: '<PROVIDER>-<NETWORK>',
        overrides: { '*': { failsafe: [{ timeout: { duration: '5s' } }] } },
      },
      { id: 'alchemy-2', vendor: 'alchemy', settings: { apiKey: 'K2' }, upstreamIdTemplate: '<PROVIDER>-<NETWORK>' },
      {
        id: 'paid-infura',
        vendor: 'infura',
        settings: { apiKey: 'K3' },
        upstreamIdTemplate: '<PROVIDER>-<NETWORK>',
        overrides: { '*': { tags: ['tier:paid'] } },
      },
    ]);
    expect(rewrites.map((r) => r.path)).to.deep.equal([
      'projects[0].providers[0].vendor',
      'projects[0].upstreams[0]',
      'projects[0].upstreams[2]',
      'projects[0].upstreams[3]',
    ]);
  });

  it('an unknown scheme or a malformed routemesh path is a problem naming the path; the upstream is left for the schema to refuse too', () => {
    const { doc, problems } = run({ projects: [{ id: 'main', upstreams: [{ endpoint: 'acme://K' }, { endpoint: 'routemesh://rm.example/v1/K' }] }] });
    expect(problems.map((p) => p.path)).to.deep.equal(['projects[0].upstreams[0].endpoint', 'projects[0].upstreams[1].endpoint']);
    expect(problems[0]!.message).to.match(
      /^"acme:\/\/" names no vendor svc knows \(vendor shortcuts: alchemy, ankr, .*\); write the upstream's http\(s\) URL instead$/,
    );
    expect(problems[1]!.message).to.include('/rpc/<chainId>/<apiKey>');
    expect((doc.projects as Array<Record<string, unknown>>)[0]!.upstreams).to.have.length(2);
  });

  it('a document without shortcuts is left exactly as written', () => {
    const written = { projects: [{ id: 'main', upstreams: [{ endpoint: 'https://node.example' }] }, { id: 'p2' }] };
    const { doc, rewrites } = run(structuredClone(written));
    expect(doc).to.deep.equal(written);
    expect(rewrites).to.deep.equal([]);
  });
});
