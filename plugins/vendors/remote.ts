/**
 * Built-in vendors whose URLs exist only in the vendor's own records (eRPC's thirdparty/*.go of
 * the same names): QuickNode and Chainstack endpoints belong to the account (listed through the
 * vendor's API with the key, each endpoint's chain learnt from its `eth_chainId`), Conduit and
 * Tenderly publish their network lists, Superchain reads a chain registry. No offline table can
 * hold these, so these vendors contact the vendor's API, as eRPC does: on the first request for a
 * chain, again once the list is older than its recheck interval (QuickNode and Chainstack 1 h,
 * the others 24 h; `settings.recheckInterval` changes it). A list that cannot be fetched is a
 * bootstrap failure (retried by the providers plugin) unless an older copy is at hand.
 */
import { parseDuration } from 'svc-proxy/plugin';
import type { Offer, Settings } from './catalog.ts';

/** What a remote vendor reads the network with (./index.ts supplies it, test rewrite included). */
export interface VendorIo {
  /**
   * GETs a JSON document (10 s timeout, 8 MiB cap).
   * @throws Error on a failure or a non-2xx status, naming the status
   */
  fetchJson(url: string, headers?: Record<string, string>): Promise<unknown>;
  /** The chain id an RPC URL answers to `eth_chainId` (10 s timeout); undefined when it does not answer one. */
  chainIdOf(url: string, headers?: Record<string, string>): Promise<number | undefined>;
}

/** A built-in vendor that looks its URLs up. */
export interface RemoteVendor {
  readonly name: string;
  readonly required: readonly string[];
  /**
   * The offers for a chain; `[]` when the vendor's list has none.
   * @throws Error when the list cannot be fetched (a bootstrap failure, retried)
   */
  offers(chainId: number, settings: Settings, io: VendorIo): Promise<Offer[]>;
}

/** Most account endpoints probed at once. */
const PROBE_CONCURRENCY = 10;
const HOUR = 3_600_000;

const str = (settings: Settings, key: string): string => (typeof settings[key] === 'string' ? (settings[key] as string) : '');
const list = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : v === undefined || v === null || v === '' ? [] : [String(v)]);

/** A fetched list per key, re-fetched when older than the recheck interval; one fetch at a time per key. */
class RemoteCache<T> {
  private readonly entries = new Map<string, { at: number; value: T }>();
  private readonly inflight = new Map<string, Promise<T>>();

  async get(key: string, recheckMs: number, load: () => Promise<T>): Promise<T> {
    const e = this.entries.get(key);
    if (e && Date.now() - e.at < recheckMs) return e.value;
    let p = this.inflight.get(key);
    if (!p) {
      p = load().finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    try {
      const value = await p;
      this.entries.set(key, { at: Date.now(), value });
      return value;
    } catch (err) {
      if (e) return e.value;
      throw err;
    }
  }
}

/** `settings.recheckInterval` (a duration) or the vendor's default, ms. */
function recheckOf(settings: Settings, fallback: number): number {
  const v = settings.recheckInterval;
  if (typeof v === 'number' && v > 0) return v;
  if (typeof v === 'string' && v.trim() !== '') return parseDuration(v);
  return fallback;
}

/** Runs `fn` over `items`, at most {@link PROBE_CONCURRENCY} at once. */
async function eachLimited<T>(items: readonly T[], fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(PROBE_CONCURRENCY, items.length) }, worker));
}

/** An account endpoint and the chain it answered. */
interface AccountEndpoint {
  id: string;
  url: string;
  chainId?: number;
}

/** Probes each endpoint's chain id (an endpoint that does not answer is left without one). */
async function withChainIds(endpoints: AccountEndpoint[], io: VendorIo): Promise<AccountEndpoint[]> {
  await eachLimited(endpoints, async (e) => {
    e.chainId = await io.chainIdOf(e.url).catch(() => undefined);
  });
  return endpoints;
}

/** The account endpoints of a chain as offers, suffixed by the vendor's endpoint id. */
const accountOffers = (endpoints: readonly AccountEndpoint[], chainId: number): Offer[] =>
  endpoints.filter((e) => e.chainId === chainId).map((e) => ({ endpoint: e.url, idSuffix: e.id }));

