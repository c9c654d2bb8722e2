/**
 * rate-limit plugin (eRPC order auth → project → network → upstream). Owns
 * `rateLimiters` and the `rateLimitBudget` key of projects, networks and upstreams.
 * - Client side, at `CallStage.RATE_LIMIT` (outermost): the budget of the caller's auth strategy
 *   or API key, then the project's, then the network's. Over one: HTTP 429, -32005
 *   "rate-limit exceeded" as `ErrAuthRateLimitRuleExceeded`, `ErrProjectRateLimitRuleExceeded` or
 *   `ErrNetworkRateLimitRuleExceeded`; `error.data.details` names the budget, its window and the seconds to
 *   wait, also sent as `Retry-After` on a single call's answer; in a batch only that element fails. A refused call
 *   counts as not routed (`record.routed` false): it carries no cost headers (spec §4.5).
 * - Upstream side, at `UpstreamStage.RATE_LIMIT`: over an upstream's budget the call skips that
 *   upstream undialled with `ErrUpstreamRateLimitRuleExceeded` (trace `rate_limited`), which
 *   counts toward neither its error or throttle rate nor its circuit breaker.
 * - Auto-tuning (`upstreams[].rateLimitAutoTune`, on by default for an upstream with a budget, as
 *   in eRPC): the same tap feeds that upstream's answers to its {@link AutoTuner}, which lowers
 *   the budget's `maxCount` while the upstream answers rate limits and raises it while it does
 *   not; `svc_rate_limiter_budget_max_count` shows every rule's current count.
 * A network or upstream without a budget (and no budgets in auth) gets no wrapper at all.
 * Internal calls (state polls, the WebSocket head follower) are not charged to client budgets.
 * Provides `RATE_LIMIT_SERVICE` (svc-proxy/plugin): doors whose work is not a pipeline call (WebSocket
 * `eth_subscribe`) charge it to the same client-side budgets, in the same order.
 */
import { Counter, Gauge } from 'prom-client';
import { RateLimiterRes } from 'rate-limiter-flexible';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  type Identity,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  type Upstream,
  type UpstreamCall,
  type UpstreamSender,
  UpstreamStage,
} from 'svc-proxy/plugin';
import {
  ErrAuthRateLimitRuleExceeded,
  ErrEndpointCapacityExceeded,
  ErrNetworkRateLimitRuleExceeded,
  ErrProjectRateLimitRuleExceeded,
  ErrUpstreamRateLimitRuleExceeded,
  type SvcErrorOptions,
} from 'svc-proxy/plugin/errors';
import { RATE_LIMIT_SERVICE } from './api.ts';
import { closeRedisClient, openRedisClient, type RedisClient, StorageBreaker } from 'svc-proxy/util';
import { AutoTuner, type Adjustment } from './autotune.ts';
import { Budget, DEFAULT_STORE_TIMEOUT_MS, fallbackReporter, refusalData, retryAfterSeconds, type Rule, type SharedStore, type Subject } from './budgets.ts';
import { AUTO_TUNE_DEFAULTS, type AutoTuneConfig, rateLimitersOf, rateLimitSchema } from './schema.ts';

export { AutoTuner, MIN_SAMPLES, tunedCount, type Adjustment } from './autotune.ts';
export { Budget, Rule } from './budgets.ts';
export { AUTO_TUNE_DEFAULTS, PERIOD_SECONDS, rateLimitSchema, type AutoTuneConfig } from './schema.ts';

/** The message of every client-side rejection (eRPC's, which clients match on). */
const MESSAGE = 'rate-limit exceeded';

/** A client-side refusal's error class (by scope: auth, project, network). */
type RefusalError = new (m: string, o: SvcErrorOptions) => Error;

function subjectOf(ctx: CallContext): Subject {
  return { method: ctx.request.method, clientAddress: ctx.http.clientAddress, userId: ctx.identity?.userId, networkId: ctx.network.id };
}

/** What a budget check needs of a call or of other charged work. */
interface Charged {
  subject: Subject;
  projectId: string;
  /** The call, when it is one: a refused call is marked not routed. */
  ctx?: CallContext;
}

