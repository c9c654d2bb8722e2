/** Stage numbers of every ordered hook tap, in one place: taps run lowest first, so in a wrapper chain higher numbers sit further out. */

/** `call` hook (network wrappers), outside in. Only stages a plugin taps are listed; others take one with {@link stageBetween}. */
export const CallStage = {
  /** Client-side rate-limit budgets (rate-limit plugin): auth, then project, then network; outermost, so a call over budget costs nothing else. */
  RATE_LIMIT: 950,
  /** One OpenTelemetry span per call (tracing plugin): the outermost wrapper, so the span covers everything. */
  TRACING: 900,
  /** Configured static answers (static-responses): inside span and budgets, outside the rest, so they win over svc's own local answers. */
  STATIC_RESPONSES: 875,
  /** Methods answered or refused locally (evm-methods: `eth_chainId` from config, `eth_accounts`/`eth_sign` refused). */
  LOCAL_METHODS: 850,
  /** Identical in-flight calls share one execution (multiplex plugin, spec §4.6), before the cache. */
  MULTIPLEX: 800,
  /** Idempotent `eth_sendRawTransaction` (evm-methods), inside multiplexing. */
  IDEMPOTENT_BROADCAST: 790,
  /** Response cache (cache plugin): inside multiplexing, outside tip enforcement and interpolation, so a hit skips all upstream work. */
  CACHE: 700,
  /** A block far beyond the head answers null without a call (evm-state), outside tip enforcement. */
  FUTURE_BLOCK: 660,
  TIP_ENFORCEMENT: 650,
  /** The per-call cap of empty/pending retries (evm-retries), inside tip enforcement. */
  RETRY_KEEP: 630,
  INTERPOLATION: 600,
  /** Shadow upstreams get a sampled copy of an answered call (shadow plugin): inside interpolation, so the copy names the same block as the served call. */
  SHADOW: 550,
  GETLOGS: 500,
  STATEFUL_GUARD: 400,
} as const;

/** `attempt` hook (network-scope failsafe), outside in: timeout( consensus( nonce quorum( retry( hedge( broadcast( sweep )))))). */
export const AttemptStage = {
  TIMEOUT: 400,
  /** One slot per upstream, each running retry and hedge on its own upstream (consensus plugin). */
  CONSENSUS: 300,
  /** `eth_getTransactionCount` at `pending` asked of several upstreams at once, the highest count served (evm-nonce plugin): inside consensus, outside retry and hedge. */
  NONCE_QUORUM: 250,
  RETRY: 200,
  HEDGE: 100,
  /** A transaction sent to every selected upstream at once, one slot each (broadcast plugin): innermost, so no retry or hedge re-sends it. */
  BROADCAST: 50,
} as const;

/** `upstream` hook (per-upstream transport wrappers), outside in: integrity( retry( breaker( timeout( rate limit( tracing( batching( transport ))))))). */
export const UpstreamStage = {
  /** Client request headers forwarded to this upstream (forward-headers plugin): outermost, so every retry and hedge of the call carries them. */
  FORWARD_HEADERS: 475,
  /** Integrity checks (integrity plugin): outermost, so a failed check moves the call to another upstream instead of asking the same one again. */
  INTEGRITY: 450,
  RETRY: 400,
  CIRCUIT_BREAKER: 300,
  /** One attempt's deadline (inside retry, so each try gets the full duration). */
  TIMEOUT: 250,
  /** An upstream's own rate-limit budget (rate-limit plugin): inside the timeout, outside batching; an upstream over budget is skipped undialled. */
  RATE_LIMIT: 200,
  /** One OpenTelemetry span per physical upstream request (tracing plugin): inside retry and timeout, outside batching. */
  TRACING: 150,
  /** Outbound JSON-RPC batching (batching plugin, spec §4.7): the innermost wrapper. */
  BATCHING: 100,
} as const;

/** `select` hook (a waterfall over the candidate list), in run order. */
export const SelectStage = {
  /** Policy order (replaces the configured order). */
  POLICY: 100,
  /** Method support: `ignoreMethods`/`allowMethods`. */
  METHODS: 200,
  /** `use-upstream` directive. */
  USE_UPSTREAM: 300,
  /** Block availability and similar per-call filters. */
  AVAILABILITY: 400,
  /** Stateful filter methods need exactly one upstream (evm-methods). */
  STATEFUL_GUARD: 500,
} as const;

/** `directives` hook, in run order. */
export const DirectiveStage = {
  /** The call's finality is classified (evm-state) before anything matches on it. */
  FINALITY: 50,
  /** Network defaults, headers, query, allowClientDirectives (directives plugin). */
  RESOLVE: 100,
  /** A matched failsafe entry's `directiveDefaults`, below the network's own (failsafe). */
  FAILSAFE_DEFAULTS: 110,
  /** The integrity level is resolved from the directive, `headerMode` and profiles (integrity plugin, spec §2.8 #10). */
  INTEGRITY: 120,
  /** Directives are final: a plugin whose directive changes where the answer comes from marks the call (`markProvenance`, spec §2.8). */
  PROVENANCE: 130,
} as const;

/** `validate` hook (a bail hook: the first error wins), in run order. */
export const ValidateStage = {
  /** A null answer to a tagged block is an error (evm-state, spec §2.8 #9). */
  NULL_TAGGED_BLOCK: 0,
  /** Answers that cannot be right (a null state read, blind empty logs) tried elsewhere (evm-answer-sanity, spec §7). */
  ANSWER_SANITY: 50,
  /** Empty and pending answers retried elsewhere (evm-retries, spec §2.8 #1-2). */
  EMPTY_RESULT: 100,
  /** Heads observed in answers; an answer behind the head is an error (evm-state, spec §2.8 #7). */
  TIP: 1000,
} as const;

/** `attemptDone` hook, in run order. */
export const AttemptDoneStage = {
  /** The core health tracker records the attempt before any observer reads scores. */
  HEALTH: -100,
} as const;

/** `shutdown` hook, in run order (taps without a stage run at 0). */
export const ShutdownStage = {
  /** The metrics listener closes last, so a proxy stuck closing a store still answers `/metrics` in state `stopped` (spec §6). */
  METRICS_LISTENER: 1000,
} as const;

/**
 * A stage strictly between two of the same hook, for a plugin that needs its own position without a core change:
 * `stageBetween(CallStage.CACHE, CallStage.MULTIPLEX)`. Always the midpoint, so it stays put while the two keep their order;
 * plugins asking for the same position order themselves with tapable's `before` (docs/plugins.md "Ordering taps").
 * @throws RangeError when either is not finite, or nothing lies between them
 */
export function stageBetween(a: number, b: number): number {
  if (!Number.isFinite(a) || !Number.isFinite(b)) throw new RangeError(`stageBetween(${a}, ${b}): stages are finite numbers`);
  const mid = a + (b - a) / 2;
  if (mid === a || mid === b) throw new RangeError(`stageBetween(${a}, ${b}): no stage lies strictly between them`);
  return mid;
}
