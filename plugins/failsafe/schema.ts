/**
 * Config and matching of the failsafe plugin: the schema of a
 * `failsafe[]` entry at network and upstream scope, the resolved {@link FailsafeEntry}, the
 * built-in defaults used when no `failsafe` is configured, and the matcher that picks the first
 * entry whose `matchMethod` glob and `matchFinality` fit a call. No hooks here; `network.ts` and
 * `upstream.ts` tap them in.
 */
import { Type, type TProperties } from '@sinclair/typebox';
import {
  DIRECTIVE_DEFAULTS_POINT,
  directiveDefaultsOf,
  type Directives,
  Duration,
  Extensible,
  type Finality,
  type SchemaFragment,
  Strict,
} from 'svc-proxy/plugin';
import { compileGlobs } from 'svc-proxy/util';
export { WRITE_METHODS } from 'svc-proxy/util';
import { normalizeFailsafeShapes } from './erpc.ts';

// ---------------------------------------------------------------------------------------
// Config

const timeoutSchema = Strict({
  duration: Type.Optional(
    Duration({
      description:
        'deadline of the whole network execution, or of one attempt at upstream scope; with quantile, added to the quantile (and the fallback before any sample)',
    }),
  ),
  quantile: Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 1,
      description:
        "adaptive: the deadline is duration + this quantile of the method's latency over the network's upstreams, clamped to minDuration..maxDuration; 0 = static",
    }),
  ),
  minDuration: Type.Optional(
    Duration({ description: 'floor of an adaptive deadline, and its latency part before any sample; default duration/2 (500ms without duration)' }),
  ),
  maxDuration: Type.Optional(Duration({ description: 'ceiling of an adaptive deadline; unset = none' })),
});
const retrySchema = Strict({
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, default: 3, description: 'total tries, first included' })),
  delay: Type.Optional(Duration({ default: '0ms', description: 'wait before the first retry' })),
  backoffFactor: Type.Optional(
    Type.Number({
      exclusiveMinimum: 0,
      default: 1.2,
      description:
        'delay multiplier per retry: the n-th retry waits delay × backoffFactor^(n-1), capped at backoffMaxDelay; below 1 the waits shrink (as in eRPC)',
    }),
  ),
  backoffMaxDelay: Type.Optional(Duration({ default: '3s', description: 'largest wait between tries' })),
  jitter: Type.Optional(Duration({ default: '0ms', description: 'random extra wait, 0..jitter' })),
  emptyResultMaxAttempts: Type.Optional(Type.Integer({ minimum: 1, default: 2, description: 'tries for retry-empty (EVM plugins)' })),
  emptyResultDelay: Type.Optional(
    Duration({
      description:
        "network scope: wait before a new round when the last one failed only because the data is not there yet (empty or missing-data answers), while the chain's block time is not estimated yet; then one block time is waited instead; unset = the backoff delay",
    }),
  ),
});
const hedgeSchema = Strict({
  delay: Type.Optional(Duration({ description: 'static hedge delay; with quantile, added to the quantile' })),
  quantile: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: "hedge after this quantile of the method's latency" })),
  minDelay: Type.Optional(Duration({ default: '100ms' })),
  maxDelay: Type.Optional(Duration({ default: '999s' })),
  maxCount: Type.Optional(Type.Integer({ minimum: 1, default: 1, description: 'extra legs at most' })),
});
const breakerSchema = Strict({
  failureThresholdCount: Type.Optional(Type.Integer({ minimum: 1, default: 20 })),
  failureThresholdCapacity: Type.Optional(Type.Integer({ minimum: 1, default: 80, description: 'ring of the last N outcomes' })),
  halfOpenAfter: Type.Optional(Duration({ default: '5m' })),
  successThresholdCount: Type.Optional(Type.Integer({ minimum: 1, default: 8 })),
  successThresholdCapacity: Type.Optional(Type.Integer({ minimum: 1, default: 200 })),
  maxClientShare: Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 1,
      default: 0.5,
      description:
        "largest share of the upstream's recent failures one client (user id, else client address) may cause and still count toward opening the breaker, while other clients are served; 1 = no bound",
    }),
  ),
  clientShareWindow: Type.Optional(Duration({ default: '1m', description: 'window of the maxClientShare bound' })),
});