/** QuickNode's admin API base (endpoints of the account whose key is `x-api-key`). */
export const QUICKNODE_API = 'https://api.quicknode.com/v0/endpoints';
/** Chainstack's platform API (nodes of the account, bearer key). */
export const CHAINSTACK_API = 'https://api.chainstack.com/v1/nodes/';
/** Conduit's public network list. */
export const CONDUIT_NETWORKS = 'https://api.conduit.xyz/public/network/all';
/** Tenderly's public network list. */
export const TENDERLY_NETWORKS = 'https://api.tenderly.co/api/v1/supported-networks';
/** The Optimism superchain registry's chain list. */
export const SUPERCHAIN_REGISTRY = 'https://raw.githubusercontent.com/ethereum-optimism/superchain-registry/main/chainList.json';

/**
 * A superchain registry reference as eRPC reads it: `github.com/<org>/<repo>[/<branch>][/<file>.json]`
 * (a `blob`/`tree` segment dropped) → its raw.githubusercontent.com URL; an http(s) URL as is;
 * anything else as `https://<spec>`.
 */
export function superchainRegistryUrl(spec: string): string {
  const gh = /^(?:https?:\/\/)?github\.com\/(.+)$/.exec(spec);
  if (!gh) return /^https?:\/\//.test(spec) ? spec : `https://${spec}`;
  let parts = (gh[1] as string).replace(/^\/+|\/+$/g, '').split('/');
  if (parts.length >= 3 && (parts[2] === 'blob' || parts[2] === 'tree')) parts = [...parts.slice(0, 2), ...parts.slice(3)];
  if (parts.length < 2) throw new Error(`invalid GitHub superchain registry "${spec}": no <org>/<repo>`);
  const [org, repo, third, ...rest] = parts as [string, string, string?, ...string[]];
  let branch = 'main';
  let file = 'chainList.json';
  if (third !== undefined && !third.endsWith('.json')) {
    branch = third;
    if (rest.length) file = rest.join('/');
  } else if (third !== undefined) file = [third, ...rest].join('/');
  return `https://raw.githubusercontent.com/${org}/${repo}/${branch}/${file}`;
}

