/**
 * eRPC's `integrity` block (projects[].integrity and networks[].integrity, eRPC's
 * common/config_integrity.go) rewritten into svc's integrity settings at load time (the plugin's
 * `SchemaFragment.normalize`; docs/consensus-integrity.md):
 *
 * - `projects[].integrity` (eRPC: every network, each network's block merged over it) →
 *   `networkDefaults.integrity` (svc merges it into every network the same way);
 * - `level: L` → the network's `directiveDefaults.integrity: L` (svc's way of setting a network's
 *   level); a block written with `level` also gets eRPC's defaults for the keys it leaves out:
 *   `headerMode: deny` (eRPC's `off`: a request cannot change the level) and
 *   `invalidBehavior: {finalized: reject, unfinalized: soft-flag}`;
 * - `headerMode: off | full` → `deny | allow` (`profiles` is svc's too);
 * - `profiles: {name: {level: L}}` → `{name: {'*': L}}` (svc's profiles map method globs to levels);
 * - `checks: {id: {enabled, onFailure, params}}` → removed when svc already does what the entry
 *   asks (see {@link ERPC_CHECKS}); `enabled: false` of a check svc can turn off alone
 *   ({@link ERPC_SKIPPABLE}) → `skipChecks`; refused, naming what svc does instead, otherwise;
 * - `budget` is svc's key too (the authoritative level's fetch cap, budget.ts);
 * - `reorgWindow`, `follow`, `stateProbe`, `misbehaviorsDestination` → refused with svc's alternative.
 */
import { eachNetwork, eachProject, isConfigObject, pathOf, rewriteKey, type ConfigDocument, type ConfigObject, type NormalizeReport } from 'svc-proxy/plugin';
import { LEVELS, type IntegrityLevel, type SKIPPABLE_CHECKS } from './levels.ts';

/** What svc does for one of eRPC's integrity checks. */
export interface ErpcCheck {
  /** The eRPC level that runs it. */
  level: Exclude<IntegrityLevel, 'off'>;
  /** svc's check(s) covering it (names as in `ErrEndpointContentValidation` details), when svc has it. */
  svc?: string;
  /** What svc does instead, when svc does not have it. */
  instead?: string;
  /** Compared with other upstreams' view of the chain (governed by `invalidBehavior`). */
  reorgSensitive?: boolean;
}

const RECEIPT_INDEXES = "svc's intrinsic receipt checks compare each transactionIndex with its position and require increasing log indexes (block receipts)";

