/**
 * eRPC's legacy and inert keys the core owns, rewritten or refused at load time (the core's part of
 * config/normalize.ts, after config/erpc.ts). A key is dropped with a rewrite line only when eRPC
 * itself gives it no effect (its docs call it inert, deprecated and ignored, a no-op or a dead
 * field), so dropping it changes nothing a migrated file did; the line says why.
 *
 * - Project `scoreGranularity`, `scorePenaltyDecayRate`, `scoreMetricsMode`,
 *   `scoreRefreshInterval`: eRPC 0.1's legacy translator only warns about them (docs
 *   config/projects "Inert" rows) → removed.
 * - Project `routingStrategy` (eRPC's pre-0.1 ordering): `score-based` (eRPC 0.0.x's default,
 *   a policy ordered by health score) → removed, svc's default policy orders by health score;
 *   `round-robin` → `networkDefaults.selectionPolicy` rotating the order one place per evaluation
 *   each second, as eRPC's own translator writes it (refused beside a selection policy of the
 *   project's own); another value is refused naming the two eRPC knew.
 * - `networks[].evm.maxFutureBlockRetryDistance` (deprecated, set to nil by eRPC) → removed;
 *   `networks[].evm.dynamicBlockTimeDebounceMultiplier: 0` (eRPC ignores 0 and keeps 0.7) → removed.
 * - `upstreams[].evm.getLogsMaxAllowedRange`, `getLogsMaxAllowedAddresses`,
 *   `getLogsMaxAllowedTopics`, `getLogsSplitOnError`, `getLogsMaxBlockRange` (eRPC: "deprecated and
 *   ignored at runtime", the network's keys apply) → removed.
 * - `networks[].upstreams` (no such key in eRPC or svc: eRPC lists upstreams per project) and a
 *   top-level `networks` (eRPC's networks belong to a project) are refused naming where the entries
 *   go, instead of an unknown-key line.
 */
import { eachNetwork, eachProject, eachUpstream, isConfigObject, pathOf, type ConfigDocument, type ConfigObject, type NormalizeReport } from './normalize.ts';

/** Project keys eRPC 0.1 accepts and ignores (warning only), with what replaced them there. */
export const INERT_PROJECT_KEYS: Readonly<Record<string, string>> = {
  scoreGranularity: 'eRPC 0.1 ignores it (per-method scoring moved to selectionPolicy)',
  scorePenaltyDecayRate: 'eRPC 0.1 ignores it (no equivalent there)',
  scoreMetricsMode: 'eRPC 0.1 ignores it (its selection metrics have fixed labels)',
  scoreRefreshInterval: 'eRPC 0.1 ignores it (replaced by selectionPolicy.evalInterval)',
};

/** Upstream `evm` keys eRPC documents as deprecated and ignored at runtime. */
export const INERT_UPSTREAM_EVM_KEYS: readonly string[] = [
  'getLogsMaxAllowedRange',
  'getLogsMaxAllowedAddresses',
  'getLogsMaxAllowedTopics',
  'getLogsSplitOnError',
  'getLogsMaxBlockRange',
];

/** Removes one key with a rewrite line giving the reason it changes nothing. */
function dropInert(obj: ConfigObject, key: string, path: string, why: string, out: NormalizeReport): void {
  out.rewrite(pathOf(path, key), obj[key], `(removed: ${why})`);
  delete obj[key];
}

/** Project-level legacy scoring keys: inert ones dropped, `routingStrategy` rewritten or refused. */
export function normalizeLegacyProjectKeys(doc: ConfigDocument, out: NormalizeReport): void {
  eachProject(doc, (p, path) => {
    for (const [key, why] of Object.entries(INERT_PROJECT_KEYS)) if (key in p) dropInert(p, key, path, `inert: ${why}`, out);
    const v = p.routingStrategy;
    // Absent or empty (YAML `routingStrategy:` with no value is null) is eRPC's default, score-based; another non-string is refused.
    const s = typeof v === 'string' ? v.trim().toLowerCase() : v === undefined || v === null ? '' : undefined;
    const at = pathOf(path, 'routingStrategy');
    if (s === 'round-robin') {
      // eRPC's translation of round-robin rotates and keeps no primary: the sticky keys say nothing there.
      for (const key of ['scoreSwitchHysteresis', 'scoreMinSwitchInterval']) if (key in p) dropInert(p, key, path, 'round-robin keeps no primary', out);
      roundRobin(p, path, out);
      return;
    }
    if (s === 'score-based' || (s === '' && 'routingStrategy' in p))
      dropInert(p, 'routingStrategy', path, "svc's default selection policy orders upstreams by health score", out);
    else if (s !== '') {
      out.problem(at, `eRPC's legacy routingStrategy takes "score-based" or "round-robin", not ${JSON.stringify(v)}`);
      delete p.routingStrategy;
      return;
    }
    if ('scoreSwitchHysteresis' in p || 'scoreMinSwitchInterval' in p) stickyPrimary(p, path, out);
  });
}

/** Go's duration syntax, as the sticky policy's `durationMs` reads it: one or more `<number><unit>` with no spaces. */
const GO_DURATION = /^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$/;

