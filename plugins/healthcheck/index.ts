/**
 * healthcheck plugin (spec §2.4, §4.1 "other", §4.3, §3.2). Serves
 * `GET /healthcheck`, `GET /<project>[/healthcheck]`, `GET /<project>/evm/<chainId>[/healthcheck]`,
 * `GET /<project>/<alias>[/healthcheck]` and every other non-POST, non-OPTIONS request, through
 * the `routes` hook (late stage, so routes other plugins mount win). Written against the public
 * plugin API only.
 *
 * Answers (README "Healthcheck"): healthy is HTTP 200, unhealthy HTTP 503 in every mode with
 * `{status: "ERROR", code: "HealthcheckUnhealthy", message, details}`; from SIGTERM on, 503 with
 * message `shutting down` (spec §3.2).
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { type Network, definePlugin, type Plugin, type PluginHost, type Project } from 'svc-proxy/plugin';
import { type Authenticator, doorAuthenticator } from 'svc-proxy/plugins/auth';
import { STATE_POLLERS_SERVICE } from 'svc-proxy/plugins/evm-state';
import { ChainIdProbes, evaluate, type Member, type Pollers, type Verdict } from './evaluate.ts';
import { healthcheckConfigOf, healthcheckSchema, isStrategy, type HealthcheckConfig, type Strategy } from './schema.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

export { CHAIN_ID_PROBE_TIMEOUT_MS, CHAIN_ID_PROBE_TTL_MS } from './evaluate.ts';
export { STRATEGIES, type HealthcheckConfig, type Strategy } from './schema.ts';

/** Stage of the catch-all route in the `routes` hook: after every other plugin's routes. */
const ROUTES_STAGE = 1000;
/** The HTTP methods answered as a healthcheck (spec §4.1: any but POST and OPTIONS). */
const METHODS = ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE'];
/** Longest accepted `eval` value, characters (client input is bounded). */
const MAX_EVAL_LENGTH = 64;

/** The body of a healthcheck answer. */
type Body = Record<string, unknown>;

/** What a request asks about: everything, one project, or one network. */
type Scope = { kind: 'all' } | { kind: 'project'; project: Project } | { kind: 'network'; project: Project; network: Network };

/**
 * Creates the healthcheck plugin (name `healthcheck`).
 * @returns a plugin owning the top-level `healthCheck` key and tapping `configured` and `routes`
 */
export function healthcheckPlugin(): Plugin {
  return definePlugin({
    name: 'healthcheck',
    schema: healthcheckSchema,
    apply(host: PluginHost) {
      let config: HealthcheckConfig = { mode: 'simple', defaultEval: 'any:initializedUpstreams' };
      const probes = new ChainIdProbes(host);
      let guard: Authenticator | undefined;
      host.hooks.configured.tap('healthcheck', (c) => {
        config = healthcheckConfigOf(c);
        // The same strategy code as projects and admin (spec §2.4, §5.1): a bad CIDR or key is a
        // start-up error, not a 401 on every probe.
        guard = doorAuthenticator(host.services, config.auth, 'healthCheck.auth');
      });
      host.hooks.routes.tap({ name: 'healthcheck', stage: ROUTES_STAGE }, (router: Router) => {
        router.register(['/', '/{*rest}'], METHODS, async (k: Context) => {
          const { status, body } = await answer(host, config, probes, k, guard);
          k.status = status;
          k.body = JSON.stringify(body);
        });
      });
    },
  });
}

async function answer(
  host: PluginHost,
  config: HealthcheckConfig,
  probes: ChainIdProbes,
  k: Context,
  guard: Authenticator | undefined,
): Promise<{ status: number; body: Body }> {
  if (guard) {
    try {
      await guard.authenticate(host.requestInfo(k));
    } catch {
      return {
        status: 401,
        body: {
          status: 'ERROR',
          code: 'ErrAuthUnauthorized',
          message: 'healthcheck requires a credential one of healthCheck.auth.strategies accepts (a secret, JWT or SIWE message) or an allowed address',
        },
      };
    }
  }
  if (host.lifecycle !== 'serving') return unhealthy('shutting down', { lifecycle: host.lifecycle });
  const rawEval = typeof k.query.eval === 'string' ? k.query.eval : config.defaultEval;
  if (!isStrategy(rawEval)) return unhealthy(`unknown evaluation strategy: ${rawEval.slice(0, MAX_EVAL_LENGTH)}`, {});
  let scope: Scope;
  try {
    scope = await scopeOf(host, k.path);
  } catch (e) {
    return { status: 404, body: { status: 'ERROR', code: (e as NotFound).code, message: (e as NotFound).message } };
  }
  return report(host, config, probes, scope, rawEval);
}

class NotFound extends Error {
  constructor(
    readonly code: 'ErrProjectNotFound' | 'ErrNetworkNotSupported',
    message: string,
  ) {
    super(message);
  }
}

