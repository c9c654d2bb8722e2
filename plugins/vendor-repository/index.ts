/**
 * The `repository` vendor (spec §2.10): upstreams from a public endpoints
 * catalog, the vendor of the zero-config `public` provider. A plugin of its own that registers
 * with the providers plugin, as a team's in-house vendor would.
 *
 * - Catalog: JSON map of chain id to `{endpoints: [...]}` at `settings.repositoryUrl`, else env
 *   `SVC_PUBLIC_REPOSITORY_URL`, else the public eRPC catalog. Fetched on the first request for a
 *   chain (10 s timeout, 8 MiB cap), then re-fetched when older than the recheck interval (1 h;
 *   only the plugin option changes it, a `recheckInterval` in YAML/JSON settings is ignored, as
 *   spec §2.10 says). Non-integer chain keys are skipped; ws/wss endpoints are skipped.
 * - One upstream per http(s) endpoint, id `<template>-<scheme>://<host>#redacted=<5 hex of the
 *   SHA-256 of the endpoint>` (the path, which may hold a key, never appears), with
 *   `autoIgnoreUnsupportedMethods: true`.
 * - Offline fallback: when the catalog cannot be fetched, the public RPC URLs viem ships in
 *   `viem/chains` serve the common chains; a warning names the fallback once. For a chain viem
 *   does not know either, the bootstrap fails with "endpoints catalog <url> unreachable" (retried
 *   in the background), which the first request for it is told at once.
 */
import { createHash } from 'node:crypto';
import { request } from 'undici';
import { type Logger, definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { PluginContractError } from 'svc-proxy/plugin/errors';
import { PROVIDERS_SERVICE } from 'svc-proxy/plugins/providers';
import { redactUrl } from 'svc-proxy/util';

/** The public eRPC endpoints catalog (spec §2.10 `{catalog_url}`). */
export const DEFAULT_REPOSITORY_URL = 'https://evm-public-endpoints.erpc.cloud';
/** Environment variable read before the default. */
export const REPOSITORY_URL_ENV = 'SVC_PUBLIC_REPOSITORY_URL';
/** Default catalog recheck interval, ms (spec §8). */
export const DEFAULT_RECHECK_INTERVAL_MS = 3_600_000;
/** Catalog fetch timeout, ms. */
export const CATALOG_TIMEOUT_MS = 10_000;
/** Largest catalog accepted, bytes. */
export const MAX_CATALOG_BYTES = 8 * 1024 * 1024;

/** A catalog: chain id to its endpoint URLs. */
export type Catalog = ReadonlyMap<number, readonly string[]>;

/** Options of {@link repositoryVendorPlugin} (programmatic only, spec §2.10). */
export interface RepositoryVendorOptions {
  /** Catalog recheck interval, ms (default 1 h). */
  recheckIntervalMs?: number;
  /** Environment to read `SVC_PUBLIC_REPOSITORY_URL` from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
}

/**
 * Parses a catalog document: integer chain keys with an `endpoints` string list.
 * @throws Error when the document is not a JSON object
 */
export function parseCatalog(text: string): Catalog {
  const doc = JSON.parse(text) as unknown;
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new Error('catalog is not a JSON object');
  const out = new Map<number, string[]>();
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    if (!/^\d+$/.test(k)) continue;
    const id = Number(k);
    const eps = (v as { endpoints?: unknown } | null)?.endpoints;
    if (!Number.isSafeInteger(id) || id <= 0 || !Array.isArray(eps)) continue;
    out.set(
      id,
      eps.filter((e): e is string => typeof e === 'string'),
    );
  }
  return out;
}

/** The upstream id suffix of an endpoint: scheme and host, and a short hash of the whole URL. */
export function redactedSuffix(endpoint: string): string {
  const u = new URL(endpoint);
  return `${u.protocol}//${u.host}#redacted=${createHash('sha256').update(endpoint).digest('hex').slice(0, 5)}`;
}

/** The http(s) endpoints of a list, as upstream offers. */
function offers(endpoints: readonly string[]): Array<{ endpoint: string; idSuffix: string; entry: { autoIgnoreUnsupportedMethods: true } }> {
  const out = [];
  for (const e of endpoints) {
    let ok = false;
    try {
      const p = new URL(e).protocol;
      ok = p === 'http:' || p === 'https:';
    } catch {
      ok = false;
    }
    if (ok) out.push({ endpoint: e, idSuffix: redactedSuffix(e), entry: { autoIgnoreUnsupportedMethods: true as const } });
  }
  return out;
}

/** viem's public RPC URLs of a chain (the offline fallback); viem/chains loads only when needed. */
export async function viemEndpoints(chainId: number): Promise<string[]> {
  const chains = (await import('viem/chains')) as unknown as Record<string, { id?: number; rpcUrls?: { default?: { http?: readonly string[] } } } | undefined>;
  for (const c of Object.values(chains)) if (c?.id === chainId) return [...(c.rpcUrls?.default?.http ?? [])];
  return [];
}

/** Fetches and caches one catalog URL, re-fetching when older than the recheck interval. */
/** One catalog URL's cached copy, fetched again once `recheckMs` has passed (spec §8 catalog recheck). */
export class CatalogSource {
  private cached?: { at: number; catalog: Catalog };
  private inflight?: Promise<Catalog>;
  private warnedFallback = false;

  constructor(
    readonly url: string,
    private readonly recheckMs: number,
  ) {}

  /** Why the last fetch failed, while no catalog was ever fetched. */
  lastError?: string;

  /** The catalog, or undefined when it cannot be fetched (the caller falls back). */
  async get(logger: Logger): Promise<Catalog | undefined> {
    if (this.cached && Date.now() - this.cached.at < this.recheckMs) return this.cached.catalog;
    this.inflight ??= fetchCatalog(this.url).finally(() => {
      this.inflight = undefined;
    });
    try {
      const catalog = await this.inflight;
      this.cached = { at: Date.now(), catalog };
      this.lastError = undefined;
      return catalog;
    } catch (e) {
      if (this.cached) return this.cached.catalog;
      this.lastError = (e as Error).message;
      if (!this.warnedFallback) {
        this.warnedFallback = true;
        logger.warn(
          { catalog: this.url, err: (e as Error).message },
          'repository vendor: the endpoints catalog cannot be fetched; falling back to the public RPC URLs shipped in viem/chains',
        );
      }
      return undefined;
    }
  }
}

async function fetchCatalog(url: string): Promise<Catalog> {
  const res = await request(url, {
    method: 'GET',
    headersTimeout: CATALOG_TIMEOUT_MS,
    bodyTimeout: CATALOG_TIMEOUT_MS,
    signal: AbortSignal.timeout(CATALOG_TIMEOUT_MS),
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`catalog answered HTTP ${res.statusCode}`);
  }
  const declared = Number(res.headers['content-length'] ?? 0);
  if (declared > MAX_CATALOG_BYTES) {
    await res.body.dump();
    throw new Error(`catalog larger than ${MAX_CATALOG_BYTES} bytes`);
  }
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res.body) {
    n += (c as Buffer).length;
    if (n > MAX_CATALOG_BYTES) throw new Error(`catalog larger than ${MAX_CATALOG_BYTES} bytes`);
    chunks.push(c as Buffer);
  }
  return parseCatalog(Buffer.concat(chunks).toString('utf8'));
}

