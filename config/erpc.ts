/**
 * eRPC's shapes of the keys the core owns, rewritten into svc's own at load time (the core's part
 * of config/normalize.ts; plugins rewrite their own keys through `SchemaFragment.normalize`).
 * Each rewrite keeps the meaning eRPC gives the key (common/config.go, common/defaults.go):
 *
 * - `logLevel: DEBUG` → `debug` (eRPC parses the level case-insensitively; `warning` → `warn`).
 * - `networks[]` without `architecture` → `architecture: evm` (eRPC's default).
 * - `upstreams[].type: evm` (and `upstreamDefaults.type`) → removed: every svc upstream is EVM
 *   JSON-RPC over HTTP. eRPC's legacy `evm+<vendor>` types are refused naming the endpoint
 *   shortcut that replaces them; `svm` is refused (svc serves EVM chains only), and so is a gRPC
 *   type (a gRPC upstream is chosen by its `grpc://` endpoint, served by the bds plugin).
 * - `architecture: svm` is refused the same way.
 * - `upstreams[].group: X` / `cohort: Y` (eRPC's legacy keys, which eRPC itself turns into tags)
 *   → `tags: [tier:X]` / `[cohort:Y]`.
 * - `server.listenV4: true` / `metrics.listenV4: true` → removed (svc always listens on its IPv4
 *   host); `false` is refused (svc has no IPv6-only listener).
 * - `server.tls.insecureSkipVerify` → removed: a server verifies no peer with it (eRPC's server ignores
 *   it too; client certificates are checked against `caFile`).
 */
import { eachNetwork, eachUpstream, isConfigNode, rewriteKey, type ConfigDocument, type NormalizeReport } from './normalize.ts';
import { normalizeLegacyEvmKeys, normalizeLegacyProjectKeys } from './erpc-legacy.ts';

const LEVELS: Readonly<Record<string, string>> = { trace: 'trace', debug: 'debug', info: 'info', warn: 'warn', warning: 'warn', error: 'error' };

/** `logLevel` in any case (eRPC: zerolog's parser, case-insensitive) → svc's lower-case names. */
export function normalizeLogLevel(doc: ConfigDocument, out: NormalizeReport): void {
  const v = doc.logLevel;
  if (typeof v !== 'string') return;
  const to = LEVELS[v.trim().toLowerCase()];
  if (to !== undefined && to !== v) rewriteKey(doc, 'logLevel', 'logLevel', to, out);
  else if (to === undefined && ['disabled', 'fatal', 'panic'].includes(v.trim().toLowerCase())) {
    out.problem('logLevel', `eRPC's log level "${v}" has no svc equivalent: use "error" (svc's quietest level)`);
  }
}

const SOLANA = 'Solana (svm) networks and upstreams are an eRPC feature svc does not have: svc serves EVM chains only (architecture: evm)';

/** Networks: `architecture` defaults to evm as in eRPC; `svm` is refused. */
export function normalizeArchitecture(doc: ConfigDocument, out: NormalizeReport): void {
  eachNetwork(doc, (n, path) => {
    const a = n.architecture;
    if (a === undefined && !path.endsWith('networkDefaults')) rewriteKey(n, 'architecture', `${path}.architecture`, 'evm', out);
    else if (typeof a === 'string' && a.toLowerCase() === 'evm' && a !== 'evm') rewriteKey(n, 'architecture', `${path}.architecture`, 'evm', out);
    else if (typeof a === 'string' && a.toLowerCase() === 'svm') out.problem(`${path}.architecture`, SOLANA);
    if ('svm' in n) out.problem(`${path}.svm`, SOLANA);
  });
}

