/**
 * Stage numbers of every around-style and ordered hook tap, in one place (DESIGN "Style").
 * tapable runs taps lowest stage first; in a wrapper chain the lowest stage wraps first and
 * so ends up innermost. Higher numbers sit further out.
 */

/** `call` hook (network wrappers), outside in: static, multiplex, cache, tip, interpolation, getLogs. */
export const CallStage = {
  STATIC_RESPONSES: 900,
  LOCAL_METHODS: 850,
  MULTIPLEX: 800,
  CACHE: 700,
  TIP_ENFORCEMENT: 650,
  INTERPOLATION: 600,
  GETLOGS: 500,
  STATEFUL_GUARD: 400,
} as const;

/** `attempt` hook (network-scope failsafe), outside in: timeout( consensus( retry( hedge( sweep ))))). */
export const AttemptStage = {
  TIMEOUT: 400,
  CONSENSUS: 300,
  RETRY: 200,
  HEDGE: 100,
} as const;

/** `upstream` hook (per-upstream transport wrappers), outside in: retry( breaker( timeout( ... ))). */
export const UpstreamStage = {
  RETRY: 400,
  CIRCUIT_BREAKER: 300,
  /** One attempt's deadline (inside retry, so each try gets the full duration). */
  TIMEOUT: 250,
  RATE_LIMIT: 200,
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
} as const;

/** `directives` hook, in run order. */
export const DirectiveStage = {
  RESOLVE: 100,
} as const;
