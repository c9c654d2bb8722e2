/**
 * Config of the selection plugin (spec §1.3): the `networks[].selectionPolicy` schema (also
 * under `networkDefaults`), its resolved form with defaults ({@link readSelectionSettings}), and
 * the boot-time check of every network's settings. No hooks here.
 */
import { Type, type TProperties } from '@sinclair/typebox';
import {
  type ConfigDocument,
  Duration,
  eachNetwork,
  isConfigObject,
  type Network,
  type NormalizeReport,
  parseDuration,
  pathOf,
  type PluginHost,
  Strict,
} from 'svc-proxy/plugin';
import type { EvalScope } from './api.ts';
import { MAX_SCOPES } from './scopes.ts';
import { ConfigError, type ConfigProblem } from 'svc-proxy/plugin/errors';
import { evaluatePolicy, type EvalFunc } from './policy.ts';
import { DEFAULT_SCORE_WEIGHTS, type ScoreWeights } from './view.ts';
import { normalizeScoreMultipliers, routingSchema } from './multipliers.ts';
import { compileSourcePolicy, PolicySourceError } from './sandbox.ts';

/** The `evalScope` values, narrowest last. */
export const EVAL_SCOPES: readonly EvalScope[] = ['network', 'network-method', 'network-finality', 'network-method-finality'];

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
          misbehaviors: Type.Optional(
            Type.Number({
              minimum: 0,
              default: 2,
              description: "weight of the consensus misbehaviour rate (0..1: misbehaviours over the upstream's requests in the health window)",
            }),
          ),
        },
        {
          default: {},
          description:
            "score = errorRate*w + p70Seconds*w + throttleRate*w + blockHeadLag*w + finalizationLag*w + misbehaviorRate*w, lower is better (svc_selection_score); an upstream's routing.scoreMultipliers override these for that upstream",
        },
      ),
    ),
    evalScope: Type.Optional(
      Type.Union(
        EVAL_SCOPES.map((v) => Type.Literal(v)),
        {
          default: 'network',
          description: `the grain of evaluation (eRPC's evalScope): \`network\` one order for every call; \`network-method\` one per method; \`network-finality\` one per finality of the call's block; \`network-method-finality\` one per pair. A narrower scope is evaluated first when a call of it arrives (for a method, once an upstream answered it; that call and the ones before its first evaluation use the network's order), then with the network's every evalInterval; at most ${MAX_SCOPES} per network, later ones use the network's order, and a scope without calls for an hour is dropped`,
        },
      ),
    ),
    evalFunc: Type.Optional(
      // One open schema for both forms (a union with a function schema breaks TypeBox's defaults):
      // readSelectionSettings checks the value and names the key.
      Type.Unsafe<EvalFunc | string>({
        'x-svc-kind': 'function',
        description:
          "the policy `(upstreams, ctx) => upstreams`. YAML: eRPC's JavaScript source (at most 64 KiB) with eRPC's chain helpers (removeCordoned, excludeIf, preferTag, sortByScore(PREFER_FASTEST)...), compiled once at load, tried once over two healthy upstreams (a failure is a config error), then run in a fresh node:vm context per evaluation bounded by evalTimeout; trusted code (node:vm is no security boundary). TypeScript/JS configs: a function (sync or async) over svc's view; call `upstreams.removeCordoned()` to honour cordons (spec §3.1)",
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
    normalizeEvalScope(doc, out);
    normalizeScoreMultipliers(doc, out);
  },
};

/**
 * eRPC's legacy `evalPerMethod` / `evalPerFinality` switches become the `evalScope` they stand
 * for (as eRPC's own loader does): both true → `network-method-finality`, one → its scope,
 * neither → `network`. An `evalScope` written next to them wins and they are only removed.
 */
export function normalizeEvalScope(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const sp = n.selectionPolicy;
    if (!isConfigObject(sp) || !('evalPerMethod' in sp || 'evalPerFinality' in sp)) return;
    const at = pathOf(path, 'selectionPolicy');
    const perMethod = sp.evalPerMethod === true;
    const perFinality = sp.evalPerFinality === true;
    for (const k of ['evalPerMethod', 'evalPerFinality'] as const) {
      const v = sp[k];
      if (v === undefined) continue;
      if (typeof v !== 'boolean') {
        out.problem(pathOf(at, k), `must be true or false (eRPC's legacy switch for evalScope), got ${JSON.stringify(v)}`);
        return;
      }
    }
    if (sp.evalScope !== undefined) {
      for (const k of ['evalPerMethod', 'evalPerFinality'] as const)
        if (k in sp) {
          out.rewrite(pathOf(at, k), sp[k], '(removed: evalScope is set and wins, as in eRPC)');
          delete sp[k];
        }
      return;
    }
    const scope: EvalScope = perMethod && perFinality ? 'network-method-finality' : perMethod ? 'network-method' : perFinality ? 'network-finality' : 'network';
    const from: Record<string, unknown> = {};
    for (const k of ['evalPerMethod', 'evalPerFinality'] as const) if (k in sp) from[k] = sp[k];
    out.rewrite(at, from, { evalScope: scope });
    delete sp.evalPerMethod;
    delete sp.evalPerFinality;
    sp.evalScope = scope;
  });
}