/** eRPC's translation of `routingStrategy: round-robin`: the order turned one place per evaluation, evaluated each second. */
export const ROUND_ROBIN_POLICY = Object.freeze({ evalInterval: '1s', evalFunc: '(upstreams, ctx) => upstreams.rotateBy(ctx.tickCount)' });

/**
 * eRPC's legacy sticky primary (`scoreSwitchHysteresis`, `scoreMinSwitchInterval`, defaults 0.10 and 30s) as eRPC's translator
 * writes it: a policy ordering by score whose primary changes only past the hysteresis and the interval.
 */
function stickyPrimary(p: ConfigObject, path: string, out: NormalizeReport): void {
  const h = p.scoreSwitchHysteresis ?? 0.1;
  const d = p.scoreMinSwitchInterval ?? '30s';
  const at = pathOf(path, 'scoreSwitchHysteresis' in p ? 'scoreSwitchHysteresis' : 'scoreMinSwitchInterval');
  const from = { scoreSwitchHysteresis: p.scoreSwitchHysteresis, scoreMinSwitchInterval: p.scoreMinSwitchInterval };
  delete p.scoreSwitchHysteresis;
  delete p.scoreMinSwitchInterval;
  if (typeof h !== 'number' || !Number.isFinite(h) || h < 0 || h > 100) {
    out.problem(at, `eRPC's scoreSwitchHysteresis is a fraction such as 0.1, not ${JSON.stringify(h)}`);
    return;
  }
  // What the policy's durationMs reads (sandbox-stdlib-ticks.ts): a number of ms, or Go's duration syntax ('30s', '1m30s'), as eRPC's Duration.
  const interval =
    typeof d === 'number' ? (Number.isFinite(d) && d >= 0 ? d : undefined) : typeof d === 'string' && GO_DURATION.test(d.trim()) ? d.trim() : undefined;
  if (interval === undefined) {
    out.problem(at, `eRPC's scoreMinSwitchInterval is a duration such as "30s", not ${JSON.stringify(d)}`);
    return;
  }
  const evalFunc = `(upstreams, ctx) => upstreams.sortByScore(PREFER_FASTEST).stickyPrimary({ hysteresis: ${h}, minSwitchInterval: ${JSON.stringify(interval)} })`;
  setProjectPolicy(p, at, from, { evalFunc }, 'legacy sticky primary', out);
}

/**
 * Puts a translated legacy policy in `networkDefaults.selectionPolicy`, which every network of the project (declared or not) takes;
 * refused beside a policy of the project's own, since one of the two would be lost.
 */
function setProjectPolicy(p: ConfigObject, at: string, from: unknown, policy: Record<string, string>, what: string, out: NormalizeReport): void {
  const defaults = isConfigObject(p.networkDefaults) ? p.networkDefaults : undefined;
  const own = [defaults?.selectionPolicy, ...(Array.isArray(p.networks) ? p.networks : []).map((n) => (isConfigObject(n) ? n.selectionPolicy : undefined))];
  if (own.some((sp) => sp !== undefined)) {
    out.problem(at, `eRPC's ${what} beside a selectionPolicy of the project's own: keep one (it is \`${policy.evalFunc}\`)`);
    return;
  }
  p.networkDefaults = { ...(defaults ?? {}), selectionPolicy: policy };
  out.rewrite(at, from, { networkDefaults: { selectionPolicy: policy } });
}

/** Rewrites a project's round-robin as eRPC's translator does (see {@link ROUND_ROBIN_POLICY}). */
function roundRobin(p: ConfigObject, path: string, out: NormalizeReport): void {
  delete p.routingStrategy;
  setProjectPolicy(p, pathOf(path, 'routingStrategy'), 'round-robin', { ...ROUND_ROBIN_POLICY }, 'legacy routingStrategy round-robin', out);
}

/** Network and upstream `evm` keys eRPC ignores; per-network upstream lists refused with their place. */
export function normalizeLegacyEvmKeys(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    if ('upstreams' in n) {
      out.problem(
        pathOf(path, 'upstreams'),
        'a network has no upstream list in eRPC or svc: list upstreams once under the project (`projects[].upstreams`); each serves the network of the chain it reports (set its `evm.chainId`), and `use-upstream` or tags pin calls to some of them',
      );
      delete n.upstreams;
    }
    const evm = n.evm;
    if (!isConfigObject(evm)) return;
    const ep = pathOf(path, 'evm');
    if ('maxFutureBlockRetryDistance' in evm) dropInert(evm, 'maxFutureBlockRetryDistance', ep, 'deprecated and ignored by eRPC', out);
    const m = evm.dynamicBlockTimeDebounceMultiplier;
    if (m === 0 || m === '0') dropInert(evm, 'dynamicBlockTimeDebounceMultiplier', ep, 'eRPC ignores 0 (it keeps its default)', out);
  });
  eachUpstream(doc, (u, path) => {
    const evm = u.evm;
    if (!isConfigObject(evm)) return;
    for (const k of INERT_UPSTREAM_EVM_KEYS)
      if (k in evm) dropInert(evm, k, pathOf(path, 'evm'), "deprecated and ignored by eRPC: the network's `evm` getLogs keys apply", out);
  });
  if ('networks' in doc) {
    out.problem(
      'networks',
      'networks belong to a project in eRPC and svc: move this list under `projects[].networks` (and `networkDefaults` for shared settings)',
    );
    delete doc.networks;
  }
}
