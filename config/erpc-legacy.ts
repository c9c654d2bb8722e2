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
 *   `round-robin` is refused naming the TypeScript `evalFunc` that rotates; another value is
 *   refused naming the two eRPC knew.
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
    if (!('routingStrategy' in p)) return;
    const v = p.routingStrategy;
    const s = typeof v === 'string' ? v.trim().toLowerCase() : '';
    const at = pathOf(path, 'routingStrategy');
    if (s === 'score-based' || s === '') {
      dropInert(p, 'routingStrategy', path, "svc's default selection policy orders upstreams by health score", out);
    } else if (s === 'round-robin') {
      out.problem(
        at,
        'eRPC\'s legacy routingStrategy round-robin (rotating the primary upstream) is not supported by svc\'s YAML: write the config as svc.config.ts and rotate in `selectionPolicy.evalFunc` (docs/fault-tolerance.md "Selection policy"), or drop it to order by health score',
      );
      delete p.routingStrategy;
    } else {
      out.problem(at, `eRPC's legacy routingStrategy takes "score-based" or "round-robin", not ${JSON.stringify(v)}`);
      delete p.routingStrategy;
    }
  });
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
