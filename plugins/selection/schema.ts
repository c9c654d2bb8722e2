/**
 * Config of the selection plugin (spec §1.3): the `networks[].selectionPolicy` schema (also
 * under `networkDefaults`), its resolved form with defaults ({@link readSelectionSettings}), and
 * the boot-time check of every network's settings. No hooks here.
 */
import { Type, type TProperties } from '@sinclair/typebox';
import { type ConfigDocument, Duration, type Network, type NormalizeReport, parseDuration, type PluginHost, Strict } from 'svc-proxy/plugin';
import { ConfigError, type ConfigProblem } from 'svc-proxy/plugin/errors';
import type { EvalFunc } from './policy.ts';
import { DEFAULT_SCORE_WEIGHTS, type ScoreWeights } from './view.ts';
import { refuseSourceEvalFunc } from './erpc.ts';
import { normalizeScoreMultipliers, routingSchema } from './multipliers.ts';

/**
 * The config keys this plugin owns: `networks[].selectionPolicy` (and the same under
 * `networkDefaults`, merged into each network).
 */
export const selectionPolicySchema = Strict(
  {
    evalInterval: Type.Optional(Duration({ default: '15s', description: 'how often the ordered upstream list is re-evaluated (spec §1.3); must be > 0' })),
    evalTimeout: Type.Optional(
      Duration({
        default: '100ms',
        description: 'bound of a custom evalFunc: an async one is raced against it, a sync one is measured; on overrun the previous order is kept',
      }),
    ),
    scoreWeights: Type.Optional(
      Strict(
        {
          errorRate: Type.Optional(Type.Number({ minimum: 0, default: 4, description: 'weight of the error rate (0..1)' })),
          respLatency: Type.Optional(Type.Number({ minimum: 0, default: 15, description: 'weight of the p70 latency, seconds' })),
          throttledRate: Type.Optional(Type.Number({ minimum: 0, default: 4, description: 'weight of the throttle rate (0..1)' })),
          blockHeadLag: Type.Optional(Type.Number({ minimum: 0, default: 1, description: 'weight of the block-head lag, blocks' })),
          finalizationLag: Type.Optional(Type.Number({ minimum: 0, default: 0, description: 'weight of the finalization lag, blocks' })),
        },
        {
          default: {},
          description:
            "score = errorRate*w + p70Seconds*w + throttleRate*w + blockHeadLag*w + finalizationLag*w, lower is better (svc_selection_score); an upstream's routing.scoreMultipliers override these for that upstream",
        },
      ),
    ),
    evalFunc: Type.Optional(
      Type.Unsafe<EvalFunc>({
        'x-svc-kind': 'function',
        description:
          'TypeScript/JS configs only: `(upstreams, ctx) => upstreams` (sync or async) replacing the default policy; call `upstreams.removeCordoned()` to honour cordons (spec §3.1)',
      }),
    ),
  },
  { default: {}, description: 'per-network upstream selection policy (spec §1.3)' },
);

/** The schema fragment of the plugin: `networks[].selectionPolicy`, `upstreams[].routing` and their eRPC rewrites. */
export const selectionSchemaFragment: { network: TProperties; upstream: TProperties; normalize: (doc: ConfigDocument, out: NormalizeReport) => void } = {
  network: { selectionPolicy: selectionPolicySchema },
  upstream: { routing: routingSchema },
  normalize: (doc, out) => {
    refuseSourceEvalFunc(doc, out);
    normalizeScoreMultipliers(doc, out);
  },
};

/** A network's selection settings, resolved (durations in ms, weights defaulted). */
export interface SelectionSettings {
  /** `evalInterval`, ms (> 0). Default 15 000. */
  evalIntervalMs: number;
  /** `evalTimeout`, ms (> 0). Default 100. */
  evalTimeoutMs: number;
  /** `scoreWeights` with defaults 4 / 15 / 4 / 1 / 0. */
  weights: ScoreWeights;
  /** `evalFunc`, when configured. */
  evalFunc?: EvalFunc;
}

