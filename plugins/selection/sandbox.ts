/**
 * eRPC's selection policy written as JavaScript source in YAML (`selectionPolicy.evalFunc: |`),
 * run with node:vm. The source is compiled once at load; each evaluation runs it in a fresh
 * context that holds only its arguments (built inside the context from a JSON string: no host
 * object is reachable from it, and no `require`, `process`, timers or console), with string code
 * generation (`eval`, `new Function`) and WebAssembly turned off, bounded by `evalTimeout` (vm's
 * `timeout`, microtasks included). The answer leaves the context as a JSON string of ids.
 * What eRPC's cross-tick helpers remember (the sticky primary, `excludedSince`) comes in with the
 * JSON input from the evaluation's carry (`memory.ts`) and leaves in the answer, checked.
 *
 * node:vm is not a security boundary: the config is trusted code, as a TypeScript config is (a
 * policy can still allocate memory or block in ways the timeout does not stop). What the bounds
 * buy is that a slow or throwing policy costs one evaluation: the plugin logs it and keeps the
 * previous order.
 */
import { performance } from 'node:perf_hooks';
import { createContext, Script } from 'node:vm';
import type { EvalFunc, PolicyContext, UpstreamsView } from './api.ts';
import { SANDBOX_STDLIB } from './sandbox-stdlib.ts';
import { carryOf, type StickyRegister, type TickCarry, tickOutputOf } from './memory.ts';

/** Longest policy source accepted, characters. */
export const MAX_POLICY_SOURCE = 64 * 1024;

/** A YAML policy that cannot be compiled (the message names what is wrong). */
export class PolicySourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicySourceError';
  }
}

let stdlibScript: Script | undefined;
const compiled = new Map<string, EvalFunc>();
/** The source of each compiled policy (what {@link policyReads} looks for names in). */
const sources = new WeakMap<EvalFunc, string>();

/**
 * Whether a policy's text names `name` (a YAML policy's source, or a function's own text), so
 * inputs only some policies read are built for those alone. A plugin's wrapper around another
 * policy hides the inner text: it gets no such inputs.
 * @param fn the policy
 * @param name what to look for (`latencyDeviationAbove`, `metricsByMethod`)
 */
export function policyReads(fn: EvalFunc, name: string): boolean {
  const src = sources.get(fn) ?? Function.prototype.toString.call(fn);
  return src.includes(name);
}

/** The plain data an evaluation hands to the context (serialised as JSON). */
interface SandboxInput {
  upstreams: Array<{
    id: string;
    vendor: string;
    tags: readonly string[];
    syncing: boolean;
    cordonReason?: string;
    metrics: Readonly<Record<string, unknown>>;
    scoreMultipliers?: Readonly<Record<string, number>>;
    metricsByMethod?: Readonly<Record<string, unknown>>;
    metricsAcrossMethods?: Readonly<Record<string, unknown>>;
  }>;
  ctx: {
    project: string;
    network: string;
    method: string;
    finality: string;
    now: number;
    previousOrder: readonly string[];
    previousExcluded: readonly string[];
    excludedSince: Readonly<Record<string, number>>;
    lastSwitchAt: number | null;
    tickCount: number;
  };
  /** The sticky primary register of each `stickyPrimary` scope (null: cold start). */
  stickies: Record<string, StickyRegister | null>;
}

