/**
 * shared-state plugin: replicas behind a load balancer share what they learn about upstream
 * heads (latest, finalized) through Redis, off the request path. Each replica publishes heads
 * that moved to `<clusterKey>:state` (with its replica id) and applies what other replicas
 * publish, forward-only per upstream (matched by project id + upstream id); every
 * `snapshotInterval` it reads and writes the hash `<clusterKey>:heads` (field
 * `<project>/<upstream>` → `latest,finalized`), so a replica that starts or reconnects catches
 * up. With Redis gone every replica keeps serving from its own view: the gauge
 * `svc_shared_state_connected` drops to 0 with one warn line, and one info line on recovery;
 * node-redis reconnects with a capped backoff. Off unless the top-level `sharedState` is set.
 *
 * Files: `merge.ts` (the merge rules, pure), `schema.ts` (config); this file wires Redis.
 */
import { randomUUID } from 'node:crypto';
import { Gauge } from 'prom-client';
import { CHAIN_STATE_SERVICE, closeRedisClient, openRedisClient, type Plugin, type PluginHost, type RedisClient, type Upstream, type Network } from 'svc/plugin';
import { headField, HeadLedger, headsToApply, parseMessage, parseSnapshotValue, type SharedHead } from './merge.ts';
import { DEFAULT_CHANGE_SCAN_MS, sharedStateSchema, sharedStateSettingsOf } from './schema.ts';

export { headField, HeadLedger, headsToApply, MAX_HEADS_PER_MESSAGE, parseMessage, parseSnapshotValue, type SharedHead, type StateMessage } from './merge.ts';
export { DEFAULT_CHANGE_SCAN_MS, sharedStateSchema, sharedStateSettingsOf, type SharedStateSettings } from './schema.ts';

/** Options of {@link sharedStatePlugin}. */
export interface SharedStatePluginOptions {
  /** How often local heads are compared with what was published, ms (default {@link DEFAULT_CHANGE_SCAN_MS}). */
  changeScanMs?: number;
}

/** Every serving upstream of every project with its network. */
function* upstreamsOf(host: PluginHost): Generator<{ network: Network; upstream: Upstream }> {
  for (const project of host.projects.values()) {
    for (const network of project.networks.values()) {
      for (const upstream of network.upstreams) yield { network, upstream };
    }
  }
}

/**
 * Creates the shared-state plugin (name `shared-state`).
 * @param opts scan interval of local head changes
 * @returns a plugin owning the top-level `sharedState` key and tapping `configured` and `shutdown`
 */
