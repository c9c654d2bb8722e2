/**
 * filters plugin: `eth_newFilter`, `eth_newBlockFilter`, `eth_getFilterChanges`,
 * `eth_getFilterLogs` and `eth_uninstallFilter` served by svc itself (spec §2.8 #4), so a filter
 * keeps working when the upstream that answered its polls dies: svc's own filter ids, changes
 * read from the canonical chain through the network's pipeline by the head follower's rules
 * (cursor.ts; reorgs give `removed: true` logs), state as a small cursor in memory or, with
 * `sharedState`, in the fleet's Redis (store.ts). `eth_newPendingTransactionFilter` passes through
 * to one upstream, and its polls stick to that upstream.
 *
 * Taps: `call` between `CallStage.MULTIPLEX` and `CallStage.LOCAL_METHODS` (inside static answers
 * and local methods, outside multiplexing and the cache: two polls of one filter never share an
 * answer, and no filter answer is cached) and `select` between `SelectStage.AVAILABILITY` and
 * `SelectStage.STATEFUL_GUARD` (a pending-transaction filter's calls go to its one upstream).
 * Internal calls and calls pinned with `use-upstream` pass through to the node as before, and so
 * does everything on a network with `filters.enabled: false`.
 */
import { Counter, Gauge } from 'prom-client';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  definePlugin,
  type Network,
  type Plugin,
  type PluginHost,
  RpcResult,
  SelectStage,
  stageBetween,
  type Upstream,
} from 'svc-proxy/plugin';
import { ErrEndpointMissingData, SvcError } from 'svc-proxy/plugin/errors';
import { linkedController, primaryValues } from 'svc-proxy/util';
import { derivedState } from 'svc-proxy/plugins/multiplex';
import { SHARED_VALUES_SERVICE } from 'svc-proxy/plugins/shared-state';
import { type ChainRead, type LogSelector, MAX_KEPT_LOG_BYTES, type PollResult, pollChanges, startWindow, trimKeptLogs } from './cursor.ts';
import { ErrFilterLimitExceeded, ErrFilterNotFound, expectNoParams, type LogCriteria, newFilterId, numberOf, parseFilterId, parseNewFilter } from './params.ts';
import { filtersSchema, filtersSettingsOf, type FiltersSettings } from './schema.ts';
import { newPending, pendingSelect, pendingCall } from './pending.ts';
import { abortError, Serial } from './serial.ts';
import { type FilterKind, FilterLedger, type FilterState, type FilterStore, MemoryFilterStore, SharedFilterStore } from './store.ts';

export { FILTERS_DEFAULTS, FILTERS_NETWORK_KEYS, filtersSchema, filtersSettingsOf, type FiltersSettings } from './schema.ts';
export * from './params.ts';
export * from './cursor.ts';
export * from './store.ts';
export { isFilterState } from './validate.ts';

/** The methods the plugin serves (the pending filter's calls included). */
export const FILTER_METHODS: ReadonlySet<string> = new Set([
  'eth_newFilter',
  'eth_newBlockFilter',
  'eth_newPendingTransactionFilter',
  'eth_getFilterChanges',
  'eth_getFilterLogs',
  'eth_uninstallFilter',
]);

/** Stage of the `call` tap: inside local methods (850), outside multiplexing (800). */
export const FILTERS_CALL_STAGE = stageBetween(CallStage.MULTIPLEX, CallStage.LOCAL_METHODS);
/** Stage of the `select` tap: after availability filters (400), before the stateful guard (500). */
export const FILTERS_SELECT_STAGE = stageBetween(SelectStage.AVAILABILITY, SelectStage.STATEFUL_GUARD);
/** Longest one chain read of a poll may take, ms (within the poll's budget and the call's own deadline). */
export const READ_TIMEOUT_MS = 10_000;
/**
 * How long a poll holds its filter's fleet lock without releasing it, ms: a replica that dies
 * mid-poll frees the filter then.
 */
export const LOCK_TTL_MS = 20_000;
/**
 * Wall time one `eth_getFilterChanges` spends reading, ms: well under {@link LOCK_TTL_MS}, so
 * the lock outlives the poll; past it the poll delivers what it read and the next poll goes on.
 */
export const POLL_BUDGET_MS = Math.min(5_000, LOCK_TTL_MS / 4);
/**
 * Most bytes (JSON) of delivered logs the filters of one replica (one process) keep for reorgs,
 * every network together: past it a poll stores its filter's window without them (a reorg then
 * re-delivers no `removed` logs for it), so kept logs never grow the store past this.
 */
export const REPLICA_KEPT_LOG_BYTES = 32 * 1024 * 1024;
/** How often expired filters are dropped from memory, ms. */
export const SWEEP_INTERVAL_MS = 30_000;

