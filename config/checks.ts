/**
 * Config checks beyond the JSON Schema: keys that reach
 * object prototypes, reserved project ids, duplicate ids, chains and aliases. Used by
 * `svc validate` and start-up through config/load.ts.
 */
import type { ConfigProblem } from './types.ts';
import type { SvcConfigInput } from './types.ts';
import { addressList } from '../lib/client-address.ts';

/** Keys that reach an object's prototype machinery: never valid anywhere in a config. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Project ids whose paths belong to svc itself (`POST /admin`, `GET /healthcheck`). */
export const RESERVED_PROJECT_IDS: ReadonlySet<string> = new Set(['admin', 'healthcheck']);

/**
 * Every `__proto__`, `constructor` or `prototype` key in a raw config, with its path. Walks with
 * an explicit stack, so a deeply nested document cannot overflow it.
 */
export function forbiddenKeys(doc: unknown): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const stack: Array<[unknown, string]> = [[doc, '']];
  const seen = new Set<unknown>();
  while (stack.length) {
    const [v, path] = stack.pop() as [unknown, string];
    if (v === null || typeof v !== 'object' || seen.has(v)) continue;
    seen.add(v);
    if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push([x, `${path}[${i}]`]));
      continue;
    }
    for (const k of Object.keys(v)) {
      const p = path ? `${path}.${k}` : k;
      if (FORBIDDEN_KEYS.has(k)) out.push({ path: p, message: `key "${k}" is not allowed` });
      else stack.push([(v as Record<string, unknown>)[k], p]);
    }
  }
  return out;
}

/** Duplicate project ids, chains, aliases, upstream and provider ids; reserved project ids. */
export function semanticProblems(doc: SvcConfigInput): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const forwarders = doc.server?.trustedIPForwarders;
  if (Array.isArray(forwarders)) {
    try {
      addressList(forwarders, 'server.trustedIPForwarders');
    } catch (e) {
      out.push({ path: 'server.trustedIPForwarders', message: (e as Error).message.replace(/^server\.trustedIPForwarders: /, '') });
    }
  }
  out.push(...tlsProblems(doc), ...proxyPoolProblems(doc));
  const projectIds = new Set<string>();
  (doc.projects ?? []).forEach((p, pi) => {
    if (RESERVED_PROJECT_IDS.has(p.id.toLowerCase()))
      out.push({ path: `projects[${pi}].id`, message: `project id "${p.id}" is reserved: /${p.id.toLowerCase()} is served by svc itself` });
    if (projectIds.has(p.id)) out.push({ path: `projects[${pi}].id`, message: `duplicate project id "${p.id}"` });
    projectIds.add(p.id);
    const chains = new Set<number>();
    const aliases = new Set<string>();
    (p.networks ?? []).forEach((n, ni) => {
      const c = n.evm?.chainId;
      if (c !== undefined) {
        if (chains.has(c)) out.push({ path: `projects[${pi}].networks[${ni}].evm.chainId`, message: `duplicate network evm:${c}` });
        chains.add(c);
      }
      if (n.alias) {
        if (aliases.has(n.alias)) out.push({ path: `projects[${pi}].networks[${ni}].alias`, message: `duplicate alias "${n.alias}"` });
        aliases.add(n.alias);
      }
    });
    const providerIds = new Set<string>();
    ((p as { providers?: Array<{ id?: unknown }> }).providers ?? []).forEach((pr, i) => {
      if (typeof pr?.id !== 'string') return;
      if (providerIds.has(pr.id)) out.push({ path: `projects[${pi}].providers[${i}].id`, message: `duplicate provider id "${pr.id}"` });
      providerIds.add(pr.id);
    });
    const ids = new Set<string>();
    (p.upstreams ?? []).forEach((u, ui) => {
      if (u.id) {
        if (ids.has(u.id)) out.push({ path: `projects[${pi}].upstreams[${ui}].id`, message: `duplicate upstream id "${u.id}"` });
        ids.add(u.id);
      }
    });
  });
  return out;
}

/** `server.tls.enabled` without both PEM files named (the files themselves are read, and their faults reported, at start). */
function tlsProblems(doc: SvcConfigInput): ConfigProblem[] {
  const tls = doc.server?.tls;
  if (!tls?.enabled) return [];
  return (['certFile', 'keyFile'] as const)
    .filter((k) => !tls[k])
    .map((k) => ({ path: `server.tls.${k}`, message: `required when server.tls.enabled is true (a PEM file path)` }));
}

/** Duplicate pool ids, proxy URLs that do not parse, and `jsonRpc.proxyPool` naming no pool (eRPC refuses each at start too). */
function proxyPoolProblems(doc: SvcConfigInput): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const ids = new Set<string>();
  (doc.proxyPools ?? []).forEach((pool, i) => {
    if (ids.has(pool.id)) out.push({ path: `proxyPools[${i}].id`, message: `duplicate proxy pool id "${pool.id}"` });
    ids.add(pool.id);
    pool.urls.forEach((u, j) => {
      if (!URL.canParse(u)) out.push({ path: `proxyPools[${i}].urls[${j}]`, message: 'not a URL (write scheme://[user:password@]host:port)' });
    });
  });
  const check = (u: { jsonRpc?: unknown } | undefined, path: string) => {
    const name = (u?.jsonRpc as { proxyPool?: unknown } | undefined)?.proxyPool;
    if (typeof name === 'string' && !ids.has(name))
      out.push({ path: `${path}.jsonRpc.proxyPool`, message: `no proxy pool "${name}" in proxyPools${ids.size ? ` (pools: ${[...ids].join(', ')})` : ''}` });
  };
  (doc.projects ?? []).forEach((p, pi) => {
    check(p.upstreamDefaults, `projects[${pi}].upstreamDefaults`);
    (p.upstreams ?? []).forEach((u, ui) => check(u, `projects[${pi}].upstreams[${ui}]`));
  });
  return out;
}