/**
 * Reads `selectionPolicy` settings (resolved or raw: durations as ms or strings).
 * @param raw the `selectionPolicy` object, or undefined for every default
 * @param path config path of the object, for errors (e.g. `projects[0].networks[1].selectionPolicy`)
 * @throws ConfigError naming `<path>.evalFunc` when it is not a function, `<path>.evalInterval`/`.evalTimeout` when not > 0, `<path>.scoreWeights.<k>` when not a finite number >= 0
 */
export function readSelectionSettings(raw: unknown, path: string): SelectionSettings {
  const problems: ConfigProblem[] = [];
  const o = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const duration = (key: string, def: number): number => {
    const v = o[key];
    if (v === undefined) return def;
    let n = Number.NaN;
    try {
      if (typeof v === 'number' || typeof v === 'string') n = parseDuration(v);
    } catch {
      // reported below
    }
    if (!Number.isFinite(n) || n <= 0) {
      problems.push({ path: `${path}.${key}`, message: `must be a duration greater than 0 (got ${JSON.stringify(v)})` });
      return def;
    }
    return n;
  };
  const evalIntervalMs = duration('evalInterval', 15_000);
  const evalTimeoutMs = duration('evalTimeout', 100);
  const weights: ScoreWeights = { ...DEFAULT_SCORE_WEIGHTS };
  const w = o.scoreWeights;
  if (w !== undefined && w !== null && typeof w === 'object') {
    for (const k of Object.keys(DEFAULT_SCORE_WEIGHTS) as (keyof ScoreWeights)[]) {
      const v = (w as Record<string, unknown>)[k];
      if (v === undefined) continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
        problems.push({ path: `${path}.scoreWeights.${k}`, message: `must be a finite number >= 0 (got ${JSON.stringify(v)})` });
      else weights[k] = v;
    }
  }
  const f = o.evalFunc;
  if (f !== undefined && typeof f !== 'function') {
    problems.push({
      path: `${path}.evalFunc`,
      message: `must be a function (upstreams, ctx) => upstreams, set from a TypeScript/JS config or a plugin; got ${f === null ? 'null' : typeof f}`,
    });
  }
  if (problems.length) throw new ConfigError(problems);
  return { evalIntervalMs, evalTimeoutMs, weights, evalFunc: typeof f === 'function' ? (f as EvalFunc) : undefined };
}

/** Config path of a network's `selectionPolicy`, for error messages. */
export function settingsPath(host: PluginHost, network: Network): string {
  const pi = host.config.projects.findIndex((p) => p.id === network.project.id);
  const ni = pi < 0 ? -1 : (host.config.projects[pi]?.networks.findIndex((n) => n.id === network.id) ?? -1);
  if (pi < 0) return `projects[?].networks[?].selectionPolicy`;
  return ni < 0 ? `projects[${pi}].networkDefaults.selectionPolicy` : `projects[${pi}].networks[${ni}].selectionPolicy`;
}

/**
 * Checks every network's (and `networkDefaults`') `selectionPolicy` of a config.
 * @throws ConfigError listing every problem, each with its config path
 */
export function validateConfig(host: PluginHost): void {
  const problems: ConfigProblem[] = [];
  const check = (raw: unknown, path: string) => {
    try {
      readSelectionSettings(raw, path);
    } catch (e) {
      if (e instanceof ConfigError) problems.push(...e.problems);
      else throw e;
    }
  };
  host.config.projects.forEach((p, i) => {
    const nd = p.networkDefaults as { selectionPolicy?: unknown };
    if (nd.selectionPolicy !== undefined) check(nd.selectionPolicy, `projects[${i}].networkDefaults.selectionPolicy`);
    p.networks.forEach((n, j) => check(n.settings.selectionPolicy, `projects[${i}].networks[${j}].selectionPolicy`));
  });
  if (problems.length) throw new ConfigError(problems);
}
