/**
 * failsafe plugin (issue #3 item 3): timeout, retry, hedge and circuit breaker.
 * Taps: `attempt` (network scope, outside in: timeout( retry( hedge( sweep )))) at the
 * AttemptStage numbers; `upstream` (per-upstream scope: retry( breaker( timeout( transport ))), the
 * timeout bounding one attempt) at
 * the UpstreamStage numbers; `directives` (an entry's `directiveDefaults`, below the network's).
 * The first `failsafe[]` entry whose `matchMethod` glob and `matchFinality` match the call applies;
 * it is resolved once per call and cached in the call's state.
 *
 * Written in-house rather than on cockatiel: the hedge must share one pass over the selected
 * upstreams between legs, let a non-empty pending answer beat an empty one, and never hedge
 * writes; retries must start a new sweep; and the breaker must ignore rate limits, timeouts and
 * cancelled hedge legs. cockatiel's policies wrap opaque functions and cannot express those.
 */
import { Type, type TProperties } from '@sinclair/typebox';
import { compileGlobs } from '../../core/glob.ts';
import { linkedController, sleep } from '../../core/abort.ts';
import type { CallContext, Directives, Finality } from '../../core/context.ts';
import { Duration, Strict, directiveDefaultsProps } from '../../core/config/schema.ts';
import { directiveDefaultsOf } from '../../core/config/load.ts';
import {
  asSvcError,
  ErrCancelled,
  ErrEndpointBillingIssue,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrFailsafeCircuitBreakerOpen,
  ErrFailsafeTimeoutExceeded,
  ErrUpstreamMalformedResponse,
  ErrUpstreamsExhausted,
  SvcError,
} from '../../core/errors.ts';
import { UpstreamCursor, type AttemptHandler, type Leg, type UpstreamCall, type UpstreamSender } from '../../core/hooks.ts';
import type { RpcResult } from '../../core/jsonrpc.ts';
import type { Plugin, Proxy } from '../../core/proxy.ts';
import type { Network } from '../../core/registry/network.ts';
import type { Upstream } from '../../core/registry/upstream.ts';
import { AttemptStage, DirectiveStage, UpstreamStage } from '../../core/stages.ts';
import { finishAttempt, outcomeOf, startAttempt } from '../../core/sweep.ts';
import { Counter } from 'prom-client';

// ---------------------------------------------------------------------------------------
// Config

const timeoutSchema = Strict({ duration: Duration({ description: 'deadline of the whole network execution, or of one attempt at upstream scope' }) });
const retrySchema = Strict({
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, default: 3, description: 'total tries, first included' })),
  delay: Type.Optional(Duration({ default: '0ms', description: 'wait before the first retry' })),
  backoffFactor: Type.Optional(Type.Number({ minimum: 1, default: 1.2, description: 'delay multiplier per retry' })),
  backoffMaxDelay: Type.Optional(Duration({ default: '3s', description: 'largest wait between tries' })),
  jitter: Type.Optional(Duration({ default: '0ms', description: 'random extra wait, 0..jitter' })),
  emptyResultMaxAttempts: Type.Optional(Type.Integer({ minimum: 1, default: 2, description: 'tries for retry-empty (EVM plugins)' })),
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
});

function entrySchema(scope: 'network' | 'upstream') {
  const props: TProperties = {
    matchMethod: Type.Optional(Type.String({ default: '*', description: 'method glob' })),
    matchFinality: Type.Optional(Type.Array(Type.Union(['finalized', 'unfinalized', 'realtime', 'unknown'].map((f) => Type.Literal(f))), { description: 'finality classes this entry applies to' })),
    timeout: Type.Optional(timeoutSchema),
    retry: Type.Optional(retrySchema),
    hedge: Type.Optional(hedgeSchema),
  };
  if (scope === 'network') {
    props.directiveDefaults = Type.Optional(Strict(Object.fromEntries(Object.entries(directiveDefaultsProps).map(([k, v]) => [k, Type.Optional(v)]))));
  } else {
    props.circuitBreaker = Type.Optional(breakerSchema);
  }
  return Strict(props);
}

