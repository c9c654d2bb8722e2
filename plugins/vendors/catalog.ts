/**
 * The URL rules of the built-in vendors that need no account lookup (eRPC's thirdparty/*.go, one
 * vendor each): a table vendor turns a chain id into the vendor's documented URL through its slug
 * in ./chains.ts; a chain-id vendor puts the chain id in the URL and, like eRPC, asks an unknown
 * chain's URL for its `eth_chainId` before offering it. Vendors that list endpoints through the
 * vendor's own API (QuickNode, Chainstack, Conduit, Tenderly, Superchain) are in ./remote.ts.
 */
import type { UpstreamInput } from 'svc-proxy/plugin';
import { ETHERSPOT_TESTNETS, PIMLICO_KNOWN_CHAINS, VENDOR_CHAINS } from './chains.ts';

/** A provider's `settings`. */
export type Settings = Readonly<Record<string, unknown>>;

/** One upstream a vendor offers for a chain. */
export interface Offer {
  /** The vendor's URL for the chain (before the test rewrite, see ./index.ts). */
  endpoint: string;
  /** Further upstream settings (method lists, an auth header). */
  entry?: Partial<UpstreamInput>;
  /** Appended to the provider's id template when a vendor offers several upstreams for a chain. */
  idSuffix?: string;
  /** When set, the offer stands only if the URL answers `eth_chainId` with the chain's id. */
  probe?: boolean;
}

/** One built-in vendor that needs no account lookup. */
export interface CatalogVendor {
  /** The `vendor` value of `providers[]` and the shortcut scheme (`alchemy://`). */
  readonly name: string;
  /** Settings the vendor cannot build a URL without, checked at start-up. */
  readonly required: readonly string[];
  /** The offers for a chain; `[]` when the vendor does not serve it. */
  offers(chainId: number, settings: Settings): Offer[];
}

const str = (settings: Settings, key: string): string => (typeof settings[key] === 'string' ? (settings[key] as string) : '');
const enc = encodeURIComponent;
/** Avalanche C-Chain slugs whose RPC path ends in `/ext/bc/C/rpc`. */
const AVALANCHE = new Set(['ava-mainnet', 'ava-testnet']);

/**
 * A table vendor: the offer of a chain whose slug the table lists.
 * @param build the vendor's URL (and extra settings) from the slug
 */
function table(name: string, required: readonly string[], build: (slug: string, settings: Settings, chainId: number) => Offer): CatalogVendor {
  const chains = VENDOR_CHAINS[name] ?? {};
  return {
    name,
    required,
    offers(chainId, settings) {
      const slug = chains[chainId];
      return slug === undefined ? [] : [build(slug, settings, chainId)];
    },
  };
}

/** Etherspot's ERC-4337 bundler methods (eRPC's allow-list): every other method goes elsewhere. */
export const ETHERSPOT_METHODS: readonly string[] = [
  'skandha_config',
  'skandha_feeHistory',
  'skandha_getGasPrice',
  'eth_getUserOperationReceipt',
  'eth_getUserOperationByHash',
  'eth_sendUserOperation',
];
/** Pimlico's bundler and paymaster methods (eRPC's allow-list). */
export const PIMLICO_METHODS: readonly string[] = [
  'eth_sendUserOperation',
  'eth_estimateUserOperationGas',
  'eth_getUserOperationReceipt',
  'eth_getUserOperationByHash',
  'eth_supportedEntryPoints',
  'pimlico_sendCompressedUserOperation',
  'pimlico_getUserOperationGasPrice',
  'pimlico_getUserOperationStatus',
  'pm_sponsorUserOperation',
  'pm_getPaymasterData',
  'pm_getPaymasterStubData',
];

/**
 * An eRPC instance's URL for a chain (eRPC's erpc vendor): the chain id appended to the path; an
 * endpoint written without a scheme is https on port 443 or none, http on any other port.
 */
