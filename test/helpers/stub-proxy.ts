/**
 * A started proxy whose upstream transports are replaced by in-process scripts, for plugin unit
 * tests that drive the real composed pipeline without sockets (used by the evm-methods and
 * evm-retries tests). The stub is the innermost `upstream` tap, so every policy and plugin
 * wrapper of the preset still runs around it.
 */
import type { CallContext, Directives } from '../../core/pipeline/context.ts';
import { ErrEndpointServerSideException, type SvcError } from '../../core/wire/errors.ts';
import { RpcResult } from '../../core/wire/jsonrpc.ts';
import { createLogger } from '../../lib/logger.ts';
import type { Plugin, Proxy } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import type { Network } from '../../core/registry/project.ts';

/** One scripted upstream: returns a result value (or an RpcResult) or throws an error. */
export type Script = (method: string, params: unknown) => unknown;

/** One request a stub received. */
export interface StubCall {
  upstream: string;
  method: string;
  params: unknown;
}

/** A plugin replacing every upstream's transport with its script (innermost `upstream` tap). */
export function stubTransport(scripts: Record<string, Script>, calls: StubCall[]): Plugin {
  return {
    name: 'test:stub-transport',
    apply(proxy: Proxy) {
      proxy.hooks.upstream.tap({ name: 'test:stub-transport', stage: -10_000 }, (_inner, u) => async (call) => {
        calls.push({ upstream: u.id, method: call.method, params: call.params });
        call.attempt.dialled = true;
        const script = scripts[u.id];
        if (!script) throw new ErrEndpointServerSideException(`no script for ${u.id}`);
        const v = await script(call.method, call.params);
        return v instanceof RpcResult ? v : new RpcResult(v);
      });
    },
  };
}

/** A running stub proxy: network `evm:31337` of project `main`, one upstream per script. */
export interface StubProxy {
  proxy: Proxy;
  net: Network;
  calls: StubCall[];
  /** Runs one call through the network's composed handler as a client call; never rejects. */
  run(method: string, params: unknown, directives?: Directives): Promise<{ ctx: CallContext; result?: RpcResult; error?: SvcError }>;
  close(): Promise<void>;
}

/**
 * Starts a stub proxy.
 * @param scripts upstream id → script, in config order
 * @param plugins the plugins under test (the stub transport is appended)
 * @param networkExtra extra keys of the network entry (e.g. `failsafe`, `evm`)
 */
export async function startStubProxy(scripts: Record<string, Script>, plugins: Plugin[], networkExtra: Record<string, unknown> = {}): Promise<StubProxy> {
  const calls: StubCall[] = [];
  const proxy = createProxy({
    config: {
      logLevel: 'error',
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 }, ...networkExtra }],
          // Nothing listens on these: the stub replaces the transport; probes fail quietly.
          upstreams: Object.keys(scripts).map((id) => ({ id, endpoint: 'http://127.0.0.1:9', evm: { chainId: 31337 } })),
        },
      ],
    },
    plugins: [...plugins, stubTransport(scripts, calls)],
    logger: createLogger('silent'),
    port: 0,
    host: '127.0.0.1',
    metricsPort: 0,
    probeBackoffMs: 600_000,
  });
  await proxy.start();
  const net = proxy.projects.get('main')!.networks.get('evm:31337')!;
  return {
    proxy,
    net,
    calls,
    async run(method, params, directives = {}) {
      const { ctx, done } = proxy.internalContext(net, method, params, 5000);
      ctx.internal = false;
      ctx.directives = directives;
      try {
        return { ctx, result: await proxy.runCall(ctx) };
      } catch (e) {
        return { ctx, error: e as SvcError };
      } finally {
        done();
      }
    },
    close: () => proxy.close(),
  };
}
