/**
 * The `hyper` vendor (spec §2.10): the HyperRPC indexed read provider, the
 * second zero-config provider. A plugin of its own that registers with the providers plugin.
 *
 * - URL `https://<chainId>.<rootDomain>`, plus `/<apiKey>` when `settings.apiKey` is set; root
 *   domain from `settings.rootDomain`, else env `SVC_HYPER_ROOT_DOMAIN`, else `rpc.hypersync.xyz`.
 * - Upstreams get `ignoreMethods: ["*"]` and the 14-method allow-list, so every other method
 *   (writes included) falls through to other providers' upstreams.
 * - A chain in {@link HYPER_KNOWN_CHAINS} (82 ids, the list eRPC ships) is
 *   served without asking. Any other chain is probed with a live `eth_chainId` (10 s): the right
 *   id means served; a certificate-verification failure, a DNS failure or a refused connection
 *   means the subdomain does not exist, so "not served" and no retry; other failures are
 *   bootstrap failures, retried by the providers plugin.
 */
import { Agent, request, type Dispatcher } from 'undici';
import type { LookupFunction } from 'node:net';
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { PluginContractError } from 'svc-proxy/plugin/errors';
import { PROVIDERS_SERVICE } from 'svc-proxy/plugins/providers';

/** Default root domain (spec §2.10 `{hyper_root_domain}`). */
export const DEFAULT_HYPER_ROOT_DOMAIN = 'rpc.hypersync.xyz';
/** Environment variable read before the default. */
export const HYPER_ROOT_DOMAIN_ENV = 'SVC_HYPER_ROOT_DOMAIN';
/** Live `eth_chainId` probe timeout for chains outside the known list, ms (spec §8). */
export const HYPER_PROBE_TIMEOUT_MS = 10_000;

/** The methods a hyper upstream serves (spec §2.10). */
export const HYPER_ALLOW_METHODS: readonly string[] = Object.freeze([
  'eth_chainId',
  'eth_blockNumber',
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getTransactionByHash',
  'eth_getTransactionByBlockHashAndIndex',
  'eth_getTransactionByBlockNumberAndIndex',
  'eth_getTransactionReceipt',
  'eth_getBlockReceipts',
  'eth_getLogs',
  'eth_getFilterLogs',
  'eth_getFilterChanges',
  'eth_uninstallFilter',
  'eth_newFilter',
]);

/** Chains HyperRPC serves (eRPC HEAD list of 82, as eRPC ships it). */
export const HYPER_KNOWN_CHAINS: ReadonlySet<number> = new Set([
  42161, 42170, 421614, 1313161554, 43114, 8453, 84532, 81457, 288, 56, 97, 42220, 1, 250, 14, 43113, 100, 10200, 1666600000, 17000, 255, 59144, 42, 169, 5000,
  1284, 10, 11155420, 137, 80002, 1101, 30, 534352, 11155111, 148, 7000, 324, 7777777, 50, 51, 2741, 5115, 7560, 80094, 88888, 999, 1750, 50104, 130, 36888,
  5042002, 4114, 33111, 42793, 252, 560048, 1776, 57073, 747474, 1135, 4201, 4326, 6343, 4200, 34443, 143, 10143, 2818, 204, 9745, 98866, 1329, 1328, 1868, 146,
  14601, 531050104, 5330, 1923, 4217, 480, 48900,
]);

/** Options of {@link hyperVendorPlugin}: how the live probe connects (tests stand in for DNS and the CA). */
export interface HyperVendorOptions {
  /** DNS lookup of the probe's connections (default the system's). */
  lookup?: LookupFunction;
  /** Extra trusted CA certificates of the probe (PEM). */
  ca?: string | Buffer;
  /** Environment to read `SVC_HYPER_ROOT_DOMAIN` from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

/** Error codes that mean "this subdomain is not a HyperRPC chain": TLS trust, DNS, refused. */
function meansUnsupported(e: unknown): boolean {
  for (let cur: unknown = e, i = 0; cur && i < 5; cur = (cur as { cause?: unknown }).cause, i++) {
    const code = String((cur as { code?: unknown }).code ?? '');
    if (/CERT|SIGNATURE|ISSUER|ALTNAME/.test(code) || ['ENOTFOUND', 'EAI_NONAME', 'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code)) return true;
  }
  return false;
}

/** The HyperRPC URL of a chain. */
export function hyperUrl(chainId: number, rootDomain: string, apiKey?: string): string {
  return `https://${chainId}.${rootDomain}${apiKey ? `/${encodeURIComponent(apiKey)}` : ''}`;
}

/**
 * Creates the hyper vendor plugin (name `vendor-hyper`, vendor `hyper`).
 * @returns a plugin depending on `providers`, closing its probe connections on `shutdown`
 */
export function hyperVendorPlugin(opts: HyperVendorOptions = {}): Plugin {
  return definePlugin({
    name: 'vendor-hyper',
    dependsOn: ['providers'],
    // Registers its vendors with the providers service in apply: also in dependsOn, to come after it.
    needs: [PROVIDERS_SERVICE],
    apply(host: PluginHost) {
      let agent: Dispatcher | undefined;
      const dispatcher = () =>
        (agent ??= new Agent({ connect: { ...(opts.lookup ? { lookup: opts.lookup } : {}), ...(opts.ca ? { ca: opts.ca } : {}) }, keepAliveTimeout: 1000 }));
      host.hooks.shutdown.tapPromise('vendor-hyper', async () => {
        await agent?.close();
      });
      const providers = host.services.get(PROVIDERS_SERVICE);
      if (!providers) throw new PluginContractError('vendor-hyper needs the providers plugin');
      providers.registerVendor({
        name: 'hyper',
        async upstreamsFor(chainId: number, settings: Record<string, unknown>) {
          const env = opts.env ?? process.env;
          const root = (typeof settings.rootDomain === 'string' && settings.rootDomain) || env[HYPER_ROOT_DOMAIN_ENV] || DEFAULT_HYPER_ROOT_DOMAIN;
          const endpoint = hyperUrl(chainId, root, typeof settings.apiKey === 'string' ? settings.apiKey : undefined);
          if (!HYPER_KNOWN_CHAINS.has(chainId) && !(await probe(endpoint, chainId, dispatcher()))) return [];
          return [{ endpoint, entry: { ignoreMethods: ['*'], allowMethods: [...HYPER_ALLOW_METHODS] } }];
        },
      });
    },
  });
}

/**
 * Asks a chain's subdomain for its chain id.
 * @returns whether it serves that chain; false when the subdomain cannot exist (see module comment)
 * @throws Error on other failures (HTTP errors, timeouts): a bootstrap failure, retried later
 */
async function probe(endpoint: string, chainId: number, dispatcher: Dispatcher): Promise<boolean> {
  let res;
  try {
    res = await request(endpoint, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
      signal: AbortSignal.timeout(HYPER_PROBE_TIMEOUT_MS),
    });
  } catch (e) {
    if (meansUnsupported(e)) return false;
    throw e;
  }
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`hyper probe of evm:${chainId} answered HTTP ${res.statusCode}`);
  let result: unknown;
  try {
    result = (JSON.parse(text) as { result?: unknown }).result;
  } catch {
    throw new Error(`hyper probe of evm:${chainId} answered non-JSON`);
  }
  return typeof result === 'string' && Number.parseInt(result, 16) === chainId;
}