/** Resolved failsafe entry (durations in ms). */
export interface FailsafeEntry {
  matchMethod: string;
  matchFinality?: Finality[];
  directiveDefaults?: Record<string, unknown>;
  timeout?: { duration: number };
  retry?: { maxAttempts: number; delay: number; backoffFactor: number; backoffMaxDelay: number; jitter: number; emptyResultMaxAttempts: number };
  hedge?: { delay?: number; quantile?: number; minDelay: number; maxDelay: number; maxCount: number };
  circuitBreaker?: { failureThresholdCount: number; failureThresholdCapacity: number; halfOpenAfter: number; successThresholdCount: number; successThresholdCapacity: number };
}

const FAILSAFE_DOC = 'first entry whose matchMethod and matchFinality match applies; an object is one entry; unset = the built-in defaults, [] = no policy';

/** Methods whose answers can legitimately take long: a longer default attempt timeout. */
const HEAVY_METHODS = 'eth_getLogs|eth_getBlockReceipts|eth_call|eth_estimateGas|eth_simulateV1|eth_createAccessList|trace_*|debug_*|arbtrace_*';

/**
 * Network failsafe used when neither the network nor `networkDefaults` sets `failsafe` (issue #8
 * item 2): a hedge on the p90 of the method's latency at the first upstream, clamped to
 * 500 ms..2 s, one extra leg (writes are never hedged). Moving to the next upstream on a
 * retryable failure is the sweep's own behaviour and needs no policy.
 */
export const DEFAULT_NETWORK_FAILSAFE: readonly FailsafeEntry[] = Object.freeze([
  { matchMethod: '*', hedge: { quantile: 0.9, minDelay: 500, maxDelay: 2000, maxCount: 1 } },
]);

/**
 * Upstream failsafe used when neither the upstream nor `upstreamDefaults` sets `failsafe` (issue
 * #8 item 2): each attempt gets 30 s for heavy methods (logs, receipts, calls, traces), 10 s for
 * everything else, then fails with `ErrEndpointRequestTimeout` so the sweep moves on.
 */
export const DEFAULT_UPSTREAM_FAILSAFE: readonly FailsafeEntry[] = Object.freeze([
  { matchMethod: HEAVY_METHODS, timeout: { duration: 30_000 } },
  { matchMethod: '*', timeout: { duration: 10_000 } },
]);

// ---------------------------------------------------------------------------------------
// Matching

interface CompiledEntry {
  entry: FailsafeEntry;
  matchMethod: (m: string) => boolean;
  /** `directiveDefaults` resolved once at compile time (undefined when the entry has none). */
  directiveDefaults?: Directives;
}

function compile(raw: unknown): CompiledEntry[] {
  if (raw === undefined || raw === null) return [];
  const list = (Array.isArray(raw) ? raw : [raw]) as FailsafeEntry[];
  return list.map((entry) => ({
    entry,
    // `a|b` alternation, like the other matchers (eRPC's matcher syntax).
    matchMethod: compileGlobs((entry.matchMethod ?? '*').split('|').map((g) => g.trim())),
    directiveDefaults: entry.directiveDefaults ? directiveDefaultsOf(entry.directiveDefaults) : undefined,
  }));
}

/** The first compiled entry matching a call's method and finality, or undefined. */
function matchCompiled(entries: readonly CompiledEntry[], method: string, finality: Finality): CompiledEntry | undefined {
  for (const c of entries) {
    if (!c.matchMethod(method)) continue;
    if (c.entry.matchFinality && c.entry.matchFinality.length && !c.entry.matchFinality.includes(finality)) continue;
    return c;
  }
  return undefined;
}

/** The first entry matching a call's method and finality, or undefined. */
export function matchEntry(entries: readonly CompiledEntry[], method: string, finality: Finality): FailsafeEntry | undefined {
  return matchCompiled(entries, method, finality)?.entry;
}

