/**
 * The vendors plugin (name `vendors`): eRPC's third-party vendors as svc vendors, so
 * `providers: [{vendor: alchemy, settings: {apiKey}}]` and the shortcut upstream
 * `endpoint: alchemy://KEY` (rewritten into that provider at load time, ./shortcuts.ts) serve
 * every chain the vendor serves, one upstream per chain, created on the first request for it.
 *
 * - Offline vendors (./catalog.ts): alchemy, ankr, blastapi, blockdaemon, blockpi, drpc,
 *   dwellir, etherspot, infura, llama, onfinality, satelink from the chain tables in
 *   ./chains.ts; pimlico, thirdweb, goldsky, routemesh and erpc put the chain id in the URL and
 *   ask an unknown chain's URL for its `eth_chainId` first (as eRPC does). A chain the table does
 *   not list is not served by that provider: the first request for it gets HTTP 404
 *   `ErrNetworkNotSupported` naming the provider (the providers plugin says why).
 * - Account and list vendors (./remote.ts): quicknode, chainstack, conduit, tenderly,
 *   superchain contact the vendor's API, as eRPC does (their URLs are in no table).
 * - `envio` is svc's `hyper` vendor (plugins/vendor-hyper), `repository` the repository vendor.
 * - Settings a vendor cannot build a URL without (`apiKey`, thirdweb's `clientId`...) are
 *   checked at start-up: a provider without them is refused, naming the path.
 * - Keys are secrets: they reach only the generated URLs and headers, which the upstream's
 *   redactor and the log/config redaction hide (lib/redact.ts); no message here carries a URL
 *   unredacted.
 * - Testing only: `SVC_VENDOR_TEST_BASE_URL` (or the plugin option `testBaseUrl`) sends every URL
 *   this plugin generates or dials to a local base instead: `https://<host>/<path>?<q>` becomes
 *   `<base>/<host>/<path>?<q>`, so a test routes each vendor host to a local node.
 */
import { Agent, type Dispatcher, request } from 'undici';
import { type Logger, definePlugin, type Plugin, type PluginHost, type ResolvedConfig } from 'svc-proxy/plugin';
import { ConfigError, PluginContractError } from 'svc-proxy/plugin/errors';
import { PROVIDERS_SERVICE, type Vendor, type VendorUpstream } from 'svc-proxy/plugins/providers';
import { redactUrl } from 'svc-proxy/util';
import { CATALOG, type Offer, type Settings } from './catalog.ts';
import { normalizeVendorShortcuts } from './shortcuts.ts';
import { remoteVendors, type RemoteVendor, type VendorIo } from './remote.ts';

export { CATALOG, type CatalogVendor, type Offer } from './catalog.ts';
export { VENDOR_CHAINS } from './chains.ts';
export { remoteVendors, superchainRegistryUrl, type RemoteVendor, type VendorIo } from './remote.ts';
export { isShortcut, normalizeVendorShortcuts, SHORTCUT_VENDORS, shortcutProvider, type ConfigDocument, type ShortcutReport } from './shortcuts.ts';

/** Environment variable (testing only) read when the option `testBaseUrl` is unset. */
export const VENDOR_TEST_BASE_URL_ENV = 'SVC_VENDOR_TEST_BASE_URL';
/** Timeout of a vendor list fetch and of an `eth_chainId` probe, ms. */
export const VENDOR_FETCH_TIMEOUT_MS = 10_000;
/** Largest vendor list accepted, bytes. */
export const MAX_VENDOR_LIST_BYTES = 8 * 1024 * 1024;

/** Options of {@link vendorsPlugin}. */
export interface VendorsPluginOptions {
  /** Testing only: the local base every vendor URL is sent to (see the module comment). */
  testBaseUrl?: string;
  /** Environment to read {@link VENDOR_TEST_BASE_URL_ENV} from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

/**
 * The URL a vendor URL is sent to: itself, or under the test base.
 * @param base the test base (`http://127.0.0.1:8545`), or undefined
 */
export function rewriteVendorUrl(url: string, base: string | undefined): string {
  if (!base) return url;
  return `${base.replace(/\/+$/, '')}/${url.replace(/^https?:\/\//, '')}`;
}

/** Reads a response body up to {@link MAX_VENDOR_LIST_BYTES}. */
async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    n += (c as Buffer).length;
    if (n > MAX_VENDOR_LIST_BYTES) throw new Error(`answer larger than ${MAX_VENDOR_LIST_BYTES} bytes`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The network access of the vendors: JSON lists and `eth_chainId` probes, through the test rewrite. */
function vendorIo(dispatcher: () => Dispatcher, base: () => string | undefined): VendorIo {
  const send = async (url: string, init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string }) => {
    const target = rewriteVendorUrl(url, base());
    try {
      const res = await request(target, {
        ...init,
        dispatcher: dispatcher(),
        headersTimeout: VENDOR_FETCH_TIMEOUT_MS,
        bodyTimeout: VENDOR_FETCH_TIMEOUT_MS,
        signal: AbortSignal.timeout(VENDOR_FETCH_TIMEOUT_MS),
      });
      if (res.statusCode < 200 || res.statusCode > 299) {
        await res.body.dump();
        throw new Error(`${redactUrl(url)} answered HTTP ${res.statusCode}`);
      }
      return JSON.parse(await readCapped(res.body)) as unknown;
    } catch (e) {
      const msg = (e as Error).message;
      throw new Error(msg.includes('answered HTTP') ? msg : `${redactUrl(url)}: ${msg}`);
    }
  };
  return {
    fetchJson: (url, headers) => send(url, { method: 'GET', headers: { accept: 'application/json', ...headers } }),
    async chainIdOf(url, headers) {
      const doc = (await send(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
      })) as { result?: unknown };
      const id = typeof doc?.result === 'string' ? Number.parseInt(doc.result, 16) : Number.NaN;
      return Number.isSafeInteger(id) ? id : undefined;
    },
  };
}

