/**
 * eRPC's mirror prober (`probeExcluded({ sampleRate, minSamples, minSamplesWindow, maxConcurrent,
 * timeout })` without `reAdmitAfter`): after a client call on the network is answered, a copy goes
 * to each upstream the last evaluation left out, off the request path, through
 * `host.upstreamCall` (the upstream's own chain; the health plugin records the attempt like any
 * other). The copy's answer is dropped; what it adds to the upstream's health window is what
 * lets the policy's own `excludeIf` re-admit an upstream that healed, on a later evaluation.
 *
 * Bounds: only methods that read (an allow-list of prefixes minus writes, signatures,
 * subscriptions and filters); sampled at `sampleRate`, except while the upstream got fewer than
 * `minSamples` probes in the current fixed window; at most `maxConcurrent` in flight per upstream
 * (a slot is taken before the copy is scheduled); each bounded by `timeout`. Nothing per method is
 * remembered (method names come from clients). `svc_selection_probes_total{project,network,upstream,outcome}`
 * counts them: `ok`, `error`, `busy` (every slot of that upstream taken). An upstream with
 * `routing.probe: off` gets none (eRPC's opt-out). Under a narrower `evalScope`, a call served
 * by a scope's order is copied to what that scope's evaluation left out ({@link ExcludedProber.scope}),
 * any other call to what the network's own left out. The `index.ts` tap wraps
 * only networks whose YAML policy names `probeExcluded`, and passes a call through untouched
 * while the last evaluation asked for no probing or excluded nothing.
 */
import type { CallContext, CallHandler, Network, PluginHost, Upstream } from 'svc-proxy/plugin';
import { DeferredCounter, STATEFUL_METHODS, WRITE_METHODS } from 'svc-proxy/util';
import { SHADOW_UPSTREAM } from 'svc-proxy/plugins/shadow';
import type { ProbeSettings } from './memory.ts';

/** Method prefixes a probe may copy (reads of the chain and of the node). */
const READ_PREFIXES: readonly string[] = ['eth_', 'net_', 'web3_', 'trace_', 'debug_trace', 'txpool_'];
/** Prefixes inside those that write, sign, subscribe or broadcast. */
const NEVER_PREFIXES: readonly string[] = ['eth_send', 'eth_sign', 'eth_submit', 'eth_subscribe', 'eth_unsubscribe', 'eth_cancel', 'eth_callBundle'];

/**
 * True when a probe may copy a call of `method`: a read (eth_, net_, web3_, trace_, debug_trace,
 * txpool_), never a write, a signature, a subscription, a bundle, or a filter method.
 */
export function probeable(method: string): boolean {
  if (WRITE_METHODS.has(method) || STATEFUL_METHODS.has(method) || method.includes('Filter')) return false;
  for (const p of NEVER_PREFIXES) if (method.startsWith(p)) return false;
  for (const p of READ_PREFIXES) if (method.startsWith(p)) return true;
  return false;
}

/** True when the network's configured policy is YAML source naming `probeExcluded` (the only way to ask for probes). */
export function asksForProbes(network: Network): boolean {
  const sp = network.config.settings.selectionPolicy as { evalFunc?: unknown } | undefined;
  return typeof sp?.evalFunc === 'string' && sp.evalFunc.includes('probeExcluded');
}

/** The excluded upstreams a probe may go to: a shadow upstream gets its own copies from the shadow plugin; `routing.probe: off` opts out, as in eRPC. */
function eligible(excluded: readonly Upstream[]): Upstream[] {
  return excluded.filter((u) => !SHADOW_UPSTREAM.get(u) && !probeOff(u));
}

/** True when the upstream's `routing.probe` is `off`. */
function probeOff(u: Upstream): boolean {
  return (u.config?.settings.routing as { probe?: unknown } | undefined)?.probe === 'off';
}

/** The probe counter of a host (shared by every network). */
export function createProbeCounter(host: PluginHost): DeferredCounter {
  return new DeferredCounter(host.metrics, {
    name: 'svc_selection_probes_total',
    help: "Copies of answered client calls sent to upstreams the selection policy excluded (eRPC's probeExcluded), by outcome: ok, error, busy (not sent: the upstream's probes in flight at maxConcurrent)",
    labelNames: ['project', 'network', 'upstream', 'outcome'],
  });
}

/** What one evaluation scope tells the prober after each evaluation it commits. */
export interface ProbeSink {
  /**
   * Takes a committed evaluation's answer.
   * @param settings its `probeExcluded` options (undefined: none)
   * @param excluded the upstreams it left out
   */
  update(settings: ProbeSettings | undefined, excluded: readonly Upstream[]): void;
  /** The scope is gone: its calls get no more copies. */
  stop(): void;
}

/** The mirror prober of one network. */
export class ExcludedProber implements ProbeSink {
  private settings?: ProbeSettings;
  private targets: readonly Upstream[] = [];
  /** The narrower scopes that asked for probes and excluded an upstream, by scope id (at most the network's scopes). */
  private readonly scoped = new Map<string, { settings: ProbeSettings; targets: readonly Upstream[] }>();
  /**
   * The id of the narrower scope whose order a call got, or undefined for the network's own
   * (set by the network's scopes; read once the call is answered).
   */
  route?: (ctx: CallContext) => string | undefined;
  private stopped = false;
  private readonly inflight = new Map<string, number>();
  private readonly windows = new Map<string, { epoch: number; count: number }>();

