/**
 * Upstream scope of the failsafe plugin: the first
 * `upstreams[].failsafe` entry matching a call applies to each request sent to that upstream;
 * its timeout may be adaptive (adaptive.ts).
 * Taps: `upstream` at UpstreamStage.CIRCUIT_BREAKER, RETRY and TIMEOUT, composing outside in
 * retry( breaker( timeout( transport ))), the timeout bounding one attempt. Composed once per
 * upstream: a policy no entry of the upstream configures adds no wrapper. The breaker records
 * with the calling client's key (its one-client bound, client-share.ts) and parks the failure
 * of an unclassified node error until the call's other answers say whom it is charged to
 * (core/pipeline/charge.ts); the retry never asks the same upstream again for a fact about the request.
 */
import { FINALITY, type PluginHost, type Upstream, type UpstreamCall, type UpstreamSender, UpstreamStage } from 'svc-proxy/plugin';
import { asSvcError, ErrFailsafeCircuitBreakerOpen } from 'svc-proxy/plugin/errors';
import { finishAttempt, isDeferred, isRequestFact, outcomeOf, settleFailedAttempt, startAttempt, whenCharged, wouldConfirm } from 'svc-proxy/plugin/contracts';
import { UPSTREAM_RETRIES } from './api.ts';
import { sleep } from 'svc-proxy/util';
import { type LatencyQuantiles, timeoutSpecOf } from './adaptive.ts';
import { breakerOutcome, CircuitBreaker } from './breaker.ts';
import type { FailsafeMetrics } from './metrics.ts';
import { attemptWithin, isRetryable, retryDelay } from './policies.ts';
import { compile, DEFAULT_UPSTREAM_FAILSAFE, matchEntry, type CompiledEntry, type FailsafeEntry } from './schema.ts';

/**
 * Taps the `upstream` hook (in that order: breaker, retry, timeout).
 * @param host the plugin host the failsafe plugin is applied to
 * @param now clock of the circuit breakers, ms
 * @param proxyBreakers filled with each upstream's breakers as its chain is composed (the registry behind `upstreamBreakers`)
 * @param latency the method latency quantiles an adaptive timeout is computed from (the network's, as in eRPC)
 * @param metrics the timeout metrics shared with the network scope
 */
export function tapUpstreamFailsafe(
  host: PluginHost,
  now: () => number,
  proxyBreakers: Map<Upstream, CircuitBreaker[]>,
  latency: LatencyQuantiles,
  metrics: FailsafeMetrics,
): void {
  const hooks = host.hooks;
  const upEntries = new WeakMap<Upstream, CompiledEntry[]>();
  const upEntriesOf = (u: Upstream): CompiledEntry[] => {
    let e = upEntries.get(u);
    if (!e) {
      e = compile(u.config.settings.failsafe ?? DEFAULT_UPSTREAM_FAILSAFE);
      upEntries.set(u, e);
    }
    return e;
  };

  hooks.upstream.tap({ name: 'failsafe:breaker', stage: UpstreamStage.CIRCUIT_BREAKER }, (inner: UpstreamSender, u: Upstream) => {
    const entries = upEntriesOf(u);
    if (!entries.some((c) => c.entry.circuitBreaker)) return inner;
    const byEntry = new Map<FailsafeEntry, CircuitBreaker>();
    for (const c of entries) if (c.entry.circuitBreaker) byEntry.set(c.entry, new CircuitBreaker(c.entry.circuitBreaker, now));
    proxyBreakers.set(u, [...byEntry.values()]);
    return async (call: UpstreamCall) => {
      const e = matchEntry(entries, call.method, FINALITY.get(call.ctx));
      const breaker = e ? byEntry.get(e) : undefined;
      if (!breaker) return inner(call);
      if (!breaker.allow()) throw new ErrFailsafeCircuitBreakerOpen(`circuit breaker of upstream ${u.id} is open`, { details: { upstream: u.id } });
      const ctx = call.ctx;
      // The one-client bound's key: the authenticated user, else the client address; none for svc's own calls.
      const client = ctx.internal ? undefined : (ctx.identity?.userId ?? ctx.http.clientAddress);
      try {
        const r = await inner(call);
        breaker.record(false, client);
        return r;
      } catch (err) {
        const se = asSvcError(err);
        const f = breakerOutcome(se);
        if (f === undefined || call.signal.aborted) throw err;
        // An unclassified node error counts only once no second upstream gave the same one (core/pipeline/charge.ts).
        if (f && isDeferred(ctx, se)) whenCharged(hooks, ctx, call.attempt, () => breaker.record(true, client));
        else breaker.record(f, client);
        throw err;
      }
    };
  });

  hooks.upstream.tap({ name: 'failsafe:upstream-retry', stage: UpstreamStage.RETRY }, (inner: UpstreamSender, u: Upstream) => {
    const entries = upEntriesOf(u);
    if (!entries.some((c) => c.entry.retry)) return inner;
    return async (call: UpstreamCall) => {
      const r = matchEntry(entries, call.method, FINALITY.get(call.ctx))?.retry;
      if (!r || r.maxAttempts <= 1) return inner(call);
      for (let n = 1; ; n++) {
        try {
          return await inner(call);
        } catch (e) {
          const err = asSvcError(e);
          // A rate-limited upstream is skipped to the next one, not hammered again; a fact about
          // the request (or an error another upstream already gave this call) is the same answer again.
          if (
            n >= r.maxAttempts ||
            !isRetryable(err) ||
            err.name === 'ErrEndpointCapacityExceeded' ||
            err.name === 'ErrUpstreamRateLimitRuleExceeded' ||
            err instanceof ErrFailsafeCircuitBreakerOpen ||
            call.signal.aborted ||
            isRequestFact(err) ||
            wouldConfirm(call.ctx, u.id, err)
          ) {
            throw err;
          }
          await sleep(retryDelay(r, n), call.signal).catch(() => {
            throw err;
          });
          // Close this try's record (its charge may wait for another upstream) and open one for the next (trace reason `retry`).
          finishAttempt(call.attempt, outcomeOf(err), err);
          settleFailedAttempt(hooks, call.ctx, call.attempt, err);
          call.attempt = startAttempt(call.ctx, u, 'retry');
          UPSTREAM_RETRIES.set(call.ctx.record, UPSTREAM_RETRIES.get(call.ctx.record) + 1);
        }
      }
    };
  });

  hooks.upstream.tap({ name: 'failsafe:upstream-timeout', stage: UpstreamStage.TIMEOUT }, (inner: UpstreamSender, u: Upstream) => {
    const entries = upEntriesOf(u);
    if (!entries.some((c) => c.entry.timeout)) return inner;
    return (call: UpstreamCall) => {
      const t = matchEntry(entries, call.method, FINALITY.get(call.ctx))?.timeout;
      const spec = t ? timeoutSpecOf(t) : undefined;
      if (!spec) return inner(call);
      const ms = latency.resolve(call.ctx, spec);
      if (!(ms > 0)) return inner(call);
      if (spec.quantile > 0) metrics.observeTimeout(call.ctx, 'upstream', ms);
      return attemptWithin(inner, call, ms, u.id, metrics);
    };
  });
}
