/**
 * Config of the rate-limit plugin: the top-level `rateLimiters` block, the
 * `rateLimitBudget` key of projects, networks and upstreams (auth strategies and API-key records
 * carry theirs in the auth schema), and `upstreams[].rateLimitAutoTune`.
 */
import { Duration, type ResolvedConfig, type SchemaFragment, Strict, Type } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import { StorageBreakerSchema, type StorageBreakerSettings } from 'svc-proxy/util';
import { normalizeRateLimitShapes } from './erpc.ts';

/** Seconds in each period name. */
export const PERIOD_SECONDS = { second: 1, minute: 60, hour: 3600, day: 86_400 } as const;
/** A period name. */
export type Period = keyof typeof PERIOD_SECONDS;

const rule = Strict({
  method: Type.Optional(Type.String({ default: '*', description: 'method glob the rule counts' })),
  maxCount: Type.Integer({ minimum: 0, description: 'requests allowed per period; 0 always rejects' }),
  period: Type.Union([Type.Literal('second'), Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day')], { description: 'fixed window' }),
  perIP: Type.Optional(Type.Boolean({ default: false, description: 'one counter per client address (behind trusted forwarders, the forwarded client)' })),
  perUser: Type.Optional(Type.Boolean({ default: false, description: 'one counter per authenticated user id' })),
  perNetwork: Type.Optional(Type.Boolean({ default: false, description: 'one counter per network' })),
});

const budget = Strict({
  id: Type.String({ minLength: 1, maxLength: 64, description: 'referenced by `rateLimitBudget` fields' }),
  rules: Type.Array(rule, { description: 'every matching rule must have room' }),
});

const budgetRef = Type.String({ minLength: 1, description: 'budget id from `rateLimiters.budgets[]`' });

/**
 * `upstreams[].rateLimitAutoTune` (eRPC's auto-tuner, upstream/ratelimiter_autotuner.go): on by
 * default for an upstream with a `rateLimitBudget`, as in eRPC; `enabled: false` turns it off.
 */
const autoTune = Strict(
  {
    enabled: Type.Optional(Type.Boolean({ default: true, description: 'tune the budget of this upstream (default true when it has a rateLimitBudget)' })),
    adjustmentPeriod: Type.Optional(
      Duration({ default: '1m', description: 'window per method: at its end, with at least 10 answers, the rate-limited share decides' }),
    ),
    errorRateThreshold: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: 1,
        default: 0.1,
        description: 'above this share of rate-limited answers (HTTP 429 or a rate-limit message) in a window, the budget is lowered',
      }),
    ),
    increaseFactor: Type.Optional(
      Type.Number({ exclusiveMinimum: 1, default: 1.05, description: 'budget multiplier after a window with no rate-limited answer' }),
    ),
    decreaseFactor: Type.Optional(
      Type.Number({ exclusiveMinimum: 0, exclusiveMaximum: 1, default: 0.95, description: 'budget multiplier after a window above errorRateThreshold' }),
    ),
    minBudget: Type.Optional(Type.Integer({ minimum: 0, default: 0, description: 'lowest maxCount tuning may set; 0 = no floor (tuning never goes below 1)' })),
    maxBudget: Type.Optional(Type.Integer({ minimum: 0, default: 100_000, description: 'highest maxCount tuning may set; 0 = no ceiling' })),
  },
  { description: "lower the maxCount of this upstream's rateLimitBudget rules while the upstream answers rate limits, raise it back while it does not" },
);

/** Schema fragment of the plugin. */
export const rateLimitSchema: SchemaFragment = {
  normalize: normalizeRateLimitShapes,
  root: {
    rateLimiters: Strict(
      {
        store: Type.Optional(
          Strict({
            driver: Type.Union([Type.Literal('memory'), Type.Literal('redis')], { default: 'memory', description: '`redis` shares counters between replicas' }),
            redis: Type.Optional(
              Strict({
                uri: Type.String({ description: 'redis://host:port[/db]' }),
                password: Type.Optional(Type.String()),
                keyPrefix: Type.Optional(Type.String({ default: 'svc_rl:' })),
                timeout: Type.Optional(
                  Duration({
                    default: '50ms',
                    description: 'a check the store has not answered by then is decided by the per-process limiter (and counts toward the breaker)',
                  }),
                ),
                breaker: Type.Optional(StorageBreakerSchema),
              }),
            ),
          }),
        ),
        budgets: Type.Optional(Type.Array(budget, { default: [] })),
      },
      { description: 'rate-limit budgets attached by id to auth strategies, API keys, projects, networks and upstreams' },
    ),
  },
  project: { rateLimitBudget: budgetRef },
  network: { rateLimitBudget: budgetRef },
  upstream: { rateLimitBudget: budgetRef, rateLimitAutoTune: autoTune },
};