  /**
   * @param random sample source, uniform in [0, 1)
   * @param now clock, epoch ms (the `minSamples` window)
   */
  constructor(
    private readonly host: PluginHost,
    private readonly network: Network,
    private readonly counter: DeferredCounter,
    private readonly random: () => number = Math.random,
    private readonly now: () => number = Date.now,
  ) {}

  /** True while the last evaluation of the network or of a narrower scope asked for probes and excluded an upstream. */
  get active(): boolean {
    return !this.stopped && ((this.settings !== undefined && this.targets.length > 0) || this.scoped.size > 0);
  }

  /** The network's own evaluation's answer (see {@link ProbeSink.update}). */
  update(settings: ProbeSettings | undefined, excluded: readonly Upstream[]): void {
    this.settings = settings;
    this.targets = settings ? eligible(excluded) : [];
  }

  /**
   * The sink of a narrower scope: the calls served by its order are copied to what its own
   * evaluations left out.
   * @param id the scope's id (the one {@link route} names)
   */
  scope(id: string): ProbeSink {
    return {
      update: (settings, excluded) => {
        const targets = settings && !this.stopped ? eligible(excluded) : [];
        if (settings && targets.length > 0) this.scoped.set(id, { settings, targets });
        else this.scoped.delete(id);
      },
      stop: () => this.scoped.delete(id),
    };
  }

  /** Sends nothing more (network retired, shutdown); probes in flight end at their timeout. */
  stop(): void {
    this.stopped = true;
    this.targets = [];
    this.scoped.clear();
  }

  /** Wraps the network's call handler: answered client calls are offered to the prober. */
  wrap(inner: CallHandler): CallHandler {
    return (ctx: CallContext) => {
      if (ctx.internal || !this.active) return inner(ctx);
      // Captured now: what the served call asked, after interpolation.
      const method = ctx.request.method;
      const params = ctx.request.params;
      return inner(ctx).then((r) => {
        try {
          this.offer(method, params, this.route?.(ctx));
        } catch (e) {
          this.host.logger.error({ plugin: 'selection', err: e instanceof Error ? e.stack : String(e) }, 'selection: scheduling a probe failed');
        }
        return r;
      });
    };
  }

  /**
   * Schedules one probe per excluded upstream that passes the gates (never awaited).
   * @param scope the narrower scope whose order served the call (its exclusions), or undefined for the network's
   */
  offer(method: string, params: unknown, scope?: string): void {
    const entry = scope === undefined ? { settings: this.settings, targets: this.targets } : this.scoped.get(scope);
    const cfg = entry?.settings;
    if (!entry || !cfg || this.stopped || this.host.isClosed || !probeable(method)) return;
    for (const u of entry.targets) {
      if (!this.network.upstreams.includes(u)) continue;
      const floor = cfg.minSamples > 0 && this.windowCount(u.id, cfg.minSamplesWindowMs) < cfg.minSamples;
      if (!floor && cfg.sampleRate < 1 && !(this.random() < cfg.sampleRate)) continue;
      const running = this.inflight.get(u.id) ?? 0;
      if (running >= cfg.maxConcurrent) {
        this.count(u, 'busy');
        continue;
      }
      // The slot and the window sample are taken before the copy is scheduled, so a burst cannot overshoot.
      this.inflight.set(u.id, running + 1);
      this.windowCount(u.id, cfg.minSamplesWindowMs, 1);
      setImmediate(() => void this.send(u, method, params, cfg.timeoutMs));
    }
  }

  private async send(u: Upstream, method: string, params: unknown, timeoutMs: number): Promise<void> {
    try {
      const bound = Math.min(timeoutMs, this.host.config.server.maxTimeoutMs);
      await this.host.upstreamCall(this.network, u, method, params, bound);
      this.count(u, 'ok');
    } catch (e) {
      this.count(u, 'error');
      this.host.logger.debug(
        { project: this.network.project.id, network: this.network.id, upstream: u.id, method, err: e instanceof Error ? e.message : String(e) },
        `selection probe to excluded upstream ${u.id} failed on ${method}`,
      );
    } finally {
      const left = (this.inflight.get(u.id) ?? 1) - 1;
      if (left > 0) this.inflight.set(u.id, left);
      else this.inflight.delete(u.id);
    }
  }

  /** Probes of `id` in the current fixed window (eRPC's scheme: epoch = now / window), after adding `add`. */
  private windowCount(id: string, windowMs: number, add = 0): number {
    const epoch = Math.floor(this.now() / windowMs);
    let w = this.windows.get(id);
    if (!w) this.windows.set(id, (w = { epoch, count: 0 }));
    if (w.epoch !== epoch) {
      w.epoch = epoch;
      w.count = 0;
    }
    w.count += add;
    return w.count;
  }

  private count(u: Upstream, outcome: 'ok' | 'error' | 'busy'): void {
    this.counter.inc([this.network.project.id, this.network.id, u.id, outcome]);
  }
}