/** eRPC's check catalog (docs/pages/config/failsafe/integrity.mdx) and svc's counterpart of each. */
export const ERPC_CHECKS: Readonly<Record<string, ErpcCheck>> = {
  schemaConformance: { level: 'intrinsic', svc: 'block.shape, receipt.shape, logs.shape' },
  headerFieldShapes: { level: 'intrinsic', svc: 'block.hash (a header whose fields are malformed does not hash to its hash; logsBloom must be 256 bytes)' },
  logFieldShapes: { level: 'intrinsic', svc: 'logs.shape, receipt.log' },
  sameBlockHash: { level: 'intrinsic', svc: 'receipt.block' },
  transactionIndexConsistency: { level: 'intrinsic', svc: 'receipt.index' },
  logMetadata: { level: 'intrinsic', svc: 'receipt.log' },
  logIndexContiguity: { level: 'intrinsic', svc: 'receipt.log (log indexes increase across the block)' },
  transactionsRootConsistency: { level: 'intrinsic', svc: 'block.transactionCount' },
  transactionsRootRecompute: { level: 'intrinsic', svc: 'block.transactionsRoot' },
  txBlockInfo: { level: 'intrinsic', svc: 'block.tx' },
  bloomMatch: { level: 'intrinsic', svc: 'the logs-in-bloom check (every log address and topic is in the logsBloom)' },
  blockHashRecompute: { level: 'intrinsic', svc: 'block.hash' },
  blockByHashIdentity: { level: 'intrinsic', svc: 'block.request' },
  blockByNumberIdentity: { level: 'intrinsic', svc: 'block.request' },
  txByHashIdentity: { level: 'intrinsic', svc: 'tx.request' },
  receiptIdentity: { level: 'intrinsic', svc: 'receipt.request' },
  getLogsFilterSanity: { level: 'intrinsic', svc: 'logs.range, logs.address, logs.topics' },
  hashStability: { level: 'corroborated', svc: 'corroborated (a second upstream confirms each block hash the answer names)', reorgSensitive: true },
  parentHashLinkage: { level: 'corroborated', svc: 'corroborated (a second upstream confirms each block hash the answer names)', reorgSensitive: true },
  receiptVsBlock: { level: 'authoritative', svc: 'authoritative (a vote of other upstreams over the block hash the receipt names)', reorgSensitive: true },
  indexMagnitude: { level: 'intrinsic', instead: `${RECEIPT_INDEXES}; single receipts and eth_getLogs are not checked for underflowed indexes` },
  bloomEmptiness: {
    level: 'intrinsic',
    instead: 'svc checks that every log is in the logsBloom (a zero bloom with logs fails that); a non-zero bloom without logs is not refused',
  },
  txHashUniqueness: {
    level: 'intrinsic',
    instead: 'svc recomputes each transaction hash of a block from its fields (tx.hash); receipts are not checked for duplicate hashes',
  },
  txFieldUniqueness: {
    level: 'intrinsic',
    instead: 'svc recomputes each transaction hash and the transactionsRoot of a block (tx.hash, block.transactionsRoot)',
  },
  senderRecovery: { level: 'intrinsic', instead: 'svc recomputes the transaction hash from its signed fields (tx.hash); the `from` address is not recovered' },
  getLogsCompleteness: {
    level: 'corroborated',
    instead: "svc's corroborated level confirms the block of each log with a second upstream and checks the log is in its logsBloom",
  },
  txPinConsistency: { level: 'corroborated', instead: "svc's corroborated level confirms the block hash a transaction names with a second upstream" },
  receiptsRootRecompute: {
    level: 'authoritative',
    instead: "svc's authoritative level votes on the receipts' block hash with other upstreams; the receipts root is not recomputed",
  },
};

/**
 * eRPC checks svc can turn off (`skipChecks`), with the svc check that implements each. eRPC ids
 * sharing one svc check are turned off together or not at all.
 */
export const ERPC_SKIPPABLE: Readonly<Record<string, (typeof SKIPPABLE_CHECKS)[number]>> = {
  blockHashRecompute: 'block.hash',
  headerFieldShapes: 'block.hash',
  blockByHashIdentity: 'block.request',
  blockByNumberIdentity: 'block.request',
  txBlockInfo: 'block.tx',
  transactionsRootConsistency: 'block.transactionCount',
  transactionsRootRecompute: 'block.transactionsRoot',
  sameBlockHash: 'receipt.block',
  transactionIndexConsistency: 'receipt.index',
  receiptIdentity: 'receipt.request',
  getLogsFilterSanity: 'logs.filter',
  txByHashIdentity: 'tx.request',
};

const RANK: Readonly<Record<IntegrityLevel, number>> = { off: 0, intrinsic: 1, corroborated: 2, authoritative: 3 };

/** eRPC keys svc refuses, with what to use instead. */
const REFUSED: Readonly<Record<string, string>> = {
  reorgWindow: "svc's chain state remembers the last 256 block hashes for reorg checks (not configurable)",
  follow: "svc's state pollers follow each upstream's head (evm.statePollerInterval); the corroborated level confirms block hashes with a second upstream",
  stateProbe: 'give state-pruned upstreams evm.blockAvailability bounds (the callState probe finds their earliest state), or use consensus for state calls',
  misbehaviorsDestination:
    'integrity failures are logged at warn and counted (svc_upstream_request_retries_total{reason="integrity_validation"}, svc_integrity_flagged_total)',
};