/** Methods that change state: never hedged (a duplicate broadcast is not free). */
export const WRITE_METHODS: ReadonlySet<string> = new Set([
  'eth_sendRawTransaction',
  'eth_sendTransaction',
  'eth_sendUserOperation',
  'eth_sendBundle',
  'eth_sendPrivateTransaction',
  'eth_sendRawTransactionConditional',
  'personal_sendTransaction',
]);

// ---------------------------------------------------------------------------------------
// Policies

/** Delay before retry number `n` (1-based): delay × factor^(n-1), capped, plus jitter (ms). */
export function retryDelay(r: NonNullable<FailsafeEntry['retry']>, n: number, random: () => number = Math.random): number {
  const base = Math.min(r.backoffMaxDelay, r.delay * r.backoffFactor ** Math.max(0, n - 1));
  return base + (r.jitter > 0 ? random() * r.jitter : 0);
}

/** Whether an error may be retried by a retry policy: never a revert or a client error. */
export function isRetryable(err: unknown): boolean {
  return err instanceof SvcError && err.retryable && !(err instanceof ErrCancelled);
}

/** Builds the error a timeout policy fails with (network scope: failsafe; upstream scope: the request's). */
type TimeoutError = new (message: string, opts?: { cause?: unknown }) => SvcError;

/**
 * Wraps a promise-producing function with a deadline; the inner work sees an aborted signal.
 * @param error the class of the error thrown at the deadline
 */
async function withTimeout<T>(ms: number, parent: AbortSignal, what: string, error: TimeoutError, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const link = linkedController(parent);
  // The error (a stack capture, several µs) is only built when the deadline fires.
  const timer = setTimeout(abortOnTimeout, ms, link.controller, ms, what, error);
  try {
    return await run(link.signal);
  } catch (e) {
    // The link aborts only through this timer or its parent: aborted while the parent is not
    // means the deadline fired, and the reason is the timer's error.
    if (link.signal.aborted && !parent.aborted) {
      const reason = link.signal.reason as SvcError;
      throw new (reason.constructor as TimeoutError)(reason.message, { cause: e });
    }
    throw e;
  } finally {
    clearTimeout(timer);
    link.dispose();
  }
}

/** Timer callback of {@link withTimeout} (module-level, so no closure is allocated per call). */
function abortOnTimeout(controller: AbortController, ms: number, what: string, error: TimeoutError): void {
  controller.abort(new error(`${what} exceeded the failsafe timeout of ${ms} ms`));
}

/**
 * Circuit breaker over a ring of the last `failureThresholdCapacity` outcomes (issue #3 item 3).
 * States: closed → open (failures in ring ≥ threshold) → half-open after `halfOpenAfter` →
 * closed after `successThresholdCount` successes within `successThresholdCapacity` trials; any
 * failure while half-open reopens it.
 */
export class CircuitBreaker {
  state: 'closed' | 'open' | 'half-open' = 'closed';
  private ring: boolean[] = [];
  private failures = 0;
  private openedAt = 0;
  private trials = 0;
  private successes = 0;

