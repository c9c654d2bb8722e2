/**
 * multiplex plugin (spec §2.7, §3.4, §4.6): identical in-flight calls on a
 * network share one execution. Taps `call` at `CallStage.MULTIPLEX`, after local and static
 * answers and before the cache and everything that reaches an upstream.
 *
 * - Key: the method plus a canonical hash (SHA-256 of key-sorted JSON) of the params, plus the
 *   call's provenance (`provenanceKey`, the rule the cache shares); the JSON-RPC id is never part of it. Params that cannot be hashed bypass multiplexing.
 * - The first call of a key is the leader and runs the inner chain; later calls are followers.
 *   Each follower gets a deep copy of the leader's result (its own id is written by the server)
 *   and the leader's metadata (winning upstream, counters, trace); a follower's directives
 *   (`skip-cache-read` included) have no effect. The leader's error reaches every follower.
 * - The shared execution runs on its own abort signal: the leader's client leaving does not
 *   cancel it while followers wait; it is cancelled when every participant left. Each participant
 *   gives up at its own deadline (its own signal).
 * - The entry is dropped when the shared execution settles; a call arriving after that is a new
 *   leader. `networks[].multiplexing` (inheritable from `networkDefaults`): unset = on, only an
 *   explicit `false` turns it off.
 * - Metric `svc_network_multiplexed_request_total{project,network,category,finality,user,agent_name}`
 *   once per follower.
 */
import { Counter } from 'prom-client';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  type ExecutionRecord,
  FINALITY,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  type RpcResult,
  serviceKey,
} from 'svc-proxy/plugin';
import { asSvcError, ErrCancelled, ErrEndpointRequestTimeout } from 'svc-proxy/plugin/errors';
import { isDeadline } from 'svc-proxy/plugin/contracts';
import { callParamsHash, paramsHash, provenanceKey } from './api.ts';
import { acquireController, agentName, BoundedLabel, releaseController } from 'svc-proxy/util';
import { Type } from '@sinclair/typebox';
import { normalizeMultiplexing } from './erpc.ts';

/** What the multiplex plugin shows other plugins and tests. */
export interface MultiplexService {
  /** Followers currently waiting on a network's in-flight entries. */
  waiting(network: Network): number;
  /** In-flight entries of a network. */
  inFlight(network: Network): number;
}

/** Key of {@link MultiplexService}. */
export const MULTIPLEX_SERVICE = serviceKey<MultiplexService>('multiplex');

/** One in-flight execution shared by a leader and its followers. */
interface Entry {
  promise: Promise<RpcResult>;
  /** The leader's execution record, whose metadata followers copy. */
  record: ExecutionRecord;
  /** Participants still waiting (leader included). */
  participants: number;
  /** Followers currently waiting. */
  followers: number;
  /** Aborts the shared execution once every participant left. */
  controller: AbortController;
}

/**
 * The table key of a call: method and params hash, plus the call's provenance (spec §2.8, the
 * rule the cache shares): a call pinning an upstream, skipping consensus or asking for another
 * integrity level than the network's never shares an execution with one that did not.
 */
function keyOf(ctx: CallContext, paramsHash: string): string {
  const base = `${ctx.request.method}:${paramsHash}`;
  const p = provenanceKey(ctx);
  return p === '' ? base : `${base}${p}`;
}

/**
 * The multiplexing key of a call, or undefined when its params cannot be hashed.
 * @param method JSON-RPC method
 * @param params params as sent (key order does not matter)
 */
export function multiplexKey(method: string, params: unknown): string | undefined {
  const h = paramsHash(params);
  return h === undefined ? undefined : `${method}:${h}`;
}

/** Copies the leader's metadata into a follower's record (spec §4.6 #4). */
function copyMetadata(from: ExecutionRecord, to: ExecutionRecord): void {
  to.upstream = from.upstream;
  to.upstreamAttempts = from.upstreamAttempts;
  to.networkAttempts = from.networkAttempts;
  to.attempts = from.attempts.map((a) => ({ ...a }));
  if (from.slots) to.slots = new Map(from.slots);
}

/**
 * The error a participant ends with when its own signal aborts first (spec §4.7 #2, §7): its
 * deadline (`server.maxTimeout`) is `ErrEndpointRequestTimeout`, like the same call without
 * multiplexing; `ErrCancelled` only when the client itself went away.
 */
function signalError(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return asSvcError(r);
  if (isDeadline(r)) return new ErrEndpointRequestTimeout('call deadline (server.maxTimeout) passed while waiting for a multiplexed answer');
  return new ErrCancelled('call cancelled while waiting for a multiplexed answer');
}

