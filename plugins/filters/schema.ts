/**
 * Config of the filters plugin: `networks[].filters` (and `networkDefaults.filters`), read per
 * network when its call chain is composed.
 */
import { Duration, type Network, type SchemaFragment, settingsOf, Strict, Type } from 'svc-proxy/plugin';

/** Defaults of `networks[].filters` (durations in ms). */
export const FILTERS_DEFAULTS = {
  enabled: true,
  maxPerClient: 64,
  maxTotal: 10_000,
  idleTimeoutMs: 5 * 60_000,
  maxBlocksPerPoll: 64,
} as const;

/** The plugin's keys under `networks[]` and `networkDefaults` (read with `settingsOf`). */
export const FILTERS_NETWORK_KEYS = {
  filters: Strict(
    {
      enabled: Type.Optional(
        Type.Boolean({
          default: FILTERS_DEFAULTS.enabled,
          description:
            'serve eth_newFilter, eth_newBlockFilter, eth_getFilterChanges, eth_getFilterLogs and eth_uninstallFilter from svc itself (filters survive failover); false: they need one upstream pinned with use-upstream, as before',
        }),
      ),
      maxPerClient: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: 100_000,
          default: FILTERS_DEFAULTS.maxPerClient,
          description: 'live filters one client (its authenticated user id, else its address) may hold on this network, per replica',
        }),
      ),
      maxTotal: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: 1_000_000,
          default: FILTERS_DEFAULTS.maxTotal,
          description: 'live filters of every client on this network, per replica',
        }),
      ),
      idleTimeout: Type.Optional(
        Duration({
          default: '5m',
          description: 'a filter not polled for this long expires (as a node’s: geth uses 5 minutes); each eth_getFilterChanges starts it again',
        }),
      ),
      maxBlocksPerPoll: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: 1024,
          default: FILTERS_DEFAULTS.maxBlocksPerPoll,
          description: 'most new blocks one eth_getFilterChanges reads; the rest come with the next poll',
        }),
      ),
    },
    { default: {}, description: 'filters served by svc from the canonical chain, surviving upstream failover (filters plugin)' },
  ),
};

/** The schema fragment of the filters plugin. */
export const filtersSchema = { network: FILTERS_NETWORK_KEYS } satisfies SchemaFragment;

/** A network's resolved `filters` settings. */
export interface FiltersSettings {
  /** Served by svc (true) or passed to a pinned upstream (false). */
  enabled: boolean;
  /** Live filters per client per replica. */
  maxPerClient: number;
  /** Live filters per network per replica. */
  maxTotal: number;
  /** Idle expiry, ms. */
  idleTimeoutMs: number;
  /** Most blocks one poll reads. */
  maxBlocksPerPoll: number;
}

/**
 * Reads a network's `filters`, with the defaults for what it lacks.
 * @param network the network (its resolved config)
 */
export function filtersSettingsOf(network: Network): FiltersSettings {
  const raw = (settingsOf(network.config, FILTERS_NETWORK_KEYS).filters ?? {}) as {
    enabled?: boolean;
    maxPerClient?: number;
    maxTotal?: number;
    idleTimeout?: number | string;
    maxBlocksPerPoll?: number;
  };
  return {
    enabled: raw.enabled ?? FILTERS_DEFAULTS.enabled,
    maxPerClient: raw.maxPerClient ?? FILTERS_DEFAULTS.maxPerClient,
    maxTotal: raw.maxTotal ?? FILTERS_DEFAULTS.maxTotal,
    idleTimeoutMs: typeof raw.idleTimeout === 'number' && raw.idleTimeout > 0 ? raw.idleTimeout : FILTERS_DEFAULTS.idleTimeoutMs,
    maxBlocksPerPoll: raw.maxBlocksPerPoll ?? FILTERS_DEFAULTS.maxBlocksPerPoll,
  };
}
