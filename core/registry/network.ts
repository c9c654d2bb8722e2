/**
 * A network (one chain, id `evm:<chainId>`) of a project, with its serving upstreams in config
 * order. Its `call` chain is composed once when the host creates it and held by the pipeline
 * (core/chains.ts), not here (docs/architecture.md).
 */
import type { ResolvedNetwork } from '../../config/types.ts';
import type { Project } from './project.ts';
import type { Upstream } from './upstream.ts';

/** One network of a project. */
export class Network {
  /** `evm:<chainId>`. */
  readonly id: string;
  readonly chainId: number;
  /** Path alias, if configured. */
  readonly alias?: string;
  /** Upstreams that may serve, in config order (the `select` hook orders them per call). */
  readonly upstreams: Upstream[] = [];
  /**
   * The wrappers this network's chains run, outermost first, by hook (`call`, `attempt`): tap
   * names recorded when the chains were composed (core/pipeline.ts; `svc pipeline` prints them).
   */
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

  /**
   * Removes an upstream (wrong chain id, config reload).
   * @returns true when it was in this network
   */
  removeUpstream(u: Upstream): boolean {
    const i = this.upstreams.indexOf(u);
    if (i < 0) return false;
    this.upstreams.splice(i, 1);
    return true;
  }
}
