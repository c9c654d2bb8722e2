/**
 * Config of the integrity plugin (`networks[].integrity`, also `networkDefaults.integrity`) and
 * the resolution of a call's level from the `integrity` directive (spec §2.8 #10): a level name,
 * or a profile name mapping method globs to levels; `headerMode: deny` ignores the request's value.
 */
import { type Static, Strict, Type } from 'svc-proxy/plugin';
import { ConfigError, ErrInvalidRequest } from 'svc-proxy/plugin/errors';
import { compileGlobs, type GlobTest } from 'svc-proxy/util';
import { budgetOf, budgetSchema, type FetchBudget } from './budget.ts';
import { NO_SKIP, type SkipChecks } from './hex.ts';

/** The four integrity levels, weakest first (spec §2.8 #10). */
export const LEVELS = ['off', 'intrinsic', 'corroborated', 'authoritative'] as const;

/**
 * svc's checks a network may turn off one by one (`skipChecks`): comparisons whose skipping
 * leaves the other checks sound (shape checks are preconditions of every other and stay on).
 */
export const SKIPPABLE_CHECKS = [
  'block.hash',
  'block.request',
  'block.tx',
  'block.transactionCount',
  'block.transactionsRoot',
  'receipt.block',
  'receipt.index',
  'receipt.request',
  'logs.filter',
  'tx.request',
] as const;

/** One integrity level. */
export type IntegrityLevel = (typeof LEVELS)[number];

/** Most profiles per network. */
export const MAX_PROFILES = 32;
/** Most method globs per profile. */
export const MAX_PROFILE_RULES = 64;

/** What a failed check does: `reject` the answer (the sweep moves on), `soft-flag` it (count, log, serve), or `off` (the check is not run). */
export type InvalidBehavior = 'reject' | 'soft-flag' | 'off';

const behaviorSchema = (when: string) =>
  Type.Union([Type.Literal('reject'), Type.Literal('soft-flag'), Type.Literal('off')], { default: 'reject', description: `verdict for a block ${when}` });

const levelSchema = Type.Union(
  LEVELS.map((l) => Type.Literal(l)),
  { description: 'integrity level applied to the methods this glob matches' },
);

/**
 * Schema of `networks[].integrity` (network scope: also valid under `networkDefaults`).
 * - `headerMode`: `allow` (default) honours the request's `X-SVC-Integrity` / `integrity`;
 *   `deny` ignores it and applies the network's `directiveDefaults.integrity`; `profiles`
 *   honours a profile name only (eRPC's mode of that name).
 * - `invalidBehavior` / `observeOnly`: eRPC's verdict keys (see {@link NetworkIntegrity}).
 * - `budget`: eRPC's cap on the authoritative level's fetches (budget.ts).
 * - `skipChecks`: checks turned off one by one (eRPC's `checks.<id>.enabled: false`, erpc.ts).
 * - `profiles`: name → { method glob → level }; the first glob (in config order) matching the
 *   call's method gives its level, no match gives `off`. A profile may not be named like a level.
 */
