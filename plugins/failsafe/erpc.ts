/**
 * eRPC's shapes of the failsafe keys, rewritten into svc's at load time (the plugin's
 * `SchemaFragment.normalize`; docs/migrating-from-erpc.md). Meaning kept as eRPC's
 * common/config.go reads them:
 *
 * - `failsafe: {...}` (one object, eRPC's legacy form, networks and upstreams) → a one-entry list;
 *   eRPC gives that entry `matchMethod: "*"`, as svc does by default.
 * - `matchFinality: finalized` (one value) → `[finalized]`; finality names in any case, or
 *   eRPC's numbers 0..3 (finalized, unfinalized, realtime, unknown) → svc's names.
 * - `retry.blockUnavailableDelay` (deprecated in eRPC, merged into `emptyResultDelay`) →
 *   `retry.emptyResultDelay` (a problem when both are set).
 * - `hedge: null` / `timeout: null` ("no such policy here") → removed.
 * - eRPC's adaptive objects `timeout.duration: {base, quantile, min, max}` and
 *   `hedge.delay: {...}` → svc's flat keys (adaptive-forms.ts).
 */
import {
  eachNetwork,
  eachUpstream,
  isConfigObject,
  pathOf,
  renameKey,
  rewriteKey,
  type ConfigDocument,
  type ConfigObject,
  type NormalizeReport,
} from 'svc-proxy/plugin';
import { flattenAdaptiveForms } from './adaptive-forms.ts';

const FINALITIES = ['finalized', 'unfinalized', 'realtime', 'unknown'] as const;

/** One finality as eRPC writes it (any case, or 0..3) in svc's name; the value itself when unknown (the schema names it). */
export function finalityName(v: unknown): unknown {
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < FINALITIES.length) return FINALITIES[v];
  if (typeof v !== 'string') return v;
  const s = v.trim().toLowerCase();
  if (/^[0-3]$/.test(s)) return FINALITIES[Number(s)];
  return (FINALITIES as readonly string[]).includes(s) ? s : v;
}

/** `matchFinality` as a list of svc names (a single value becomes a list). */
function normalizeFinality(entry: ConfigObject, path: string, out: NormalizeReport): void {
  if (!('matchFinality' in entry) || entry.matchFinality === undefined) return;
  const v = entry.matchFinality;
  const list = Array.isArray(v) ? v : [v];
  const names = list.map(finalityName);
  if (!Array.isArray(v) || names.some((n, i) => n !== list[i])) rewriteKey(entry, 'matchFinality', pathOf(path, 'matchFinality'), names, out);
}

function normalizeEntry(entry: unknown, path: string, out: NormalizeReport): void {
  if (!isConfigObject(entry)) return;
  normalizeFinality(entry, path, out);
  const retry = entry.retry;
  if (isConfigObject(retry)) renameKey(retry, pathOf(path, 'retry'), 'blockUnavailableDelay', 'emptyResultDelay', out);
}

/** Rewrites the `failsafe` value of one network or upstream. */
function normalizeFailsafe(holder: ConfigObject, path: string, out: NormalizeReport): void {
  if (!('failsafe' in holder) || holder.failsafe === undefined || holder.failsafe === null) return;
  const at = pathOf(path, 'failsafe');
  if (isConfigObject(holder.failsafe)) rewriteKey(holder, 'failsafe', at, [holder.failsafe], out);
  const flat = flattenAdaptiveForms(holder.failsafe);
  if (flat !== holder.failsafe) rewriteKey(holder, 'failsafe', at, flat, out);
  if (Array.isArray(holder.failsafe)) holder.failsafe.forEach((e, i) => normalizeEntry(e, `${at}[${i}]`, out));
}

/**
 * The failsafe plugin's `normalize`: every network's and upstream's `failsafe` (defaults, entries
 * and provider overrides) in svc's shape.
 */
export function normalizeFailsafeShapes(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => normalizeFailsafe(n, path, out));
  eachUpstream(doc, (u, path) => normalizeFailsafe(u, path, out));
}
