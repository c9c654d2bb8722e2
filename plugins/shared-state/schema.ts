/**
 * Config of the shared-state plugin: the top-level `sharedState` block (off when absent).
 */
import { Duration, type SchemaFragment, Strict, Type } from 'svc-proxy/plugin';

/** Default interval of the heads snapshot, ms. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 5000;
/** How often local heads are compared with what was published, ms. */
export const DEFAULT_CHANGE_SCAN_MS = 100;
/** Default bound of the operator-change stream `<clusterKey>:ops`, entries (approximate: XADD MAXLEN ~). */
export const DEFAULT_OPS_LOG_MAX_LENGTH = 10_000;

/** The schema fragment: top-level `sharedState`. */
export const sharedStateSchema: SchemaFragment = {
  root: {
    sharedState: Strict(
      {
        redis: Strict(
          { uri: Type.String({ minLength: 1, description: 'redis://[user:password@]host:port[/db] (redacted in logs and the admin config view)' }) },
          { description: 'the Redis every replica of the deployment shares' },
        ),
        clusterKey: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 200,
            default: 'svc',
            description: 'prefix of the channel and keys: keeps two deployments on one Redis apart',
          }),
        ),
        snapshotInterval: Type.Optional(
          Duration({
            default: '5s',
            description:
              'how often a replica reads the heads snapshot and rewrites its own entry (a replica that starts or reconnects catches up from it); an entry lives three intervals (3 s to 10 min), then it is ignored',
          }),
        ),
        opsLogMaxLength: Type.Optional(
          Type.Integer({
            minimum: 100,
            maximum: 1_000_000,
            default: DEFAULT_OPS_LOG_MAX_LENGTH,
            description:
              'entries kept in the operator-change stream `<clusterKey>:ops` (cordons, API-key changes; trimmed approximately with XADD MAXLEN ~): a replica that starts replays them all, one that reconnects those it missed',
          }),
        ),
      },
      {
        description:
          'shared state across replicas: upstream heads travel through Redis pub/sub and a periodic snapshot, operator changes (cordons, API-key changes) through a Redis stream; off when absent',
      },
    ),
  },
};

/** `sharedState` as the plugin uses it. */
export interface SharedStateSettings {
  /** The shared Redis. */
  redis: { uri: string };
  /** Channel and key prefix. */
  clusterKey: string;
  /** Snapshot interval, ms; shared entries live three of them (merge.ts `entryTtlMs`). */
  snapshotIntervalMs: number;
  /** Bound of the operator-change stream, entries. */
  opsLogMaxLength: number;
}

/**
 * Reads `sharedState` from the resolved settings.
 * @param settings the top-level settings as the schema leaves them
 * @returns the settings, or undefined when the block is absent (the plugin stays off)
 */
export function sharedStateSettingsOf(settings: Readonly<Record<string, unknown>>): SharedStateSettings | undefined {
  const s = settings.sharedState as { redis?: { uri?: string }; clusterKey?: string; snapshotInterval?: number | string; opsLogMaxLength?: number } | undefined;
  if (!s?.redis?.uri) return undefined;
  const interval = typeof s.snapshotInterval === 'number' && s.snapshotInterval > 0 ? s.snapshotInterval : DEFAULT_SNAPSHOT_INTERVAL_MS;
  const opsLogMaxLength =
    typeof s.opsLogMaxLength === 'number' && Number.isInteger(s.opsLogMaxLength) && s.opsLogMaxLength > 0 ? s.opsLogMaxLength : DEFAULT_OPS_LOG_MAX_LENGTH;
  return { redis: { uri: s.redis.uri }, clusterKey: s.clusterKey ?? 'svc', snapshotIntervalMs: interval, opsLogMaxLength };
}
