/**
 * The request pipeline as data (a test keeps it equal to docs/architecture.md). {@link composeRecorded} remembers which taps
 * actually wrapped, so `svc pipeline` prints what a config and preset really run, not every registered tap.
 */
import type { Hook } from 'tapable';

/** One stage of a call, in run order. */
export interface PipelineStage {
  /** The stage's name in docs/architecture.md. */
  name: string;
  /** The hook that carries it (`-` for core's own step). */
  hook: string;
  /** What it does, in a few words. */
  does: string;
  /** How a failure leaves the stage (the error and HTTP status a client sees). */
  exit: string;
}

/** Every stage of one call, outermost first (the order of docs/architecture.md "Request lifecycle"). */
export const PIPELINE: readonly PipelineStage[] = Object.freeze([
  {
    name: 'read',
    hook: '-',
    does: 'HTTP body read (size-capped, decompressed) and JSON-RPC parsed; a batch fans out per element',
    exit: 'parse error -32700 / invalid request -32600, HTTP 400 or 413',
  },
  {
    name: 'route',
    hook: 'resolveNetwork',
    does: 'project and network from the path (providers may create the network)',
    exit: 'ErrNetworkNotSupported / unknown project, HTTP 404',
  },
  { name: 'authenticate', hook: 'authenticate', does: "the project's auth strategies name the caller", exit: 'ErrAuthUnauthorized, HTTP 401' },
  {
    name: 'directives',
    hook: 'directives',
    does: 'request directives resolved (defaults, header, query) and filtered by the caller',
    exit: 'invalid directive value, -32602',
  },
  {
    name: 'call',
    hook: 'call',
    does: 'network wrappers, outside in: budgets, tracing, local answers, multiplexing, cache, tip rules, interpolation, getLogs splitting',
    exit: "the wrapper's own error (a rate limit 429, a cached error); anything else goes on",
  },
  {
    name: 'select',
    hook: 'select',
    does: 'candidate upstreams: policy order, method support, use-upstream, block availability',
    exit: 'ErrUpstreamsExhausted (no candidate)',
  },
  {
    name: 'attempt',
    hook: 'attempt',
    does: 'network failsafe, outside in: timeout, consensus, retry, hedge, then the sweep over candidates',
    exit: 'ErrEndpointRequestTimeout / ErrUpstreamsExhausted / consensus errors',
  },
  {
    name: 'upstream',
    hook: 'upstream',
    does: 'per-upstream wrappers, outside in: integrity, retry, circuit breaker, timeout, rate limit, tracing, batching, then the transport',
    exit: 'a per-upstream fault: the attempt moves to the next upstream',
  },
  {
    name: 'fault',
    hook: 'upstreamFault',
    does: "an upstream's error answer named once, where the transport reads it, from its HTTP status, JSON-RPC code and message",
    exit: 'the named error: an upstream fault moves the attempt on, a fact about the request fails the call with its code',
  },
  {
    name: 'validate',
    hook: 'validate',
    does: 'an answer is checked (tip, null or empty answers, chain) before it is served or cached',
    exit: 'a retryable upstream fault: the attempt moves on',
  },
  {
    name: 'respond',
    hook: 'responseHeaders',
    does: 'diagnostic headers written, the answer (or batch) sent; attemptDone and callDone observers',
    exit: 'none (observers never fail a call)',
  },
]);

/** A tapable hook whose taps can be listed (tapable keeps them in run order). */
interface TapList {
  taps: ReadonlyArray<{ name: string; fn: (...args: never[]) => unknown }>;
}

/**
 * Composes a wrapper chain as `SyncWaterfallHook.call` does, recording the taps that returned another handler.
 * @param hook `call`, `attempt` or `upstream`; it must carry no interceptor
 * @param rest the hook's other arguments (the network or the upstream)
 * @returns the composed handler and the names of the taps that wrapped, outermost first
 */
export function composeRecorded<H, R extends unknown[]>(hook: Hook<[H, ...R], H>, base: H, ...rest: R): { handler: H; wrappers: string[] } {
  let h = base;
  const wrappers: string[] = [];
  for (const tap of (hook as unknown as TapList).taps) {
    const next = (tap.fn as (h: H, ...r: R) => H | undefined)(h, ...rest);
    if (next !== undefined && next !== h) {
      wrappers.unshift(tap.name);
      h = next;
    }
  }
  return { handler: h, wrappers };
}

/** Names of a tapable hook's taps in the order they run. */
export function tapNames(hook: object): string[] {
  return (hook as unknown as TapList).taps.map((t) => t.name);
}

/** What {@link renderPipeline} reads: the hooks and the built projects. */
export interface PipelineSource {
  readonly hooks: Readonly<Record<'resolveNetwork' | 'authenticate' | 'directives' | 'select' | 'upstreamFault' | 'validate' | 'responseHeaders', object>>;
  readonly projects: ReadonlyMap<
    string,
    {
      readonly id: string;
      readonly networks: ReadonlyMap<
        string,
        {
          readonly id: string;
          readonly upstreams: ReadonlyArray<{ readonly id: string; readonly pipeline: readonly string[] }>;
          readonly pipeline: { readonly call: readonly string[]; readonly attempt: readonly string[] };
        }
      >;
    }
  >;
}

/**
 * Each network's pipeline as text (`svc pipeline`): every {@link PIPELINE} stage with its taps, wrapper chains as composed
 * (outermost first, `>` between), other hooks' taps in run order (`,` between). One block per network; empty if none matches.
 * @param networkId only this network (`evm:<chainId>`), in every project that has it
 */
export function renderPipeline(src: PipelineSource, networkId?: string): string {
  const h = src.hooks;
  const list = (names: readonly string[], sep: string) => (names.length ? names.join(sep) : '(none)');
  const out: string[] = [];
  for (const project of src.projects.values()) {
    for (const network of project.networks.values()) {
      if (networkId !== undefined && network.id !== networkId) continue;
      out.push(`project ${project.id}, network ${network.id}`);
      // A continuation row (another upstream of the same stage) has no number and no name.
      const row = (i: number | undefined, name: string, taps: string) =>
        out.push(`  ${i === undefined ? '  ' : String(i + 1).padStart(2)} ${name.padEnd(13)} ${taps}`);
      PIPELINE.forEach((stage, i) => {
        switch (stage.name) {
          case 'call':
            return row(i, stage.name, list(network.pipeline.call, ' > '));
          case 'attempt':
            return row(i, stage.name, list(network.pipeline.attempt, ' > '));
          case 'upstream':
            if (network.upstreams.length === 0) return row(i, stage.name, '(no upstream yet)');
            return network.upstreams.forEach((u, k) => row(k === 0 ? i : undefined, k === 0 ? stage.name : '', `${u.id}: ${list(u.pipeline, ' > ')}`));
          case 'read':
            return row(i, stage.name, '(core)');
          default:
            return row(i, stage.name, list(tapNames(h[stage.hook as keyof PipelineSource['hooks']]), ', '));
        }
      });
      out.push('');
    }
  }
  return out.join('\n');
}