export const IntegritySchema = Strict(
  {
    headerMode: Type.Optional(
      Type.Union([Type.Literal('allow'), Type.Literal('deny'), Type.Literal('profiles')], {
        default: 'allow',
        description:
          "spec §2.8 #10: `allow` honours the X-SVC-Integrity header / integrity query; `deny` ignores it (the configured directiveDefaults.integrity applies); `profiles` honours only a profile name (a bare level is ignored). eRPC's off/full are read as deny/allow",
      }),
    ),
    invalidBehavior: Type.Optional(
      Strict(
        {
          finalized: Type.Optional(behaviorSchema("at or below the network's finalized block")),
          unfinalized: Type.Optional(behaviorSchema('above the finalized block (a mismatch there may be a reorg)')),
        },
        {
          description:
            "eRPC's per-finality verdict of the checks that compare an answer with other upstreams (corroborated, authoritative): reject (default), soft-flag (count and serve) or off (skip them)",
        },
      ),
    ),
    observeOnly: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'eRPC\'s observeOnly: every check of the level runs, a failure is counted (svc_integrity_flagged_total{outcome="would_reject"}) and the answer served anyway',
      }),
    ),
    budget: Type.Optional(budgetSchema),
    skipChecks: Type.Optional(
      Type.Array(Type.Union(SKIPPABLE_CHECKS.map((c) => Type.Literal(c))), {
        uniqueItems: true,
        description:
          "checks not run on this network (eRPC's checks.<id>.enabled: false is read into it): block.hash (header hash recompute), block.request (the block asked for), block.tx (transactions' block fields), block.transactionCount (transactions under the empty root), block.transactionsRoot (the root recomputed), receipt.block, receipt.index, receipt.request, logs.filter (logs within the request's range, addresses, topics), tx.request; the other checks of the level still run",
      }),
    ),
    profiles: Type.Optional(
      Type.Record(
        Type.String({ maxLength: 64 }),
        Type.Record(Type.String({ maxLength: 256 }), levelSchema, {
          maxProperties: MAX_PROFILE_RULES,
          description: 'method glob (`*`, `?`) → level; first match in order wins',
        }),
        { maxProperties: MAX_PROFILES, description: 'named profiles a request (or directiveDefaults.integrity) may name instead of a level' },
      ),
    ),
  },
  { description: 'integrity checks of block data (spec §2.8 #10)' },
);

/** `networks[].integrity` as written in config. */
export type IntegrityInput = Static<typeof IntegritySchema>;

/** A compiled profile: its rules in config order. */
type Profile = ReadonlyArray<{ test: GlobTest; level: IntegrityLevel }>;

/** The compiled integrity settings of one network. */
export interface NetworkIntegrity {
  headerMode: 'allow' | 'deny' | 'profiles';
  profiles: ReadonlyMap<string, Profile>;
  /** Verdict of the peer comparisons (corroborated, authoritative) for a finalized / unfinalized block (eRPC's invalidBehavior). */
  invalidBehavior: { readonly finalized: InvalidBehavior; readonly unfinalized: InvalidBehavior };
  /** Failures are counted and the answer served (eRPC's observeOnly; wins over everything). */
  observeOnly: boolean;
  /** The authoritative level's fetch budget (eRPC's `budget`), undefined when uncapped. */
  budget?: FetchBudget;
  /** Checks not run (`skipChecks`). */
  skip: SkipChecks;
}

const REJECT_BOTH = Object.freeze({ finalized: 'reject', unfinalized: 'reject' } as const);

/** Settings of a network without an `integrity` key. */
export const DEFAULT_NETWORK_INTEGRITY: NetworkIntegrity = Object.freeze({
  headerMode: 'allow',
  profiles: new Map(),
  invalidBehavior: REJECT_BOTH,
  observeOnly: false,
  skip: NO_SKIP,
});

const LEVEL_SET: ReadonlySet<string> = new Set(LEVELS);

/**
 * Checks and compiles a network's `integrity` settings.
 * @param input the validated `integrity` value (undefined when the network has none)
 * @param where the network, for the error message
 * @throws ConfigError when a profile is named like a level
 */
export function compileIntegrity(input: unknown, where = 'integrity'): NetworkIntegrity {
  if (input === undefined || input === null) return DEFAULT_NETWORK_INTEGRITY;
  const i = input as IntegrityInput;
  const profiles = new Map<string, Profile>();
  for (const [name, rules] of Object.entries(i.profiles ?? {})) {
    if (LEVEL_SET.has(name.trim().toLowerCase()))
      throw new ConfigError([{ path: `${where}.profiles.${name}`, message: `a profile may not be named like a level (${LEVELS.join(', ')})` }]);
    profiles.set(
      name,
      Object.entries(rules).map(([glob, level]) => ({ test: compileGlobs(glob), level: level as IntegrityLevel })),
    );
  }
  const ib = i.invalidBehavior;
  return {
    headerMode: i.headerMode === 'deny' || i.headerMode === 'profiles' ? i.headerMode : 'allow',
    profiles,
    invalidBehavior: ib ? { finalized: ib.finalized ?? 'reject', unfinalized: ib.unfinalized ?? 'reject' } : REJECT_BOTH,
    observeOnly: i.observeOnly === true,
    budget: budgetOf(i.budget),
    skip: i.skipChecks && i.skipChecks.length > 0 ? new Set<string>(i.skipChecks) : NO_SKIP,
  };
}