/** The filter store is unreachable (a `sharedState` Redis down): -32603, HTTP 503, retry later. */
export class ErrFilterStoreUnavailable extends SvcError {
  static override readonly defaultCode = -32603;
  static override readonly httpStatus = 503;
  static override readonly retryable = true;
}

/**
 * Who may poll a filter: the authenticated user id, else the client address.
 * @param ctx the call
 */
export function ownerOf(ctx: CallContext): string {
  const key = ctx.identity?.userId !== undefined ? `user:${ctx.identity.userId}` : `addr:${ctx.http.clientAddress}`;
  return key.slice(0, 256);
}

/** `fromBlock`/`toBlock` as numbers, for the blocks a log filter's polls read logs of. */
function selectorOf(c: LogCriteria | undefined): LogSelector {
  return { address: c?.address, topics: c?.topics, from: numberOf(c?.fromBlock), to: numberOf(c?.toBlock) };
}

/** A failure that is not svc's named error (a malformed answer) as one: the data could not be read. */
function readFailure(e: unknown): SvcError {
  return e instanceof SvcError ? e : new ErrEndpointMissingData(`filter: ${e instanceof Error ? e.message : String(e)}`);
}

/**
 * Creates the filters plugin (name `filters`).
 * @returns a plugin owning `networks[].filters` (and `networkDefaults.filters`), tapping `call`,
 *   `select`, `configured`, `listening` and `shutdown`, registering `svc_filters_active`
 */
