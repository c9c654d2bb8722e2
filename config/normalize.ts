/**
 * The load-time normalisation step (docs/migrating-from-erpc.md): before
 * schema validation, eRPC's config shapes whose meaning svc shares are rewritten into svc's own
 * shape, one rewrite line per change (`svc validate --print` shows them). The core rewrites the
 * keys it owns (config/erpc.ts); each plugin rewrites its own keys through the `normalize` member
 * of its schema fragment (`SchemaFragment.normalize`), with the visitors below. A shape svc cannot honour is reported
 * as a problem ({@link NormalizeReport.problem}), never dropped.
 */

/** The raw config document as written (YAML/JSON/TS, `${ENV}` expanded), before validation. */
export type ConfigDocument = Record<string, unknown>;

/** A plain config object (a network, an upstream, a failsafe entry...), mutated in place by rewrites. */
export type ConfigObject = Record<string, unknown>;

/** Where a `normalize` function reports what it did. */
export interface NormalizeReport {
  /**
   * Records one rewrite.
   * @param path config path of the rewritten key as eRPC wrote it, e.g. `projects[0].networks[1].failsafe`
   * @param from the value (or key name) as written
   * @param to the value (or key name) svc reads
   */
  rewrite(path: string, from: unknown, to: unknown): void;
  /**
   * Refuses a shape svc does not honour: the config does not load, and the message is shown with
   * its path. Name the eRPC feature and what to use in svc instead.
   */
  problem(path: string, message: string): void;
  /**
   * Schemes of upstream endpoints a plugin of the preset serves besides http and https
   * (`SchemaFragment.endpointSchemes`): such an endpoint is that plugin's, not a shape to rewrite.
   * Unset: none.
   */
  readonly endpointSchemes?: ReadonlySet<string>;
}

/** One rewrite line: where, the eRPC form, the svc form. */
export interface NormalizeRewrite {
  readonly path: string;
  readonly from: unknown;
  readonly to: unknown;
}

/** A deep copy of plain data (functions and other objects kept by reference). */
function snapshot<T>(v: T): T {
  if (Array.isArray(v)) return v.map(snapshot) as T;
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, snapshot(x)])) as T;
  }
  return v;
}

/** A {@link NormalizeReport} that keeps what it is told (the loader's and the CLI's). */
export class NormalizeLog implements NormalizeReport {
  /** Every rewrite, in the order made. */
  readonly rewrites: Rewrite[] = [];
  /** Every refusal, in the order found. */
  readonly problems: Array<{ path: string; message: string }> = [];

  /** @param endpointSchemes see {@link NormalizeReport.endpointSchemes} */
  constructor(readonly endpointSchemes: ReadonlySet<string> = new Set()) {}

  rewrite(path: string, from: unknown, to: unknown): void {
    // Copies: a normaliser may go on to change the same objects (a line shows each step as it was).
    this.rewrites.push({ path, from: snapshot(from), to: snapshot(to) });
  }

  problem(path: string, message: string): void {
    this.problems.push({ path, message });
  }
}

/** Whether a value is a plain object (not an array, not null). */
export function isConfigObject(v: unknown): v is ConfigObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Same as {@link isConfigObject}. */
export const isConfigNode = isConfigObject;

/** Same as {@link NormalizeRewrite}. */
export type Rewrite = NormalizeRewrite;

/**
 * Sets (or, with `to` undefined, removes) one key and records the rewrite from its old value.
 * @param obj the object holding the key (mutated)
 * @param key the key
 * @param path the key's full path, for the rewrite line
 * @param to the new value; undefined removes the key (an unchanged value records nothing)
 */
export function rewriteKey(obj: ConfigObject, key: string, path: string, to: unknown, out: NormalizeReport): void {
  if (obj[key] === to) return;
  out.rewrite(path, obj[key], to);
  if (to === undefined) delete obj[key];
  else obj[key] = to;
}

/**
 * Runs the core's normalisers, then each fragment's `normalize` in plugin order, on a document
 * (in place).
 * @param doc the env-expanded raw document (mutated)
 * @param core the core's normalisers (config/erpc.ts `CORE_NORMALIZERS`), in order
 * @param fragments the preset's schema fragments
 * @returns every rewrite made and every shape refused (as config problems)
 */
export function normalizeDocument(
  doc: ConfigDocument,
  core: ReadonlyArray<(doc: ConfigDocument, out: NormalizeReport) => void>,
  fragments: ReadonlyArray<{ readonly normalize?: (doc: ConfigDocument, out: NormalizeReport) => void; readonly endpointSchemes?: readonly string[] }>,
): { rewrites: Rewrite[]; problems: Array<{ path: string; message: string }> } {
  const log = new NormalizeLog(new Set(fragments.flatMap((f) => f.endpointSchemes ?? [])));
  for (const n of core) n(doc, log);
  for (const f of fragments) f.normalize?.(doc, log);
  return { rewrites: log.rewrites, problems: log.problems };
}