function inputOf(upstreams: UpstreamsView, ctx: PolicyContext, carry: TickCarry | undefined): SandboxInput {
  const previousOrder = carry?.previousOrder ?? [];
  return {
    upstreams: upstreams.map((u) => ({
      id: u.id,
      vendor: u.vendor,
      tags: u.tags,
      syncing: u.syncing,
      ...(u.cordoned ? { cordonReason: u.metrics.cordonReason ?? 'cordoned' } : {}),
      metrics: u.metrics,
      ...(u.scoreMultipliers ? { scoreMultipliers: u.scoreMultipliers as Record<string, number> } : {}),
      ...(u.metricsByMethod ? { metricsByMethod: u.metricsByMethod } : {}),
      ...(u.metricsAcrossMethods ? { metricsAcrossMethods: u.metricsAcrossMethods } : {}),
    })),
    // The evaluation's scope: method `*` and finality `unknown` unless evalScope splits them.
    ctx: {
      project: ctx.project,
      network: ctx.network,
      method: ctx.method,
      finality: ctx.finality,
      now: ctx.now,
      // eRPC's cross-tick fields, which the helpers read and a policy may too.
      previousOrder,
      previousExcluded: upstreams.filter((u) => carry?.excludedSince[u.id] !== undefined).map((u) => u.id),
      excludedSince: carry?.excludedSince ?? {},
      lastSwitchAt: carry?.sticky?.lastSwitchAt ?? null,
      tickCount: carry?.tickCount ?? 0,
    },
    stickies: { ...(carry?.stickies ?? {}) },
  };
}

/**
 * Compiles a policy's JavaScript source (an expression evaluating to `(upstreams, ctx) => upstreams`,
 * eRPC's `evalFunc` string) into an {@link EvalFunc}. The same source compiles once per process.
 * The function it returns is synchronous: it runs the policy in a fresh context per call, bounded
 * by the context's `evalTimeoutMs`, and returns the chosen upstream ids; when the policy called
 * `removeCordoned()` it also calls the host view's, so new cordons apply on the request path at once.
 * @param source the JavaScript source, at most {@link MAX_POLICY_SOURCE} characters
 * @returns the policy
 * @throws PolicySourceError when the source is too long or not valid JavaScript
 */
export function compileSourcePolicy(source: string): EvalFunc {
  const hit = compiled.get(source);
  if (hit) return hit;
  if (source.length > MAX_POLICY_SOURCE) throw new PolicySourceError(`the policy source is ${source.length} characters, more than ${MAX_POLICY_SOURCE}`);
  let script: Script;
  try {
    // The definition runs inside the driver's try, so whatever it throws is described in the
    // context; a trailing comment in the source must not swallow the closing parenthesis.
    script = new Script(`__svcRun(() => (${source}\n), globalThis.__input)`, { filename: 'selectionPolicy.evalFunc' });
  } catch (e) {
    throw new PolicySourceError(`the policy source is not valid JavaScript: ${(e as Error).message}`);
  }
  stdlibScript ??= new Script(SANDBOX_STDLIB, { filename: 'svc-policy-stdlib.js' });
  const stdlib = stdlibScript;
  const fn: EvalFunc = (upstreams, ctx) => {
    const context = createContext(Object.create(null) as object, {
      name: 'selection policy',
      codeGeneration: { strings: false, wasm: false },
      microtaskMode: 'afterEvaluate',
    });
    // One budget for both runs: what the stdlib spends, the policy no longer has.
    const deadline = performance.now() + ctx.evalTimeoutMs;
    const left = () => Math.max(1, Math.ceil(deadline - performance.now()));
    stdlib.runInContext(context, { timeout: left() });
    const carry = carryOf(ctx);
    (context as { __input?: string }).__input = JSON.stringify(inputOf(upstreams, ctx, carry));
    const out: unknown = script.runInContext(context, { timeout: left() });
    if (typeof out !== 'string') throw new Error('the policy driver did not answer');
    const r = JSON.parse(out) as { ids?: string[]; cordonsRemoved?: boolean; error?: string; state?: unknown };
    if (r.error !== undefined) throw new Error(r.error);
    if (r.cordonsRemoved) upstreams.removeCordoned();
    const byId = new Map(upstreams.map((u) => [u.id, u] as const));
    if (carry) carry.out = tickOutputOf(r.state, new Set(byId.keys()));
    return (r.ids ?? []).flatMap((id) => byId.get(id) ?? []);
  };
  if (compiled.size >= 64) compiled.delete(compiled.keys().next().value as string);
  compiled.set(source, fn);
  sources.set(fn, source);
  return fn;
}