export function sharedStatePlugin(opts: SharedStatePluginOptions = {}): Plugin {
  const scanMs = opts.changeScanMs ?? DEFAULT_CHANGE_SCAN_MS;
  return {
    name: 'shared-state',
    // No `dependsOn`: the chain state service is looked up when heads are applied, so presets
    // without evm-state (and tests that drop it) still build; there is then nothing to share.
    schema: sharedStateSchema,
    apply(host: PluginHost) {
      const replica = randomUUID();
      const ledger = new HeadLedger();
      let client: RedisClient | undefined;
      let subscriber: RedisClient | undefined;
      const timers: NodeJS.Timeout[] = [];
      /** undefined until first connected. */
      let connected: boolean | undefined;
      const gauge = new Gauge({ name: 'svc_shared_state_connected', help: 'Whether this replica is connected to the shared-state Redis (1) or serves from its own view (0)', registers: [host.metrics] });

      const find = (project: string, upstream: string): { network: Network; upstream: Upstream } | undefined => {
        const p = host.projects.get(project);
        const u = p?.upstreams.get(upstream);
        if (!p || !u) return undefined;
        for (const network of p.networks.values()) if (network.upstreams.includes(u)) return { network, upstream: u };
        return undefined;
      };
      const known = (h: SharedHead) => {
        const at = find(h.project, h.upstream);
        if (!at) return undefined;
        const s = host.chainState(at.network).peek(at.upstream);
        return { latest: s?.latest ?? 0, finalized: s?.finalized ?? 0 };
      };
      const apply = (heads: SharedHead[]): void => {
        const service = host.services.get(CHAIN_STATE_SERVICE);
        for (const h of heads) {
          const at = find(h.project, h.upstream);
          if (!at) continue;
          service?.observeShared?.(at.network, at.upstream, h.latest, h.finalized);
          ledger.learned(h);
        }
      };
      const local = function* (): Generator<SharedHead> {
        for (const { network, upstream } of upstreamsOf(host)) {
          const s = host.chainState(network).peek(upstream);
          if (s && (s.latest > 0 || s.finalized > 0)) yield { project: upstream.projectId, upstream: upstream.id, latest: s.latest, finalized: s.finalized };
        }
      };
      const setConnected = (up: boolean): void => {
        gauge.set(up ? 1 : 0);
        // Logged on transitions once connected (the two connections come up one after the other at start).
        if (connected === undefined) {
          if (up) connected = true;
          return;
        }
        if (connected === up) return;
        if (up) host.logger.info('shared state: Redis reachable again; applying the fleet snapshot');
        else host.logger.warn("shared state: Redis unreachable; serving from this replica's own view until it is back");
        connected = up;
      };

      host.hooks.configured.tap('shared-state', (c) => {
        const settings = sharedStateSettingsOf(c.settings);
        if (!settings) return;
        const channel = `${settings.clusterKey}:state`;
        const hash = `${settings.clusterKey}:heads`;
        // Connected means both connections are ready (commands and the subscription).
        const update = (): void => setConnected(main.isReady && sub.isReady);
        const onError = (): void => update();
        const main = openRedisClient({ uri: settings.redis.uri }, onError);
        client = main;
        const sub = main.duplicate();
        subscriber = sub;
        sub.on('error', onError);
        const readSnapshot = async (): Promise<void> => {
          const all = await main.hGetAll(hash);
          const heads: SharedHead[] = [];
          for (const [field, value] of Object.entries(all)) {
            const slash = field.indexOf('/');
            if (slash < 0) continue;
            heads.push({ project: field.slice(0, slash), upstream: field.slice(slash + 1), ...parseSnapshotValue(value) });
          }
          apply(headsToApply({ replica: '', heads }, replica, known));
        };
        // On (re)connect of either connection, catch up from the snapshot: messages sent meanwhile were missed.
        const onReady = (): void => {
          update();
          if (main.isReady) readSnapshot().catch(onError);
        };
        main.on('ready', onReady);
        sub.on('ready', onReady);
        main.on('end', onError);
        sub.on('end', onError);
        sub
          .connect()
          .then(() =>
            sub.subscribe(channel, (text) => {
              const msg = parseMessage(text);
              if (msg) apply(headsToApply(msg, replica, known));
            }),
          )
          .catch(onError);

        // Publish heads that moved, off the request path.
        timers.push(
          setInterval(() => {
            if (!main.isReady) return;
            const heads = ledger.changed(local());
            if (heads.length === 0) return;
            main.publish(channel, JSON.stringify({ replica, heads })).catch(onError);
          }, scanMs),
        );
        // Snapshot: catch up on what was missed, then write this replica's view (now at least the snapshot's).
        timers.push(
          setInterval(() => {
            if (!main.isReady) return;
            readSnapshot()
              .then(async () => {
                const fields: Record<string, string> = {};
                for (const h of local()) fields[headField(h.project, h.upstream)] = `${h.latest},${h.finalized}`;
                if (Object.keys(fields).length > 0) await main.hSet(hash, fields);
              })
              .catch(onError);
          }, settings.snapshotIntervalMs),
        );
        for (const t of timers) t.unref();
      });

      host.hooks.shutdown.tapPromise('shared-state', async () => {
        for (const t of timers.splice(0)) clearInterval(t);
        const c = client;
        const s = subscriber;
        client = subscriber = undefined;
        if (s) await closeRedisClient(s);
        if (c) await closeRedisClient(c);
      });
    },
  };
}