/**
 * A directive value as a level: a level name (case-insensitive, trimmed), or a profile name (its
 * first glob matching `method`, else `off`); undefined when the value is empty or unknown.
 * @param value the directive or config value
 * @param settings the network's compiled settings
 * @param method the call's method
 */
export function levelOf(value: string | undefined, settings: NetworkIntegrity, method: string): IntegrityLevel | undefined {
  if (value === undefined) return undefined;
  const t = value.trim();
  if (t === '') return undefined;
  const lower = t.toLowerCase();
  if (LEVEL_SET.has(lower)) return lower as IntegrityLevel;
  const profile = settings.profiles.get(t);
  if (!profile) return undefined;
  for (const rule of profile) if (rule.test(method)) return rule.level;
  return 'off';
}

/** A call's resolved level. */
export interface ResolvedLevel {
  /** The level applied to the call. */
  level: IntegrityLevel;
  /** True when anything asked for a level (the request or config), so `X-SVC-Integrity` reports it, `off` included. */
  shown: boolean;
}

/**
 * Resolves a call's level (spec §2.8 #10).
 * - `headerMode: allow`: the merged directive (`requested`: the request's value over the
 *   config default); `deny`: the configured default only; `profiles`: the merged directive when
 *   it names a profile, else the configured default.
 * - An unknown value falls back to the configured default, then `off`.
 * @param requested `ctx.directives.integrity` (config default, then header, then query)
 * @param configured the network's configured `directiveDefaults.integrity` (or a failsafe entry's)
 * @param settings the network's compiled settings
 * @param method the call's method
 */
export function resolveLevel(requested: string | undefined, configured: string | undefined, settings: NetworkIntegrity, method: string): ResolvedLevel {
  const shown = (requested !== undefined && requested.trim() !== '') || (configured !== undefined && configured.trim() !== '');
  if (!shown) return { level: 'off', shown };
  let value = settings.headerMode === 'deny' ? configured : requested;
  // `profiles`: the request may name a profile, not a bare level.
  if (settings.headerMode === 'profiles' && !(requested !== undefined && settings.profiles.has(requested.trim()))) value = configured;
  return { level: levelOf(value, settings, method) ?? levelOf(configured, settings, method) ?? 'off', shown };
}

/** Longest echo of a refused directive value in its error, characters. */
const MAX_ECHO = 64;

/**
 * Refuses a request's unknown level (spec §2.8 #10): under `headerMode: allow` a value that is
 * neither a level nor one of the network's profiles is a client mistake (a typo would otherwise
 * quietly run the call unchecked), so the call fails with -32600 naming what is valid. Under
 * `deny` the request's value is ignored, so it is never refused. The caller passes only a value
 * that came from the request (one equal to config's is left to {@link resolveLevel}).
 * @param requested the request's `integrity` directive (header, or query)
 * @param settings the network's compiled settings
 * @param network the network id, for the message
 * @throws ErrInvalidRequest (-32600, HTTP 400; in a batch that element only) for an unknown value
 */
export function refuseUnknownLevel(requested: string | undefined, settings: NetworkIntegrity, network: string): void {
  if (requested === undefined || settings.headerMode === 'deny') return;
  const t = requested.trim();
  // Under `profiles` a bare level is ignored, not refused (eRPC's mode: the header may only pick a profile).
  if (t === '' || LEVEL_SET.has(t.toLowerCase()) || settings.profiles.has(t)) return;
  const profiles = settings.profiles.size ? [...settings.profiles.keys()].join(', ') : 'none configured';
  const echo = t.length > MAX_ECHO ? `${t.slice(0, MAX_ECHO)}…` : t;
  throw new ErrInvalidRequest(
    `unknown integrity level ${JSON.stringify(echo)} (X-SVC-Integrity / integrity): use a level (${LEVELS.join(', ')}) or a profile of network ${network} (${profiles})`,
  );
}
