/**
 * Config of the healthcheck plugin (spec §2.4, §5.7): the top-level `healthCheck` block, as eRPC
 * users write it. `auth.strategies[]` is the project-auth strategy schema (spec §5.1), checked and
 * run by the auth plugin's `auth` service at start-up (so `database` is refused here: API keys
 * belong to projects).
 */
import { type ResolvedConfig, Strict, type TProperties, Type } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';
import { AuthBlockSchema } from 'svc-proxy/plugins/auth';

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

/** Schema fragment: the top-level `healthCheck` key. */
export const healthcheckSchema: { root: TProperties } = {
  root: {
    healthCheck: Type.Optional(
      Strict(
        {
          mode: Type.Optional(
            Type.Union([Type.Literal('simple'), Type.Literal('networks'), Type.Literal('verbose')], {
              default: 'simple',
              description: 'spec §4.3 response shape',
            }),
          ),
          defaultEval: Type.Optional(Type.String({ default: 'any:initializedUpstreams', description: 'strategy when the probe sends no `eval` (spec §4.3)' })),
          auth: Type.Optional(
            AuthBlockSchema('auth strategies of the healthcheck, as in `projects[].auth` (checked by the auth plugin at start-up); none: open'),
          ),
        },
        { description: 'spec §2.4 healthcheck settings' },
      ),
    ),
  },
};

/** The resolved `healthCheck` block. */
export interface HealthcheckConfig {
  mode: HealthMode;
  defaultEval: Strategy;
  /** The `auth` block as written: the auth service checks and compiles it. */
  auth?: unknown;
}

/**
 * The healthcheck settings of a resolved config.
 * @throws ConfigError when `defaultEval` names no strategy of spec §4.3
 */
export function healthcheckConfigOf(config: ResolvedConfig): HealthcheckConfig {
  const raw = config.settings.healthCheck as Partial<HealthcheckConfig> | undefined;
  const defaultEval = raw?.defaultEval ?? 'any:initializedUpstreams';
  if (!isStrategy(defaultEval))
    throw new ConfigError([{ path: 'healthCheck.defaultEval', message: `unknown evaluation strategy "${defaultEval}" (one of ${STRATEGIES.join(', ')})` }]);
  return { mode: raw?.mode ?? 'simple', defaultEval, auth: raw?.auth };
}

/** Whether a string names a strategy of spec §4.3. */
export function isStrategy(s: string): s is Strategy {
  return (STRATEGIES as readonly string[]).includes(s);
}