/** Upstreams: `type: evm` is svc's only kind (removed); eRPC's other types are refused with the replacement. */
export function normalizeUpstreamType(doc: ConfigDocument, out: NormalizeReport): void {
  eachUpstream(doc, (u, path) => {
    const t = u.type;
    if (t === undefined) return;
    const at = `${path}.type`;
    if (typeof t === 'string' && t.toLowerCase() === 'evm') return void rewriteKey(u, 'type', at, undefined, out);
    const s = String(t).toLowerCase();
    if (s.startsWith('evm+')) {
      out.problem(
        at,
        `eRPC's legacy upstream type "${t}" is replaced by an endpoint shortcut: write \`endpoint: ${s.slice(4)}://<key>\` (or a providers[] entry with vendor ${s.slice(4)}) and drop type`,
      );
    } else if (s === 'svm' || s.startsWith('svm')) out.problem(at, SOLANA);
    else if (s.includes('grpc'))
      out.problem(at, "eRPC's gRPC upstreams are chosen by the endpoint's scheme (`grpc://`, served by the bds plugin), not by a type: drop type");
    else out.problem(at, `unknown upstream type "${String(t)}": svc upstreams are EVM JSON-RPC over HTTP(S) (eRPC's \`type: evm\`, which may be left out)`);
    if ('svm' in u) out.problem(`${path}.svm`, SOLANA);
  });
}

/** eRPC's legacy `group: X` / `cohort: Y` on an upstream (eRPC rewrites them as tags `tier:X` / `cohort:Y`) → those tags. */
export function normalizeUpstreamGroups(doc: ConfigDocument, out: NormalizeReport): void {
  eachUpstream(doc, (u, path) => {
    const add: string[] = [];
    for (const [key, prefix] of [
      ['group', 'tier'],
      ['cohort', 'cohort'],
    ] as const) {
      if (typeof u[key] !== 'string' || u[key] === '') continue;
      add.push(`${prefix}:${u[key] as string}`);
      out.rewrite(`${path}.${key}`, { [key]: u[key] }, { tags: [`${prefix}:${u[key] as string}`] });
      delete u[key];
    }
    if (add.length) u.tags = [...(Array.isArray(u.tags) ? (u.tags as unknown[]) : []), ...add.filter((t) => !(Array.isArray(u.tags) && u.tags.includes(t)))];
  });
}

/**
 * `server.listenV4: true` (eRPC's default) says nothing svc does not already do; `false` is
 * refused. eRPC's metrics server reads none of `metrics.listenV4`, `listenV6`, `hostV6` (dead
 * fields in its docs: it binds every interface): any value is removed with a line saying so.
 */
export function normalizeListen(doc: ConfigDocument, out: NormalizeReport): void {
  const m = doc.metrics;
  if (isConfigNode(m)) {
    for (const k of ['listenV4', 'listenV6', 'hostV6'])
      if (k in m) {
        out.rewrite(`metrics.${k}`, m[k], "(removed: eRPC's metrics server never reads it)");
        delete m[k];
      }
  }
  for (const block of ['server'] as const) {
    const b = doc[block];
    if (!isConfigNode(b) || !('listenV4' in b)) continue;
    const v = b.listenV4;
    if (v === true || v === 'true') rewriteKey(b, 'listenV4', `${block}.listenV4`, undefined, out);
    else
      out.problem(
        `${block}.listenV4`,
        `eRPC's ${block}.listenV4: false (an IPv6-only listener) is not supported: svc listens on server.httpHost (use "::" there for IPv6)`,
      );
  }
}

/** `server.tls.insecureSkipVerify` is a client-side switch: on a listener it changes nothing, in eRPC as in svc (removed, one line). */
export function normalizeServerTls(doc: ConfigDocument, out: NormalizeReport): void {
  const server = doc.server;
  const tls = isConfigNode(server) ? server.tls : undefined;
  if (!isConfigNode(tls) || !('insecureSkipVerify' in tls)) return;
  out.rewrite(
    'server.tls.insecureSkipVerify',
    tls.insecureSkipVerify,
    "(removed: it skips verifying a server's certificate, and svc's listener is the server: no effect, as in eRPC; caFile checks client certificates)",
  );
  delete tls.insecureSkipVerify;
}

/** The core's normalisers, in order (config/load.ts runs them before the plugins'). */
export const CORE_NORMALIZERS: ReadonlyArray<(doc: ConfigDocument, out: NormalizeReport) => void> = [
  normalizeLogLevel,
  normalizeArchitecture,
  normalizeUpstreamType,
  normalizeUpstreamGroups,
  normalizeListen,
  normalizeLegacyProjectKeys,
  normalizeLegacyEvmKeys,
  normalizeServerTls,
];