function withChainPath(base: string, chainId: number): URL {
  let u: URL;
  if (/^https?:\/\//.test(base)) u = new URL(base);
  else {
    u = new URL(`http://${base}`);
    if (u.port === '' || u.port === '443') u = new URL(`https://${base}`);
  }
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/${chainId}`;
  return u;
}

/** Every built-in vendor of this file, by name. */
export const CATALOG: ReadonlyMap<string, CatalogVendor> = new Map(
  (
    [
      table('alchemy', ['apiKey'], (slug, s) => ({ endpoint: `https://${slug}.g.alchemy.com/v2/${str(s, 'apiKey')}` })),
      table('ankr', ['apiKey'], (slug, s) => ({ endpoint: `https://rpc.ankr.com/${slug}/${enc(str(s, 'apiKey'))}` })),
      table('blastapi', ['apiKey'], (slug, s) => ({
        endpoint: `https://${slug}.blastapi.io/${str(s, 'apiKey')}${AVALANCHE.has(slug) ? '/ext/bc/C/rpc' : ''}`,
      })),
      // The key travels as a bearer token, never in the URL.
      table('blockdaemon', ['apiKey'], (slug, s) => ({
        endpoint: `https://svc.blockdaemon.com/${slug}`,
        entry: { jsonRpc: { headers: { Authorization: `Bearer ${str(s, 'apiKey')}` } } },
      })),
      table('blockpi', ['apiKey'], (slug, s) => ({
        endpoint:
          slug === 'movement'
            ? `https://${slug}.blockpi.network/rpc/v1/${enc(str(s, 'apiKey'))}/v1`
            : `https://${slug}.blockpi.network/v1/rpc/${enc(str(s, 'apiKey'))}`,
      })),
      // dRPC answers "method not supported" for methods it does serve on other networks: never auto-ignore (eRPC's rule).
      table('drpc', ['apiKey'], (slug, s) => ({
        endpoint: `https://lb.drpc.org/ogrpc?network=${enc(slug)}&dkey=${enc(str(s, 'apiKey'))}`,
        entry: { autoIgnoreUnsupportedMethods: false },
      })),
      table('dwellir', ['apiKey'], (slug, s) => ({
        endpoint: `https://${slug}.dwellir.com/${str(s, 'apiKey')}${slug === 'api-avalanche-mainnet-archive.n' ? '/ext/bc/C/rpc' : ''}`,
      })),
      table('infura', ['apiKey'], (slug, s) => ({ endpoint: `https://${slug}.infura.io/v3/${str(s, 'apiKey')}${AVALANCHE.has(slug) ? '/ext/bc/C/rpc' : ''}` })),
      table('llama', ['apiKey'], (slug, s) => ({ endpoint: `https://${slug}.llamarpc.com/${str(s, 'apiKey')}` })),
      table('onfinality', ['apiKey'], (slug, s) => ({ endpoint: `https://${slug}.api.onfinality.io/rpc?apikey=${enc(str(s, 'apiKey'))}` })),
      // Satelink's free tier needs no key (`free` or none); a key goes in X-API-Key.
      table('satelink', [], (slug, s) => {
        const key = str(s, 'apiKey');
        return {
          endpoint: `https://rpc.satelink.network/rpc/${slug}`,
          ...(key && key !== 'free' ? { entry: { jsonRpc: { headers: { 'X-API-Key': key } } } } : {}),
        };
      }),
      {
        name: 'etherspot',
        required: ['apiKey'],
        offers(chainId, s) {
          const slug = VENDOR_CHAINS.etherspot?.[chainId];
          const base =
            slug !== undefined
              ? `https://${slug}-bundler.etherspot.io/`
              : ETHERSPOT_TESTNETS.has(chainId)
                ? `https://testnet-rpc.etherspot.io/v1/${chainId}`
                : undefined;
          if (!base) return [];
          const key = str(s, 'apiKey');
          return [
            { endpoint: key && key !== 'public' ? `${base}?apikey=${enc(key)}` : base, entry: { ignoreMethods: ['*'], allowMethods: [...ETHERSPOT_METHODS] } },
          ];
        },
      },
      {
        name: 'pimlico',
        required: ['apiKey'],
        offers(chainId, s) {
          const key = str(s, 'apiKey');
          const endpoint = key === 'public' ? `https://public.pimlico.io/v2/${chainId}/rpc` : `https://api.pimlico.io/v2/${chainId}/rpc?apikey=${enc(key)}`;
          return [{ endpoint, entry: { ignoreMethods: ['*'], allowMethods: [...PIMLICO_METHODS] }, probe: !PIMLICO_KNOWN_CHAINS.has(chainId) }];
        },
      },
      {
        name: 'thirdweb',
        required: ['clientId'],
        offers: (chainId, s) => [{ endpoint: `https://${chainId}.rpc.thirdweb.com/${str(s, 'clientId')}`, probe: true }],
      },
      {
        name: 'goldsky',
        required: ['secret'],
        offers(chainId, s) {
          const u = new URL(/^https?:\/\//.test(str(s, 'endpoint')) ? str(s, 'endpoint') : `https://${str(s, 'endpoint') || 'edge.goldsky.com'}`);
          const base = u.pathname.replace(/\/+$/, '') || `/${(str(s, 'tier') || 'standard').replace(/^\/+|\/+$/g, '')}/evm`;
          u.pathname = `${base}/${chainId}`;
          if (!u.searchParams.get('secret')) u.searchParams.set('secret', str(s, 'secret'));
          return [{ endpoint: u.toString(), probe: true }];
        },
      },
      {
        name: 'routemesh',
        required: ['baseURL', 'apiKey'],
        offers: (chainId, s) => [{ endpoint: `https://${str(s, 'baseURL')}/rpc/${chainId}/${str(s, 'apiKey')}`, probe: true }],
      },
      {
        name: 'erpc',
        required: ['endpoint'],
        offers(chainId, s) {
          const u = withChainPath(str(s, 'endpoint'), chainId);
          if (str(s, 'secret')) u.searchParams.set('secret', str(s, 'secret'));
          return [{ endpoint: u.toString(), probe: true }];
        },
      },
    ] satisfies CatalogVendor[]
  ).map((v): [string, CatalogVendor] => [v.name, v]),
);
