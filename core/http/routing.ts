/**
 * Routing (spec §4.1): which project and network a request path names, directly or through `server.aliasing.rules` on the Host; shared
 * by the HTTP server and plugin transports (the WebSocket endpoint, through the host's `resolveRoute`).
 */
import { compileGlobs } from '../../lib/glob.ts';
import { ErrInvalidRequest, ErrNetworkNotSupported, ErrProjectNotFound } from '../wire/errors.ts';
import type { Network } from '../registry/project.ts';
import type { Project } from '../registry/project.ts';

/** Where a request is routed: a project and, when the URL names one, a network. */
export interface RouteTarget {
  /** The project the path (or an aliasing rule) names. */
  project: Project;
  /** Network from the URL; undefined when the body's `networkId` must name it. */
  network?: Network;
}

/** What routing needs of the host: the projects and on-demand networks (the proxy is one). */
export interface RouteHost {
  readonly projects: ReadonlyMap<string, Project>;
  /** A network by id, asking providers when the project does not have it yet (spec §2.10). */
  getNetwork(project: Project, networkId: string, deadline?: number): Promise<Network | undefined>;
}

/**
 * Resolves the project and network named by a path (spec §4.1): a configured project id first, then `server.aliasing.rules` on the Host;
 * a numeric segment is a chain id only after aliasing.
 * @throws ErrProjectNotFound / ErrNetworkNotSupported (HTTP 404)
 */
export async function resolveTarget(proxy: RouteHost, segments: readonly string[], host: string, aliasMatchers: readonly AliasMatcher[]): Promise<RouteTarget> {
  return resolveRoute(proxy, segments, host, aliasMatchers);
}

/**
 * {@link resolveTarget} with a promise only when the `resolveNetwork` hook must be asked (not in the common case of a known network).
 * @throws ErrProjectNotFound / ErrNetworkNotSupported, synchronously or through the promise
 */
export function resolveRoute(
  proxy: RouteHost,
  segments: readonly string[],
  host: string,
  aliasMatchers: readonly AliasMatcher[],
): RouteTarget | Promise<RouteTarget> {
  let project = segments[0] !== undefined ? proxy.projects.get(segments[0]) : undefined;
  let rest: readonly string[];
  if (project) rest = segments.slice(1);
  else {
    const rule = aliasMatchers.find((m) => m.match(host));
    if (!rule) throw new ErrProjectNotFound(`project "${segments[0] ?? ''}" not found`);
    project = proxy.projects.get(rule.rule.serveProject);
    if (!project) throw new ErrProjectNotFound(`aliasing rule serves project "${rule.rule.serveProject}", which is not configured`);
    rest = segments;
    if (rule.rule.serveArchitecture) rest = rule.rule.serveChain !== undefined ? ['evm', String(rule.rule.serveChain), ...rest] : ['evm', ...rest];
  }
  if (rest.length === 0) return { project };
  if (rest.length === 2 && rest[0] === 'evm') {
    const chain = rest[1] as string;
    if (!/^\d+$/.test(chain)) throw chainNotSupported(chain, project);
    const id = `evm:${Number(chain)}`;
    const known = project.networks.get(id);
    if (known) return { project, network: known };
    const found = project;
    return proxy.getNetwork(project, id).then(
      (network) => {
        if (!network) throw chainNotSupported(chain, found);
        return { project: found, network };
      },
      (e: unknown) => {
        // A provider's reason (it ignores or does not serve the chain) gets the same list of what is served.
        throw e instanceof ErrNetworkNotSupported ? new ErrNetworkNotSupported(`${e.message}${servedNetworks(found)}`) : e;
      },
    );
  }
  if (rest.length === 1) {
    const network = project.aliases.get(rest[0] as string);
    if (network) return { project, network };
    throw new ErrNetworkNotSupported(`network alias "${rest[0]}" is not known in project ${project.id}${servedNetworks(project)}`);
  }
  throw new ErrNetworkNotSupported(`path /${segments.join('/')} names no network${servedNetworks(project)}`);
}

function chainNotSupported(chain: string, project: Project): ErrNetworkNotSupported {
  return new ErrNetworkNotSupported(`network evm:${chain} is not supported by project ${project.id}${servedNetworks(project)}`);
}

/** Most network paths a 404 lists (a project may serve hundreds of chains). */
const MAX_LISTED_NETWORKS = 10;

/**
 * What a project serves, for a 404 on a network it does not (spec §4.1): `; served: /main/evm/1, /main/eth, …`, the first
 * {@link MAX_LISTED_NETWORKS} paths, or why there is none yet (zero-config networks appear once an upstream's chain id is known).
 */
export function servedNetworks(project: Project): string {
  const paths: string[] = [];
  let more = 0;
  for (const n of project.networks.values()) {
    if (paths.length >= MAX_LISTED_NETWORKS) {
      more++;
      continue;
    }
    paths.push(`/${project.id}/${n.id.replace(':', '/')}${n.alias ? ` (/${project.id}/${n.alias})` : ''}`);
  }
  if (paths.length === 0) return '; it serves no network yet (its upstreams are still being asked for their chain id, or none answered)';
  return `; served: ${paths.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** A compiled aliasing rule. */
export interface AliasMatcher {
  rule: { serveProject: string; serveArchitecture?: 'evm'; serveChain?: string | number };
  match: (host: string) => boolean;
}

/** Normalises a body `networkId` (`evm:<chainId>`, hex or decimal chain) to `evm:<decimal>`. */
export function normaliseNetworkId(id: string): string | undefined {
  const m = /^evm:(0x[0-9a-fA-F]+|\d+)$/.exec(id.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? `evm:${n}` : undefined;
}

/** The non-empty, percent-decoded segments of a request path. @throws ErrInvalidRequest on a malformed percent-encoding */
export function pathSegments(path: string): string[] {
  const out: string[] = [];
  try {
    for (const s of path.split('/')) if (s !== '') out.push(decodeURIComponent(s));
  } catch {
    throw new ErrInvalidRequest(`invalid percent-encoding in path ${path}`);
  }
  return out;
}

/** The server's aliasing rules compiled for matching (`server.aliasing.rules`, case-insensitive globs on the Host). */
export function compileAliasMatchers(rules: ReadonlyArray<AliasMatcher['rule'] & { matchDomain: string | string[] }>): AliasMatcher[] {
  return rules.map((rule) => ({ rule, match: compileGlobs(Array.isArray(rule.matchDomain) ? rule.matchDomain : [rule.matchDomain], { nocase: true }) }));
}
