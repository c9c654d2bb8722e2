/**
 * eRPC's vendor endpoint shortcuts, rewritten at load time into svc's own shape (eRPC's
 * common/defaults.go `convertUpstreamToProvider` and `buildProviderSettings`): an upstream whose
 * endpoint is `<vendor>://...` or `evm+<vendor>://...` (anything but http/https) becomes a
 * provider of that vendor, which generates one upstream per chain the vendor serves, on the first
 * request for it:
 *
 * - provider id: the upstream's `id`, else `<vendor>-<n>` (n counting that vendor's shortcuts
 *   from 1, in file order); `upstreamIdTemplate` `<PROVIDER>-<NETWORK>`;
 * - the upstream's other keys (failsafe, tags, jsonRpc, method lists...) become the provider's
 *   `overrides["*"]`, so every generated upstream carries them;
 * - the vendor's settings come from the URL: `alchemy://KEY` → `{apiKey: KEY}` (likewise ankr,
 *   blastapi, blockdaemon, blockpi, conduit, drpc, dwellir, etherspot, infura, llama,
 *   onfinality, pimlico, satelink, tenderly), `thirdweb://ID` → `{clientId}`,
 *   `quicknode://KEY?tagIds=1,2&tagLabels=a` → `{apiKey, tagIds, tagLabels}`,
 *   `chainstack://KEY?project=..` → `{apiKey, <each query parameter>}`,
 *   `goldsky://SECRET?tier=..` → `{secret, tier}`, `routemesh://HOST/rpc/<chain>/KEY` →
 *   `{baseURL, apiKey}`, `erpc://HOST/PATH?secret=S` → `{endpoint: https://HOST/PATH, secret}`,
 *   `superchain://SPEC` → `{registryUrl}`, `envio://ROOT` → vendor `hyper` `{rootDomain}`,
 *   `repository://HOST/PATH?Q` → `{repositoryUrl: https://HOST/PATH?Q}` (eRPC leaves a
 *   trailing `?` when there is no query; svc does not).
 *
 * A provider's `vendor: envio` (eRPC's name for HyperRPC) becomes `hyper`. A provider written with
 * the shortcut as its `endpoint` (`providers: [{endpoint: drpc://KEY}]`) becomes the provider the
 * shortcut names. An unknown scheme is a config problem naming the upstream and the known
 * vendors, never a crash; so is an upstream id a shortcut shares with another upstream (once the
 * shortcut is a provider the duplicate would no longer be visible).
 */

/** The raw config document (YAML/JSON/TS as written, before validation). */
export type ConfigDocument = Record<string, unknown>;

/** Where a rewrite or a problem is reported. */
export interface ShortcutReport {
  /** One rewrite: where, what was written, what it became (secrets are the caller's to redact). */
  rewrite(path: string, from: unknown, to: unknown): void;
  /** One problem: the config is refused with it. */
  problem(path: string, message: string): void;
  /** Endpoint schemes a plugin of the preset serves (left alone: not shortcuts). */
  readonly endpointSchemes?: ReadonlySet<string>;
}

/** eRPC's vendor name for HyperRPC, which svc calls `hyper`. */
const VENDOR_ALIASES: Readonly<Record<string, string>> = { envio: 'hyper' };

/** The vendors a shortcut may name (eRPC's list); `envio` maps to svc's `hyper`. */
export const SHORTCUT_VENDORS: readonly string[] = [
  'alchemy',
  'ankr',
  'blastapi',
  'blockdaemon',
  'blockpi',
  'chainstack',
  'conduit',
  'drpc',
  'dwellir',
  'envio',
  'erpc',
  'etherspot',
  'goldsky',
  'infura',
  'llama',
  'onfinality',
  'pimlico',
  'quicknode',
  'repository',
  'routemesh',
  'satelink',
  'superchain',
  'tenderly',
  'thirdweb',
];

/** Vendors whose only setting is the key in the authority (`<vendor>://KEY`). */
const API_KEY_VENDORS = new Set([
  'alchemy',
  'ankr',
  'blastapi',
  'blockdaemon',
  'blockpi',
  'conduit',
  'drpc',
  'dwellir',
  'etherspot',
  'infura',
  'llama',
  'onfinality',
  'pimlico',
  'satelink',
  'tenderly',
]);

/** A shortcut URL split as Go's url.Parse splits it (authority kept as written, case included). */
interface ShortcutUrl {
  scheme: string;
  host: string;
  path: string;
  query: string;
}

/** Splits `scheme://authority/path?query#fragment`; undefined when it has no `://`. */
export function splitShortcut(endpoint: string): ShortcutUrl | undefined {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?/.exec(endpoint.trim());
  if (!m) return undefined;
  return { scheme: (m[1] as string).toLowerCase(), host: m[2] as string, path: m[3] ?? '', query: m[4] ?? '' };
}

/** Whether an endpoint is a vendor shortcut (a scheme other than http/https). */
export function isShortcut(endpoint: unknown): endpoint is string {
  if (typeof endpoint !== 'string') return false;
  const u = splitShortcut(endpoint);
  return !!u && u.scheme !== 'http' && u.scheme !== 'https';
}