/** Keys of eRPC's per-profile settings other than `level` (svc's profiles set a level only). */
const PROFILE_SETTINGS = ['checks', 'budget', 'invalidBehavior', 'reorgWindow', 'observeOnly', 'stateProbe', 'follow', 'misbehaviorsDestination'];

const levelName = (v: unknown): IntegrityLevel | undefined => {
  const t = typeof v === 'string' ? v.trim().toLowerCase() : undefined;
  return t !== undefined && (LEVELS as readonly string[]).includes(t) ? (t as IntegrityLevel) : undefined;
};

/**
 * One `checks` entry: accepted (nothing to do: svc already does it), a check to turn off (added
 * to `off`, its svc check name), or a problem.
 */
function checkEntry(id: string, entry: unknown, level: IntegrityLevel, path: string, out: NormalizeReport, off: Map<string, string>): void {
  const c = ERPC_CHECKS[id];
  if (!c) {
    out.problem(path, `unknown eRPC integrity check "${id}" (eRPC's catalog: ${Object.keys(ERPC_CHECKS).join(', ')})`);
    return;
  }
  const e = isConfigObject(entry) ? entry : {};
  const on = e.enabled;
  if (!c.svc) {
    // svc does not run it: only "off" keeps its meaning.
    if (on === false) return;
    out.problem(path, `eRPC's integrity check ${id} is not in svc: ${c.instead}`);
    return;
  }
  if (on === false) {
    const svc = ERPC_SKIPPABLE[id];
    if (svc) off.set(id, svc);
    else
      out.problem(
        pathOf(path, 'enabled'),
        `svc runs ${id} (${c.svc}) with every ${c.level} check and cannot turn it off alone: map the affected methods to a lower level with a profile (integrity.profiles)`,
      );
    return;
  }
  if (on === true && RANK[level] < RANK[c.level]) {
    out.problem(
      pathOf(path, 'enabled'),
      `svc runs ${id} (${c.svc}) at the ${c.level} level, not one by one: set level ${c.level} (or a profile mapping the methods to it)`,
    );
    return;
  }
  if (e.onFailure !== undefined && e.onFailure !== 'reject') {
    out.problem(
      pathOf(path, 'onFailure'),
      c.reorgSensitive
        ? `per-check onFailure is not in svc: set invalidBehavior (finalized/unfinalized: reject | soft-flag | off) for ${id}`
        : `per-check onFailure is not in svc (${id} always rejects): use observeOnly: true to serve and count failures`,
    );
    return;
  }
  if (e.params !== undefined) out.problem(pathOf(path, 'params'), `check params are not in svc (${id} runs as ${c.svc})`);
}

/**
 * eRPC checks turned off (`enabled: false`) → svc's `skipChecks`: a svc check is skipped only when
 * every eRPC id it implements is off (else a problem naming the others).
 */
function skipChecks(i: ConfigObject, at: string, off: ReadonlyMap<string, string>, out: NormalizeReport): void {
  if (off.size === 0) return;
  const names = new Set<string>();
  for (const [id, svc] of off) {
    const companions = Object.keys(ERPC_SKIPPABLE).filter((o) => ERPC_SKIPPABLE[o] === svc && !off.has(o));
    if (companions.length > 0) {
      out.problem(
        pathOf(pathOf(pathOf(at, 'checks'), id), 'enabled'),
        `svc's ${svc} check also does ${companions.join(', ')}: turn ${companions.length > 1 ? 'them' : 'it'} off too (enabled: false), or keep ${id} on`,
      );
      continue;
    }
    names.add(svc);
  }
  if (names.size === 0) return;
  const have = Array.isArray(i.skipChecks) ? i.skipChecks.filter((x): x is string => typeof x === 'string') : [];
  rewriteKey(i, 'skipChecks', pathOf(at, 'skipChecks'), [...new Set([...have, ...names])].sort(), out);
}