/** `upstreams[].rateLimitAutoTune` as validated (durations in ms). */
export interface AutoTuneConfig {
  enabled: boolean;
  adjustmentPeriod: number;
  errorRateThreshold: number;
  increaseFactor: number;
  decreaseFactor: number;
  minBudget: number;
  maxBudget: number;
}

/** eRPC's defaults (common/defaults.go), used for an upstream with a budget and no `rateLimitAutoTune`. */
export const AUTO_TUNE_DEFAULTS: Readonly<AutoTuneConfig> = Object.freeze({
  enabled: true,
  adjustmentPeriod: 60_000,
  errorRateThreshold: 0.1,
  increaseFactor: 1.05,
  decreaseFactor: 0.95,
  minBudget: 0,
  maxBudget: 100_000,
});

/** One rule as validated. */
export interface RuleConfig {
  method?: string;
  maxCount: number;
  period: Period;
  perIP?: boolean;
  perUser?: boolean;
  perNetwork?: boolean;
}

/** The `rateLimiters` block as validated. */
export interface RateLimitersConfig {
  store?: {
    driver?: 'memory' | 'redis';
    redis?: { uri: string; password?: string; keyPrefix?: string; timeout?: number; breaker?: Partial<StorageBreakerSettings> };
  };
  budgets?: Array<{ id: string; rules: RuleConfig[] }>;
}

/**
 * The block of a resolved config, with every budget reference checked.
 * Warns (in `c.warnings`) about an upstream whose `rateLimitAutoTune` has no budget to tune.
 * @throws ConfigError for a duplicate budget id, a redis store without `redis`, or a
 *   `rateLimitBudget` naming no budget (on a project, strategy, network, upstream,
 *   `upstreamDefaults` or a provider's `overrides`, where an endpoint shortcut's budget goes)
 */
export function rateLimitersOf(c: ResolvedConfig): RateLimitersConfig {
  const rl = (c.settings.rateLimiters ?? {}) as RateLimitersConfig;
  const ids = new Set<string>();
  const problems: Array<{ path: string; message: string }> = [];
  (rl.budgets ?? []).forEach((b, i) => {
    if (ids.has(b.id)) problems.push({ path: `rateLimiters.budgets[${i}].id`, message: `duplicate budget id "${b.id}"` });
    ids.add(b.id);
  });
  if (rl.store?.driver === 'redis' && !rl.store.redis) problems.push({ path: 'rateLimiters.store.redis', message: 'driver redis needs redis.uri' });
  const check = (ref: unknown, path: string) => {
    if (typeof ref === 'string' && !ids.has(ref)) problems.push({ path, message: `budget "${ref.slice(0, 64)}" is not declared in rateLimiters.budgets` });
  };
  c.projects.forEach((p, pi) => {
    check(p.settings.rateLimitBudget, `projects[${pi}].rateLimitBudget`);
    for (const [si, s] of (
      (p.settings.auth as { strategies?: Array<{ rateLimitBudget?: string; failOpen?: { rateLimitBudget?: string } }> } | undefined)?.strategies ?? []
    ).entries()) {
      check(s.rateLimitBudget, `projects[${pi}].auth.strategies[${si}].rateLimitBudget`);
      check(s.failOpen?.rateLimitBudget, `projects[${pi}].auth.strategies[${si}].failOpen.rateLimitBudget`);
    }
    p.networks.forEach((n, ni) => check(n.settings.rateLimitBudget, `projects[${pi}].networks[${ni}].rateLimitBudget`));
    check((p.upstreamDefaults as { rateLimitBudget?: unknown } | undefined)?.rateLimitBudget, `projects[${pi}].upstreamDefaults.rateLimitBudget`);
    // A provider's upstreams (an endpoint shortcut's too) take their budget from its overrides.
    for (const [vi, v] of ((p.settings.providers as Array<{ overrides?: Record<string, { rateLimitBudget?: unknown }> }> | undefined) ?? []).entries())
      for (const [glob, o] of Object.entries(v.overrides ?? {}))
        check(o?.rateLimitBudget, `projects[${pi}].providers[${vi}].overrides[${JSON.stringify(glob)}].rateLimitBudget`);
    p.upstreams.forEach((u, ui) => {
      check(u.settings.rateLimitBudget, `projects[${pi}].upstreams[${ui}].rateLimitBudget`);
      // eRPC ignores it silently; svc says so (it may come from upstreamDefaults, so not an error).
      const tune = u.settings.rateLimitAutoTune as { enabled?: boolean } | undefined;
      if (tune && tune.enabled !== false && typeof u.settings.rateLimitBudget !== 'string') {
        c.warnings.push(`projects[${pi}].upstreams[${ui}].rateLimitAutoTune has no effect: the upstream has no rateLimitBudget to tune`);
      }
    });
  });
  if (problems.length) throw new ConfigError(problems);
  return rl;
}