/** A network's selection settings, resolved (durations in ms, weights defaulted). */
export interface SelectionSettings {
  /** `evalInterval`, ms (> 0). Default 15 000. */
  evalIntervalMs: number;
  /** `evalTimeout`, ms (> 0). Default 100. */
  evalTimeoutMs: number;
  /** `scoreWeights` with defaults 4 / 15 / 4 / 1 / 0 / 2. */
  weights: ScoreWeights;
  /** `evalScope`, default `network`. */
  evalScope: EvalScope;
  /** `evalFunc`, when configured (JavaScript source compiled into a sandboxed function). */
  evalFunc?: EvalFunc;
  /** True when `evalFunc` was JavaScript source (a YAML policy), run in node:vm. */
  evalFuncSource?: boolean;
}

/**
 * Reads `selectionPolicy` settings (resolved or raw: durations as ms or strings).
 * @param raw the `selectionPolicy` object, or undefined for every default
 * @param path config path of the object, for errors (e.g. `projects[0].networks[1].selectionPolicy`)
 * @throws ConfigError naming `<path>.evalFunc` when it is neither a function nor JavaScript source that compiles, `<path>.evalInterval`/`.evalTimeout` when not > 0, `<path>.scoreWeights.<k>` when not a finite number >= 0
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
  let evalScope: EvalScope = 'network';
  if (o.evalScope !== undefined) {
    if ((EVAL_SCOPES as readonly unknown[]).includes(o.evalScope)) evalScope = o.evalScope as EvalScope;
    else problems.push({ path: `${path}.evalScope`, message: `must be one of ${EVAL_SCOPES.join(', ')} (got ${JSON.stringify(o.evalScope)})` });
  }
  const f = o.evalFunc;
  let evalFunc: EvalFunc | undefined;
  if (typeof f === 'function') evalFunc = f as EvalFunc;
  else if (typeof f === 'string') {
    try {
      evalFunc = compileSourcePolicy(f);
    } catch (e) {
      if (!(e instanceof PolicySourceError)) throw e;
      problems.push({ path: `${path}.evalFunc`, message: e.message });
    }
  } else if (f !== undefined) {
    problems.push({
      path: `${path}.evalFunc`,
      message: `must be JavaScript source (YAML) or a function (upstreams, ctx) => upstreams (TypeScript config, plugin); got ${f === null ? 'null' : typeof f}`,
    });
  }
  if (problems.length) throw new ConfigError(problems);
  return { evalIntervalMs, evalTimeoutMs, weights, evalScope, evalFunc, evalFuncSource: typeof f === 'string' };
}

/** Config path of a network's `selectionPolicy`, for error messages. */
export function settingsPath(host: PluginHost, network: Network): string {
  const pi = host.config.projects.findIndex((p) => p.id === network.project.id);
  const ni = pi < 0 ? -1 : (host.config.projects[pi]?.networks.findIndex((n) => n.id === network.id) ?? -1);
  if (pi < 0) return `projects[?].networks[?].selectionPolicy`;
  return ni < 0 ? `projects[${pi}].networkDefaults.selectionPolicy` : `projects[${pi}].networks[${ni}].selectionPolicy`;
}

/** Least time the load-time trial run of a policy gets, ms: enough for a cold context on a busy machine, short enough to catch a loop. */
const TRIAL_MIN_MS = 2000;

/**
 * Runs a YAML policy once over two healthy synthetic upstreams (ids `a`, `b`), so a call to a
 * helper svc does not provide, a typo or a wrong return shape fails at load, naming the key,
 * rather than at every evaluation.
 * It checks shape, not speed: it gets at least {@link TRIAL_MIN_MS}, so a loaded machine (a cold vm context) never refuses a valid policy.
 * @throws ConfigError naming `<path>.evalFunc` when the run throws, never ends within its bound or returns no array
 */
function trialRun(s: SelectionSettings, path: string): void {
  try {
    const evalTimeoutMs = Math.max(s.evalTimeoutMs, TRIAL_MIN_MS);
    const r = evaluatePolicy([{ id: 'a' }, { id: 'b' }], { evalFunc: s.evalFunc, weights: s.weights, evalTimeoutMs, network: 'evm:1' });
    if (r instanceof Promise) throw new Error('the policy answered asynchronously');
  } catch (e) {
    throw new ConfigError([{ path: `${path}.evalFunc`, message: `the policy failed a trial run over two healthy upstreams: ${(e as Error).message}` }]);
  }
}

/**
 * Checks every network's (and `networkDefaults`') `selectionPolicy` of a config.
 * @throws ConfigError listing every problem, each with its config path
 */
export function validateConfig(host: PluginHost): void {
  const problems: ConfigProblem[] = [];
  const check = (raw: unknown, path: string) => {
    try {
      const s = readSelectionSettings(raw, path);
      if (s.evalFunc && s.evalFuncSource) trialRun(s, path);
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