/** Joins a path and a key: `a` + `b` → `a.b`; a key that is not an identifier is quoted (`overrides["evm:*"]`). */
export function pathOf(base: string, key: string | number): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  if (!/^[A-Za-z_$][\w$]*$/.test(key)) return `${base}[${JSON.stringify(key)}]`;
  return base ? `${base}.${key}` : key;
}

/**
 * Calls `visit` on every project of the document with its path (`projects[0]`).
 * @param doc the raw config document
 */
export function eachProject(doc: ConfigDocument, visit: (project: ConfigObject, path: string) => void): void {
  const projects = doc.projects;
  if (!Array.isArray(projects)) return;
  projects.forEach((p, i) => {
    if (isConfigObject(p)) visit(p, `projects[${i}]`);
  });
}

/**
 * Calls `visit` on every network config of every project: `networkDefaults` first, then each
 * `networks[]` entry, with its path (`projects[0].networkDefaults`, `projects[0].networks[2]`).
 * Use it for keys of `projects[].networks[]` (they are also valid under `networkDefaults`).
 * @param doc the raw config document
 */
export function eachNetwork(doc: ConfigDocument, visit: (network: ConfigObject, path: string) => void): void {
  eachProject(doc, (p, pp) => {
    if (isConfigObject(p.networkDefaults)) visit(p.networkDefaults, `${pp}.networkDefaults`);
    if (Array.isArray(p.networks)) p.networks.forEach((n, i) => isConfigObject(n) && visit(n, `${pp}.networks[${i}]`));
  });
}

/**
 * Calls `visit` on every upstream config of every project: `upstreamDefaults`, each
 * `upstreams[]` entry, and each provider's `overrides` entry (upstream settings merged into the
 * upstreams a provider generates), with its path. Use it for keys of `projects[].upstreams[]`.
 * @param doc the raw config document
 */
export function eachUpstream(doc: ConfigDocument, visit: (upstream: ConfigObject, path: string) => void): void {
  eachProject(doc, (p, pp) => {
    if (isConfigObject(p.upstreamDefaults)) visit(p.upstreamDefaults, `${pp}.upstreamDefaults`);
    if (Array.isArray(p.upstreams)) p.upstreams.forEach((u, i) => isConfigObject(u) && visit(u, `${pp}.upstreams[${i}]`));
    if (!Array.isArray(p.providers)) return;
    p.providers.forEach((pr, i) => {
      if (!isConfigObject(pr) || !isConfigObject(pr.overrides)) return;
      for (const [glob, o] of Object.entries(pr.overrides)) if (isConfigObject(o)) visit(o, pathOf(`${pp}.providers[${i}].overrides`, glob));
    });
  });
}

/**
 * Calls `visit` on every `auth` block of the document: each project's `auth`, `admin.auth` and
 * `healthCheck.auth` (they share one strategy schema), with its path.
 * @param doc the raw config document
 */
export function eachAuthBlock(doc: ConfigDocument, visit: (auth: ConfigObject, path: string) => void): void {
  eachProject(doc, (p, pp) => isConfigObject(p.auth) && visit(p.auth, `${pp}.auth`));
  for (const k of ['admin', 'healthCheck']) {
    const o = doc[k];
    if (isConfigObject(o) && isConfigObject(o.auth)) visit(o.auth, `${k}.auth`);
  }
}

/**
 * Renames a key of an object, keeping its value, and records the rewrite. When both names are
 * present the svc key wins and the eRPC key is a problem (two values for one setting).
 * @param obj the object holding the key
 * @param path the object's path
 * @param from the eRPC key name
 * @param to the svc key name
 * @returns true when the key was renamed
 */
export function renameKey(obj: ConfigObject, path: string, from: string, to: string, out: NormalizeReport): boolean {
  if (!(from in obj)) return false;
  if (to in obj) {
    out.problem(pathOf(path, from), `"${from}" is eRPC's name of "${to}", which is also set: keep one`);
    return false;
  }
  obj[to] = obj[from];
  delete obj[from];
  out.rewrite(pathOf(path, from), from, to);
  return true;
}