function entrySchema(scope: 'network' | 'upstream') {
  const props: TProperties = {
    matchMethod: Type.Optional(Type.String({ default: '*', description: 'method glob' })),
    matchFinality: Type.Optional(
      Type.Array(Type.Union(['finalized', 'unfinalized', 'realtime', 'unknown'].map((f) => Type.Literal(f))), {
        description: 'finality classes this entry applies to',
      }),
    ),
    timeout: Type.Optional(timeoutSchema),
    retry: Type.Optional(retrySchema),
    hedge: Type.Optional(hedgeSchema),
  };
  if (scope === 'network') {
    // Every directive default the preset's plugins declare (the `directiveDefaults` extension point).
    props.directiveDefaults = Type.Optional(
      Extensible(DIRECTIVE_DEFAULTS_POINT, {}, { description: "spec §2.8 defaults for the calls this entry matches, below the network's own" }),
    );
    // Other plugins add their own keys to a network entry (the consensus plugin: `consensus`).
    return Extensible(FAILSAFE_ENTRY_POINT, props);
  }
  props.circuitBreaker = Type.Optional(breakerSchema);
  return Strict(props);
}

/**
 * The extension point of a network `failsafe[]` entry: a plugin adds keys to it with
 * `schema: { extend: { 'projects[].networks[].failsafe[]': {...} } }` and reads them from the
 * matched entry (the `failsafe.entry` call slot).
 */
export const FAILSAFE_ENTRY_POINT = 'projects[].networks[].failsafe[]';

/** Resolved failsafe entry (durations in ms). */
export interface FailsafeEntry {
  matchMethod: string;
  matchFinality?: Finality[];
  directiveDefaults?: Record<string, unknown>;
  /** `duration` alone is a static deadline; with `quantile` it is adaptive (adaptive.ts). Durations in ms. */
  timeout?: { duration?: number; quantile?: number; minDuration?: number; maxDuration?: number };
  /** `emptyResultDelay` (ms) paces a network round after a "data not there yet" failure (network.ts). */
  retry?: {
    maxAttempts: number;
    delay: number;
    backoffFactor: number;
    backoffMaxDelay: number;
    jitter: number;
    emptyResultMaxAttempts: number;
    emptyResultDelay?: number;
  };
  hedge?: { delay?: number; quantile?: number; minDelay: number; maxDelay: number; maxCount: number };
  /** Keys other plugins add to a network entry ({@link FAILSAFE_ENTRY_POINT}), resolved and defaulted like the rest. */
  readonly [added: string]: unknown;
  /**
   * Upstream scope only. `maxClientShare` (0..1) and `clientShareWindow` (ms) bound what one
   * client's failures can do to the breaker (client-share.ts); unset when built by hand (tests):
   * 0.5 and 60 s.
   */
  circuitBreaker?: {
    failureThresholdCount: number;
    failureThresholdCapacity: number;
    halfOpenAfter: number;
    successThresholdCount: number;
    successThresholdCapacity: number;
    maxClientShare?: number;
    clientShareWindow?: number;
  };
}

const FAILSAFE_DOC = 'first entry whose matchMethod and matchFinality match applies; an object is one entry; unset = the built-in defaults, [] = no policy';

/**
 * The config keys the failsafe plugin owns: `networks[].failsafe` and `upstreams[].failsafe`
 * (one entry or a list of entries); a fresh set of schema objects per plugin instance.
 */
export function failsafeSchemaFragment(): SchemaFragment {
  return {
    network: { failsafe: Type.Union([Type.Array(entrySchema('network')), entrySchema('network')], { description: FAILSAFE_DOC }) },
    upstream: { failsafe: Type.Union([Type.Array(entrySchema('upstream')), entrySchema('upstream')], { description: FAILSAFE_DOC }) },
    normalize: normalizeFailsafeShapes,
  };
}

/** Methods whose answers can legitimately take long: a longer default attempt timeout. */
const HEAVY_METHODS = 'eth_getLogs|eth_getBlockReceipts|eth_call|eth_estimateGas|eth_simulateV1|eth_createAccessList|trace_*|debug_*|arbtrace_*';

