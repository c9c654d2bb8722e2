/**
 * providers plugin (spec §1.2, §2.10, §3.6). Written against the public
 * plugin API only.
 *
 * - `projects[].providers[]` turn into upstreams per chain, lazily: the first request for a chain
 *   the project does not have (`resolveNetwork`) starts the eligible providers' bootstrap tasks
 *   and waits, polling every 200 ms for up to 30 s (never past the request's deadline), until
 *   an upstream of that chain is ready;
 *   once every task finished without one it answers "not served" (HTTP 404
 *   `ErrNetworkNotSupported`), naming why when a task failed (a catalog that cannot be fetched);
 *   it also stops waiting, with the same error, once every generated upstream failed its first
 *   `eth_chainId` probe (offline), rather than holding the request for 30 s. Networks declared
 *   in config bootstrap at start-up, in the background.
 * - Vendors are plugins: they register with the `providers` service (`PROVIDERS_SERVICE`).
 * - Zero-config (`config` hook): a project with no providers and no upstreams gets the `public`
 *   provider (vendor `repository`), and `hyper` when a vendor of that name is registered, with a
 *   warning naming what they contact and how to turn it off. An explicitly empty `providers: []`
 *   does not prevent it (spec §2.10): upstreams, a provider, or a preset without this plugin do.
 */
import { type Network, definePlugin, type Plugin, type PluginHost, type Project, type ResolvedConfig } from 'svc-proxy/plugin';
import { ErrNetworkNotSupported, PluginContractError } from 'svc-proxy/plugin/errors';
import { PROVIDERS_SERVICE, type Vendor } from './api.ts';
import { redactText, sleep } from 'svc-proxy/util';
import { ProjectBootstrap } from './bootstrap.ts';
import { DEFAULT_UPSTREAM_ID_TEMPLATE, providersOf, providersSchema } from './schema.ts';

export {
  BOOTSTRAP_BACKOFF_FACTOR,
  BOOTSTRAP_FIRST_RETRY_MS,
  BOOTSTRAP_MAX_RETRY_MS,
  bootstrapRetryDelayMs,
  networkFilter,
  upstreamIdOf,
  type Vendor,
  type VendorUpstream,
} from './bootstrap.ts';
export { DEFAULT_UPSTREAM_ID_TEMPLATE, providersOf, type ProviderConfig } from './schema.ts';

// The service's key and types are the contract in svc-proxy/plugin (vendor plugins import them there).
export { PROVIDERS_SERVICE, type ProvidersService } from './api.ts';

/** How long the first request for a chain waits for a provider upstream to be ready, ms (spec §8). */
export const FIRST_REQUEST_WAIT_MS = 30_000;
/** How often it looks, ms (spec §8). */
export const FIRST_REQUEST_POLL_MS = 200;

/**
 * Creates the providers plugin (name `providers`).
 * @returns a plugin owning `projects[].providers`, tapping `config`, `project`, `resolveNetwork` and `shutdown`
 */
export function providersPlugin(): Plugin {
  return definePlugin({
    name: 'providers',
    provides: [PROVIDERS_SERVICE],
    schema: providersSchema,
    apply(host: PluginHost) {
      const vendors = new Map<string, Vendor>();
      const bootstraps = new Map<Project, ProjectBootstrap>();
      host.services.provide(PROVIDERS_SERVICE, {
        registerVendor(v) {
          if (vendors.has(v.name)) throw new PluginContractError(`vendor "${v.name}" is registered twice`);
          vendors.set(v.name, v);
        },
      });

      host.hooks.config.tap('providers', (config: ResolvedConfig) => injectZeroConfig(config, vendors));

      host.hooks.configured.tap('providers', (config) => {
        for (const p of config.projects) {
          for (const pr of providersOf(p.settings)) {
            if (!vendors.has(pr.vendor))
              throw new PluginContractError(
                `project ${p.id}: provider "${pr.id}" names vendor "${pr.vendor}", which no plugin registers (known: ${[...vendors.keys()].join(', ') || 'none'})`,
              );
          }
        }
      });

      host.hooks.project.tapPromise('providers', async (project) => {
        const providers = providersOf(project.config.settings);
        if (providers.length === 0) return;
        const b = new ProjectBootstrap(host, project, providers, vendors);
        bootstraps.set(project, b);
        // Declared networks never reach resolveNetwork: bootstrap them now, in the background.
        for (const n of project.networks.values()) b.start(n.chainId);
        await Promise.resolve();
      });

      host.hooks.resolveNetwork.tapPromise('providers', async (project: Project, networkId: string, deadline: number): Promise<Network | undefined> => {
        const b = bootstraps.get(project);
        const m = /^evm:(\d+)$/.exec(networkId);
        if (!b || !m) return undefined;
        const chainId = Number(m[1]);
        if (!Number.isSafeInteger(chainId) || chainId <= 0) return undefined;
        b.start(chainId);
        // Up to 30 s, never past the waiting request's own deadline (spec §8); an upstream whose
        // probe failed once is not waited for (offline, a dead endpoint): its retries run on.
        const until = Math.min(Date.now() + FIRST_REQUEST_WAIT_MS, deadline);
        for (;;) {
          const n = project.networks.get(networkId);
          if (n?.upstreams.some((u) => u.state === 'ready')) return n;
          if ((!b.running(chainId) && !n?.upstreams.some((u) => u.state === 'probing' && u.probeFailures === 0)) || Date.now() >= until || host.isClosed) break;
          await sleep(FIRST_REQUEST_POLL_MS);
        }
        const n = project.networks.get(networkId);
        const done = !b.running(chainId);
        return notServedYet(project, networkId, n, done ? b.failures(chainId) : [], done ? b.declined(chainId) : []);
      });

      host.hooks.shutdown.tapPromise('providers', async () => {
        for (const b of bootstraps.values()) b.close();
        await Promise.resolve();
      });
    },
  });
}

