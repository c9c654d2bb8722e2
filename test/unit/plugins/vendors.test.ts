/**
 * The built-in vendors (plugins/vendors): each vendor's documented URL per chain from the offline
 * tables, as eRPC's thirdparty/*.go builds it; chains a table lacks are not served; the account
 * and list vendors read the vendor's API (a stand-in here); settings a vendor needs are checked;
 * the test-only URL rewrite.
 */
import { expect } from 'chai';
import {
  CATALOG,
  missingSettings,
  remoteVendors,
  rewriteVendorUrl,
  superchainRegistryUrl,
  VENDOR_CHAINS,
  type VendorIo,
} from '../../../plugins/vendors/index.ts';

const offers = (vendor: string, chainId: number, settings: Record<string, unknown>) => CATALOG.get(vendor)!.offers(chainId, settings);
const url = (vendor: string, chainId: number, settings: Record<string, unknown> = { apiKey: 'K3Y' }) => offers(vendor, chainId, settings)[0]?.endpoint;

describe('vendors: offline tables and URL rules', () => {
  it('alchemy: https://<network>.g.alchemy.com/v2/<apiKey> per chain', () => {
    expect(url('alchemy', 1)).to.equal('https://eth-mainnet.g.alchemy.com/v2/K3Y');
    expect(url('alchemy', 137)).to.equal('https://polygon-mainnet.g.alchemy.com/v2/K3Y');
    expect(url('alchemy', 8453)).to.equal('https://base-mainnet.g.alchemy.com/v2/K3Y');
    expect(Object.keys(VENDOR_CHAINS.alchemy!).length).to.be.above(100);
  });

  it('a chain the table does not list: no offer (not served), never a throw', () => {
    for (const v of ['alchemy', 'infura', 'drpc', 'blastapi', 'ankr', 'blockpi', 'dwellir', 'llama', 'onfinality', 'blockdaemon', 'satelink', 'etherspot']) {
      expect(offers(v, 999_999_991, { apiKey: 'K3Y' }), v).to.deep.equal([]);
    }
  });

  it('infura, blastapi (Avalanche C-Chain path), ankr, blockpi, llama, dwellir, onfinality', () => {
    expect(url('infura', 1)).to.equal('https://mainnet.infura.io/v3/K3Y');
    expect(url('infura', 10)).to.equal('https://optimism-mainnet.infura.io/v3/K3Y');
    expect(url('blastapi', 43114)).to.equal('https://ava-mainnet.blastapi.io/K3Y/ext/bc/C/rpc');
    expect(url('blastapi', 1)).to.equal('https://eth-mainnet.blastapi.io/K3Y');
    expect(url('ankr', 1, { apiKey: 'a/b' })).to.equal('https://rpc.ankr.com/eth/a%2Fb');
    expect(url('blockpi', 1)).to.equal('https://ethereum.blockpi.network/v1/rpc/K3Y');
    expect(url('llama', 1)).to.equal('https://eth.llamarpc.com/K3Y');
    expect(url('dwellir', 43114)).to.equal('https://api-avalanche-mainnet-archive.n.dwellir.com/K3Y/ext/bc/C/rpc');
    expect(url('onfinality', 1)).to.equal('https://eth.api.onfinality.io/rpc?apikey=K3Y');
  });

  it('drpc: lb.drpc.org with the network name and dkey; unsupported-method answers never auto-ignore', () => {
    const [o] = offers('drpc', 1, { apiKey: 'K3Y' });
    expect(o?.endpoint).to.equal('https://lb.drpc.org/ogrpc?network=ethereum&dkey=K3Y');
    expect(o?.entry).to.deep.equal({ autoIgnoreUnsupportedMethods: false });
  });

  it('blockdaemon: the key is a bearer token, not in the URL; satelink: X-API-Key unless the free tier', () => {
    const [b] = offers('blockdaemon', 1, { apiKey: 'K3Y' });
    expect(b?.endpoint).to.equal('https://svc.blockdaemon.com/ethereum/mainnet/native');
    expect(b?.entry).to.deep.equal({ jsonRpc: { headers: { Authorization: 'Bearer K3Y' } } });
    expect(offers('satelink', 137, {})[0]).to.deep.equal({ endpoint: 'https://rpc.satelink.network/rpc/polygon' });
    expect(offers('satelink', 137, { apiKey: 'free' })[0]?.entry).to.equal(undefined);
    expect(offers('satelink', 137, { apiKey: 'K3Y' })[0]?.entry).to.deep.equal({ jsonRpc: { headers: { 'X-API-Key': 'K3Y' } } });
  });

  it('etherspot: mainnet bundlers and testnets, the 4337 methods only', () => {
    const [m] = offers('etherspot', 1, { apiKey: 'K3Y' });
    expect(m?.endpoint).to.equal('https://ethereum-bundler.etherspot.io/?apikey=K3Y');
    expect(m?.entry?.ignoreMethods).to.deep.equal(['*']);
    expect(m?.entry?.allowMethods).to.include('eth_sendUserOperation');
    expect(url('etherspot', 11155111, { apiKey: 'public' })).to.equal('https://testnet-rpc.etherspot.io/v1/11155111');
  });

  it('pimlico, thirdweb, goldsky, routemesh, erpc: the chain id in the URL; unknown chains are probed first', () => {
    expect(offers('pimlico', 1, { apiKey: 'public' })[0]).to.include({ endpoint: 'https://public.pimlico.io/v2/1/rpc', probe: false });
    expect(offers('pimlico', 424242, { apiKey: 'K3Y' })[0]).to.include({ endpoint: 'https://api.pimlico.io/v2/424242/rpc?apikey=K3Y', probe: true });
    expect(offers('thirdweb', 10, { clientId: 'cid' })[0]).to.include({ endpoint: 'https://10.rpc.thirdweb.com/cid', probe: true });
    expect(url('goldsky', 8453, { secret: 's3c' })).to.equal('https://edge.goldsky.com/standard/evm/8453?secret=s3c');
    expect(url('goldsky', 1, { secret: 's3c', tier: 'premium' })).to.equal('https://edge.goldsky.com/premium/evm/1?secret=s3c');
    expect(url('routemesh', 1, { baseURL: 'rm.example', apiKey: 'K3Y' })).to.equal('https://rm.example/rpc/1/K3Y');
    expect(url('erpc', 1, { endpoint: 'https://erpc.example/main/evm', secret: 'x' })).to.equal('https://erpc.example/main/evm/1?secret=x');
    expect(url('erpc', 5, { endpoint: 'erpc.internal:4000/main/evm' })).to.equal('http://erpc.internal:4000/main/evm/5');
    expect(url('erpc', 5, { endpoint: 'erpc.example/main/evm' })).to.equal('https://erpc.example/main/evm/5');
  });

  it('settings a vendor cannot build a URL without are refused at start-up, naming the path', () => {
    const required = new Map([...CATALOG.values()].map((v) => [v.name, v.required]));
    const problems = missingSettings(
      {
        projects: [
          {
            settings: {
              providers: [
                { id: 'a', vendor: 'alchemy', settings: {} },
                { id: 't', vendor: 'thirdweb', settings: { clientId: 'x' } },
                { id: 'r', vendor: 'repository' },
              ],
            },
          },
        ],
      } as never,
      required,
    );
    expect(problems).to.deep.equal([{ path: 'projects[0].providers[0].settings.apiKey', message: 'vendor alchemy needs settings.apiKey (provider a)' }]);
  });

  it('the test-only rewrite sends https://host/path?q under a local base', () => {
    expect(rewriteVendorUrl('https://eth-mainnet.g.alchemy.com/v2/K3Y', 'http://127.0.0.1:9/')).to.equal('http://127.0.0.1:9/eth-mainnet.g.alchemy.com/v2/K3Y');
    expect(rewriteVendorUrl('https://x.example/a?b=c', undefined)).to.equal('https://x.example/a?b=c');
  });
});

