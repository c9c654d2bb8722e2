/**
 * shared-state plugin: replicas behind a load balancer share what they learn about upstream
 * heads (latest, finalized) and what operators change (cordons, API-key changes through
 * `/admin`) through Redis, off the request path.
 *
 * Heads: each replica publishes the heads it observed itself that moved to `<clusterKey>:state`
 * (`{replica, at, heads}`: its id and the time, ms) and applies what other replicas publish,
 * forward-only per upstream (matched by project id + upstream id) and only when its chain state
 * does not judge the head implausible (docs/evm.md); every `snapshotInterval` it reads the hash
 * `<clusterKey>:snapshot` (one field per replica, the same shape) and rewrites its own field, so
 * a replica that starts or reconnects catches up. Entries older than the TTL (`entryTtlMs`: three
 * intervals, 3 s to 10 min) are ignored (and deleted from the hash): a head lives in the fleet
 * only while a replica that saw it keeps saying so. Bad entries are dropped and counted
 * (`svc_shared_state_dropped_total{reason}`, merge.ts and drops.ts).
 *
 * Operator changes: the plugin registers a fleet relay (svc-proxy/plugin `registerFleetRelay`), so
 * every worker broadcast of this process (the admin plugin's replay of cordons and API-key
 * changes) is appended to the stream `<clusterKey>:ops` (XADD, trimmed with MAXLEN ~
 * `opsLogMaxLength`), and every entry read from it (XREAD BLOCK on its own connection, from the
 * last id seen; from the start of the bounded log when the replica starts) is delivered to this
 * process's receivers in log order, this replica's own entries included, where the admin plugin
 * applies it as it applies a sibling worker's. The log is the one order: a change is applied at
 * once where it was made (and over IPC by its sibling workers), then again when its entry is
 * read, so after conflicting changes made at once on two replicas every replica ends at the
 * log's last entry.
 *
 * Connections open when the proxy listens, not when it is configured: a proxy built only to
 * check a config (`svc validate`, a config reload) opens none.
 *
 * With Redis gone or frozen (a PING every second, unanswered within a second) every replica
 * keeps serving from its own view: the gauge `svc_shared_state_connected` drops to 0 with one
 * warn line (also when the first connection attempt fails), and one info line on recovery, when
 * the snapshot is read again and the operator changes made meanwhile (held in a bounded outbox)
 * are appended. node-redis reconnects with a capped backoff. Off unless the top-level
 * `sharedState` is set.
 *
 * Files: `merge.ts` (head merge rules), `heads.ts` (heads to and from the chain state), `ops.ts` (the operator-change log), `link.ts`
 * (connected or not, the PING watch), `schema.ts` (config), `erpc.ts` (eRPC's
 * `database.sharedState` and `clusterKey` rewritten into `sharedState` at load); this file wires Redis.
 */
import { randomUUID } from 'node:crypto';
import { Counter, Gauge } from 'prom-client';
import { definePlugin, type Plugin, type PluginHost } from 'svc-proxy/plugin';
import { fleetReplicaId, type FleetRelayRegistration, openRedisClient, type RedisClient, registerFleetRelay, sleep } from 'svc-proxy/util';
import { normalizeSharedStateShapes } from './erpc.ts';
import { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS, LinkState, PingWatch } from './link.ts';
import { type DropReason, entryTtlMs, HeadLedger, headsToApply, MAX_SNAPSHOT_ENTRIES, messagesOf, parseMessage } from './merge.ts';
import { headBridge } from './heads.ts';
import { DropTally } from './drops.ts';
import { entriesOfReply, opFields, OPS_READ_COUNT, OpsOutbox } from './ops.ts';
import { ClientCloser } from './close.ts';
import { DEFAULT_CHANGE_SCAN_MS, sharedStateSchema, sharedStateSettingsOf, type SharedStateSettings } from './schema.ts';
import { SHARED_VALUES_SERVICE } from './api.ts';
import { sharedValues } from './values.ts';