/** Rewrites one network's (or networkDefaults') `integrity` block. */
function normalizeBlock(n: ConfigObject, path: string, out: NormalizeReport): void {
  const i = n.integrity;
  if (!isConfigObject(i)) return;
  const at = pathOf(path, 'integrity');
  for (const [k, why] of Object.entries(REFUSED)) if (k in i) out.problem(pathOf(at, k), `eRPC's integrity ${k} is not in svc: ${why}`);
  const dd = isConfigObject(n.directiveDefaults) ? n.directiveDefaults : undefined;
  let level = levelName(dd?.integrity) ?? 'off';
  if ('level' in i) {
    const l = levelName(i.level);
    if (!l) out.problem(pathOf(at, 'level'), `integrity level must be one of ${LEVELS.join(', ')}`);
    else if (dd && dd.integrity !== undefined && levelName(dd.integrity) !== l)
      out.problem(pathOf(at, 'level'), `integrity.level (eRPC's form) and directiveDefaults.integrity are both set: keep directiveDefaults.integrity`);
    else {
      level = l;
      rewriteKey(i, 'level', pathOf(at, 'level'), undefined, out);
      const d = dd ?? {};
      rewriteKey(d, 'integrity', `${path}.directiveDefaults.integrity`, l, out);
      if (!dd) n.directiveDefaults = d;
      // eRPC's defaults for what its block leaves out.
      if (!('headerMode' in i)) rewriteKey(i, 'headerMode', pathOf(at, 'headerMode'), 'deny', out);
      if (!('invalidBehavior' in i)) rewriteKey(i, 'invalidBehavior', pathOf(at, 'invalidBehavior'), { finalized: 'reject', unfinalized: 'soft-flag' }, out);
    }
  }
  if (i.headerMode === 'off') rewriteKey(i, 'headerMode', pathOf(at, 'headerMode'), 'deny', out);
  else if (i.headerMode === 'full') rewriteKey(i, 'headerMode', pathOf(at, 'headerMode'), 'allow', out);
  if (isConfigObject(i.profiles)) {
    for (const [name, p] of Object.entries(i.profiles)) {
      if (!isConfigObject(p)) continue;
      const pp = pathOf(pathOf(at, 'profiles'), name);
      const extra = PROFILE_SETTINGS.filter((k) => k in p);
      if (extra.length)
        out.problem(
          pp,
          `eRPC's per-profile ${extra.join(', ')} are not in svc: a svc profile maps method globs to a level; set the rest on the network's integrity block`,
        );
      else if ('level' in p && Object.keys(p).length === 1 && levelName(p.level)) rewriteKey(i.profiles, name, pp, { '*': levelName(p.level) }, out);
    }
  }
  if ('checks' in i) {
    const off = new Map<string, string>();
    if (isConfigObject(i.checks)) for (const [id, e] of Object.entries(i.checks)) checkEntry(id, e, level, pathOf(pathOf(at, 'checks'), id), out, off);
    else out.problem(pathOf(at, 'checks'), 'integrity checks must be a map of check id to {enabled, onFailure, params}');
    skipChecks(i, at, off, out);
    rewriteKey(i, 'checks', pathOf(at, 'checks'), undefined, out);
  }
}

/** The integrity plugin's `normalize`: eRPC's project and network `integrity` blocks in svc's shape. */
export function normalizeErpcIntegrity(doc: ConfigDocument, out: NormalizeReport): void {
  eachProject(doc, (p, pp) => {
    if (!('integrity' in p) || p.integrity === undefined) return;
    const nd = isConfigObject(p.networkDefaults) ? p.networkDefaults : undefined;
    if (nd && nd.integrity !== undefined) {
      out.problem(`${pp}.integrity`, "eRPC's project integrity block and networkDefaults.integrity are both set: keep networkDefaults.integrity");
      return;
    }
    const d = nd ?? {};
    rewriteKey(d, 'integrity', `${pp}.networkDefaults.integrity`, p.integrity, out);
    if (!nd) p.networkDefaults = d;
    rewriteKey(p, 'integrity', `${pp}.integrity`, undefined, out);
  });
  eachNetwork(doc, (n, path) => normalizeBlock(n, path, out));
}