/**
 * Network failsafe used when neither the network nor `networkDefaults` sets `failsafe`: a hedge on the p90 of the method's latency over the network's upstreams, clamped to
 * 500 ms..2 s, one extra leg (writes are never hedged). Moving to the next upstream on a
 * retryable failure is the sweep's own behaviour and needs no policy.
 */
export const DEFAULT_NETWORK_FAILSAFE: readonly FailsafeEntry[] = Object.freeze([
  { matchMethod: '*', hedge: { quantile: 0.9, minDelay: 500, maxDelay: 2000, maxCount: 1 } },
]);

/**
 * Upstream failsafe used when neither the upstream nor `upstreamDefaults` sets `failsafe`: each
 * attempt gets 30 s for heavy methods (logs, receipts, calls, traces), 10 s for
 * everything else, then fails with `ErrEndpointRequestTimeout` so the sweep moves on.
 */
export const DEFAULT_UPSTREAM_FAILSAFE: readonly FailsafeEntry[] = Object.freeze([
  { matchMethod: HEAVY_METHODS, timeout: { duration: 30_000 } },
  { matchMethod: '*', timeout: { duration: 10_000 } },
]);

// ---------------------------------------------------------------------------------------
// Matching

/** A failsafe entry with its method matcher compiled. */
export interface CompiledEntry {
  entry: FailsafeEntry;
  matchMethod: (m: string) => boolean;
  /** `directiveDefaults` resolved once at compile time (undefined when the entry has none). */
  directiveDefaults?: Directives;
}

/**
 * Compiles a configured `failsafe` value (one entry, a list, or nothing).
 * @returns the entries in config order; empty for undefined/null
 */
export function compile(raw: unknown): CompiledEntry[] {
  if (raw === undefined || raw === null) return [];
  const list = (Array.isArray(raw) ? raw : [raw]) as FailsafeEntry[];
  return list.map((entry) => ({
    entry,
    // `a|b` alternation, like the other matchers (eRPC's matcher syntax).
    matchMethod: compileGlobs((entry.matchMethod ?? '*').split('|').map((g) => g.trim())),
    directiveDefaults: entry.directiveDefaults ? directiveDefaultsOf(entry.directiveDefaults) : undefined,
  }));
}

/** Distinct (method, finality) pairs whose match is remembered per entry list (method names come from clients). */
const MATCH_MEMO_LIMIT = 1024;
/** Remembered matches per compiled entry list: `null` is "no entry matches". */
const matchMemo = new WeakMap<readonly CompiledEntry[], Map<string, Map<Finality, CompiledEntry | null>>>();

/**
 * The first compiled entry matching a call's method and finality, or undefined. Remembered per
 * entry list: a call asks up to four times (breaker, retry and timeout per attempt,
 * the network entry per call), and each ask would run the method globs again.
 */
export function matchCompiled(entries: readonly CompiledEntry[], method: string, finality: Finality): CompiledEntry | undefined {
  let memo = matchMemo.get(entries);
  if (!memo) matchMemo.set(entries, (memo = new Map()));
  const byFinality = memo.get(method);
  const known = byFinality?.get(finality);
  if (known !== undefined) return known ?? undefined;
  let found: CompiledEntry | null = null;
  for (const c of entries) {
    if (!c.matchMethod(method)) continue;
    if (c.entry.matchFinality && c.entry.matchFinality.length && !c.entry.matchFinality.includes(finality)) continue;
    found = c;
    break;
  }
  if (byFinality) byFinality.set(finality, found);
  else if (memo.size < MATCH_MEMO_LIMIT) memo.set(method, new Map([[finality, found]]));
  return found ?? undefined;
}

/** The first entry matching a call's method and finality, or undefined. */
export function matchEntry(entries: readonly CompiledEntry[], method: string, finality: Finality): FailsafeEntry | undefined {
  return matchCompiled(entries, method, finality)?.entry;
}

/** Methods that change state: never hedged (a duplicate broadcast is not free). Shared through core. */
