/**
 * evm-getlogs plugin (spec §2.8 #8): getLogs limits and splitting.
 * Taps: `call` at `CallStage.GETLOGS`, below interpolation (fresh `latest`/`finalized` tags are
 * numbers by then). It rejects a filter over the network's range limit (and, for `eth_getLogs`,
 * its address/topic limits) before anything is forwarded (-32012, HTTP 200). For `eth_getLogs`,
 * `trace_filter` and `arbtrace_filter` it cuts a range wider than the upstreams' proactive threshold into chunks, and
 * when the upstreams refuse a range as too large (`ErrEndpointRequestTooLarge`) it halves the
 * range; the parts run through the rest of the chain with bounded concurrency and are merged in
 * block order. Config keys live under `networks[].evm` and `upstreams[].evm`.
 *
 * Layout: `limits.ts` (settings, filter inspection, limit checks), `split.ts` (refusal
 * detection, halving, split executor), this file (config schema fragment, plugin factory,
 * re-exports).
 */
import { Type } from '@sinclair/typebox';
import { Counter } from 'prom-client';
import { type CallContext, type CallHandler, CallStage, type Network, definePlugin, type Plugin, type PluginHost, type RpcResult } from 'svc-proxy/plugin';
import { declareDirectives, Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import {
  autoSplitThresholdOf,
  checkGetLogsLimits,
  DEFAULT_MAX_ALLOWED_RANGE,
  DEFAULT_SPLIT_CONCURRENCY,
  GETLOGS_METHODS,
  getLogsSettingsOf,
  isFilter,
  resolveFilterRange,
  splitSettingsOf,
  TRACE_METHODS,
} from './limits.ts';
import { isRequestTooLarge, runProactiveSplit, splitGetLogs } from './split.ts';

export {
  autoSplitThresholdOf,
  checkGetLogsLimits,
  countAddresses,
  countTopics,
  DEFAULT_MAX_ALLOWED_RANGE,
  DEFAULT_SPLIT_CONCURRENCY,
  GETLOGS_METHODS,
  getLogsSettingsOf,
  resolveFilterRange,
  type FilterRange,
  type GetLogsSettings,
  type LogsFilter,
} from './limits.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';
export {
  chunkJob,
  isRequestTooLarge,
  jobFilter,
  runProactiveSplit,
  splitGetLogs,
  splitJob,
  type JobSplit,
  type LogsJob,
  type SplitDimension,
  type SplitOptions,
} from './split.ts';

// ---------------------------------------------------------------------------------------
// Config

/** The plugin's keys under `networks[].evm` (and `networkDefaults.evm`). */
const networkEvmSchema = {
  getLogsMaxAllowedRange: Type.Integer({
    minimum: 0,
    default: DEFAULT_MAX_ALLOWED_RANGE,
    description:
      'largest eth_getLogs/trace_filter/arbtrace_filter block range (toBlock - fromBlock + 1, in blocks) accepted; larger is rejected with -32012 before forwarding (spec §2.8 #8); 0 = unlimited',
  }),
  getLogsMaxAllowedAddresses: Type.Integer({
    minimum: 0,
    default: 0,
    description: 'most entries in an eth_getLogs `address` list; more is rejected with -32012; 0 = unlimited',
  }),
  getLogsMaxAllowedTopics: Type.Integer({
    minimum: 0,
    default: 0,
    description:
      'most topic values in an eth_getLogs `topics` filter, summed over all positions (an OR-list counts each entry, null wildcards count 0); more is rejected with -32012; 0 = unlimited',
  }),
  getLogsSplitOnError: Type.Boolean({
    default: true,
    description: 'when the upstreams refuse a range as too large, halve it and merge the parts in block order',
  }),
  getLogsSplitConcurrency: Type.Integer({
    minimum: 1,
    default: DEFAULT_SPLIT_CONCURRENCY,
    description: 'split sub-requests of one call in flight at once',
  }),
  traceFilterSplitOnError: Type.Boolean({
    default: true,
    description:
      "when the upstreams refuse a trace_filter/arbtrace_filter range as too large, halve it and join the parts in block order (eRPC's key; it defaults to off there)",
  }),
  traceFilterSplitConcurrency: Type.Integer({
    minimum: 1,
    default: DEFAULT_SPLIT_CONCURRENCY,
    description: 'trace_filter/arbtrace_filter split sub-requests of one call in flight at once',
  }),
};

/** The plugin's keys under `upstreams[].evm` (and `upstreamDefaults.evm`). */
const upstreamEvmSchema = {
  getLogsAutoSplittingRangeThreshold: Type.Integer({
    minimum: 0,
    default: 0,
    description:
      "blocks: an eth_getLogs range wider than this is split before forwarding into consecutive chunks of this many blocks, run with getLogsSplitConcurrency in flight and merged in block order (eRPC's proactive split). The network uses the smallest value above 0 among its upstreams, capped by getLogsMaxAllowedRange; 0 = no proactive split",
  }),
  traceFilterAutoSplittingRangeThreshold: Type.Integer({
    minimum: 0,
    default: 0,
    description:
      'blocks: a trace_filter/arbtrace_filter range wider than this (without after/count paging) is split before forwarding into consecutive chunks of this many blocks, run with traceFilterSplitConcurrency in flight and joined in block order. The network uses the smallest value above 0 among its upstreams, capped by getLogsMaxAllowedRange; 0 = no proactive split',
  }),
};

/** Most chunks of one proactive split; a wider range (only without a range limit) is not split ahead. */
export const MAX_PROACTIVE_CHUNKS = 10_000;

// ---------------------------------------------------------------------------------------
// Plugin

/**
 * Directive `enforce-getlogs-range` (spec §2.8 #8): reject over-range getLogs before forwarding.
 * Only `directiveDefaults` sets it: the directives plugin ignores a request's own.
 */
export const ENFORCE_GETLOGS_RANGE = new Directive<boolean>({
  field: 'enforceGetLogsBlockRange',
  query: 'enforce-getlogs-range',
  header: 'X-SVC-Enforce-GetLogs-Range',
  type: 'bool',
  fromRequest: false,
  fallback: true,
  spec: '#8',
  description: 'reject over-range getLogs before forwarding (default true); only config changes it',
});

/**
 * Creates the getLogs limits and splitting plugin (name `evm-getlogs`).
 *
 * For `eth_getLogs`, `trace_filter` and `arbtrace_filter` calls whose param 0 is a filter
 * without `blockHash` (a `blockHash` filter bypasses everything; the trace methods use the
 * `traceFilter*` keys and are never split with `after`/`count` paging):
 * 1. resolves the range ({@link resolveFilterRange}) and rejects it before forwarding when it
 *    breaks a limit ({@link checkGetLogsLimits}); the range check runs unless the
 *    `enforce-getlogs-range` directive ({@link ENFORCE_GETLOGS_RANGE}, declared here) is false,
 *    which only `directiveDefaults` can set (a request's own is ignored, spec §2.8 #8);
 * 2. with a resolved range wider than the network's proactive threshold
 *    ({@link autoSplitThresholdOf}: the smallest `upstreams[].evm.getLogsAutoSplittingRangeThreshold`
 *    above 0, capped by `getLogsMaxAllowedRange`; for the trace methods the smallest
 *    `traceFilterAutoSplittingRangeThreshold`, capped the same way), runs it as consecutive chunks of that many
 *    blocks ({@link runProactiveSplit}), `toBlock` clamped to the known head as below; chunks
 *    still refused as too large are halved when `getLogsSplitOnError` (`traceFilterSplitOnError`) is on;
 * 3. otherwise forwards it unchanged;
 * 4. when `getLogsSplitOnError` (`traceFilterSplitOnError`) is on, the range is splittable (no
 *    `earliest`/`safe`/`pending`, no trace `after`/`count` paging) and the answer is a too-large refusal, runs it
 *    split ({@link splitGetLogs}). A `toBlock` above the network's highest known latest block
 *    is clamped to it for the split (no logs exist above it yet, and nodes answer a range wholly
 *    above their head with an error); a range starting above it is not split.
 *
 * Registers the counter `svc_network_getlogs_splits_total{project,network,method,dimension}`.
 */
export function evmGetLogsPlugin(): Plugin {
  return definePlugin({
    name: 'evm-getlogs',
    schema: { networkEvm: networkEvmSchema, upstreamEvm: upstreamEvmSchema, directiveDefaults: directiveDefaultsSchema(ENFORCE_GETLOGS_RANGE) },
    apply(host: PluginHost) {
      declareDirectives(host, 'evm-getlogs', ENFORCE_GETLOGS_RANGE);
      const splits = new Counter({
        name: 'svc_network_getlogs_splits_total',
        help: 'eth_getLogs/trace_filter requests split: halved after an upstream refused them as too large (dimension block_range, addresses, topics0) or cut into chunks before forwarding (dimension proactive)',
        labelNames: ['project', 'network', 'method', 'dimension'],
        registers: [host.metrics],
      });
      host.hooks.call.tap({ name: 'evm-getlogs', stage: CallStage.GETLOGS }, (inner: CallHandler, network: Network): CallHandler => {
        const settings = getLogsSettingsOf(network);
        const limited = async (ctx: CallContext, method: string): Promise<RpcResult> => {
          const params = ctx.request.params;
          const filter: unknown = Array.isArray(params) ? params[0] : undefined;
          if (!isFilter(filter) || (filter.blockHash !== undefined && filter.blockHash !== null)) return inner(ctx);
          const state = networkChainState(host, network);
          const range = resolveFilterRange(method, filter, { latest: state.highestLatest, finalized: state.highestFinalized });
          const rejected = checkGetLogsLimits(method, filter, range, settings, ENFORCE_GETLOGS_RANGE.get(ctx.directives));
          if (rejected) throw rejected;
          const trace = TRACE_METHODS.has(method);
          const paged = trace && (filter.after !== undefined || filter.count !== undefined);
          const split = splitSettingsOf(method, settings);
          if (!paged && range.splittable && range.from !== undefined && range.to !== undefined && range.from <= range.to) {
            const threshold = trace
              ? autoSplitThresholdOf(network.upstreams, settings.maxAllowedRange, 'traceFilterAutoSplittingRangeThreshold')
              : autoSplitThresholdOf(network.upstreams, settings.maxAllowedRange, 'getLogsAutoSplittingRangeThreshold');
            // Chunks are never asked above the highest known block (see the reactive split).
            const head = state.highestLatest;
            const to = head > 0 && range.to > head ? head : range.to;
            // A range needing more than MAX_PROACTIVE_CHUNKS chunks (only without a range limit) is
            // sent whole: an upstream refusal still halves it, and svc builds no unbounded plan.
            if (threshold > 0 && range.from <= to && to - range.from + 1 > threshold && (to - range.from + 1) / threshold <= MAX_PROACTIVE_CHUNKS) {
              splits.inc({ project: ctx.project.id, network: network.id, method, dimension: 'proactive' });
              return runProactiveSplit(ctx, inner, { from: range.from, to, filter }, threshold, split.splitOnError, {
                concurrency: split.concurrency,
                onSplit: (dimension) => splits.inc({ project: ctx.project.id, network: network.id, method, dimension }),
              });
            }
          }
          try {
            return await inner(ctx);
          } catch (e) {
            if (!split.splitOnError || paged || !range.splittable || range.from === undefined || range.to === undefined || range.from > range.to) throw e;
            if (ctx.signal.aborted || !isRequestTooLarge(e)) throw e;
            // Parts are never asked above the highest known block: no logs exist there yet, and
            // nodes answer a range wholly above their head with an error, not `[]`.
            const head = networkChainState(host, network).highestLatest;
            let to = range.to;
            if (head > 0 && to > head) {
              if (range.from > head) throw e;
              to = head;
            }
            return splitGetLogs(ctx, inner, { from: range.from, to, filter }, e, {
              concurrency: split.concurrency,
              onSplit: (dimension) => splits.inc({ project: ctx.project.id, network: network.id, method, dimension }),
            });
          }
        };
        // Other methods pass straight through, without an extra promise layer.
        return (ctx: CallContext) => {
          const method = ctx.request.method;
          return GETLOGS_METHODS.has(method) ? limited(ctx, method) : inner(ctx);
        };
      });
    },
  });
}