/** The scope a path names (spec §4.3 paths, plus eRPC's `/<project>[/healthcheck]`). */
async function scopeOf(host: PluginHost, path: string): Promise<Scope> {
  let segs: string[];
  try {
    segs = path
      .split('/')
      .filter((s) => s !== '')
      .map((s) => decodeURIComponent(s));
  } catch {
    throw new NotFound('ErrProjectNotFound', 'invalid percent-encoding in path');
  }
  if (segs[segs.length - 1] === 'healthcheck') segs.pop();
  if (segs.length === 0) return { kind: 'all' };
  const project = host.projects.get(segs[0] as string);
  if (!project) throw new NotFound('ErrProjectNotFound', `project "${(segs[0] as string).slice(0, 64)}" not found`);
  if (segs.length === 1) return { kind: 'project', project };
  let network: Network | undefined;
  if (segs.length === 3 && segs[1] === 'evm' && /^\d{1,20}$/.test(segs[2] as string)) {
    const id = `evm:${Number(segs[2])}`;
    // A per-network probe initialises a lazy (provider) network, as a first call would.
    network = project.networks.get(id) ?? (await host.hooks.resolveNetwork.promise(project, id, Date.now() + host.config.server.maxTimeoutMs));
  } else if (segs.length === 2) network = project.aliases.get(segs[1] as string);
  if (!network) throw new NotFound('ErrNetworkNotSupported', `path ${path.slice(0, 128)} names no network of project ${project.id}`);
  return { kind: 'network', project, network };
}

function unhealthy(message: string, details: Body): { status: number; body: Body } {
  return { status: 503, body: { status: 'ERROR', code: 'HealthcheckUnhealthy', message, details } };
}

/** The upstreams of a project (or of one network) with the network each serves. */
function membersOf(project: Project, only?: Network): Member[] {
  const out: Member[] = [];
  const networkOf = new Map<unknown, Network>();
  for (const n of project.networks.values()) for (const u of n.upstreams) networkOf.set(u, n);
  if (only) return only.upstreams.map((upstream) => ({ upstream, network: only }));
  for (const u of project.upstreams.values()) out.push({ upstream: u, network: networkOf.get(u) });
  return out;
}

/** Whether a project's upstreams come only from providers (zero-config), so none may exist yet. */
function providersOnly(project: Project): boolean {
  const providers = project.config.settings.providers as unknown[] | undefined;
  return project.config.upstreams.length === 0 && Array.isArray(providers) && providers.length > 0;
}

async function projectVerdict(host: PluginHost, project: Project, strategy: Strategy, probes: ChainIdProbes, pollers: Pollers): Promise<Verdict> {
  const members = membersOf(project);
  if (members.length === 0 && providersOnly(project)) return { healthy: true, message: 'no networks initialized yet' };
  return evaluate(host, project, members, strategy, probes, pollers);
}

async function networkDetails(
  host: PluginHost,
  config: HealthcheckConfig,
  project: Project,
  networks: readonly Network[],
  strategy: Strategy,
  probes: ChainIdProbes,
  pollers: Pollers,
): Promise<{ body: Body; all: boolean }> {
  const out: Body = {};
  let all = true;
  for (const n of networks) {
    const v = await evaluate(host, project, membersOf(project, n), strategy, probes, pollers);
    all &&= v.healthy;
    const entry: Body = {
      networkId: n.id,
      alias: n.alias ?? null,
      blockTimeMs: networkChainState(host, n).blockTimeMs ?? null,
      healthy: v.healthy,
      status: v.healthy ? 'OK' : 'ERROR',
    };
    if (config.mode === 'verbose') {
      entry.message = v.message;
      const ups: Body = {};
      for (const u of n.upstreams) {
        const s = project.health.snapshot(u.id);
        ups[u.id] = { healthy: u.state === 'ready' && !s.cordoned && s.errorRate < 1, errorRate: s.errorRate };
      }
      entry.upstreams = ups;
    }
    out[n.id] = entry;
  }
  return { body: out, all };
}

async function report(
  host: PluginHost,
  config: HealthcheckConfig,
  probes: ChainIdProbes,
  scope: Scope,
  strategy: Strategy,
): Promise<{ status: number; body: Body }> {
  const pollers = host.services.get(STATE_POLLERS_SERVICE);
  const projects = scope.kind === 'all' ? [...host.projects.values()] : [scope.project];
  if (projects.length === 0) return unhealthy('no projects configured', {});
  const details: Body = {};
  let healthy = true;
  const messages: string[] = [];
  for (const project of projects) {
    const v =
      scope.kind === 'network'
        ? await evaluate(host, project, membersOf(project, scope.network), strategy, probes, pollers)
        : await projectVerdict(host, project, strategy, probes, pollers);
    healthy &&= v.healthy;
    messages.push(projects.length > 1 || scope.kind === 'all' ? `${project.id}: ${v.message}` : v.message);
    const entry: Body = { status: v.healthy ? 'OK' : 'ERROR' };
    if (config.mode === 'simple') entry.message = v.message;
    else {
      const networks = scope.kind === 'network' ? [scope.network] : [...project.networks.values()];
      entry.networks = (await networkDetails(host, config, project, networks, strategy, probes, pollers)).body;
      if (config.mode === 'verbose') {
        entry.message = v.message;
        entry.config = {
          networks: project.networks.size,
          upstreams: project.upstreams.size,
          providers: ((project.config.settings.providers as unknown[] | undefined) ?? []).length,
        };
      }
    }
    details[project.id] = entry;
  }
  const message = messages.join('; ');
  if (!healthy) return unhealthy(message, details);
  return { status: 200, body: config.mode === 'simple' ? { status: 'OK', message } : { status: 'OK', message, details } };
}