/** Creates the remote vendors, each with its own cache. */
export function remoteVendors(): RemoteVendor[] {
  const quicknode = new RemoteCache<AccountEndpoint[]>();
  const chainstack = new RemoteCache<AccountEndpoint[]>();
  const conduit = new RemoteCache<Map<number, string>>();
  const tenderly = new RemoteCache<Map<number, string>>();
  const superchain = new RemoteCache<Map<number, string[]>>();
  return [
    {
      name: 'quicknode',
      required: ['apiKey'],
      async offers(chainId, s, io) {
        const key = str(s, 'apiKey');
        const tagIds = list(s.tagIds);
        const tagLabels = list(s.tagLabels);
        const endpoints = await quicknode.get(`${key}\0${tagIds.join(',')}\0${tagLabels.join(',')}`, recheckOf(s, HOUR), async () => {
          const out: AccountEndpoint[] = [];
          for (let offset = 0; ; offset += 100) {
            const q = new URLSearchParams({ limit: '100', offset: String(offset) });
            if (tagIds.length) q.set('tag_ids', tagIds.join(','));
            if (tagLabels.length) q.set('tag_labels', tagLabels.join(','));
            const doc = (await io.fetchJson(`${QUICKNODE_API}?${q.toString()}`, { 'x-api-key': key })) as {
              data?: Array<{ id?: unknown; http_url?: unknown }>;
              error?: unknown;
            };
            if (doc.error) throw new Error(`quicknode API error: ${String(doc.error)}`);
            const page = Array.isArray(doc.data) ? doc.data : [];
            for (const e of page) if (typeof e.http_url === 'string' && e.http_url) out.push({ id: String(e.id ?? out.length), url: e.http_url });
            if (page.length < 100) break;
          }
          return withChainIds(out, io);
        });
        return accountOffers(endpoints, chainId);
      },
    },
    {
      name: 'chainstack',
      required: ['apiKey'],
      async offers(chainId, s, io) {
        const key = str(s, 'apiKey');
        const q = new URLSearchParams();
        for (const f of ['project', 'organization', 'region', 'provider', 'type']) if (str(s, f)) q.set(f, str(s, f));
        const nodes = await chainstack.get(`${key}\0${q.toString()}`, recheckOf(s, HOUR), async () => {
          const out: AccountEndpoint[] = [];
          let next: string | undefined = q.size ? `${CHAINSTACK_API}?${q.toString()}` : CHAINSTACK_API;
          for (let pages = 0; next && pages < 100; pages++) {
            const doc = (await io.fetchJson(next, { Authorization: `Bearer ${key}` })) as {
              next?: unknown;
              results?: Array<{ id?: unknown; status?: unknown; details?: { https_endpoint?: unknown; auth_key?: unknown } }>;
            };
            for (const n of Array.isArray(doc.results) ? doc.results : []) {
              const base = n.details?.https_endpoint;
              if (n.status === 'running' && typeof base === 'string' && base && n.id)
                out.push({ id: String(n.id), url: `${base}/${typeof n.details?.auth_key === 'string' ? n.details.auth_key : ''}` });
            }
            next = typeof doc.next === 'string' && doc.next ? doc.next : undefined;
          }
          return withChainIds(out, io);
        });
        return accountOffers(nodes, chainId);
      },
    },
    {
      name: 'conduit',
      required: ['apiKey'],
      async offers(chainId, s, io) {
        const url = str(s, 'networksUrl') || CONDUIT_NETWORKS;
        const nets = await conduit.get(url, recheckOf(s, 24 * HOUR), async () => {
          const doc = (await io.fetchJson(url)) as { endpoints?: Array<{ chainId?: unknown; httpEndpoint?: unknown }> };
          const m = new Map<number, string>();
          for (const e of Array.isArray(doc.endpoints) ? doc.endpoints : []) {
            const id = Number(e.chainId);
            if (Number.isSafeInteger(id) && id > 0 && typeof e.httpEndpoint === 'string' && e.httpEndpoint) m.set(id, e.httpEndpoint);
          }
          return m;
        });
        const base = nets.get(chainId);
        return base ? [{ endpoint: `${base}/${str(s, 'apiKey')}` }] : [];
      },
    },
    {
      name: 'tenderly',
      required: ['apiKey'],
      async offers(chainId, s, io) {
        const nets = await tenderly.get(TENDERLY_NETWORKS, recheckOf(s, 24 * HOUR), async () => {
          const doc = (await io.fetchJson(TENDERLY_NETWORKS)) as Array<{
            chain_id?: unknown;
            network_slugs?: { node_rpc_slug?: unknown; vnet_rpc_slug?: unknown; explorer_slug?: unknown };
          }>;
          const m = new Map<number, string>();
          for (const n of Array.isArray(doc) ? doc : []) {
            const id = Number(n.chain_id);
            const slugs = n.network_slugs ?? {};
            const slug = [slugs.node_rpc_slug, slugs.vnet_rpc_slug, slugs.explorer_slug].find((x): x is string => typeof x === 'string' && x !== '');
            if (Number.isSafeInteger(id) && id > 0 && slug) m.set(id, slug);
          }
          return m;
        });
        const slug = nets.get(chainId);
        return slug ? [{ endpoint: `https://${slug}.gateway.tenderly.co/${str(s, 'apiKey')}` }] : [];
      },
    },
    {
      name: 'superchain',
      required: [],
      async offers(chainId, s, io) {
        const url = superchainRegistryUrl(str(s, 'registryUrl') || SUPERCHAIN_REGISTRY);
        const nets = await superchain.get(url, recheckOf(s, 24 * HOUR), async () => {
          const doc = (await io.fetchJson(url)) as Array<{ chainId?: unknown; rpc?: unknown }>;
          const m = new Map<number, string[]>();
          for (const e of Array.isArray(doc) ? doc : []) {
            const id = Number(e.chainId);
            const rpcs = Array.isArray(e.rpc) ? e.rpc.filter((r): r is string => typeof r === 'string' && /^https?:\/\//.test(r)) : [];
            if (Number.isSafeInteger(id) && id > 0 && rpcs.length) m.set(id, rpcs);
          }
          return m;
        });
        return (nets.get(chainId) ?? []).map((endpoint, i) => ({ endpoint, idSuffix: String(i) }));
      },
    },
  ];
}
