/**
 * `svc-proxy/plugins/cache`: the record slots the cache plugin writes for each call (`X-SVC-Cache`,
 * `X-SVC-Cache-Attempts`, `-Retries`, `-Hedges`), read by the headers, select and tracing plugins.
 */
import { Slot } from 'svc-proxy/plugin';

/**
 * Record slot `cache.outcome`: `HIT` or `MISS` when the cache plugin looked the call up
 * (`X-SVC-Cache`); read by headers, select (a hit has no upstream lag) and tracing.
 */
export const CACHE_OUTCOME = new Slot<'HIT' | 'MISS' | undefined>('cache.outcome', undefined);

/** Record slot `cache.attempts`: cache tiers read for the call (`X-SVC-Cache-Attempts`, summed over a batch). */
export const CACHE_ATTEMPTS = new Slot<number>('cache.attempts', 0);
/** Record slot `cache.retries`: cache reads retried (`X-SVC-Cache-Retries`, summed over a batch). */
export const CACHE_RETRIES = new Slot<number>('cache.retries', 0);
/** Record slot `cache.hedges`: cache reads hedged (`X-SVC-Cache-Hedges`, summed over a batch). */
export const CACHE_HEDGES = new Slot<number>('cache.hedges', 0);
