/**
 * eRPC's per-upstream `routing.scoreMultipliers` (its config docs, "upstream.routing"): the
 * schema of `upstreams[].routing`, the load-time rewrite of eRPC's extra shapes, and the
 * resolution of the entry that applies to a network's evaluation.
 *
 * An entry applies to the evaluations of the scopes it matches (`selectionPolicy.evalScope`): with
 * the default `network` scope the evaluation's method is `*` and its finality `unknown`, so (as in
 * eRPC) an entry naming a specific method, or finalities without `unknown`, never applies; under
 * `network-method` the scope of `eth_getLogs` matches an entry for `eth_getLogs`, and under
 * `network-finality` the scope of finalized calls matches an entry listing `finalized`.
 */
import { Type } from '@sinclair/typebox';
import { eachUpstream, isConfigObject, pathOf, rewriteKey, Strict, type ConfigDocument, type NormalizeReport } from 'svc-proxy/plugin';
import { MatcherCache } from 'svc-proxy/util';
import type { ScoreMultipliers } from './api.ts';

/** Finality names eRPC's `finality` lists take (its numbers 0..3 are rewritten to them). */
export const FINALITIES = ['finalized', 'unfinalized', 'realtime', 'unknown'] as const;

/** The weight keys of one entry, in eRPC's order. */
export const MULTIPLIER_KEYS = ['overall', 'errorRate', 'respLatency', 'throttledRate', 'blockHeadLag', 'finalizationLag', 'misbehaviors'] as const;

const weight = (what: string) => Type.Optional(Type.Number({ minimum: 0, description: what }));

/** Schema of one `routing.scoreMultipliers[]` entry. */
export const scoreMultiplierSchema = Strict(
  {
    network: Type.Optional(Type.String({ description: "network id pattern in eRPC's matcher syntax (`evm:1`, `evm:*`, `evm:1|evm:10`); empty or `*` = any" })),
    method: Type.Optional(
      Type.String({
        description:
          "method pattern; empty or `*` = any. Matched against the evaluation's method: `*` in the default `evalScope: network`, where an entry naming a method never applies (as in eRPC); the scope's method under `network-method` and `network-method-finality`",
      }),
    ),
    finality: Type.Optional(
      Type.Array(Type.Union(FINALITIES.map((f) => Type.Literal(f))), {
        description: "finalities the entry applies to; empty = any. Matched against the evaluation's finality: `unknown` unless `evalScope` splits by finality",
      }),
    ),
    overall: weight('multiplies the preference of this upstream: > 1 prefers it, < 1 demotes it, 0 ranks it last (default 1)'),
    errorRate: weight('replaces the base weight of the error rate (0..1) for this upstream; 0 drops the term'),
    respLatency: weight('replaces the base weight of the p70 latency (seconds) for this upstream'),
    throttledRate: weight('replaces the base weight of the throttle rate (0..1) for this upstream'),
    blockHeadLag: weight('replaces the base weight of the block-head lag (blocks) for this upstream'),
    finalizationLag: weight('replaces the base weight of the finalization lag (blocks) for this upstream'),
    misbehaviors: weight('replaces the base weight of the consensus misbehaviour rate (0..1) for this upstream'),
  },
  { description: 'one score-multiplier entry: matchers plus weight overrides; the first entry matching the evaluation applies' },
);

/** Schema of `upstreams[].routing` (the selection plugin's upstream key). */
export const routingSchema = Strict(
  {
    scoreMultipliers: Type.Optional(
      Type.Array(scoreMultiplierSchema, {
        description:
          "eRPC's per-upstream score weights: the first entry whose network/method/finality match applies to this upstream's selection score (see networks[].selectionPolicy.scoreWeights)",
      }),
    ),
    probe: Type.Optional(
      Type.Union([Type.Literal('on'), Type.Literal('off')], {
        default: 'on',
        description:
          "eRPC's opt-out of probeExcluded's mirrored traffic: `off` never sends this upstream a probe (it stays excluded until its other signals recover)",
      }),
    ),
  },
  { description: 'per-upstream routing hints of the selection policy' },
);

function finalityName(v: unknown): unknown {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < FINALITIES.length) return FINALITIES[v];
  if (typeof v !== 'string') return v;
  const s = v.trim().toLowerCase();
  if (/^[0-3]$/.test(s)) return FINALITIES[Number(s)];
  return (FINALITIES as readonly string[]).includes(s) ? s : v;
}

/**
 * The selection plugin's rewrite of eRPC's score-multiplier shapes: `finality` as one value or
 * eRPC's numbers 0..3 becomes a list of names; `totalRequests` is removed (eRPC accepts it and
 * ignores it: its score uses rates over the window, not request counts).
 */
export function normalizeScoreMultipliers(doc: ConfigDocument, out: NormalizeReport): void {
  eachUpstream(doc, (u, path) => {
    const r = u.routing;
    if (!isConfigObject(r) || !Array.isArray(r.scoreMultipliers)) return;
    const base = pathOf(pathOf(path, 'routing'), 'scoreMultipliers');
    r.scoreMultipliers.forEach((e, i) => {
      if (!isConfigObject(e)) return;
      const at = pathOf(base, i);
      if ('totalRequests' in e) {
        out.rewrite(pathOf(at, 'totalRequests'), e.totalRequests, '(removed: eRPC ignores it too, its score uses rates over the window, not request counts)');
        delete e.totalRequests;
      }
      if (e.finality !== undefined) {
        const list = Array.isArray(e.finality) ? e.finality : [e.finality];
        const names = list.map(finalityName);
        if (!Array.isArray(e.finality) || names.some((n, k) => n !== list[k])) rewriteKey(e, 'finality', pathOf(at, 'finality'), names, out);
      }
    });
  });
}

/** One validated entry (the schema's shape). */
export interface ScoreMultiplierEntry extends ScoreMultipliers {
  network?: string;
  method?: string;
  finality?: string[];
}

const anyPattern = (p: string | undefined) => p === undefined || p === '' || p === '*';
// eRPC's matcher syntax (`*`, `?`, `|`, `&`, `!`); patterns come from config, so few and bounded.
const matchers = new MatcherCache(512);

/**
 * The multipliers of an upstream for one evaluation: the first entry whose `network` glob matches
 * the network id, whose `method` glob matches the scope's method and whose `finality` list is
 * empty or holds the scope's finality. An entry that matches but sets no weight shadows later
 * ones and yields none, as in eRPC.
 * @param entries the upstream's `routing.scoreMultipliers` (validated), or undefined
 * @param networkId `evm:<chainId>`
 * @param method the scope's method (`*` for the network scope)
 * @param finality the scope's finality (`unknown` unless the scope splits by finality)
 * @returns the weight overrides and `overall`, or undefined
 */
export function resolveScoreMultipliers(
  entries: readonly ScoreMultiplierEntry[] | undefined,
  networkId: string,
  method = '*',
  finality = 'unknown',
): ScoreMultipliers | undefined {
  if (!entries) return undefined;
  for (const e of entries) {
    if (!anyPattern(e.network) && !matchers.get(e.network as string).test(networkId)) continue;
    if (!anyPattern(e.method) && !matchers.get(e.method as string).test(method)) continue;
    if (e.finality && e.finality.length > 0 && !e.finality.includes(finality)) continue;
    const out: ScoreMultipliers = {};
    for (const k of MULTIPLIER_KEYS) if (typeof e[k] === 'number') out[k] = e[k];
    return Object.keys(out).length ? out : undefined;
  }
  return undefined;
}