export {
  type Drop,
  DROP_REASONS,
  type DropReason,
  entryTtlMs,
  type HeadContext,
  headField,
  HeadLedger,
  headsToApply,
  MAX_ENTRY_BYTES,
  MAX_ENTRY_TTL_MS,
  MAX_HEADS_PER_MESSAGE,
  MAX_ID_LENGTH,
  MAX_SNAPSHOT_ENTRIES,
  messagesOf,
  MIN_ENTRY_TTL_MS,
  parseMessage,
  type SharedHead,
  type StateMessage,
  TTL_INTERVALS,
} from './merge.ts';
export { type DropSinks, DropTally } from './drops.ts';
export { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS, LinkState, PingWatch, type PingWatchOptions } from './link.ts';
export {
  entriesOfReply,
  MAX_OP_NAME,
  MAX_OP_PAYLOAD_BYTES,
  MAX_OUTBOX,
  opFields,
  type OpEntry,
  type OpFields,
  OPS_READ_COUNT,
  OpsOutbox,
  parseOpEntry,
} from './ops.ts';
export { ClientCloser, CLOSE_WAIT_MS } from './close.ts';
export { DEFAULT_CHANGE_SCAN_MS, DEFAULT_OPS_LOG_MAX_LENGTH, sharedStateSchema, sharedStateSettingsOf, type SharedStateSettings } from './schema.ts';

/** How long one XREAD on the operator-change stream blocks, ms (then it is sent again). */
const OPS_BLOCK_MS = 1000;
/** Pause before reading the stream again after an error, ms. */
const OPS_RETRY_MS = 200;
/** Not connected this long after start (a Redis that accepts connections but never answers): say so, ms. */
const START_GRACE_MS = 3000;

/** Options of {@link sharedStatePlugin}. */
export interface SharedStatePluginOptions {
  /** How often local heads are compared with what was published, ms (default {@link DEFAULT_CHANGE_SCAN_MS}). */
  changeScanMs?: number;
  /** How often Redis is sent a PING, ms (default {@link DEFAULT_PING_INTERVAL_MS}). */
  pingIntervalMs?: number;
  /** Longest wait for a PONG before Redis counts as unreachable, ms (default {@link DEFAULT_PING_TIMEOUT_MS}). */
  pingTimeoutMs?: number;
}

/**
 * Creates the shared-state plugin (name `shared-state`).
 * @param opts scan interval of local head changes, PING interval and timeout
 * @returns a plugin owning the top-level `sharedState` key and tapping `configured` and `shutdown`
 */
