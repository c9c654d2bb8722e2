/**
 * Finality classification of the evm-state plugin: every call's
 * `FINALITY` slot (finalized, unfinalized, realtime or unknown) from its method, its block
 * parameter and the network's highest finalized block.
 * Taps: `directives` at RESOLVE − 50, before the failsafe plugin matches its entries on
 * `matchFinality` (FAILSAFE_DEFAULTS).
 */
import { type CallContext, type Directives, DirectiveStage, FINALITY, type PluginHost } from 'svc-proxy/plugin';
import { BLOCK_PARAM, classifyFinality } from 'svc-proxy/util';
import type { NetworkChainState } from './api.ts';
import { chainStateOf } from './chain.ts';

/**
 * The network's finalized block for {@link classifyFinality}: undefined until an upstream reported
 * one, then the highest (0 on a young chain that finalized only its genesis).
 */
export function knownFinalized(st: NetworkChainState): number | undefined {
  return st.finalizedKnown ? st.highestFinalized : undefined;
}

/**
 * Taps the `directives` hook to set `FINALITY` slot (the directives pass through unchanged).
 * @param host the plugin host the evm-state plugin is applied to
 */
export function tapFinality(host: PluginHost): void {
  host.hooks.directives.tap({ name: 'evm-state', stage: DirectiveStage.FINALITY }, (d: Directives, ctx: CallContext) => {
    // The finalized head (a pass over the counted upstreams) only matters for a method with a block parameter.
    const method = ctx.request.method;
    FINALITY.set(ctx, classifyFinality(method, ctx.request.params, BLOCK_PARAM[method] === undefined ? undefined : knownFinalized(chainStateOf(ctx.network))));
    return d;
  });
}
