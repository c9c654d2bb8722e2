/**
 * Config of the rate-limit plugin (issue #13 item 5): the top-level `rateLimiters` block, and the
 * `rateLimitBudget` key of projects, networks and upstreams (auth strategies and API-key records
 * carry theirs in the auth schema).
 */
import { ConfigError, Duration, type ResolvedConfig, type SchemaFragment, StorageBreakerSchema, type StorageBreakerSettings, Strict, Type } from 'svc/plugin';

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

/** Schema fragment of the plugin. */
export const rateLimitSchema: SchemaFragment = {
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
                timeout: Type.Optional(Duration({ default: '50ms', description: 'a check the store has not answered by then is decided by the per-process limiter (and counts toward the breaker)' })),
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
  upstream: { rateLimitBudget: budgetRef },
};

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
  store?: { driver?: 'memory' | 'redis'; redis?: { uri: string; password?: string; keyPrefix?: string; timeout?: number; breaker?: Partial<StorageBreakerSettings> } };
  budgets?: Array<{ id: string; rules: RuleConfig[] }>;
}

/**
 * The block of a resolved config, with every budget reference checked.
 * @throws ConfigError for a duplicate budget id, a redis store without `redis`, or a
 *   `rateLimitBudget` naming no budget
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
    for (const [si, s] of (((p.settings.auth as { strategies?: Array<{ rateLimitBudget?: string }> } | undefined)?.strategies ?? []).entries())) check(s.rateLimitBudget, `projects[${pi}].auth.strategies[${si}].rateLimitBudget`);
    p.networks.forEach((n, ni) => check(n.settings.rateLimitBudget, `projects[${pi}].networks[${ni}].rateLimitBudget`));
    p.upstreams.forEach((u, ui) => check(u.settings.rateLimitBudget, `projects[${pi}].upstreams[${ui}].rateLimitBudget`));
  });
  if (problems.length) throw new ConfigError(problems);
  return rl;
}