/** Whether a setting is a non-empty string. */
const has = (settings: Settings, key: string): boolean => typeof settings[key] === 'string' && (settings[key] as string) !== '';

/**
 * The problems of the providers naming a built-in vendor without a setting it needs.
 * @param required each built-in vendor's required settings
 */
export function missingSettings(
  config: Pick<ResolvedConfig, 'projects'>,
  required: ReadonlyMap<string, readonly string[]>,
): Array<{ path: string; message: string }> {
  const out: Array<{ path: string; message: string }> = [];
  config.projects.forEach((p, pi) => {
    const list = (p.settings.providers ?? []) as Array<{ id?: string; vendor?: string; settings?: Settings }>;
    list.forEach((pr, i) => {
      for (const key of required.get(pr.vendor ?? '') ?? []) {
        if (!has(pr.settings ?? {}, key))
          out.push({ path: `projects[${pi}].providers[${i}].settings.${key}`, message: `vendor ${pr.vendor} needs settings.${key} (provider ${pr.id ?? i})` });
      }
    });
  });
  return out;
}

/**
 * Creates the vendors plugin (name `vendors`).
 * @returns a plugin depending on `providers`, registering every built-in vendor of ./catalog.ts and ./remote.ts
 */
export function vendorsPlugin(opts: VendorsPluginOptions = {}): Plugin {
  return definePlugin({
    name: 'vendors',
    dependsOn: ['providers'],
    // Registers its vendors with the providers service in apply: also in dependsOn, to come after it.
    needs: [PROVIDERS_SERVICE],
    // eRPC's `endpoint: <vendor>://…` shortcuts become providers before validation (shortcuts.ts).
    schema: { normalize: normalizeVendorShortcuts },
    apply(host: PluginHost) {
      const providers = host.services.get(PROVIDERS_SERVICE);
      if (!providers) throw new PluginContractError('the vendors plugin needs the providers plugin');
      let agent: Dispatcher | undefined;
      const base = () => opts.testBaseUrl ?? (opts.env ?? process.env)[VENDOR_TEST_BASE_URL_ENV] ?? undefined;
      const io = vendorIo(() => (agent ??= new Agent({ keepAliveTimeout: 1000 })), base);
      const required = new Map<string, readonly string[]>();
      host.hooks.shutdown.tapPromise('vendors', async () => {
        await agent?.close();
      });

      /** The offers as upstreams: probed offers kept when the URL answers the chain's id; URLs through the test rewrite. */
      const finish = async (chainId: number, offers: readonly Offer[]): Promise<VendorUpstream[]> => {
        const out: VendorUpstream[] = [];
        for (const o of offers) {
          if (o.probe && (await io.chainIdOf(o.endpoint)) !== chainId) continue;
          out.push({
            endpoint: rewriteVendorUrl(o.endpoint, base()),
            ...(o.entry ? { entry: o.entry } : {}),
            ...(o.idSuffix !== undefined ? { idSuffix: o.idSuffix } : {}),
          });
        }
        return out;
      };
      const noChain = (logger: Logger, vendor: string, provider: string, chainId: number) =>
        // Debug only: chain ids come from clients, one line each would let them flood the log.
        logger.debug({ provider, vendor, chainId }, `vendor ${vendor} serves no evm:${chainId} (not in its table or list)`);
      const register = (name: string, needs: readonly string[], offers: (chainId: number, settings: Settings) => Offer[] | Promise<Offer[]>) => {
        required.set(name, needs);
        const vendor: Vendor = {
          name,
          async upstreamsFor(chainId, settings, provider) {
            const missing = needs.filter((k) => !has(settings, k));
            if (missing.length) throw new Error(`vendor ${name} needs settings.${missing.join(', settings.')}`);
            const list = await finish(chainId, await offers(chainId, settings));
            if (list.length === 0) noChain(provider.logger, name, provider.id, chainId);
            return list;
          },
        };
        providers.registerVendor(vendor);
      };
      for (const v of CATALOG.values()) register(v.name, v.required, (chainId, settings) => v.offers(chainId, settings));
      for (const v of remoteVendors() as RemoteVendor[]) register(v.name, v.required, (chainId, settings) => v.offers(chainId, settings, io));

      host.hooks.configured.tap('vendors', (config) => {
        const problems = missingSettings(config, required);
        if (problems.length) throw new ConfigError(problems);
      });
    },
  });
}
