/**
 * Config of the evm-state plugin: the keys it owns
 * (`upstreams[].evm.statePollerInterval`, `networks[].evm.fallbackFinalityDepth`,
 * `networks[].evm.maxRetryableBlockDistance`), their defaults and the readers that resolve them
 * for one network or one upstream's poller. No hooks here.
 */
import { Type } from '@sinclair/typebox';
import { Duration, type Network, type SchemaFragment, type Upstream } from 'svc-proxy/plugin';
import { Directive, directiveDefaultsSchema } from 'svc-proxy/plugins/directives';
import { blockAvailabilitySchema } from './block-availability.ts';
import { normalizeBlockAvailability, normalizePollerDebounce } from './erpc.ts';
import { normalizeServedTip, servedTipSchema } from './served-tip.ts';
import { safeBlockSourceSchema } from './safe-source.ts';
import type { PollerSettings } from './poller.ts';

/** Upper bound of one poll request, ms: the timeout is min(interval, this). */
export const MAX_POLL_TIMEOUT_MS = 10_000;

/** Default `upstreams[].evm.statePollerInterval`, ms. */
export const DEFAULT_STATE_POLLER_INTERVAL_MS = 30_000;
/** Default `networks[].evm.fallbackFinalityDepth`, blocks. */
export const DEFAULT_FALLBACK_FINALITY_DEPTH = 1024;
/** Default `networks[].evm.maxRetryableBlockDistance`, blocks. */
export const DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE = 128;

/** Directive `enforce-highest-block` (spec §2.8 #7): re-route tagged block answers behind the known head. */
export const ENFORCE_HIGHEST_BLOCK = new Directive<boolean>({
  field: 'enforceHighestBlock',
  query: 'enforce-highest-block',
  header: 'X-SVC-Enforce-Highest-Block',
  type: 'bool',
  fallback: true,
  spec: '#7',
  description: 're-route tagged block answers behind the known head (default true)',
});

/** Directive `enforce-non-null-tagged-blocks` (spec §2.8 #9): a null tagged block is an error. */
export const ENFORCE_NON_NULL_TAGGED_BLOCKS = new Directive<boolean>({
  field: 'enforceNonNullTaggedBlocks',
  query: 'enforce-non-null-tagged-blocks',
  header: 'X-SVC-Enforce-Non-Null-Tagged-Blocks',
  type: 'bool',
  fallback: true,
  spec: '#9',
  description: 'a null tagged block is an error (default true)',
});

/**
 * The config keys this plugin owns: `upstreams[].evm.statePollerInterval` and
 * `upstreams[].evm.blockAvailability` (also under `upstreamDefaults.evm`; eRPC's deprecated
 * `nodeType` / `maxAvailableRecentBlocks` are rewritten into it at load time, erpc.ts) and `networks[].evm.fallbackFinalityDepth` /
 * `networks[].evm.maxRetryableBlockDistance` / `networks[].evm.safeBlockSource` (also under
 * `networkDefaults.evm`; eRPC's `fallbackStatePollerDebounce` is accepted there and removed with a
 * rewrite line saying why it changes nothing, erpc.ts), and the
 * `directiveDefaults` of its two directives.
 */
export const evmStateSchema: SchemaFragment = {
  directiveDefaults: directiveDefaultsSchema(ENFORCE_HIGHEST_BLOCK, ENFORCE_NON_NULL_TAGGED_BLOCKS),
  upstreamEvm: {
    statePollerInterval: Duration({
      default: '30s',
      description:
        'how often the state poller reads latest/finalized blocks and eth_syncing from this upstream, through its own failsafe chain; 0 disables the poller for this upstream (its head is then only learnt from answers)',
    }),
    blockAvailability: blockAvailabilitySchema,
  },
  normalize: (doc, out) => {
    normalizeBlockAvailability(doc, out);
    normalizeServedTip(doc, out);
    normalizePollerDebounce(doc, out);
  },
  networkEvm: {
    servedTip: Type.Optional(servedTipSchema),
    safeBlockSource: safeBlockSourceSchema,
    fallbackFinalityDepth: Type.Integer({
      minimum: 0,
      default: DEFAULT_FALLBACK_FINALITY_DEPTH,
      description: 'blocks: an upstream without a usable `finalized` tag is taken as finalized at latest minus this (floored at 0)',
    }),
    maxRetryableBlockDistance: Type.Integer({
      minimum: 0,
      default: DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE,
      description: 'blocks: eth_getBlockByNumber for a block more than this beyond the highest known head answers null without an upstream call',
    }),
  },
};

/** A network's resolved `evm` settings read by this plugin. */
export interface NetworkEvmSettings {
  /** `fallbackFinalityDepth`, blocks (default 1024). */
  fallbackFinalityDepth: number;
  /** `maxRetryableBlockDistance`, blocks (default 128). */
  maxRetryableBlockDistance: number;
}

function intSetting(obj: unknown, key: string, def: number): number {
  if (obj === null || typeof obj !== 'object') return def;
  const v = (obj as Record<string, unknown>)[key];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : def;
}

/** Reads `networks[].evm.{fallbackFinalityDepth,maxRetryableBlockDistance}` with their defaults. */
export function networkEvmSettings(network: Network): NetworkEvmSettings {
  const evm = network.config.settings.evm;
  return {
    fallbackFinalityDepth: intSetting(evm, 'fallbackFinalityDepth', DEFAULT_FALLBACK_FINALITY_DEPTH),
    maxRetryableBlockDistance: intSetting(evm, 'maxRetryableBlockDistance', DEFAULT_MAX_RETRYABLE_BLOCK_DISTANCE),
  };
}

/**
 * The poller settings of one upstream on its network.
 * @param maxTimeoutMs cap of one poll request, ms (default 10 000)
 */
export function pollerSettingsOf(u: Upstream, network: Network, maxTimeoutMs = MAX_POLL_TIMEOUT_MS): PollerSettings {
  const intervalMs = intSetting(u.config.settings.evm, 'statePollerInterval', DEFAULT_STATE_POLLER_INTERVAL_MS);
  return {
    intervalMs,
    timeoutMs: intervalMs > 0 ? Math.min(intervalMs, maxTimeoutMs) : maxTimeoutMs,
    fallbackFinalityDepth: networkEvmSettings(network).fallbackFinalityDepth,
  };
}
