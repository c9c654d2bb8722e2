/**
 * eRPC's shapes of the block-availability keys, rewritten into svc's at load time (the evm-state
 * plugin's `SchemaFragment.normalize`), with the meaning eRPC's common/defaults.go gives them:
 *
 * - `evm.maxAvailableRecentBlocks: N` (deprecated in eRPC) → `evm.blockAvailability.lower.latestBlockMinus: N`
 *   (a problem when the same upstream also sets `blockAvailability`: eRPC would enforce both);
 * - `evm.nodeType: full` (deprecated) → `blockAvailability.lower.latestBlockMinus: 128` when the
 *   upstream declares no window of its own and `upstreamDefaults` gives none; `archive` /
 *   `unknown` → removed (no window; an archive upstream also drops a window that
 *   `upstreamDefaults` derived from its own `nodeType: full`);
 * - an upstream that declares its own `blockAvailability` keeps it whole: eRPC inherits
 *   `upstreamDefaults.evm.blockAvailability` only by upstreams that declare none, where svc's
 *   defaults merge key by key, so the sides and bound kinds the upstream leaves out are written
 *   as `null` (unset) and nothing of the default's window mixes into its own.
 */
import {
  eachNetwork,
  eachProject,
  isConfigObject,
  parseDuration,
  pathOf,
  rewriteKey,
  type ConfigDocument,
  type ConfigObject,
  type NormalizeReport,
} from 'svc-proxy/plugin';

/** Blocks of eRPC's `nodeType: full` window. */
export const FULL_NODE_RECENT_BLOCKS = 128;

const BOUND_KINDS = ['exactBlock', 'latestBlockMinus', 'earliestBlockPlus'] as const;

/** Legacy keys of one upstream's `evm` → its own `blockAvailability`; returns true when the window came from `nodeType: full`. */
function legacyWindow(evm: ConfigObject, path: string, out: NormalizeReport, defaultsHaveWindow: boolean): boolean {
  let fromNodeType = false;
  if ('maxAvailableRecentBlocks' in evm) {
    const n = evm.maxAvailableRecentBlocks;
    const at = pathOf(path, 'maxAvailableRecentBlocks');
    if (evm.blockAvailability !== undefined && evm.blockAvailability !== null && typeof n === 'number' && n > 0) {
      out.problem(
        at,
        "eRPC's deprecated maxAvailableRecentBlocks and blockAvailability are both set: keep blockAvailability (set lower.latestBlockMinus there)",
      );
      return false;
    }
    if (typeof n === 'number' && Number.isInteger(n) && n >= 0) {
      rewriteKey(evm, 'maxAvailableRecentBlocks', at, undefined, out);
      if (n > 0) rewriteKey(evm, 'blockAvailability', pathOf(path, 'blockAvailability'), { lower: { latestBlockMinus: n } }, out);
    } else
      out.problem(at, "eRPC's deprecated maxAvailableRecentBlocks must be a whole number of blocks (svc reads it as blockAvailability.lower.latestBlockMinus)");
  }
  if ('nodeType' in evm) {
    const t = typeof evm.nodeType === 'string' ? evm.nodeType.trim().toLowerCase() : evm.nodeType;
    const at = pathOf(path, 'nodeType');
    if (t === 'full') {
      rewriteKey(evm, 'nodeType', at, undefined, out);
      if (evm.blockAvailability === undefined && !defaultsHaveWindow) {
        rewriteKey(evm, 'blockAvailability', pathOf(path, 'blockAvailability'), { lower: { latestBlockMinus: FULL_NODE_RECENT_BLOCKS } }, out);
        fromNodeType = true;
      }
    } else if (t === 'archive' || t === 'unknown' || t === '') {
      rewriteKey(evm, 'nodeType', at, undefined, out);
    } else out.problem(at, "eRPC's deprecated nodeType must be full, archive or unknown (svc reads full as blockAvailability.lower.latestBlockMinus: 128)");
  }
  return fromNodeType;
}

/** Writes the sides and kinds an upstream's own window leaves out as `null`, so `upstreamDefaults` does not fill them. */
function keepWhole(evm: ConfigObject, path: string, out: NormalizeReport): void {
  const ba = evm.blockAvailability;
  if (!isConfigObject(ba)) return;
  const whole: ConfigObject = { ...ba };
  for (const side of ['lower', 'upper'] as const) {
    const b = whole[side];
    if (b === undefined) whole[side] = null;
    else if (isConfigObject(b)) {
      const kinds = BOUND_KINDS.filter((k) => b[k] !== undefined && b[k] !== null);
      if (kinds.length === 1) whole[side] = { ...b, ...Object.fromEntries(BOUND_KINDS.filter((k) => !(k in b)).map((k) => [k, null])) };
    }
  }
  rewriteKey(evm, 'blockAvailability', pathOf(path, 'blockAvailability'), whole, out);
}