export function filtersPlugin(): Plugin {
  return definePlugin({
    name: 'filters',
    schema: filtersSchema,
    apply(host: PluginHost) {
      const memory = new MemoryFilterStore();
      const ledger = new FilterLedger();
      let store: FilterStore = memory;
      let sweeper: NodeJS.Timeout | undefined;
      /** One poll at a time per filter on this replica, so no change is delivered twice. */
      const serial = new Serial();

      new Gauge({
        name: 'svc_filters_active',
        help: 'Live filters this replica serves (made or polled here, within their idle timeout), by network and kind (logs, blocks, pending)',
        labelNames: ['project', 'network', 'kind'],
        registers: [host.metrics],
        collect() {
          this.reset();
          for (const [net, counts] of ledger.byNetwork()) {
            const at = net.lastIndexOf('/');
            for (const kind of ['logs', 'blocks', 'pending'] as const) this.set({ project: net.slice(0, at), network: net.slice(at + 1), kind }, counts[kind]);
          }
        },
      });

      const jumps = new Counter({
        name: 'svc_filters_cursor_jumps_total',
        help: 'Polls whose filter cursor jumped to the latest block over a gap of more than 1024 blocks (those blocks’ changes not delivered)',
        labelNames: ['project', 'network'],
        registers: [host.metrics],
      });

      host.hooks.configured.tap('filters', () => {
        const values = host.services.get(SHARED_VALUES_SERVICE);
        // The fleet's Redis, else the primary of `server.workers` (a client's next poll may reach another worker), else this process.
        const shared = values?.enabled ? values : primaryValues('filters');
        if (shared) store = new SharedFilterStore(shared);
      });
      host.hooks.listening.tap('filters', () => {
        sweeper = setInterval(() => {
          memory.sweep();
          ledger.sweep();
        }, SWEEP_INTERVAL_MS);
        sweeper.unref();
      });
      host.hooks.shutdown.tap('filters', () => clearInterval(sweeper));

      const stored = async <T>(op: () => Promise<T>): Promise<T> => {
        try {
          return await op();
        } catch (e) {
          // svc's own refusals (a bound) pass; anything else is the store failing.
          if (e instanceof SvcError) throw e;
          throw new ErrFilterStoreUnavailable(`filter store unavailable: ${e instanceof Error ? e.message : String(e)}`);
        }
      };
      /**
       * Reads through the network's pipeline as svc's own call (no cache, no multiplexing), until
       * `until` (ms since the epoch, within the call's deadline), aborted when the client leaves.
       */
      const readerOf =
        (network: Network, ctx: CallContext, until = ctx.deadline): ChainRead =>
        async (method, params, options) => {
          const { ctx: c, done } = host.internalContext(network, method, params, Math.max(1, Math.min(READ_TIMEOUT_MS, until - Date.now())));
          // Aborted at the read's own deadline (the parent) or when the client leaves, linked by hand: AbortSignal.any leaks on Node 20.
          const link = linkedController(c.signal);
          const leave = () => link.controller.abort(ctx.signal.reason);
          if (ctx.signal.aborted) leave();
          else ctx.signal.addEventListener('abort', leave, { once: true });
          c.signal = link.signal;
          if (options?.retryEmpty) c.directives = { ...c.directives, retryEmpty: true };
          try {
            return (await host.runCall(c)).result;
          } finally {
            ctx.signal.removeEventListener('abort', leave);
            link.dispose();
            done();
          }
        };
      /**
       * The caller's live filter of this network, else undefined (a filter uninstalled or expired
       * elsewhere leaves the ledger too, so it no longer counts against the bounds).
       * @throws ErrFilterStoreUnavailable when the store cannot be read
       */
      const find = async (ctx: CallContext, id: string | undefined): Promise<FilterState | undefined> => {
        if (id === undefined) return undefined;
        const s = await stored(() => store.get(id));
        if (!s) ledger.forget(id);
        if (!s || s.owner !== ownerOf(ctx) || s.net !== `${ctx.project.id}/${ctx.network.id}`) return undefined;
        return s;
      };
      /**
       * Stores `next` over `prior` (compare-and-set) and starts the idle timeout over.
       * @returns false when the filter changed since `prior` was read (another poll, an uninstall)
       */
      const save = async (id: string, prior: FilterState, next: FilterState, settings: FiltersSettings, kept?: number): Promise<boolean> => {
        const ok = await stored(() => store.update(id, prior, next, settings.idleTimeoutMs));
        if (ok) ledger.touch(id, prior.owner, prior.net, prior.kind, settings.idleTimeoutMs, kept);
        else ledger.forget(id);
        return ok;
      };
      const drop = async (id: string): Promise<boolean> => {
        ledger.forget(id);
        return stored(() => store.delete(id));
      };

      /** A new filter of `kind`: bounded per client and per network, its cursor at the latest block. */
      const create = async (ctx: CallContext, settings: FiltersSettings, kind: FilterKind, inner: CallHandler): Promise<RpcResult> => {
        const owner = ownerOf(ctx);
        const net = `${ctx.project.id}/${ctx.network.id}`;
        const { total, owned } = ledger.count(net, owner);
        if (owned >= settings.maxPerClient)
          throw new ErrFilterLimitExceeded(
            `limit exceeded: this client holds ${owned} filters on ${ctx.network.id} (filters.maxPerClient ${settings.maxPerClient}); eth_uninstallFilter one first`,
          );
        if (total >= settings.maxTotal) throw new ErrFilterLimitExceeded(`limit exceeded: ${total} filters on ${ctx.network.id} (filters.maxTotal)`);
        const id = newFilterId();
        // Counted before the first await, so a batch of creations cannot overshoot the bounds.
        ledger.touch(id, owner, net, kind, settings.idleTimeoutMs);
        try {
          const s: FilterState = { v: 1, kind, seq: 0, owner, net };
          if (kind === 'logs') s.criteria = parseNewFilter(ctx.request.params);
          else expectNoParams(ctx.request.method, ctx.request.params);
          if (kind === 'pending') s.upstream = await newPending(ctx, inner);
          else s.window = await startWindow(readerOf(ctx.network, ctx)).catch((e: unknown) => Promise.reject(readFailure(e)));
          await stored(() => store.create(id, s, settings.idleTimeoutMs));
          return new RpcResult(id);
        } catch (e) {
          ledger.forget(id);
          throw e;
        }
      };

      const changes = (ctx: CallContext, settings: FiltersSettings, inner: CallHandler): Promise<RpcResult> => {
        const id = parseFilterId(ctx.request.method, ctx.request.params);
        if (id === undefined) return Promise.reject(new ErrFilterNotFound());
        return serial.run(id, ctx.signal, ctx.deadline, async () => {
          const found = await find(ctx, id);
          if (!found) throw new ErrFilterNotFound();
          if (found.kind === 'pending') {
            const r = await pendingCall(ctx, id, found, 'eth_getFilterChanges', inner, drop);
            // The node's answer is delivered: a refused write only means another replica polled it too.
            await save(id, found, found, settings);
            return r;
          }
          // Another replica polls it right now: what it reads, it delivers (never twice).
          const lock = store.lock?.bind(store);
          const unlock = lock ? await stored(() => lock(id, LOCK_TTL_MS)) : undefined;
          if (lock && !unlock) return new RpcResult([]);
          try {
            // Read again once locked: a poll that just ended elsewhere moved the cursor.
            const s = lock ? await find(ctx, id) : found;
            if (!s) throw new ErrFilterNotFound();
            return await poll(ctx, id, s, settings);
          } finally {
            await unlock?.().catch(() => undefined);
          }
        });
      };

      /** One poll of a log or block filter, within {@link POLL_BUDGET_MS}; the cursor moves only when the client gets the changes. */
      const poll = async (ctx: CallContext, id: string, s: FilterState, settings: FiltersSettings): Promise<RpcResult> => {
        const until = Math.min(Date.now() + POLL_BUDGET_MS, ctx.deadline);
        const logs = s.kind === 'logs' ? selectorOf(s.criteria) : undefined;
        let polled: PollResult;
        try {
          polled = await pollChanges(readerOf(ctx.network, ctx, until), s.window ?? [], logs, settings.maxBlocksPerPoll, { until, signal: ctx.signal });
        } catch (e) {
          // Nothing was read: the cursor stays, the poll still counts as activity.
          await save(id, s, s, settings).catch(() => undefined);
          throw ctx.signal.aborted ? abortError(ctx.deadline, 'eth_getFilterChanges') : readFailure(e);
        }
        if (ctx.signal.aborted) {
          // The client left (or timed out): it never gets these changes, so the cursor stays and its next poll reads them again.
          await save(id, s, s, settings).catch(() => undefined);
          throw abortError(ctx.deadline, 'eth_getFilterChanges');
        }
        if (polled.jumped !== undefined) {
          jumps.inc({ project: ctx.project.id, network: ctx.network.id });
          host.logger.warn(
            { network: ctx.network.id, skipped: polled.jumped },
            'filters: a filter’s cursor jumped to the latest block; the skipped blocks’ changes are not delivered',
          );
        }
        // The replica's budget of kept logs: what other filters keep leaves this one less.
        const kept = trimKeptLogs(polled.window, Math.max(0, Math.min(MAX_KEPT_LOG_BYTES, REPLICA_KEPT_LOG_BYTES - ledger.keptBytes(id))));
        if (!(await save(id, s, polled.moved ? { ...s, window: polled.window } : s, settings, kept))) {
          // Stored by another poll since (this one overran its lock: that poll delivered these changes), or uninstalled.
          if (!(await find(ctx, id))) throw new ErrFilterNotFound();
          return new RpcResult([]);
        }
        return new RpcResult(polled.changes);
      };

      const filterLogs = async (ctx: CallContext, inner: CallHandler): Promise<RpcResult> => {
        const s = await find(ctx, parseFilterId(ctx.request.method, ctx.request.params));
        if (s?.kind !== 'logs') throw new ErrFilterNotFound();
        const c = s.criteria ?? {};
        const q: Record<string, unknown> = { fromBlock: c.fromBlock ?? 'latest', toBlock: c.toBlock ?? 'latest' };
        if (c.address) q.address = c.address;
        if (c.topics) q.topics = c.topics;
        // The rest of the chain below: getLogs limits and splitting, interpolation, cache, failover;
        // under the client's own provenance and finality (shared and cached only with calls of its rules).
        return inner({ ...ctx, request: { ...ctx.request, method: 'eth_getLogs', params: [q] }, state: derivedState(ctx) });
      };

      const uninstall = async (ctx: CallContext, inner: CallHandler): Promise<RpcResult> => {
        const id = parseFilterId(ctx.request.method, ctx.request.params);
        if (id === undefined) return new RpcResult(false);
        return serial.run(id, ctx.signal, ctx.deadline, async () => {
          const s = await find(ctx, id);
          if (!s) return new RpcResult(false);
          if (s.kind === 'pending') await pendingCall(ctx, id, s, 'eth_uninstallFilter', inner, drop).catch(() => undefined);
          await drop(id);
          return new RpcResult(true);
        });
      };

      host.hooks.call.tap({ name: 'filters', stage: FILTERS_CALL_STAGE }, (inner: CallHandler, network: Network): CallHandler => {
        const settings = filtersSettingsOf(network);
        if (!settings.enabled) return inner;
        return (ctx: CallContext) => {
          const method = ctx.request.method;
          if (ctx.internal || !FILTER_METHODS.has(method)) return inner(ctx);
          const pinned = ctx.directives.useUpstream;
          if (typeof pinned === 'string' && pinned.trim() !== '') return inner(ctx);
          switch (method) {
            case 'eth_newFilter':
              return create(ctx, settings, 'logs', inner);
            case 'eth_newBlockFilter':
              return create(ctx, settings, 'blocks', inner);
            case 'eth_newPendingTransactionFilter':
              return create(ctx, settings, 'pending', inner);
            case 'eth_getFilterChanges':
              return changes(ctx, settings, inner);
            case 'eth_getFilterLogs':
              return filterLogs(ctx, inner);
            default:
              return uninstall(ctx, inner);
          }
        };
      });

      host.hooks.select.tap({ name: 'filters', stage: FILTERS_SELECT_STAGE }, pendingSelect);
    },
  });
}