const decode = (s: string): string => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/**
 * The vendor and settings of a shortcut (eRPC's buildProviderSettings).
 * @throws Error naming the problem (unknown vendor, a routemesh path not `/rpc/<chain>/<key>`)
 */
export function shortcutProvider(endpoint: string): { vendor: string; settings: Record<string, unknown> } {
  const u = splitShortcut(endpoint);
  if (!u) throw new Error('not a <vendor>://... shortcut');
  const name = u.scheme.replace(/^evm\+/, '');
  const host = decode(u.host);
  const q = new URLSearchParams(u.query);
  const vendor = VENDOR_ALIASES[name] ?? name;
  if (API_KEY_VENDORS.has(name)) return { vendor, settings: { apiKey: host } };
  switch (name) {
    case 'thirdweb':
      return { vendor, settings: { clientId: host } };
    case 'envio':
      return { vendor, settings: { rootDomain: host } };
    case 'goldsky': {
      const settings: Record<string, unknown> = {};
      if (host) settings.secret = host;
      if (q.get('secret')) settings.secret = q.get('secret');
      if (q.get('tier')) settings.tier = q.get('tier');
      return { vendor, settings };
    }
    case 'superchain':
      return { vendor, settings: { registryUrl: u.path && u.path !== '/' ? `${host}${u.path}` : host } };
    case 'quicknode': {
      const settings: Record<string, unknown> = { apiKey: host };
      const ids = (q.get('tagIds') ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
        .map(Number)
        .filter(Number.isInteger);
      if (ids.length) settings.tagIds = ids.length === 1 ? ids[0] : ids;
      const labels = (q.get('tagLabels') ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (labels.length) settings.tagLabels = labels.length === 1 ? labels[0] : labels;
      return { vendor, settings };
    }
    case 'chainstack': {
      const settings: Record<string, unknown> = { apiKey: host };
      for (const k of new Set(q.keys())) {
        const all = q.getAll(k);
        settings[k] = all.length === 1 ? all[0] : all;
      }
      return { vendor, settings };
    }
    case 'erpc': {
      const settings: Record<string, unknown> = { endpoint: `https://${u.host}/${u.path.replace(/^\/+/, '')}` };
      if (q.get('secret')) settings.secret = q.get('secret');
      return { vendor, settings };
    }
    case 'repository':
      return { vendor, settings: { repositoryUrl: `https://${u.host}/${u.path.replace(/^\/+/, '')}${u.query ? `?${u.query}` : ''}` } };
    case 'routemesh': {
      const parts = u.path.replace(/^\/+/, '').split('/');
      if (parts.length < 3 || parts[0] !== 'rpc') throw new Error(`a routemesh shortcut's path must be /rpc/<chainId>/<apiKey>`);
      return { vendor, settings: { baseURL: host, apiKey: parts[2] } };
    }
    case 'grpc':
    case 'grpcs':
    case 'grpc+bds':
      // Reached only when no plugin of the preset serves the scheme (see normalizeVendorShortcuts).
      throw new Error(GRPC_UPSTREAM.replace('grpc://', `${u.scheme}://`));
    default:
      throw new Error(
        `"${u.scheme}://" names no vendor svc knows (vendor shortcuts: ${SHORTCUT_VENDORS.join(', ')}); write the upstream's http(s) URL instead`,
      );
  }
}

/** Why a `grpc://` endpoint is refused when the preset lacks the plugin that serves it, and what to do instead. */
const GRPC_UPSTREAM =
  "eRPC's gRPC upstreams (grpc://: the Blockchain Data Standards protobuf API) are served by the bds plugin, which this preset does not apply: add bdsPlugin() (svc-proxy/presets) to the preset, or write the node's http(s) JSON-RPC URL";

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * A provider written with an endpoint shortcut instead of `vendor` and `settings`
 * (`providers: [{endpoint: alchemy://KEY}]`, the shortcut eRPC takes on an upstream): the provider
 * that shortcut names, its own keys kept (`id`, `onlyNetworks`, `overrides`...; explicit
 * `settings` win over those from the URL), `id` defaulting as an upstream shortcut's does.
 * @returns the rewritten provider, or undefined after reporting why it cannot be rewritten
 */
function providerFromEndpoint(
  pr: Record<string, unknown>,
  path: string,
  counters: Map<string, number>,
  report: ShortcutReport,
): Record<string, unknown> | undefined {
  const at = `${path}.endpoint`;
  if (pr.vendor !== undefined) {
    report.problem(at, 'a provider takes `vendor` (with `settings`) or an endpoint shortcut (`alchemy://KEY`), not both: keep one');
    return undefined;
  }
  if (!isShortcut(pr.endpoint)) {
    report.problem(
      at,
      "a provider's endpoint must be a vendor shortcut (`alchemy://KEY`, `drpc://KEY`...); a plain http(s) URL is one node: list it under `upstreams[]` with its `evm.chainId`",
    );
    return undefined;
  }
  let parsed: ReturnType<typeof shortcutProvider>;
  try {
    parsed = shortcutProvider(pr.endpoint);
  } catch (e) {
    report.problem(at, (e as Error).message.replace("write the upstream's http(s) URL instead", "list the node's http(s) URL under `upstreams[]` instead"));
    return undefined;
  }
  const scheme = (splitShortcut(pr.endpoint) as ShortcutUrl).scheme.replace(/^evm\+/, '');
  const { endpoint: _endpoint, id, settings, ...rest } = pr;
  let providerId = id;
  if (typeof id !== 'string' || !id) {
    const n = (counters.get(scheme) ?? 0) + 1;
    counters.set(scheme, n);
    providerId = `${scheme}-${n}`;
  }
  const out: Record<string, unknown> = {
    id: providerId,
    vendor: parsed.vendor,
    settings: { ...parsed.settings, ...(isObject(settings) ? settings : {}) },
    ...rest,
  };
  report.rewrite(at, pr.endpoint, { id: out.id, vendor: out.vendor, settings: out.settings });
  return out;
}

/**
 * Rewrites every vendor shortcut of a config document into a provider, in place (see the module
 * comment), and every provider's `vendor: envio` into `hyper`.
 * @param doc the raw document (as written, before validation)
 * @param report where each rewrite and each problem goes
 */
export function normalizeVendorShortcuts(doc: ConfigDocument, report: ShortcutReport): void {
  const projects = doc.projects;
  if (!Array.isArray(projects)) return;
  const counters = new Map<string, number>();
  projects.forEach((p, pi) => {
    if (!isObject(p)) return;
    const providers: unknown[] = Array.isArray(p.providers) ? [...(p.providers as unknown[])] : [];
    let changed = false;
    providers.forEach((pr, i) => {
      if (isObject(pr) && 'endpoint' in pr) {
        const rewritten = providerFromEndpoint(pr, `projects[${pi}].providers[${i}]`, counters, report);
        if (rewritten) {
          providers[i] = pr = rewritten;
          changed = true;
        }
      }
      if (isObject(pr) && typeof pr.vendor === 'string' && VENDOR_ALIASES[pr.vendor]) {
        report.rewrite(`projects[${pi}].providers[${i}].vendor`, pr.vendor, VENDOR_ALIASES[pr.vendor]);
        providers[i] = { ...pr, vendor: VENDOR_ALIASES[pr.vendor] };
        changed = true;
      }
    });
    const upstreams = Array.isArray(p.upstreams) ? (p.upstreams as unknown[]) : [];
    // An id is checked here, where the upstream is still where the file put it: once a shortcut is
    // a provider, a second upstream of the same id would no longer be an upstream.
    const firstWithId = new Map<string, number>();
    upstreams.forEach((u, ui) => {
      if (!isObject(u) || typeof u.id !== 'string' || !u.id) return;
      const first = firstWithId.get(u.id);
      if (first === undefined) return void firstWithId.set(u.id, ui);
      const other = upstreams[first] as Record<string, unknown>;
      if (isShortcut(u.endpoint) || isShortcut(other.endpoint))
        report.problem(`projects[${pi}].upstreams[${ui}].id`, `duplicate upstream id "${u.id}" (also projects[${pi}].upstreams[${first}])`);
    });
    const kept: unknown[] = [];
    // A scheme a plugin of the preset serves (`SchemaFragment.endpointSchemes`: grpc:// by the bds plugin) is that plugin's upstream.
    const served = (e: unknown) => typeof e === 'string' && report.endpointSchemes?.has(splitShortcut(e)?.scheme ?? '') === true;
    upstreams.forEach((u, ui) => {
      if (!isObject(u) || !isShortcut(u.endpoint) || served(u.endpoint)) return void kept.push(u);
      const path = `projects[${pi}].upstreams[${ui}]`;
      let parsed: ReturnType<typeof shortcutProvider>;
      try {
        parsed = shortcutProvider(u.endpoint);
      } catch (e) {
        report.problem(`${path}.endpoint`, (e as Error).message);
        return void kept.push(u);
      }
      const scheme = (splitShortcut(u.endpoint) as ShortcutUrl).scheme.replace(/^evm\+/, '');
      const { id, endpoint: _endpoint, ...rest } = u;
      const n = (counters.get(scheme) ?? 0) + 1;
      counters.set(scheme, n);
      const provider: Record<string, unknown> = {
        id: typeof id === 'string' && id ? id : `${scheme}-${n}`,
        vendor: parsed.vendor,
        settings: parsed.settings,
        upstreamIdTemplate: '<PROVIDER>-<NETWORK>',
        ...(Object.keys(rest).length ? { overrides: { '*': rest } } : {}),
      };
      report.rewrite(path, u, { providers: [provider] });
      providers.push(provider);
      changed = true;
    });
    if (!changed) return;
    if (Array.isArray(p.upstreams)) p.upstreams = kept;
    p.providers = providers;
  });
}
