/**
 * The composed `call` and `upstream` chains, held here by object rather than on the registry objects: the registry stays plain
 * data, and a reader (or profiler) follows a call from {@link runCall} to {@link sendUpstream} through named functions.
 */
import { ErrInternal } from '../wire/errors.ts';
import type { CallContext } from './context.ts';
import type { CallHandler, UpstreamCall, UpstreamSender } from './hooks.ts';
import type { RpcResult } from '../wire/jsonrpc.ts';
import type { Network } from '../registry/project.ts';
import type { Upstream } from '../registry/upstream.ts';

const callChains = new WeakMap<Network, CallHandler>();
const senders = new WeakMap<Upstream, UpstreamSender>();

/** Installs a network's composed `call` chain (once, when the host creates the network). */
export function installCallChain(network: Network, chain: CallHandler): void {
  callChains.set(network, chain);
}

/**
 * Runs a call (client, internal, or a plugin's `host.serveCall`) through its network's `call` chain; rejects with a {@link SvcError}.
 * @throws ErrInternal (rejected) when the network's chain was never composed (a network not made by the host)
 */
export function runCall(ctx: CallContext): Promise<RpcResult> {
  const chain = callChains.get(ctx.network);
  if (!chain) return Promise.reject(new ErrInternal(`network ${ctx.network.id} has no call chain (networks are created by the host)`));
  return chain(ctx);
}

/** Installs an upstream's composed `upstream` chain (once, when the host registers the upstream). */
export function installSender(upstream: Upstream, sender: UpstreamSender): void {
  senders.set(upstream, sender);
}

/** Sends one request through an upstream's `upstream` chain (dialled directly if never registered); rejects with a {@link SvcError}. */
export function sendUpstream(upstream: Upstream, call: UpstreamCall): Promise<RpcResult> {
  const send = senders.get(upstream);
  return send ? send(call) : upstream.dial(call);
}