/** The auto-tune settings of an upstream: its own, else eRPC's defaults; undefined when off or without a budget. */
function autoTuneOf(u: Upstream): AutoTuneConfig | undefined {
  if (typeof u.config.settings.rateLimitBudget !== 'string') return undefined;
  const cfg = { ...AUTO_TUNE_DEFAULTS, ...(u.config.settings.rateLimitAutoTune as Partial<AutoTuneConfig> | undefined) };
  return cfg.enabled ? cfg : undefined;
}

/** Options of {@link rateLimitPlugin}. */
export interface RateLimitPluginOptions {
  /** Clock of the auto-tuners' windows (tests), ms. */
  now?: () => number;
}

/**
 * Creates the rate-limit plugin (name `rate-limit`).
 * @param opts test hooks
 * @returns a plugin tapping `configured`, `call` (RATE_LIMIT), `upstream` (RATE_LIMIT) and `shutdown`
 */
export function rateLimitPlugin(opts: RateLimitPluginOptions = {}): Plugin {
  return definePlugin({
    name: 'rate-limit',
    provides: [RATE_LIMIT_SERVICE],
    schema: rateLimitSchema,
    apply(host: PluginHost) {
      const rejected = new Counter({
        name: 'svc_rate_limited_total',
        help: 'Calls or upstream attempts refused by a rate-limit budget',
        labelNames: ['project', 'scope', 'budget'],
        registers: [host.metrics],
      });
      const fallbacks = new Counter({
        name: 'svc_rate_limit_store_fallback_total',
        help: 'Budget checks decided per process because the shared store failed, missed its deadline or is skipped by its open breaker',
        registers: [host.metrics],
      });
      const maxCount = new Gauge({
        name: 'svc_rate_limiter_budget_max_count',
        help: 'Requests a budget rule allows per period now: its maxCount, as the auto-tuner left it',
        labelNames: ['budget', 'method', 'period', 'scope'],
        registers: [host.metrics],
        // Several workers each tune their own copy: /metrics on the primary shows their mean, not a sum.
        aggregator: 'average',
      });
      const showCount = (b: Budget, r: Rule) => maxCount.set({ budget: b.id, method: r.method, period: r.period, scope: r.scope }, r.maxCount);
      const budgets = new Map<string, Budget>();
      let anyAuthBudget = false;
      let redis: RedisClient | undefined;

      host.hooks.configured.tap('rate-limit', (c) => {
        const rl = rateLimitersOf(c);
        let store: SharedStore | undefined;
        if (rl.store?.driver === 'redis' && rl.store.redis) {
          const r = rl.store.redis;
          const onFallback = fallbackReporter(host.logger, () => fallbacks.inc());
          const client = openRedisClient(r, onFallback);
          redis = client;
          // A full window is the store answering, not failing.
          const breaker = new StorageBreaker({
            connector: 'rate-limit-store',
            kind: 'rate-limit',
            logger: host.logger,
            metrics: host.metrics,
            settings: r.breaker,
            isFailure: (e) => !(e instanceof RateLimiterRes),
          });
          store = { client, keyPrefix: r.keyPrefix ?? 'svc_rl:', timeoutMs: r.timeout ?? DEFAULT_STORE_TIMEOUT_MS, breaker, onFallback };
        }
        for (const b of rl.budgets ?? []) {
          const budget = new Budget(b.id, b.rules, store);
          budgets.set(b.id, budget);
          for (const r of budget.rules) showCount(budget, r);
        }
        // API-key records and JWT claims name budgets at run time: any budget may come from auth.
        anyAuthBudget = budgets.size > 0;
      });

      const check = async (budget: Budget | undefined, c: Charged, scope: string, Err: RefusalError): Promise<void> => {
        if (!budget) return;
        const refused = await budget.refusal(c.subject);
        if (refused) {
          rejected.inc({ project: c.projectId, scope, budget: budget.id });
          // Refused before routing: no cost headers count it, nothing bills it (spec §4.5).
          if (c.ctx) c.ctx.record.routed = false;
          // eRPC's exact message (clients match on it); what refused and when to come back go in
          // `error.data.details` and the Retry-After header.
          throw new Err(MESSAGE, { details: { ...refusalData(budget.id, refused) }, retryAfterSeconds: retryAfterSeconds(refused) });
        }
      };
      const checkAll = async (c: Charged, identity: Identity | undefined, network: Network): Promise<void> => {
        await check(budgetOf(budgets, identity?.rateLimitBudget), c, 'auth', ErrAuthRateLimitRuleExceeded);
        await check(budgetOf(budgets, network.project.config.settings.rateLimitBudget), c, 'project', ErrProjectRateLimitRuleExceeded);
        await check(budgetOf(budgets, network.config.settings.rateLimitBudget), c, 'network', ErrNetworkRateLimitRuleExceeded);
      };
      host.services.provide(RATE_LIMIT_SERVICE, {
        charge: (network, method, caller) =>
          checkAll(
            { subject: { method, clientAddress: caller.clientAddress, userId: caller.identity?.userId, networkId: network.id }, projectId: network.project.id },
            caller.identity,
            network,
          ),
      });

      host.hooks.call.tap({ name: 'rate-limit', stage: CallStage.RATE_LIMIT }, (inner: CallHandler, network: Network): CallHandler => {
        const projectBudget = budgetOf(budgets, network.project.config.settings.rateLimitBudget);
        const networkBudget = budgetOf(budgets, network.config.settings.rateLimitBudget);
        if (!anyAuthBudget && !projectBudget && !networkBudget) return inner;
        return async (ctx) => {
          // svc's own traffic (state polls, the WebSocket head follower) spends no client's budget.
          if (ctx.internal) return inner(ctx);
          const c: Charged = { subject: subjectOf(ctx), projectId: ctx.project.id, ctx };
          await check(budgetOf(budgets, ctx.identity?.rateLimitBudget), c, 'auth', ErrAuthRateLimitRuleExceeded);
          await check(projectBudget, c, 'project', ErrProjectRateLimitRuleExceeded);
          await check(networkBudget, c, 'network', ErrNetworkRateLimitRuleExceeded);
          return inner(ctx);
        };
      });

      host.hooks.upstream.tap({ name: 'rate-limit', stage: UpstreamStage.RATE_LIMIT }, (inner: UpstreamSender, u: Upstream): UpstreamSender => {
        const budget = budgetOf(budgets, u.config.settings.rateLimitBudget);
        if (!budget) return inner;
        const admit = async (call: UpstreamCall): Promise<void> => {
          if (!(await budget.admit(subjectOf(call.ctx)))) {
            rejected.inc({ project: call.ctx.project.id, scope: 'upstream', budget: budget.id });
            throw new ErrUpstreamRateLimitRuleExceeded(`upstream ${u.id} is over its rate-limit budget ${budget.id}: skipped`, {
              details: { upstream: u.id, budget: budget.id },
            });
          }
        };
        const tune = autoTuneOf(u);
        if (!tune) {
          return async (call: UpstreamCall) => {
            await admit(call);
            return inner(call);
          };
        }
        const onAdjust = (a: Adjustment) => {
          showCount(budget, a.rule);
          host.logger.info(
            {
              budget: budget.id,
              upstream: u.id,
              rule: a.rule.method,
              triggeredBy: a.method,
              from: a.from,
              to: a.to,
              errorRate: a.errorRate,
              samples: a.samples,
              direction: a.direction,
            },
            'rate-limit auto-tuner: adjusting budget',
          );
        };
        const tuner = new AutoTuner((m) => budget.rulesFor(m), tune, onAdjust, opts.now);
        return async (call: UpstreamCall) => {
          await admit(call);
          try {
            const r = await inner(call);
            tuner.recordSuccess(call.method);
            return r;
          } catch (e) {
            // Only the upstream's own rate limits lower the budget (eRPC records nothing else).
            if (e instanceof ErrEndpointCapacityExceeded) tuner.recordError(call.method);
            throw e;
          }
        };
      });

      host.hooks.shutdown.tapPromise('rate-limit', async () => {
        const c = redis;
        redis = undefined;
        if (c) await closeRedisClient(c);
      });
    },
  });
}

function budgetOf(budgets: ReadonlyMap<string, Budget>, id: unknown): Budget | undefined {
  return typeof id === 'string' ? budgets.get(id) : undefined;
}