describe('vendors: account and list vendors (the vendor API, a stand-in here)', () => {
  /** A stand-in for the vendor APIs: JSON by URL prefix; eth_chainId by URL. */
  function fakeIo(
    docs: Record<string, unknown>,
    chains: Record<string, number>,
  ): VendorIo & { fetched: Array<{ url: string; headers?: Record<string, string> }> } {
    const fetched: Array<{ url: string; headers?: Record<string, string> }> = [];
    return {
      fetched,
      async fetchJson(url, headers) {
        fetched.push({ url, headers });
        const key = Object.keys(docs).find((k) => url.startsWith(k));
        if (!key) throw new Error(`no document at ${url}`);
        return docs[key];
      },
      async chainIdOf(url) {
        return chains[url];
      },
    };
  }
  const vendor = (name: string) => remoteVendors().find((v) => v.name === name)!;

  it('quicknode: the account endpoints (key in x-api-key, tag filters), each endpoint by the chain it answers', async () => {
    const io = fakeIo(
      {
        'https://api.quicknode.com/v0/endpoints': {
          data: [
            { id: 'e1', http_url: 'https://a.quiknode.pro/t1/' },
            { id: 'e2', http_url: 'https://b.quiknode.pro/t2/' },
            { id: 'e3', http_url: 'https://c.quiknode.pro/t3/' },
          ],
        },
      },
      { 'https://a.quiknode.pro/t1/': 1, 'https://b.quiknode.pro/t2/': 137, 'https://c.quiknode.pro/t3/': 1 },
    );
    const qn = vendor('quicknode');
    const one = await qn.offers(1, { apiKey: 'QK', tagIds: [1, 2], tagLabels: 'prod' }, io);
    expect(one).to.deep.equal([
      { endpoint: 'https://a.quiknode.pro/t1/', idSuffix: 'e1' },
      { endpoint: 'https://c.quiknode.pro/t3/', idSuffix: 'e3' },
    ]);
    expect(await qn.offers(10, { apiKey: 'QK', tagIds: [1, 2], tagLabels: 'prod' }, io)).to.deep.equal([]);
    // One list fetch for both chains (cached for the recheck interval), with the key and the tags.
    expect(io.fetched).to.have.length(1);
    expect(io.fetched[0]!.url).to.equal('https://api.quicknode.com/v0/endpoints?limit=100&offset=0&tag_ids=1%2C2&tag_labels=prod');
    expect(io.fetched[0]!.headers).to.deep.equal({ 'x-api-key': 'QK' });
  });

  it('chainstack: running nodes of the account (bearer key, pages), URL + auth key', async () => {
    const io = fakeIo(
      {
        'https://api.chainstack.com/v1/nodes/?project=p1': {
          next: 'https://api.chainstack.com/v1/nodes/page2',
          results: [{ id: 'n1', status: 'running', details: { https_endpoint: 'https://nd-1.p2pify.com', auth_key: 'ak1' } }],
        },
        'https://api.chainstack.com/v1/nodes/page2': {
          next: null,
          results: [{ id: 'n2', status: 'stopped', details: { https_endpoint: 'https://nd-2.p2pify.com', auth_key: 'ak2' } }],
        },
      },
      { 'https://nd-1.p2pify.com/ak1': 1, 'https://nd-2.p2pify.com/ak2': 1 },
    );
    expect(await vendor('chainstack').offers(1, { apiKey: 'CK', project: 'p1' }, io)).to.deep.equal([
      { endpoint: 'https://nd-1.p2pify.com/ak1', idSuffix: 'n1' },
    ]);
    expect(io.fetched.map((f) => f.headers)).to.deep.equal([{ Authorization: 'Bearer CK' }, { Authorization: 'Bearer CK' }]);
  });

  it('conduit and tenderly: the published network lists; superchain: the registry, one upstream per RPC', async () => {
    const io = fakeIo(
      {
        'https://api.conduit.xyz/public/network/all': { endpoints: [{ chainId: '7777777', httpEndpoint: 'https://rpc-zora-mainnet-0.t.conduit.xyz' }] },
        'https://api.tenderly.co/api/v1/supported-networks': [
          { chain_id: '1', network_slugs: { node_rpc_slug: 'mainnet' } },
          { chain_id: '10', network_slugs: { vnet_rpc_slug: 'optimism' } },
        ],
        'https://raw.githubusercontent.com/ethereum-optimism/superchain-registry/main/chainList.json': [
          { chainId: 10, rpc: ['https://mainnet.optimism.io', 'wss://skip.example'] },
        ],
      },
      {},
    );
    expect(await vendor('conduit').offers(7777777, { apiKey: 'CK' }, io)).to.deep.equal([{ endpoint: 'https://rpc-zora-mainnet-0.t.conduit.xyz/CK' }]);
    expect(await vendor('tenderly').offers(10, { apiKey: 'TK' }, io)).to.deep.equal([{ endpoint: 'https://optimism.gateway.tenderly.co/TK' }]);
    expect(await vendor('superchain').offers(10, {}, io)).to.deep.equal([{ endpoint: 'https://mainnet.optimism.io', idSuffix: '0' }]);
    expect(await vendor('superchain').offers(1, {}, io)).to.deep.equal([]);
  });

  it('a list that cannot be fetched is a bootstrap failure (thrown, retried by the providers plugin)', async () => {
    let err: unknown;
    await vendor('tenderly')
      .offers(1, { apiKey: 'TK' }, fakeIo({}, {}))
      .catch((e: unknown) => (err = e));
    expect(String(err)).to.include('no document');
  });

  it('superchain registry references as eRPC reads them', () => {
    expect(superchainRegistryUrl('github.com/acme/registry')).to.equal('https://raw.githubusercontent.com/acme/registry/main/chainList.json');
    expect(superchainRegistryUrl('https://github.com/acme/registry/blob/dev/lists/chains.json')).to.equal(
      'https://raw.githubusercontent.com/acme/registry/dev/lists/chains.json',
    );
    expect(superchainRegistryUrl('github.com/acme/registry/custom.json')).to.equal('https://raw.githubusercontent.com/acme/registry/main/custom.json');
    expect(superchainRegistryUrl('chains.example/list.json')).to.equal('https://chains.example/list.json');
  });
});
