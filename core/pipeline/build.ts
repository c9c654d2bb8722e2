/**
 * Building the registry (docs/architecture.md "Layers"): each network's and upstream's chains are composed once, when it is
 * created. The host decides when (start, reload, a provider adding an upstream); this module decides how.
 */
import type { Pool } from 'undici';
import type { TObject } from '@sinclair/typebox';
import { resolveNetwork, resolveUpstream } from '../../config/load.ts';
import type { ResolvedNetwork, ResolvedProject, UpstreamInput } from '../../config/types.ts';
import { ErrUpstreamsExhausted } from '../wire/errors.ts';
import { Network, Project } from '../registry/project.ts';
import { Upstream, type UpstreamPoolOptions } from '../registry/upstream.ts';
import { healthOutcome } from './blame.ts';
import { installCallChain, installSender } from './chains.ts';
import { UpstreamCursor, type AttemptHandler, type CallHandler, type ProxyHooks, type UpstreamCall } from './hooks.ts';
import { composeRecorded } from './pipeline.ts';
import { callFailure } from './sweep.ts';

/** The attempt handler before any plugin wraps it: the `forward` plugin replaces it with the sweep. */
const noForward: AttemptHandler = () => Promise.reject(new ErrUpstreamsExhausted([], 'no forwarding plugin is applied (add forwardPlugin() to the preset)'));

/** Builds projects, networks and upstreams into a registry, composing their chains. */
export class RegistryBuilder {
  /**
   * @param schema the config schema (on-demand networks resolve from `networkDefaults` with it)
   * @param projects the registry, filled by {@link buildProject}; `pools`: one keep-alive pool per upstream origin
   */
  constructor(
    private readonly hooks: ProxyHooks,
    private readonly schema: TObject,
    private readonly projects: Map<string, Project>,
    private readonly pools: Map<string, Pool>,
  ) {}

  /** Builds a project with its declared networks and its upstreams (not yet probed). */
  buildProject(pc: ResolvedProject): Project {
    const project = new Project(pc, healthOutcome);
    this.projects.set(project.id, project);
    for (const nc of pc.networks) this.createNetwork(project, nc, true);
    for (const uc of pc.upstreams) this.addUpstream(project, new Upstream(uc, project.id, this.upstreamOptions()));
    return project;
  }

  /** What every upstream is built with: the shared pools by origin, the `upstreamDispatcher`, `upstreamFault` and `upstreamTransport` hooks. */
  upstreamOptions(): UpstreamPoolOptions {
    const { upstreamFault: faults, upstreamDispatcher: out, upstreamTransport: transports } = this.hooks;
    return {
      shared: this.pools,
      dispatcher: out.isUsed() ? (u, pool) => out.call(u, pool) : undefined,
      classifyFault: faults.isUsed() ? (f, opts) => faults.call(f, opts) : undefined,
      transportFor: (u) => transports.call(u),
    };
  }

  /**
   * An upstream from a raw entry (providers, CLI endpoints), resolved against `upstreamDefaults` and registered.
   * @throws Error when the project has an upstream of that id
   */
  upstreamFromConfig(project: Project, entry: UpstreamInput): Upstream {
    if (entry.id !== undefined && project.upstreams.has(entry.id)) throw new Error(`project ${project.id} already has an upstream "${entry.id}"`);
    const resolved = resolveUpstream(this.schema, project.config.upstreamDefaults, entry, new Set(project.upstreams.keys()));
    const u = new Upstream(resolved, project.id, this.upstreamOptions());
    this.addUpstream(project, u);
    return u;
  }

  /**
   * Registers an upstream: composes its chain and, with a configured chain id, joins that network at once (serving while probed).
   * @param order its place in the project's config order (a reload keeps a replaced upstream's)
   */
  addUpstream(project: Project, u: Upstream, order?: number): void {
    project.addUpstream(u, order);
    const sender = composeRecorded(this.hooks.upstream, (call: UpstreamCall) => u.dial(call), u);
    installSender(u, sender.handler);
    u.pipeline = sender.wrappers;
    if (u.config.chainId !== undefined) this.join(project, u, u.config.chainId);
  }

  /** Joins an upstream to the network of a chain (created on demand). */
  join(project: Project, u: Upstream, chainId: number): void {
    const network = this.ensureNetwork(project, chainId);
    if (network.addUpstream(u)) this.hooks.upstreamJoined.call(u, network);
  }

  /** The network for a chain id, created on demand from `networkDefaults` when undeclared. */
  ensureNetwork(project: Project, chainId: number): Network {
    const existing = project.networks.get(`evm:${chainId}`);
    if (existing) return existing;
    const nc = resolveNetwork(this.schema, project.config.networkDefaults, { architecture: 'evm', evm: { chainId } });
    return this.createNetwork(project, nc, false);
  }

  /** Builds a network and composes its chains once (docs/architecture.md). */
  createNetwork(project: Project, nc: ResolvedNetwork, declared: boolean): Network {
    const network = new Network(project, nc, declared);
    const attempts = composeRecorded(this.hooks.attempt, noForward, network);
    const attempt = attempts.handler;
    const hooks = this.hooks;
    const inner: CallHandler = async (ctx) => {
      const candidates = hooks.select.call(network.upstreams.slice(), ctx);
      if (candidates.length === 0) throw new ErrUpstreamsExhausted([], `no upstream of ${network.id} can serve ${ctx.request.method}`);
      ctx.record.networkAttempts++;
      return attempt(ctx, { cursor: new UpstreamCursor(candidates), reason: 'primary', signal: ctx.signal });
    };
    const calls = composeRecorded(this.hooks.call, inner, network);
    const chain = calls.handler;
    network.pipeline = { call: calls.wrappers, attempt: attempts.wrappers };
    // A call that reached its deadline is a timeout, whatever path failed it (spec §4.7 #2).
    installCallChain(network, async (ctx) => {
      try {
        return await chain(ctx);
      } catch (e) {
        throw callFailure(ctx.signal, e);
      }
    });
    project.addNetwork(network);
    this.hooks.network.call(network);
    return network;
  }
}