/**
 * The evm-state plugin's `normalize`: eRPC's deprecated `nodeType` / `maxAvailableRecentBlocks`
 * as `blockAvailability`, and eRPC's whole-object inheritance of `upstreamDefaults.evm.blockAvailability`.
 */
export function normalizeBlockAvailability(doc: ConfigDocument, out: NormalizeReport): void {
  eachProject(doc, (p, pp) => {
    const defaults = isConfigObject(p.upstreamDefaults) && isConfigObject(p.upstreamDefaults.evm) ? p.upstreamDefaults.evm : undefined;
    const defaultsFromNodeType = defaults ? legacyWindow(defaults, `${pp}.upstreamDefaults.evm`, out, false) : false;
    const defaultsHaveWindow = defaults !== undefined && isConfigObject(defaults.blockAvailability);
    const visit = (u: unknown, path: string) => {
      if (!isConfigObject(u) || !isConfigObject(u.evm)) return;
      const evm = u.evm;
      const archive = typeof evm.nodeType === 'string' && evm.nodeType.trim().toLowerCase() === 'archive';
      const hadOwn = evm.blockAvailability !== undefined || (typeof evm.maxAvailableRecentBlocks === 'number' && evm.maxAvailableRecentBlocks > 0);
      legacyWindow(evm, `${path}.evm`, out, defaultsHaveWindow);
      if (!defaultsHaveWindow) return;
      // An archive node keeps no window that the defaults only derived from their nodeType.
      if (archive && !hadOwn && defaultsFromNodeType) rewriteKey(evm, 'blockAvailability', `${path}.evm.blockAvailability`, { lower: null, upper: null }, out);
      else if (hadOwn) keepWhole(evm, `${path}.evm`, out);
    };
    if (Array.isArray(p.upstreams)) p.upstreams.forEach((u, i) => visit(u, `${pp}.upstreams[${i}]`));
    if (Array.isArray(p.providers)) {
      p.providers.forEach((pr, i) => {
        if (!isConfigObject(pr) || !isConfigObject(pr.overrides)) return;
        for (const [glob, o] of Object.entries(pr.overrides)) visit(o, pathOf(`${pp}.providers[${i}].overrides`, glob));
      });
    }
  });
}

/**
 * Why eRPC's `networks[].evm.fallbackStatePollerDebounce` changes nothing in svc, as the rewrite
 * line says it. eRPC debounces its state polls because calls trigger polls on demand (a block
 * beyond the known head, eth_blockNumber); the debounce keeps a burst of such calls from polling
 * again and again until the block time is learnt. svc never polls on a call: each upstream is
 * polled on its `statePollerInterval` timer only, and heads are also learnt from the answers.
 */
const POLLER_DEBOUNCE_REASON =
  '(removed: svc polls each upstream only on its statePollerInterval timer, never on demand from calls, so there is no poll burst to debounce; set upstreams[].evm.statePollerInterval)';

/**
 * Accepts eRPC's `networks[].evm.fallbackStatePollerDebounce` (and under `networkDefaults.evm`):
 * checked as a duration (`"5s"`, milliseconds; eRPC requires it above 0), then removed with a
 * rewrite line saying why. A value that is not a duration is a problem naming the key.
 */
export function normalizePollerDebounce(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    if (!isConfigObject(n.evm) || !('fallbackStatePollerDebounce' in n.evm)) return;
    const v = n.evm.fallbackStatePollerDebounce;
    const at = pathOf(`${path}.evm`, 'fallbackStatePollerDebounce');
    let ms: number | undefined;
    try {
      ms = typeof v === 'string' || typeof v === 'number' ? parseDuration(v) : undefined;
    } catch {
      ms = undefined;
    }
    if (ms === undefined || !(ms > 0)) {
      out.problem(at, 'eRPC\'s fallbackStatePollerDebounce must be a duration above 0 (e.g. "5s"); svc accepts it and has nothing to debounce');
      return;
    }
    out.rewrite(at, v, POLLER_DEBOUNCE_REASON);
    delete n.evm.fallbackStatePollerDebounce;
  });
}
