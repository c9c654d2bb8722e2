/**
 * A project (spec §1.2) and its networks (`evm:<chainId>`), in one module because each refers to the other: a project holds its networks
 * by id and alias, a network orders its upstreams by the project's config order. Chains are held by the pipeline (core/pipeline/chains.ts).
 */
import type { ResolvedNetwork, ResolvedProject } from '../../config/types.ts';
import { HealthTracker, type HealthClassifier } from '../../lib/health-window.ts';
import type { Upstream } from './upstream.ts';

/** One configured project. */
export class Project {
  readonly id: string;
  /** Networks by id (`evm:<chainId>`). */
  readonly networks = new Map<string, Network>();
  /** Networks by alias. */
  readonly aliases = new Map<string, Network>();
  /** Upstreams by id, in config order. */
  readonly upstreams = new Map<string, Upstream>();
  /** Health of this project's upstreams: rolling scores and cordons. */
  readonly health: HealthTracker;
  private readonly order = new Map<Upstream, number>();

  /**
   * @param config resolved project config; a reload (core/host/reload.ts) replaces it when networks or upstreams change (plugin keys stay)
   * @param classify what an attempt means for its upstream's health (the pipeline's charging rule, handed in so the registry needs nothing above it)
   */
  constructor(
    public config: ResolvedProject,
    classify: HealthClassifier,
  ) {
    this.id = config.id;
    const windowMs = typeof config.settings.scoreMetricsWindowSize === 'number' ? config.settings.scoreMetricsWindowSize : 600_000;
    this.health = new HealthTracker(classify, windowMs);
  }

  private nextOrder = 0;

  /**
   * Registers an upstream.
   * @param order its place in config order; default after every other (a reload passes that of the upstream it replaces)
   */
  addUpstream(u: Upstream, order?: number): void {
    this.upstreams.set(u.id, u);
    this.order.set(u, order ?? this.nextOrder++);
  }

  /** A new config order after a reload: the listed ids first, then the others (added at run time) as they were; every network re-sorted. */
  reorder(ids: readonly string[]): void {
    const first = new Map(ids.map((id, i) => [id, i]));
    const rest = [...this.upstreams.values()].filter((u) => !first.has(u.id)).sort((x, y) => this.upstreamOrder(x) - this.upstreamOrder(y));
    for (const u of this.upstreams.values()) {
      const i = first.get(u.id);
      if (i !== undefined) this.order.set(u, i);
    }
    rest.forEach((u, i) => this.order.set(u, ids.length + i));
    this.nextOrder = ids.length + rest.length;
    for (const n of this.networks.values()) n.upstreams.sort((x, y) => this.upstreamOrder(x) - this.upstreamOrder(y));
  }

  /** Unregisters an upstream (removed by a config reload); no-op when another holds its id. */
  removeUpstream(u: Upstream): void {
    if (this.upstreams.get(u.id) === u) this.upstreams.delete(u.id);
  }

  /** Position of an upstream in config order. */
  upstreamOrder(u: Upstream): number {
    return this.order.get(u) ?? Number.MAX_SAFE_INTEGER;
  }

  /** Registers a network under its id and alias. */
  addNetwork(n: Network): void {
    this.networks.set(n.id, n);
    if (n.alias) this.aliases.set(n.alias, n);
  }
}

/** One network of a project. */
export class Network {
  /** `evm:<chainId>`. */
  readonly id: string;
  readonly chainId: number;
  /** Path alias, if configured. */
  readonly alias?: string;
  /** Upstreams that may serve, in config order (the `select` hook orders them per call). */
  readonly upstreams: Upstream[] = [];
  /** Tap names of the wrappers this network's `call` and `attempt` chains run, outermost first (`svc pipeline` prints them). */
  pipeline: { readonly call: readonly string[]; readonly attempt: readonly string[] } = { call: [], attempt: [] };

  /**
   * @param project owning project
   * @param config resolved network config
   * @param declared false when created on demand for an undeclared chain
   */
  constructor(
    readonly project: Project,
    readonly config: ResolvedNetwork,
    readonly declared: boolean,
  ) {
    this.id = config.id;
    this.chainId = config.chainId;
    this.alias = config.alias;
  }

  /** Adds an upstream in config order (by its index in the project), ignoring duplicates. */
  addUpstream(u: Upstream): boolean {
    if (this.upstreams.includes(u)) return false;
    const order = this.project.upstreamOrder(u);
    const at = this.upstreams.findIndex((x) => this.project.upstreamOrder(x) > order);
    if (at < 0) this.upstreams.push(u);
    else this.upstreams.splice(at, 0, u);
    return true;
  }

  /** Removes an upstream (wrong chain id, config reload); true when it was in this network. */
  removeUpstream(u: Upstream): boolean {
    const i = this.upstreams.indexOf(u);
    if (i < 0) return false;
    this.upstreams.splice(i, 1);
    return true;
  }
}
