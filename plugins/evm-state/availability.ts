/**
 * Block availability of the evm-state plugin: a call reading a concrete block
 * goes to upstreams known to have it, and a block far beyond the network head answers `null`
 * without any upstream call.
 * Taps: `select` at AVAILABILITY (skip upstreams whose known head is below the block a call
 * reads, see `filterByAvailability`); `call` at FUTURE_BLOCK (the far-future `null`,
 * outside tip enforcement).
 */
import { type CallContext, type CallHandler, CallStage, type Network, type PluginHost, RpcResult, SelectStage, type Upstream } from 'svc-proxy/plugin';
import { blockRefOf, highestNumberOf } from 'svc-proxy/util';
import { chainStateOf } from './chain.ts';
import { networkEvmSettings, type NetworkEvmSettings } from './schema.ts';
import { blockNumberParamOf, filterByAvailability } from './tip.ts';

/**
 * Taps the `select` hook: candidates whose known latest block is below the highest block a call
 * reads are skipped, while at least one candidate is known to have it.
 * @param host the plugin host the evm-state plugin is applied to
 */
export function tapBlockAvailability(host: PluginHost): void {
  host.hooks.select.tap({ name: 'evm-state:availability', stage: SelectStage.AVAILABILITY }, (ups: Upstream[], ctx: CallContext) => {
    if (ups.length < 2) return ups;
    const block = highestNumberOf(blockRefOf(ctx.request.method, ctx.request.params));
    if (block === undefined) return ups;
    return filterByAvailability(ups, block, chainStateOf(ctx.network));
  });
}

/**
 * Taps the `call` hook: `eth_getBlockByNumber` for a block more than
 * `networks[].evm.maxRetryableBlockDistance` beyond the known head answers `null` at once.
 * @param host the plugin host the evm-state plugin is applied to
 */
export function tapFarFutureBlocks(host: PluginHost): void {
  const settingsByNetwork = new WeakMap<Network, NetworkEvmSettings>();
  const netSettings = (n: Network): NetworkEvmSettings => {
    let s = settingsByNetwork.get(n);
    if (!s) {
      s = networkEvmSettings(n);
      settingsByNetwork.set(n, s);
    }
    return s;
  };

  host.hooks.call.tap(
    { name: 'evm-state:future-block', stage: CallStage.FUTURE_BLOCK },
    (inner: CallHandler, network: Network): CallHandler =>
      (ctx) => {
        if (ctx.request.method !== 'eth_getBlockByNumber' || ctx.internal) return inner(ctx);
        const n = blockNumberParamOf(ctx.request.params);
        if (n === undefined) return inner(ctx);
        // The highest head, not a served majority tip: never null a block an upstream has (as eRPC).
        const head = chainStateOf(network).maxLatest;
        if (head > 0 && n > head + netSettings(network).maxRetryableBlockDistance) return Promise.resolve(new RpcResult(null));
        return inner(ctx);
      },
  );
}