/**
 * Rewrites eRPC's Redis connector fields (`addr`, `username`, `db`, `tls`) into the `uri` svc's
 * Redis blocks take: `addr: host:6379` + `db: 2` → `uri: redis://host:6379/2`; `username` and
 * `password` go into the URI's user part only when the block has no `password` key of its own
 * (svc keeps `password` apart so it stays out of logs); `tls.enabled` selects `rediss://`. A
 * `redis://` or `rediss://` prefix on `addr` (eRPC accepts both forms) is dropped first, a
 * `rediss://` one selecting TLS. eRPC's
 * `initTimeout`/`getTimeout`/`setTimeout` are renamed by `timeouts` (each block names its own
 * deadline keys); `connPoolSize` is dropped with a line saying why ({@link CONN_POOL_SIZE_MOOT});
 * `lockRetryInterval`, `iamAuth` and TLS certificate files are problems (svc's client takes no
 * locks, and reads TLS settings from the URI only).
 * @param block a `redis:` block (mutated)
 * @param path its path
 * @param timeouts eRPC timeout key → this block's key (a missing eRPC key is a problem when set)
 */
export function normalizeRedisBlock(block: ConfigObject, path: string, out: NormalizeReport, timeouts: Readonly<Record<string, string>> = {}): void {
  if ('addr' in block) {
    if ('uri' in block && block.uri !== '' && block.uri !== undefined) {
      out.problem(pathOf(path, 'addr'), 'eRPC\'s "addr" and "uri" are both set: keep "uri"');
    } else {
      const tls = isConfigObject(block.tls) ? block.tls : undefined;
      // eRPC takes `addr` with or without a scheme: one written is dropped (rediss:// keeps TLS).
      const written = /^(rediss?):\/\//i.exec(String(block.addr));
      const host = written ? String(block.addr).slice(written[0].length) : String(block.addr);
      const scheme = tls?.enabled === true || written?.[1]?.toLowerCase() === 'rediss' ? 'rediss' : 'redis';
      const user = typeof block.username === 'string' ? encodeURIComponent(block.username) : '';
      const db = block.db === undefined || block.db === 0 || block.db === '0' ? '' : `/${String(block.db)}`;
      const uri = `${scheme}://${user ? `${user}@` : ''}${host}${db}`;
      out.rewrite(
        pathOf(path, 'addr'),
        { addr: block.addr, ...(user ? { username: block.username } : {}), ...(db ? { db: block.db } : {}), ...(tls ? { tls } : {}) },
        { uri },
      );
      block.uri = uri;
      delete block.addr;
      delete block.username;
      delete block.db;
      if (tls) {
        const extra = Object.keys(tls).filter((k) => k !== 'enabled');
        if (extra.length)
          out.problem(
            pathOf(path, 'tls'),
            `eRPC's Redis TLS files (${extra.join(', ')}): svc's Redis client takes TLS from the URI scheme (rediss://) with the system's CAs; put the certificates in NODE_EXTRA_CA_CERTS`,
          );
        else delete block.tls;
      }
    }
  } else if ('username' in block || 'db' in block) {
    out.problem(path, 'eRPC\'s "username"/"db" go with "addr"; with "uri", put them in the URI (redis://user@host:6379/2)');
  }
  for (const [from, to] of Object.entries(timeouts)) if (from in block) renameKey(block, path, from, to, out);
  const refused: Record<string, string> = {
    lockRetryInterval: "eRPC's Redis lock retry interval (distributed locks of the shared state): svc takes no Redis locks; remove lockRetryInterval",
    iamAuth:
      "eRPC's AWS IAM authentication for ElastiCache: not supported; use a password (redis://user@host, password: ...) or an ElastiCache user with a password",
    initTimeout: "eRPC's Redis connect timeout: this Redis block has no connect timeout of its own; remove initTimeout",
    getTimeout: "eRPC's Redis read timeout: this Redis block names its deadlines differently (see its keys in the config reference)",
    setTimeout: "eRPC's Redis write timeout: this Redis block names its deadlines differently (see its keys in the config reference)",
  };
  for (const [k, message] of Object.entries(refused)) if (k in block) out.problem(pathOf(path, k), message);
  if ('connPoolSize' in block) {
    out.rewrite(pathOf(path, 'connPoolSize'), block.connPoolSize, CONN_POOL_SIZE_MOOT);
    delete block.connPoolSize;
  }
}

/**
 * Why eRPC's `connPoolSize` is dropped: go-redis runs one command per pooled connection at a time, so its pool size bounds concurrent
 * commands; svc's Redis client (node-redis) pipelines every command over one connection, so no command waits for a free connection and
 * a pool size would change nothing.
 */
export const CONN_POOL_SIZE_MOOT =
  "(removed: svc's Redis client pipelines every command over one connection, so no command waits for a free one as in go-redis's pool: a pool size changes nothing)";