/**
 * What the first request for a chain gets once the wait is over: the network when one of its
 * upstreams serves or may still pass its probe; `undefined` (the core's generic HTTP 404) when no
 * provider was asked.
 * @throws ErrNetworkNotSupported (HTTP 404) naming why, at once, when a bootstrap task failed
 *   (e.g. the catalog cannot be fetched) and produced nothing, or when every upstream the
 *   providers generated failed its `eth_chainId` probe; bootstrap and probes keep retrying
 *   in the background, so a later call can succeed
 * @throws ErrNetworkNotSupported (HTTP 404) naming the providers that do not serve the chain
 *   (their vendor offered nothing, or `ignoreNetworks` names it), when that is all there is
 */
function notServedYet(
  project: Project,
  networkId: string,
  n: Network | undefined,
  failures: readonly string[],
  declined: readonly string[] = [],
): Network | undefined {
  const ups = n?.upstreams ?? [];
  if (ups.some((u) => u.state === 'ready' || (u.state === 'probing' && u.probeFailures === 0))) return n;
  if (ups.length > 0) {
    throw new ErrNetworkNotSupported(
      redactText(
        `network ${networkId} of project ${project.id} has no reachable upstream yet: all ${ups.length} upstream(s) its providers generated failed their eth_chainId probe (is this host offline?)${failures.length ? `; ${failures.join('; ')}` : ''}; retrying in the background`,
      ),
    );
  }
  if (failures.length > 0)
    throw new ErrNetworkNotSupported(
      redactText(`network ${networkId} is not served by project ${project.id} yet: ${failures.join('; ')}; retrying in the background`),
    );
  if (declined.length > 0)
    throw new ErrNetworkNotSupported(redactText(`network ${networkId} is not supported by project ${project.id}: ${declined.join('; ')}`));
  return undefined;
}

/**
 * Zero-config (spec §2.10, §3.6): injects `public` (and `hyper` when registered) into projects
 * with no providers and no upstreams, with a warning.
 */
function injectZeroConfig(config: ResolvedConfig, vendors: ReadonlyMap<string, Vendor>): ResolvedConfig {
  for (const p of config.projects) {
    const providers = p.settings.providers as unknown[] | undefined;
    if (p.upstreams.length > 0 || (providers && providers.length > 0)) continue;
    const injected = [
      { id: 'public', vendor: 'repository' },
      { id: 'hyper', vendor: 'hyper' },
    ]
      .filter((x) => vendors.has(x.vendor))
      .map((x) => ({ ...x, settings: {}, upstreamIdTemplate: DEFAULT_UPSTREAM_ID_TEMPLATE, overrides: {} }));
    if (injected.length === 0) continue;
    p.settings.providers = injected;
    const what = injected.map((x) => {
      const d = vendors.get(x.vendor)?.describe?.(x.settings);
      return `${x.id} (vendor ${x.vendor}${d ? `: ${d}` : ''})`;
    });
    config.warnings.push(
      `project ${p.id} has no upstreams and no providers: zero-config, serving any chain id on /evm/<chainId> from the public providers ${what.join(', ')}, created on the first request for each chain (docs/interface.md §2.10). To turn this off, give the project upstreams (svc start ENDPOINT..., or upstreams in the config file) or providers of its own (an empty providers: [] does not turn it off), or run a preset without the providers plugin (--preset minimal)`,
    );
  }
  return config;
}