export function sharedStatePlugin(opts: SharedStatePluginOptions = {}): Plugin {
  const scanMs = opts.changeScanMs ?? DEFAULT_CHANGE_SCAN_MS;
  const pingIntervalMs = opts.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS;
  const pingTimeoutMs = opts.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS;
  return definePlugin({
    name: 'shared-state',
    // No `dependsOn`: the chain state service is looked up when heads are applied, so presets
    // without evm-state (and tests that drop it) still build; there is then nothing to share.
    schema: { ...sharedStateSchema, normalize: normalizeSharedStateShapes },
    provides: [SHARED_VALUES_SERVICE],
    apply(host: PluginHost) {
      /** Id of this process's head messages (each worker polls on its own, so each has its own). */
      const replica = randomUUID();
      /** Id of this replica's operator changes (shared by its workers, which get them over IPC). */
      const fleet = fleetReplicaId();
      const ledger = new HeadLedger();
      const clients = new ClientCloser();
      /** Whether Redis answered the last PING (a QUIT at shutdown would get an answer). */
      let answering = () => false;
      let relay: FleetRelayRegistration | undefined;
      let closed = false;
      const timers: NodeJS.Timeout[] = [];
      const gauge = new Gauge({
        name: 'svc_shared_state_connected',
        help: 'Whether this replica is connected to the shared-state Redis (1) or serves from its own view (0)',
        registers: [host.metrics],
      });
      const dropped = new Counter({
        name: 'svc_shared_state_dropped_total',
        help: 'Shared-state heads and entries read from Redis and not applied, by reason (malformed, oversized, out_of_range, stale, unknown, implausible)',
        labelNames: ['reason'],
        registers: [host.metrics],
      });
      for (const reason of DropTally.reasons) dropped.inc({ reason }, 0);

      const { context, apply, local } = headBridge(host, ledger);
      /** What went wrong last (an error message of node-redis: host and port, never the URI's credentials). */
      let reason = '';
      const link = new LinkState((up, atStart) => {
        if (up) {
          if (!atStart) host.logger.info('shared state: Redis reachable again; applying the fleet snapshot and the operator changes missed');
        } else if (atStart)
          host.logger.warn({ reason }, "shared state: Redis unreachable at start; serving from this replica's own view until it is reachable");
        else host.logger.warn({ reason }, "shared state: Redis unreachable; serving from this replica's own view until it is back");
      });

      /** The settings read in `configured`; connections open in `listening` only. */
      let configuredSettings: SharedStateSettings | undefined;
      /** The main connection once opened, and whether it may take commands. */
      let valuesClient: (() => RedisClient | undefined) | undefined;
      host.services.provide(
        SHARED_VALUES_SERVICE,
        sharedValues({ client: () => (closed ? undefined : valuesClient?.()), clusterKey: () => configuredSettings?.clusterKey }),
      );
      // Read only: a proxy that checks a config (`svc validate`, a config reload, the primary of
      // server.workers) is configured and closed without listening, and must open nothing.
      host.hooks.configured.tap('shared-state', (c) => {
        configuredSettings = sharedStateSettingsOf(c.settings);
      });

      host.hooks.listening.tap('shared-state', () => {
        const settings = configuredSettings;
        if (!settings || closed) return;
        const channel = `${settings.clusterKey}:state`;
        const hash = `${settings.clusterKey}:snapshot`;
        const ttlMs = entryTtlMs(settings.snapshotIntervalMs);
        const tally = new DropTally(
          {
            count: (reason) => dropped.inc({ reason }),
            log: (reason, n) => host.logger.warn({ reason, dropped: n }, 'shared state: entries read from Redis dropped (see svc_shared_state_dropped_total)'),
          },
          settings.snapshotIntervalMs,
        );
        const stream = `${settings.clusterKey}:ops`;
        const outbox = new OpsOutbox();
        // Connected means every connection is ready (commands, the subscription, the stream
        // reader) and Redis answers PINGs.
        let watch: PingWatch | undefined;
        const update = (failure: boolean): void => {
          // Closing drops the connections on purpose (also the primary of server.workers, which
          // builds a proxy to check the config and closes it): not an outage.
          if (closed) return;
          link.update(main.isReady && sub.isReady && ops.isReady && !watch?.frozen, failure);
          gauge.set(link.connected ? 1 : 0);
        };
        const onError = (e?: unknown): void => {
          reason = (e instanceof Error ? e.message : String(e)).slice(0, 200);
          update(true);
        };
        const main = openRedisClient({ uri: settings.redis.uri }, onError);
        const sub = main.duplicate();
        const ops = main.duplicate();
        clients.track(main);
        clients.track(sub);
        // The stream reader may be blocked in XREAD at shutdown: dropped rather than waited for.
        clients.track(ops, false);
        /** Commands may go out: connected and not frozen (a frozen Redis would only pile them up). */
        const writable = (): boolean => main.isReady && !watch?.frozen;
        answering = writable;
        valuesClient = () => (writable() ? main : undefined);

        // Every other replica's entry, each checked like a channel message; stale ones are
        // deleted (their writer is gone). A hash with more entries than any fleet has is not read.
        const readSnapshot = async (): Promise<void> => {
          if ((await main.hLen(hash)) > MAX_SNAPSHOT_ENTRIES) return tally.drop('oversized');
          const all = await main.hGetAll(hash);
          const now = Date.now();
          const stale: string[] = [];
          for (const [field, value] of Object.entries(all)) {
            if (field === replica) continue;
            let reason: DropReason | undefined;
            const msg = parseMessage(value, now, ttlMs, (r) => {
              reason ??= r;
              tally.drop(r);
            });
            if (reason === 'stale') stale.push(field);
            if (!msg) continue;
            if (msg.replica !== field) {
              tally.drop('malformed');
              continue;
            }
            apply(headsToApply(msg, replica, context, tally.drop));
          }
          if (stale.length > 0) await main.hDel(hash, stale);
        };

        // Operator changes of this process → the stream, in order; kept while Redis is away.
        let flushing = false;
        const flush = async (): Promise<void> => {
          if (flushing) return;
          flushing = true;
          try {
            const dropped = outbox.takeDropped();
            if (dropped > 0)
              host.logger.warn({ dropped }, 'shared state: operator changes dropped while Redis was unreachable (outbox full); the other replicas miss them');
            for (let f = outbox.peek(); f && writable() && !closed; f = outbox.peek()) {
              await main.xAdd(stream, '*', f, { TRIM: { strategy: 'MAXLEN', strategyModifier: '~', threshold: settings.opsLogMaxLength } });
              outbox.shift();
            }
          } catch (e) {
            // Kept in the outbox: retried on the next PING tick and on reconnect.
            onError(e);
          } finally {
            flushing = false;
          }
        };
        relay = registerFleetRelay({
          forward: (topic, payload) => {
            const fields = opFields(fleet, topic, payload);
            if (!fields) {
              host.logger.warn({ topic }, 'shared state: an operator change is not shared (payload not JSON or over 64 KiB)');
              return;
            }
            outbox.push(fields);
            void flush();
          },
        });
        const registration = relay;

        // Operator changes ← the stream, from the last id seen (all of the bounded log at start),
        // every entry in log order, this replica's own included: the log is the one order, so
        // every replica (and every worker) ends at its last entry, also after conflicting changes
        // made at once on two replicas or queued in two outboxes while Redis was frozen. A change
        // applied at once where it was made (or over IPC by a sibling worker) is applied again
        // when its entry is read: cordons are idempotent, the admin's replay ignores a duplicate
        // key add or a missing key. A frozen Redis holds the XREAD; it answers once Redis runs again.
        let lastId = '0-0';
        const readOps = async (): Promise<void> => {
          while (!closed) {
            if (!ops.isReady) {
              await sleep(OPS_RETRY_MS, undefined, true);
              continue;
            }
            try {
              const reply = await ops.xRead({ key: stream, id: lastId }, { BLOCK: OPS_BLOCK_MS, COUNT: OPS_READ_COUNT });
              const read = entriesOfReply(reply);
              if (read.lastId) lastId = read.lastId;
              for (const e of read.entries) if (e && !closed) registration.deliver(e.topic, e.payload);
            } catch {
              if (!closed) await sleep(OPS_RETRY_MS, undefined, true);
            }
          }
        };

        const catchUp = (): void => {
          if (!main.isReady) return;
          readSnapshot().catch(onError);
          void flush();
        };
        watch = new PingWatch({
          ping: () => main.ping(),
          timeoutMs: pingTimeoutMs,
          onFrozen: () => onError(new Error(`no answer to PING within ${pingTimeoutMs} ms`)),
          onThawed: () => {
            update(false);
            catchUp();
          },
        });
        // On (re)connect of any connection, catch up: messages sent meanwhile were missed.
        main.on('ready', () => {
          watch?.reset();
          update(false);
          catchUp();
        });
        for (const conn of [sub, ops]) {
          conn.on('error', onError);
          conn.on('ready', () => {
            update(false);
            catchUp();
          });
        }
        for (const conn of [main, sub, ops]) conn.on('end', () => onError(new Error('connection closed')));
        sub
          .connect()
          .then(() =>
            sub.subscribe(channel, (text) => {
              const msg = parseMessage(text, Date.now(), ttlMs, tally.drop);
              if (msg) apply(headsToApply(msg, replica, context, tally.drop));
            }),
          )
          .catch(onError);
        ops.connect().catch(onError);
        void readOps();
        // A Redis that takes connections but never answers (stopped at start) raises no error.
        const startCheck = setTimeout(() => {
          if (!link.connected) onError(new Error(`not connected within ${START_GRACE_MS} ms`));
        }, START_GRACE_MS);
        startCheck.unref();
        timers.push(startCheck);

        // Liveness: a PING every interval (one at a time); operator changes still queued are retried.
        timers.push(
          setInterval(() => {
            if (!main.isReady) return;
            watch?.tick();
            if (outbox.size > 0 && writable()) void flush();
          }, pingIntervalMs),
        );
        // Publish heads that moved, off the request path.
        timers.push(
          setInterval(() => {
            if (!writable()) return;
            const heads = ledger.changed(local());
            if (heads.length === 0) return;
            for (const m of messagesOf(replica, heads, Date.now())) main.publish(channel, m).catch(onError);
          }, scanMs),
        );
        // Snapshot: catch up on what was missed, then rewrite this replica's own entry (the heads
        // it observed itself, never what it learned: a head outlives no replica that saw it).
        // The hash expires too, so it goes once every replica is gone.
        timers.push(
          setInterval(() => {
            if (!writable()) return;
            readSnapshot()
              .then(async () => {
                const mine = ledger.ownHeads(local());
                if (mine.length === 0) return;
                await main.hSet(hash, replica, messagesOf(replica, mine, Date.now())[0] as string);
                await main.pExpire(hash, ttlMs);
              })
              .catch(onError);
          }, settings.snapshotIntervalMs),
        );
        for (const t of timers) t.unref();
      });

      host.hooks.shutdown.tapPromise('shared-state', async () => {
        closed = true;
        for (const t of timers.splice(0)) clearInterval(t);
        relay?.remove();
        relay = undefined;
        await clients.closeAll(answering());
      });
    },
  });
}
