/**
 * Config of the healthcheck plugin (spec §2.4, §5.7): the top-level `healthCheck` block, as eRPC
 * users write it. `auth.strategies[]` uses the project-auth strategy shape (spec §5.1); the
 * healthcheck accepts the two that make sense for probes, `secret` and `network`.
 */
import { ConfigError, Strict, Type, type ResolvedConfig, type TProperties } from '../../core/plugin-api.ts';

/** The eight evaluation strategies of spec §4.3. */
export const STRATEGIES = [
  'any:initializedUpstreams',
  'any:errorRateBelow90',
  'all:errorRateBelow90',
  'any:errorRateBelow100',
  'all:errorRateBelow100',
  'any:evm:eth_chainId',
  'all:evm:eth_chainId',
  'all:activeUpstreams',
] as const;

/** One evaluation strategy name (spec §4.3). */
export type Strategy = (typeof STRATEGIES)[number];

/** Response shape (spec §4.3 "Responses"). */
export type HealthMode = 'simple' | 'networks' | 'verbose';

const secretStrategy = Strict({
  type: Type.Literal('secret'),
  secret: Strict({
    id: Type.Optional(Type.String({ description: 'name of the secret (never the value) for logs' })),
    value: Type.String({ minLength: 1, description: 'sent by the prober as query `secret=` or header `X-SVC-Secret-Token`' }),
  }),
});

const networkStrategy = Strict({
  type: Type.Literal('network'),
  network: Strict({
    allowLocalhost: Type.Optional(Type.Boolean({ default: false, description: 'let 127.0.0.0/8 and ::1 in' })),
    allowedCIDRs: Type.Optional(Type.Array(Type.String(), { description: 'CIDRs allowed (IPv4 or IPv6); orchestrator probes come from node addresses (spec §5.3)' })),
  }),
});

/** Schema fragment: the top-level `healthCheck` key. */
export const healthcheckSchema: { root: TProperties } = {
  root: {
    healthCheck: Type.Optional(
      Strict(
        {
          mode: Type.Optional(Type.Union([Type.Literal('simple'), Type.Literal('networks'), Type.Literal('verbose')], { default: 'simple', description: 'spec §4.3 response shape' })),
          defaultEval: Type.Optional(Type.String({ default: 'any:initializedUpstreams', description: 'strategy when the probe sends no `eval` (spec §4.3)' })),
          auth: Type.Optional(
            Strict(
              { strategies: Type.Array(Type.Union([secretStrategy, networkStrategy]), { minItems: 1, description: 'any one passing lets the probe in' }) },
              { description: 'spec §5.7: open when omitted' },
            ),
          ),
        },
        { description: 'spec §2.4 healthcheck settings' },
      ),
    ),
  },
};

/** One resolved auth strategy of the healthcheck. */
export type HealthAuthStrategy = { type: 'secret'; secret: { id?: string; value: string } } | { type: 'network'; network: { allowLocalhost: boolean; allowedCIDRs: string[] } };

/** The resolved `healthCheck` block. */
export interface HealthcheckConfig {
  mode: HealthMode;
  defaultEval: Strategy;
  auth?: { strategies: HealthAuthStrategy[] };
}

/**
 * The healthcheck settings of a resolved config.
 * @throws ConfigError when `defaultEval` names no strategy of spec §4.3
 */
export function healthcheckConfigOf(config: ResolvedConfig): HealthcheckConfig {
  const raw = config.settings.healthCheck as Partial<HealthcheckConfig> | undefined;
  const defaultEval = raw?.defaultEval ?? 'any:initializedUpstreams';
  if (!isStrategy(defaultEval)) throw new ConfigError([{ path: 'healthCheck.defaultEval', message: `unknown evaluation strategy "${defaultEval}" (one of ${STRATEGIES.join(', ')})` }]);
  return { mode: raw?.mode ?? 'simple', defaultEval, auth: raw?.auth };
}

/** Whether a string names a strategy of spec §4.3. */
export function isStrategy(s: string): s is Strategy {
  return (STRATEGIES as readonly string[]).includes(s);
}
