/**
 * Redaction of the config the admin endpoint returns (`svc_config`, `svc_project`; spec §4.4,
 * issue #13 item 3). Replaced by `#redacted=<short_hash>`:
 * - every value under a key matching {@link SECRET_KEY} (so `secret.value`, `redis.password`, JWT
 *   `verificationKeys` (an HS* key is a shared secret),
 *   `aws.secretAccessKey`, a provider's `settings.apiKey`, any `*Token`…), whole subtrees included;
 * - every value of a `headers` map under `jsonRpc` (auth headers of upstreams);
 * - the credentials, path and query of every URL (`https://host/v2/<KEY>` keeps only its origin).
 * The short hash is an HMAC with a key drawn at start, so an operator can tell two redacted
 * values apart (or equal) in one process without the hash being a lookup table for the secret.
 */
import { createHmac, randomBytes } from 'node:crypto';

/** Keys whose values are secrets, at any depth. */
export const SECRET_KEY = /(password|secret|token|apikey|api_key|authorization|privatekey|verificationkeys)/i;
/** A URL: scheme, `://`. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i;
/** Deepest object walked; deeper values are dropped (configs are shallow). */
const MAX_DEPTH = 32;

const processKey = randomBytes(32);

/** `#redacted=<8 hex>` of a value. */
export function redactedMark(value: string): string {
  return `#redacted=${createHmac('sha256', processKey).update(value).digest('hex').slice(0, 8)}`;
}

/**
 * A URL with its user info, path and query replaced, or the value unchanged when it has none.
 * A string that looks like a URL but does not parse is redacted whole.
 */
export function redactUrl(value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return redactedMark(value);
  }
  const hasPath = u.pathname !== '' && u.pathname !== '/';
  if (!u.username && !u.password && !hasPath && !u.search && !u.hash) return value;
  return `${u.protocol}//${u.username || u.password ? `${redactedMark(`${u.username}:${u.password}`)}@` : ''}${u.host}/${hasPath || u.search || u.hash ? redactedMark(`${u.pathname}${u.search}${u.hash}`) : ''}`;
}

function redactAll(v: unknown, depth: number): unknown {
  if (depth > MAX_DEPTH) return undefined;
  if (typeof v === 'string') return redactedMark(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return redactedMark(String(v));
  if (Array.isArray(v)) return v.map((x) => redactAll(x, depth + 1));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactAll(x, depth + 1)]));
  return undefined;
}

/**
 * A JSON copy of a config subtree with every secret replaced (see the module comment).
 * Functions, Maps and other non-JSON values are left out.
 * @param value a resolved config or part of it
 */
export function redactConfig(value: unknown, depth = 0, parentKey = '', grandKey = ''): unknown {
  if (depth > MAX_DEPTH) return undefined;
  if (typeof value === 'string') return URL_LIKE.test(value) ? redactUrl(value) : value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  if (Array.isArray(value)) return value.map((x) => redactConfig(x, depth + 1, parentKey, grandKey));
  if (!value || typeof value !== 'object' || (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null)) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v === 'function') continue;
    if (SECRET_KEY.test(k) || (parentKey === 'headers' && grandKey === 'jsonRpc') || (k === 'headers' && parentKey === 'jsonRpc')) out[k] = redactAll(v, depth + 1);
    else out[k] = redactConfig(v, depth + 1, k, parentKey);
  }
  return out;
}
