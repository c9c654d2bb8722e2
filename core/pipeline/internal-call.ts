/** Calls svc makes itself (state polls, healthchecks, subscription followers), marked `internal` so no plugin counts them as a client's. */
import { newExecutionRecord, type CallContext, type HttpRequestInfo } from './context.ts';
import type { ProxyHooks } from './hooks.ts';
import type { RpcResult } from '../wire/jsonrpc.ts';
import type { Network } from '../registry/project.ts';
import { DeadlineReason, type Upstream } from '../registry/upstream.ts';
import { tryUpstream } from './sweep.ts';

/** The HTTP view of an internal call: no client, no headers. */
const INTERNAL_HTTP: HttpRequestInfo = Object.freeze({
  headers: {},
  query: {},
  remoteAddress: '127.0.0.1',
  clientAddress: '127.0.0.1',
  host: 'internal',
  path: '',
}) as HttpRequestInfo;

/** A call context for internal traffic, with a deadline of `timeoutMs` (ms); call `done` when the call ended (clears the timer). */
export function internalContext(network: Network, method: string, params: unknown, timeoutMs: number): { ctx: CallContext; done: () => void } {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new DeadlineReason()), timeoutMs);
  const ctx: CallContext = {
    project: network.project,
    network,
    request: { idRaw: '1', method, params },
    directives: {},
    http: { ...INTERNAL_HTTP, headers: {}, query: {} },
    signal: ac.signal,
    deadline: Date.now() + timeoutMs,
    record: newExecutionRecord(method),
    internal: true,
    state: new Map(),
  };
  return { ctx, done: () => clearTimeout(timer) };
}

/** Sends one internal call through one upstream's own chain (never swept or hedged). @throws SvcError the normalised upstream error */
export async function upstreamCall(hooks: ProxyHooks, network: Network, u: Upstream, method: string, params: unknown, timeoutMs: number): Promise<RpcResult> {
  const { ctx, done } = internalContext(network, method, params, timeoutMs);
  try {
    return await tryUpstream(hooks, ctx, u, 'primary', ctx.signal);
  } finally {
    done();
  }
}