/** Whether multiplexing is on for a network (tri-state: only an explicit `false` turns it off). */
function enabled(network: Network): boolean {
  return network.config.settings.multiplexing !== false;
}

/**
 * Creates the multiplex plugin (name `multiplex`).
 * @returns a plugin owning `networks[].multiplexing`, tapping `call` and providing the `multiplex` service
 */
export function multiplexPlugin(): Plugin {
  return definePlugin({
    name: 'multiplex',
    provides: [MULTIPLEX_SERVICE],
    schema: {
      network: {
        multiplexing: Type.Boolean({
          description: 'spec §2.7: identical in-flight calls share one upstream call; unset = on, only false turns it off (inheritable from networkDefaults)',
        }),
      },
      normalize: normalizeMultiplexing,
    },
    apply(host: PluginHost) {
      const tables = new WeakMap<Network, Map<string, Entry>>();
      const users = new BoundedLabel(1000);
      const agents = new BoundedLabel(50);
      const followersTotal = new Counter({
        name: 'svc_network_multiplexed_request_total',
        help: 'Calls answered by another identical in-flight call (once per follower)',
        labelNames: ['project', 'network', 'category', 'finality', 'user', 'agent_name'],
        registers: [host.metrics],
      });
      const tableOf = (n: Network): Map<string, Entry> => {
        let t = tables.get(n);
        if (!t) {
          t = new Map();
          tables.set(n, t);
        }
        return t;
      };
      host.services.provide(MULTIPLEX_SERVICE, {
        waiting: (n) => [...(tables.get(n)?.values() ?? [])].reduce((s, e) => s + e.followers, 0),
        inFlight: (n) => tables.get(n)?.size ?? 0,
      });

      /**
       * A participant (the leader or a follower) waits for the shared execution, or for its own
       * signal: one listener does both, leaving the entry (the last one out cancels the shared
       * execution) and ending this participant's wait with its own error (spec §4.6 #4).
       */
      const wait = (entry: Entry, signal: AbortSignal): Promise<RpcResult> => {
        if (signal.aborted) {
          if (entry.participants === 0) entry.controller.abort(signal.reason);
          return Promise.reject(signalError(signal));
        }
        entry.participants++;
        return new Promise<RpcResult>((resolve, reject) => {
          const onAbort = () => {
            entry.participants--;
            if (entry.participants === 0) entry.controller.abort(signal.reason);
            reject(signalError(signal));
          };
          signal.addEventListener('abort', onAbort, { once: true });
          entry.promise.then(
            (v) => {
              signal.removeEventListener('abort', onAbort);
              resolve(v);
            },
            (e: unknown) => {
              signal.removeEventListener('abort', onAbort);
              reject(e);
            },
          );
        });
      };

      host.hooks.call.tap({ name: 'multiplex', stage: CallStage.MULTIPLEX }, (inner: CallHandler, network: Network): CallHandler => {
        if (!enabled(network)) return inner;
        const table = tableOf(network);
        return (ctx: CallContext) => {
          if (ctx.internal) return inner(ctx);
          const h = callParamsHash(ctx);
          if (h === undefined) return inner(ctx);
          const key = keyOf(ctx, h);
          const existing = table.get(key);
          if (existing) {
            existing.followers++;
            const ua = ctx.http.query['user-agent'] ?? (ctx.http.headers['user-agent'] as string | undefined);
            followersTotal.inc({
              project: ctx.project.id,
              network: network.id,
              category: host.methodLabel.value(ctx.request.method),
              finality: FINALITY.get(ctx),
              user: users.value(ctx.identity?.userId ?? 'anonymous'),
              agent_name: agents.value(agentName(ua)),
            });
            return wait(existing, ctx.signal).then(
              (r) => {
                existing.followers--;
                copyMetadata(existing.record, ctx.record);
                return r.copy();
              },
              (e: unknown) => {
                existing.followers--;
                copyMetadata(existing.record, ctx.record);
                throw e;
              },
            );
          }
          // The leader: the shared execution runs on its own signal, aborted when every participant
          // left. Its controller is a recycled one (an AbortSignal is costly to build, lib/abort.ts),
          // handed back once the execution settled.
          const controller = acquireController();
          const shared: CallContext = { ...ctx, signal: controller.signal };
          const entry: Entry = { promise: inner(shared), record: ctx.record, participants: 0, followers: 0, controller };
          const settled = (): void => {
            if (table.get(key) === entry) table.delete(key);
            releaseController(controller);
          };
          // Handles the shared execution's failure once (each participant handles it on its own chain).
          entry.promise.then(settled, settled);
          table.set(key, entry);
          return wait(entry, ctx.signal);
        };
      });
    },
  });
}