  /**
   * @param cfg thresholds (ms for `halfOpenAfter`)
   * @param now clock in ms
   */
  constructor(
    readonly cfg: NonNullable<FailsafeEntry['circuitBreaker']>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a call may be dialled now (moves open → half-open once `halfOpenAfter` passed). */
  allow(): boolean {
    if (this.state === 'open' && this.now() - this.openedAt >= this.cfg.halfOpenAfter) {
      this.state = 'half-open';
      this.trials = 0;
      this.successes = 0;
    }
    return this.state !== 'open';
  }

  /** Records a counted outcome (`true` = failure). */
  record(failure: boolean): void {
    if (this.state === 'half-open') {
      if (failure) return this.open();
      this.trials++;
      this.successes++;
      if (this.successes >= this.cfg.successThresholdCount) this.close();
      else if (this.trials >= this.cfg.successThresholdCapacity) this.open();
      return;
    }
    if (this.state === 'open') return;
    this.ring.push(failure);
    if (failure) this.failures++;
    if (this.ring.length > this.cfg.failureThresholdCapacity && this.ring.shift()) this.failures--;
    if (this.failures >= this.cfg.failureThresholdCount) this.open();
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.now();
  }

  private close(): void {
    this.state = 'closed';
    this.ring = [];
    this.failures = 0;
  }
}

/**
 * How an error counts for the breaker: `true` failure (5xx, transport, malformed, unauthorised,
 * billing), `false` success, `undefined` not counted (rate limits, timeouts, client errors,
 * cancellations, lost hedge legs).
 */
export function breakerOutcome(err: SvcError | undefined): boolean | undefined {
  if (!err) return false;
  if (err instanceof ErrEndpointServerSideException || err instanceof ErrUpstreamMalformedResponse || err instanceof ErrEndpointUnauthorized || err instanceof ErrEndpointBillingIssue) return true;
  if (err.retryable) return undefined; // rate limits, timeouts, missing data, unsupported...
  if (err instanceof ErrCancelled) return undefined;
  // Reverts and other deterministic answers prove the upstream works.
  return err.code === 3 || err.name === 'ErrEndpointExecutionException' || err.name === 'ErrEndpointNonceException' ? false : undefined;
}

// ---------------------------------------------------------------------------------------
// Plugin

const ENTRY = Symbol('svc.failsafe.entry');

/**
 * The network failsafe entry that applies to a call, once the failsafe plugin matched it
 * (EVM plugins read `retry.emptyResultMaxAttempts` from it). Undefined when none matched.
 */
export function failsafeEntryOf(ctx: CallContext): FailsafeEntry | undefined {
  return ctx.state.get(ENTRY) as FailsafeEntry | undefined;
}

/** Registry of breakers, for tests and the admin `svc_project` view. */
const breakers = new WeakMap<Proxy, Map<Upstream, CircuitBreaker[]>>();

/** The circuit breakers of an upstream (one per failsafe entry with a `circuitBreaker`). */
export function upstreamBreakers(proxy: Proxy, u: Upstream): readonly CircuitBreaker[] {
  return breakers.get(proxy)?.get(u) ?? [];
}

/** Options of the failsafe plugin. */
export interface FailsafePluginOptions {
  /** Clock for breakers (tests), ms. */
  now?: () => number;
}

/**
 * Creates the failsafe plugin.
 * @param opts test hooks
 */
export function failsafePlugin(opts: FailsafePluginOptions = {}): Plugin {
  return {
    name: 'failsafe',
    schema: {
      network: { failsafe: Type.Union([Type.Array(entrySchema('network')), entrySchema('network')], { description: FAILSAFE_DOC }) },
      upstream: { failsafe: Type.Union([Type.Array(entrySchema('upstream')), entrySchema('upstream')], { description: FAILSAFE_DOC }) },
    },
    apply(proxy: Proxy) {
      const hooks = proxy.hooks;
      const now = opts.now ?? Date.now;
      const netEntries = new WeakMap<Network, CompiledEntry[]>();
      const retries = new Counter({
        name: 'svc_network_request_retries_total',
        help: 'Network-scope retry rounds started',
        labelNames: ['project', 'network', 'category'],
        registers: [proxy.metrics],
      });
      const hedges = new Counter({
        name: 'svc_network_hedges_total',
        help: 'Hedge legs started',
        labelNames: ['project', 'network', 'category'],
        registers: [proxy.metrics],
      });
      const entriesOf = (n: Network): CompiledEntry[] => {
        let e = netEntries.get(n);
        if (!e) {
          e = compile(n.config.settings.failsafe ?? DEFAULT_NETWORK_FAILSAFE);
          netEntries.set(n, e);
        }
        return e;
      };
      const entryFor = (ctx: CallContext): FailsafeEntry | undefined => {
        if (ctx.state.has(ENTRY)) return ctx.state.get(ENTRY) as FailsafeEntry | undefined;
        const e = matchEntry(entriesOf(ctx.network), ctx.request.method, ctx.finality);
        ctx.state.set(ENTRY, e);
        return e;
      };

      // An entry's directiveDefaults sit below the network's own and the request's (§2.8).
      // The match made here is the call's entry (finality is classified before this stage and
      // nothing changes it or the method later), so the network wrappers do not match again.
      hooks.directives.tap({ name: 'failsafe', stage: DirectiveStage.RESOLVE + 10 }, (d: Directives, ctx: CallContext) => {
        const entries = entriesOf(ctx.network);
        if (entries.length === 0) return d;
        const c = matchCompiled(entries, ctx.request.method, ctx.finality);
        ctx.state.set(ENTRY, c?.entry);
        if (!c?.directiveDefaults) return d;
        const out: Directives = { ...d };
        for (const k in c.directiveDefaults) {
          const key = k as keyof Directives;
          if (out[key] === undefined) (out as Record<string, unknown>)[key] = c.directiveDefaults[key];
        }
        return out;
      });

      // ---- network scope ---------------------------------------------------------------
      // Composed once per network: a policy no entry of the network configures adds no wrapper
      // (and no promise layer) to its calls.
      const configures = (n: Network, policy: 'hedge' | 'retry' | 'timeout'): boolean => entriesOf(n).some((c) => c.entry[policy] !== undefined);

      hooks.attempt.tap({ name: 'failsafe:hedge', stage: AttemptStage.HEDGE }, (inner: AttemptHandler, network: Network): AttemptHandler => {
        if (!configures(network, 'hedge')) return inner;
        const hedged = async (ctx: CallContext, leg: Leg, h: NonNullable<FailsafeEntry['hedge']>): Promise<RpcResult> => {
          const delay = hedgeDelay(ctx, leg, h);
          return runHedged(ctx, leg, inner, delay, h.maxCount, () => {
            ctx.record.networkHedges++;
            hedges.inc({ project: ctx.project.id, network: ctx.network.id, category: proxy.methodLabel.value(ctx.request.method) });
          });
        };
        return (ctx, leg) => {
          const h = entryFor(ctx)?.hedge;
          if (!h || WRITE_METHODS.has(ctx.request.method) || leg.cursor.remaining < 2) return inner(ctx, leg);
          return hedged(ctx, leg, h);
        };
      });

      hooks.attempt.tap({ name: 'failsafe:retry', stage: AttemptStage.RETRY }, (inner: AttemptHandler, network: Network): AttemptHandler => {
        if (!configures(network, 'retry')) return inner;
        const retried = async (ctx: CallContext, leg: Leg, r: NonNullable<FailsafeEntry['retry']>): Promise<RpcResult> => {
          for (let n = 1; ; n++) {
            const round: Leg = n === 1 ? leg : { cursor: new UpstreamCursor(leg.cursor.upstreams), reason: 'retry', signal: leg.signal };
            try {
              return await inner(ctx, round);
            } catch (e) {
              if (n >= r.maxAttempts || !isRetryable(e) || leg.signal.aborted) throw e;
              ctx.record.networkRetries++;
              ctx.record.networkAttempts++;
              retries.inc({ project: ctx.project.id, network: ctx.network.id, category: proxy.methodLabel.value(ctx.request.method) });
              await sleep(retryDelay(r, n), leg.signal).catch(() => {
                throw e;
              });
            }
          }
        };
        return (ctx, leg) => {
          const r = entryFor(ctx)?.retry;
          if (!r || r.maxAttempts <= 1) return inner(ctx, leg);
          return retried(ctx, leg, r);
        };
      });

      hooks.attempt.tap({ name: 'failsafe:timeout', stage: AttemptStage.TIMEOUT }, (inner: AttemptHandler, network: Network): AttemptHandler => {
        if (!configures(network, 'timeout')) return inner;
        return (ctx, leg) => {
          const t = entryFor(ctx)?.timeout;
          if (!t) return inner(ctx, leg);
          return withTimeout(t.duration, leg.signal, `${ctx.request.method} on ${ctx.network.id}`, ErrFailsafeTimeoutExceeded, (signal) => inner(ctx, { ...leg, signal }));
        };
      });

      // ---- upstream scope --------------------------------------------------------------
      const upEntries = new WeakMap<Upstream, CompiledEntry[]>();
      const upEntriesOf = (u: Upstream): CompiledEntry[] => {
        let e = upEntries.get(u);
        if (!e) {
          e = compile(u.config.settings.failsafe ?? DEFAULT_UPSTREAM_FAILSAFE);
          upEntries.set(u, e);
        }
        return e;
      };
      const proxyBreakers = new Map<Upstream, CircuitBreaker[]>();
      breakers.set(proxy, proxyBreakers);

      hooks.upstream.tap({ name: 'failsafe:breaker', stage: UpstreamStage.CIRCUIT_BREAKER }, (inner: UpstreamSender, u: Upstream) => {
        const entries = upEntriesOf(u);
        if (!entries.some((c) => c.entry.circuitBreaker)) return inner;
        const byEntry = new Map<FailsafeEntry, CircuitBreaker>();
        for (const c of entries) if (c.entry.circuitBreaker) byEntry.set(c.entry, new CircuitBreaker(c.entry.circuitBreaker, now));
        proxyBreakers.set(u, [...byEntry.values()]);
        return async (call: UpstreamCall) => {
          const e = matchEntry(entries, call.method, call.ctx.finality);
          const breaker = e ? byEntry.get(e) : undefined;
          if (!breaker) return inner(call);
          if (!breaker.allow()) throw new ErrFailsafeCircuitBreakerOpen(`circuit breaker of upstream ${u.id} is open`, { details: { upstream: u.id } });
          try {
            const r = await inner(call);
            breaker.record(false);
            return r;
          } catch (err) {
            const f = breakerOutcome(asSvcError(err));
            if (f !== undefined && !call.signal.aborted) breaker.record(f);
            throw err;
          }
        };
      });

      hooks.upstream.tap({ name: 'failsafe:upstream-retry', stage: UpstreamStage.RETRY }, (inner: UpstreamSender, u: Upstream) => {
        const entries = upEntriesOf(u);
        if (!entries.some((c) => c.entry.retry)) return inner;
        return async (call: UpstreamCall) => {
          const r = matchEntry(entries, call.method, call.ctx.finality)?.retry;
          if (!r || r.maxAttempts <= 1) return inner(call);
          for (let n = 1; ; n++) {
            try {
              return await inner(call);
            } catch (e) {
              const err = asSvcError(e);
              // A rate-limited upstream is skipped to the next one, not hammered again.
              if (n >= r.maxAttempts || !isRetryable(err) || err.name === 'ErrEndpointCapacityExceeded' || err instanceof ErrFailsafeCircuitBreakerOpen || call.signal.aborted) throw err;
              await sleep(retryDelay(r, n), call.signal).catch(() => {
                throw err;
              });
              // Close this try's record and open one for the next (trace reason `retry`).
              finishAttempt(call.attempt, outcomeOf(err), err);
              hooks.attemptDone.call(call.attempt);
              call.attempt = startAttempt(call.ctx, u, 'retry');
              call.ctx.record.upstreamRetries++;
            }
          }
        };
      });

      hooks.upstream.tap({ name: 'failsafe:upstream-timeout', stage: UpstreamStage.TIMEOUT }, (inner: UpstreamSender, u: Upstream) => {
        const entries = upEntriesOf(u);
        if (!entries.some((c) => c.entry.timeout)) return inner;
        return (call: UpstreamCall) => {
          const t = matchEntry(entries, call.method, call.ctx.finality)?.timeout;
          if (!t) return inner(call);
          const scoped: UpstreamCall = { ...call };
          // One upstream request ran out of its time: the request's own timeout error (issue #8 item 2).
          return withTimeout(t.duration, call.signal, `${call.method} on upstream ${u.id}`, ErrEndpointRequestTimeout, (signal) => {
            scoped.signal = signal;
            return inner(scoped);
          }).finally(() => {
            // An inner wrapper may have opened a new attempt record: hand it back to the caller.
            call.attempt = scoped.attempt;
          });
        };
      });
    },
  };
}

/** Hedge delay in ms: static `delay`, or the method's latency quantile (+ delay), clamped. */
function hedgeDelay(ctx: CallContext, leg: Leg, h: NonNullable<FailsafeEntry['hedge']>): number {
  // A static delay is taken as configured; only the adaptive (quantile) delay is clamped.
  if (h.quantile === undefined || h.quantile <= 0) return h.delay ?? h.minDelay;
  let d = h.delay ?? h.minDelay;
  {
    const first = leg.cursor.upstreams[0];
    if (first) {
      const s = ctx.project.health.snapshot(first.id, ctx.request.method);
      const q = h.quantile >= 0.99 ? s.p99 : h.quantile >= 0.9 ? s.p90 : h.quantile >= 0.7 ? s.p70 : s.p50;
      if (s.requests > 0 && q > 0) d = q * 1000 + (h.delay ?? 0);
    }
  }
  return Math.min(h.maxDelay, Math.max(h.minDelay, d));
}

/**
 * Runs a primary leg and up to `maxCount` hedge legs on the same cursor. The first usable
 * answer wins and the other legs are aborted (their sockets closed); an empty answer only wins
 * when no other leg is still pending; a deterministic error (a revert) settles the call.
 */
function runHedged(ctx: CallContext, leg: Leg, inner: AttemptHandler, delayMs: number, maxCount: number, onHedge: () => void): Promise<RpcResult> {
  return new Promise<RpcResult>((resolve, reject) => {
    const links: ReturnType<typeof linkedController>[] = [];
    let pending = 0;
    let settled = false;
    let emptyFallback: RpcResult | undefined;
    const causes: SvcError[] = [];
    let timer: NodeJS.Timeout | undefined;
    let hedgesStarted = 0;

    const finish = (fn: () => void, winner?: RpcResult) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      const lost = new ErrCancelled('hedge leg lost the race');
      for (const l of links) {
        if (!l.signal.aborted) l.controller.abort(lost);
        l.dispose();
      }
      if (winner) for (const a of ctx.record.attempts) if (a.won && a.upstreamId !== winner.upstreamId) a.won = false;
      fn();
    };

    const settleIfDone = () => {
      if (pending > 0 || settled) return;
      if (leg.cursor.remaining > 0 && hedgesStarted < maxCount && !leg.signal.aborted) {
        // A leg failed over its upstreams before the delay: no point waiting for the timer.
        startLeg(true);
        return;
      }
      if (emptyFallback) finish(() => resolve(emptyFallback as RpcResult), emptyFallback);
      else finish(() => reject(causes.length === 1 ? causes[0] : new ErrUpstreamsExhausted(flatten(causes))));
    };

    const startLeg = (hedge: boolean) => {
      if (settled || leg.cursor.remaining === 0) return;
      if (hedge) {
        hedgesStarted++;
        onHedge();
      }
      const link = linkedController(leg.signal);
      links.push(link);
      pending++;
      inner(ctx, { cursor: leg.cursor, reason: hedge ? 'hedge' : leg.reason, signal: link.signal }).then(
        (r) => {
          pending--;
          if (settled) return;
          if (r.isEmpty() && pending > 0) {
            emptyFallback ??= r;
            return;
          }
          finish(() => resolve(r), r);
        },
        (e: unknown) => {
          pending--;
          if (settled) return;
          const err = asSvcError(e);
          if (!err.retryable && !(err instanceof ErrCancelled)) {
            finish(() => reject(err));
            return;
          }
          causes.push(err);
          settleIfDone();
        },
      );
      if (hedgesStarted < maxCount) scheduleHedge();
    };

    const scheduleHedge = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        if (!settled && hedgesStarted < maxCount && leg.cursor.remaining > 0) startLeg(true);
      }, delayMs);
    };

    startLeg(false);
  });
}

function flatten(causes: readonly SvcError[]): SvcError[] {
  return causes.flatMap((c) => (c instanceof ErrUpstreamsExhausted ? [...c.causes] : [c]));
}