/**
 * Creates the repository vendor plugin (name `vendor-repository`, vendor `repository`).
 * @returns a plugin depending on `providers`
 */
export function repositoryVendorPlugin(opts: RepositoryVendorOptions = {}): Plugin {
  return definePlugin({
    name: 'vendor-repository',
    dependsOn: ['providers'],
    // Registers its vendors with the providers service in apply: also in dependsOn, to come after it.
    needs: [PROVIDERS_SERVICE],
    apply(host: PluginHost) {
      const sources = new Map<string, CatalogSource>();
      const recheckMs = opts.recheckIntervalMs ?? DEFAULT_RECHECK_INTERVAL_MS;
      const providers = host.services.get(PROVIDERS_SERVICE);
      if (!providers) throw new PluginContractError('vendor-repository needs the providers plugin');
      const urlOf = (settings: Record<string, unknown>): string =>
        (typeof settings.repositoryUrl === 'string' && settings.repositoryUrl) || (opts.env ?? process.env)[REPOSITORY_URL_ENV] || DEFAULT_REPOSITORY_URL;
      providers.registerVendor({
        name: 'repository',
        async upstreamsFor(chainId: number, settings: Record<string, unknown>, provider: { logger: Logger }) {
          const url = urlOf(settings);
          let source = sources.get(url);
          if (!source) sources.set(url, (source = new CatalogSource(url, recheckMs)));
          const catalog = await source.get(provider.logger);
          if (catalog) return offers(catalog.get(chainId) ?? []);
          const fallback = offers(await viemEndpoints(chainId));
          // Neither the catalog nor viem: a failed bootstrap (retried), so the caller is told why.
          if (fallback.length === 0)
            throw new Error(
              `endpoints catalog ${redactUrl(url)} unreachable (${source.lastError ?? 'fetch failed'}) and viem/chains lists no public RPC for chain ${chainId}`,
            );
          return fallback;
        },
        describe: (settings: Record<string, unknown>) => `endpoints catalog ${redactUrl(urlOf(settings))}, else viem/chains public RPCs`,
      });
    },
  });
}
