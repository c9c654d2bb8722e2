/**
 * Redaction of secrets.
 *
 * Upstream-originated text: an error body that echoes the request URL or an
 * auth header must not carry a provider key to a client, a log line, a metric or a trace header:
 * every such text passes through its upstream's `Redactor` where it arrives (the
 * transport), before any of those see it: lib/redact-upstream.ts, re-exported here.
 *
 * Config, logs and error text: {@link redactTree} and {@link redactText} hide
 * credentials by key name, header maps and URLs wherever config can surface: the admin config
 * views, every log line (lib/logger.ts), internal error messages and start-up errors.
 */
import { createHmac, randomBytes } from 'node:crypto';

export { excerptOf, MIN_SECRET_SEGMENT, REDACTED, Redactor, safeDecode, secretsOf } from './redact-upstream.ts';

// ---- Config, log and error-text redaction ------------------------------------------------
// The admin config views, every log line (lib/logger.ts) and start-up error text pass their
// values through {@link redactTree} / {@link redactText}, so a credential written anywhere in a
// config (a header value, a provider setting, a URL's user info or key) never shows in plain text.

/** Words of a key (camelCase, `_`, `-`, `.` and spaces split) that make it a credential. */
const CREDENTIAL_WORDS = new Set([
  'secret',
  'secrets',
  'token',
  'tokens',
  'password',
  'passwords',
  'passwd',
  'pwd',
  'passphrase',
  'authorization',
  'bearer',
  'credential',
  'credentials',
  'private',
  'mnemonic',
  'session',
  'sessions',
  'cookie',
  'cookies',
  'jwt',
  'auth',
  'signature',
  'apikey',
  'apikeys',
]);
/**
 * Parts of a key written without separators (`APIKEY`, `accesstoken`, `x_secretkey`) that make it
 * a credential; `dkey` (dRPC's key parameter) and `clientid` (thirdweb's key setting) are the
 * vendor spellings of an API key (plugins/vendors).
 */
const CREDENTIAL_PARTS = [
  'secret',
  'password',
  'passwd',
  'passphrase',
  'token',
  'apikey',
  'accesskey',
  'privatekey',
  'mnemonic',
  'credential',
  'authorization',
  'bearer',
  'cookie',
  'dkey',
  'clientid',
];
/**
 * Credential-looking keys that name a config block (`auth: {strategies}`, `jwt: {...}`): an
 * object under them is walked (its own secrets are still found by key) rather than hidden whole,
 * so `svc_config` still shows which strategies exist; a scalar under them is hidden.
 */
const CONTAINER_KEYS = new Set(['auth', 'jwt', 'session', 'sessions', 'private']);
/** URL schemes whose authority is a host (`new URL` parses it); any other scheme's text is hidden whole (`alchemy://KEY`). */
const HOST_SCHEMES = new Set([
  'http:',
  'https:',
  'ws:',
  'wss:',
  'redis:',
  'rediss:',
  'postgres:',
  'postgresql:',
  'mysql:',
  'mongodb:',
  'mongodb+srv:',
  'amqp:',
  'amqps:',
  'nats:',
  'grpc:',
  'grpcs:',
  'tcp:',
  'udp:',
]);
/** Deepest object walked; deeper values are replaced (configs and log objects are shallow). */
const MAX_TREE_DEPTH = 32;
/** Most key classifications remembered (config and log keys are a small, fixed set). */
const MAX_KEY_MEMO = 4096;

const processKey = randomBytes(32);
const keyMemo = new Map<string, KeyKind>();

/** How a key's value is redacted: not at all, whole (every leaf), or as a block walked further. */
export type KeyKind = 'plain' | 'credential' | 'container';

/**
 * `#redacted=<8 hex>` of a value: an HMAC with a key drawn at start, so equal values look equal
 * within one process (an operator can compare them) without the mark being a lookup table.
 * @param value the secret
 */
export function redactedMark(value: string): string {
  return `#redacted=${createHmac('sha256', processKey).update(value).digest('hex').slice(0, 8)}`;
}

/**
 * Whether a key names a credential, case-insensitively: a word among secret, token, password,
 * passwd, pwd, passphrase, authorization, bearer, credential(s), private, mnemonic, session,
 * cookie, jwt, auth, signature, apikey; a last word `key`/`keys` (`apiKey`, `X-Api-Key`,
 * `secretAccessKey`, `verificationKeys`, but not `keyPrefix`); or, written without separators,
 * a part such as `apikey`, `accesstoken`, `privatekey`.
 * @param name an object key or a `key=value` name
 * @returns `credential` (hide every leaf), `container` (a block: walk it, hide a scalar) or `plain`
 */
export function keyKind(name: string): KeyKind {
  const memo = keyMemo.get(name);
  if (memo !== undefined) return memo;
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  const compact = words.join('');
  const last = words[words.length - 1];
  let kind: KeyKind = 'plain';
  if (CONTAINER_KEYS.has(compact)) kind = 'container';
  else if (last === 'key' || last === 'keys' || words.some((w) => CREDENTIAL_WORDS.has(w)) || CREDENTIAL_PARTS.some((p) => compact.includes(p)))
    kind = 'credential';
  if (keyMemo.size < MAX_KEY_MEMO) keyMemo.set(name, kind);
  return kind;
}

/**
 * A URL with its user info, path, query and fragment replaced by one mark each (only its origin
 * stays: `https://host/v2/KEY?apikey=K` → `https://host/#redacted=…`), or unchanged when it has
 * none (or only an already `#redacted…` fragment). A scheme whose authority is not a host
 * (`alchemy://KEY`) or text that does not parse is hidden whole after `://`; `file://` URLs
 * (stack traces) are kept.
 * @param value a URL
 */
export function redactUrl(value: string): string {
  const sep = value.indexOf('://');
  const scheme = sep > 0 ? `${value.slice(0, sep).toLowerCase()}:` : '';
  if (scheme === 'file:') return value;
  let u: URL | undefined;
  try {
    u = HOST_SCHEMES.has(scheme) ? new URL(value) : undefined;
  } catch {
    u = undefined;
  }
  if (!u) return sep > 0 ? `${value.slice(0, sep)}://${redactedMark(value.slice(sep + 3))}` : redactedMark(value);
  const hasPath = u.pathname !== '' && u.pathname !== '/';
  // An already redacted fragment (`…://host#redacted=1a2b3`, a repository upstream's id) stays.
  if (!u.username && !u.password && !hasPath && !u.search && (!u.hash || u.hash.startsWith('#redacted'))) return value;
  return `${u.protocol}//${u.username || u.password ? `${redactedMark(`${u.username}:${u.password}`)}@` : ''}${u.host}/${hasPath || u.search || u.hash ? redactedMark(`${u.pathname}${u.search}${u.hash}`) : ''}`;
}

/** A URL inside text (up to white space, a quote or a bracket). */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`\\]+/gi;
/** Punctuation that ends a sentence rather than a URL. */
const URL_TAIL = /[.,;:)\]}]+$/;
/** `Bearer <token>` / `Basic <base64>` in text. */
const AUTH_SCHEME = /\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{6,})/gi;
/**
 * `name=value`, `name: value`, `"name":"value"`, `name: "two words"` in text; the name decides
 * (see {@link keyKind}). A quoted value runs to its closing quote (at most 512 characters).
 */
const KEY_VALUE = /([A-Za-z][A-Za-z0-9_.-]*)("?\s*[=:]\s*)(?:"([^"]{1,512})"|([^\s"'&,;)}\]]{3,}))/g;

function urlInText(match: string): string {
  const tail = URL_TAIL.exec(match)?.[0] ?? '';
  return redactUrl(tail ? match.slice(0, -tail.length) : match) + tail;
}

/**
 * Every credential `name=value` of a text redacted. A plain name's value is scanned again (in
 * `Error: token=abc` the value of `Error` holds `token=abc`), so the scan restarts right after
 * the separator instead of after the value.
 */
function keyValuesInText(text: string): string {
  const re = KEY_VALUE;
  re.lastIndex = 0;
  let out = '';
  let from = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const [whole, name = '', sep = '', quoted, bare] = m;
    const value = quoted ?? bare ?? '';
    if (keyKind(name) === 'plain' || value.startsWith('#redacted')) {
      re.lastIndex = m.index + name.length + sep.length;
      continue;
    }
    out += text.slice(from, m.index) + (quoted !== undefined ? `${name}${sep}"${redactedMark(value)}"` : `${name}${sep}${redactedMark(value)}`);
    from = m.index + whole.length;
  }
  return from === 0 ? text : out + text.slice(from);
}

/**
 * Free text (a log message, an error message, a config-file parse error) with its credentials
 * replaced: every URL as {@link redactUrl} does, the token after `Bearer `/`Basic `, and the
 * value of every `name=value` / `name: value` / `"name":"value"` whose name looks like a
 * credential ({@link keyKind}). Text without `:`, `=` or an auth scheme is returned as is.
 * @param text any text
 */
export function redactText(text: string): string {
  if (text.indexOf(':') < 0 && text.indexOf('=') < 0 && !/bearer|basic/i.test(text)) return text;
  const partly = text
    .replace(URL_IN_TEXT, urlInText)
    .replace(AUTH_SCHEME, (_m, scheme: string, sp: string, token: string) => `${scheme}${sp}${redactedMark(token)}`);
  return keyValuesInText(partly);
}

/** An error as pino's serializer writes it (`type`, `message`, `stack`, `code`), its text redacted. */
function errorView(e: Error): Record<string, unknown> {
  const code = (e as { code?: unknown }).code;
  return {
    type: e.name,
    message: redactText(e.message),
    ...(e.stack ? { stack: redactText(e.stack) } : {}),
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
  };
}

/**
 * An error of the same class with its message, stack, cause and own fields redacted: what a log
 * line gets, so pino's error serializer still names its class (`type`) and follows its cause.
 */
function errorClone(e: Error, depth: number, seen: Set<object>): Error {
  const c = Object.create(Object.getPrototypeOf(e) as object) as Error;
  const hidden = (value: unknown) => ({ value, enumerable: false, writable: true, configurable: true });
  Object.defineProperty(c, 'message', hidden(redactText(e.message)));
  if (e.stack !== undefined) Object.defineProperty(c, 'stack', hidden(redactText(e.stack)));
  if (e.cause !== undefined) Object.defineProperty(c, 'cause', hidden(walk(e.cause, depth + 1, seen, true)));
  const own = walk({ ...e }, depth + 1, seen, true) as Record<string, unknown>;
  Object.assign(c, own);
  return c;
}

/** Every string and number leaf of a value hidden (booleans and null say nothing and stay). */
function hideAll(v: unknown, depth: number, seen: Set<object>): unknown {
  if (typeof v === 'string') return redactedMark(v);
  if (typeof v === 'number' || typeof v === 'bigint') return redactedMark(String(v));
  if (v === null || typeof v !== 'object') return typeof v === 'boolean' ? v : undefined;
  if (depth > MAX_TREE_DEPTH || seen.has(v)) return '#redacted';
  if (v instanceof Error) return redactedMark(v.message);
  seen.add(v);
  try {
    if (Array.isArray(v)) return v.map((x) => hideAll(x, depth + 1, seen));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (typeof x !== 'function') out[k] = hideAll(x, depth + 1, seen);
    return out;
  } finally {
    seen.delete(v);
  }
}

/** Whether the value under `key` is a map of header values (`headers`, `responseHeaders`; not a list of names such as `allowedHeaders: [...]`). */
function isHeaderValues(key: string, v: unknown): boolean {
  const lower = key.toLowerCase();
  if (lower === 'headers') return true;
  return lower.endsWith('headers') && v !== null && typeof v === 'object' && !Array.isArray(v);
}

function walk(v: unknown, depth: number, seen: Set<object>, clones: boolean): unknown {
  if (typeof v === 'string') return redactText(v);
  if (v === null || typeof v !== 'object') return typeof v === 'function' || typeof v === 'symbol' ? undefined : v;
  if (depth > MAX_TREE_DEPTH) return '[too deep]';
  if (seen.has(v)) return '[circular]';
  if (v instanceof Error) {
    if (!clones) return errorView(v);
    seen.add(v);
    try {
      return errorClone(v, depth, seen);
    } finally {
      seen.delete(v);
    }
  }
  seen.add(v);
  try {
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1, seen, clones));
    if (v instanceof Map || v instanceof Set || ArrayBuffer.isView(v)) return undefined;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === 'function') continue;
      const kind = keyKind(k);
      if (kind === 'credential' || isHeaderValues(k, x)) out[k] = hideAll(x, depth + 1, seen);
      else if (kind === 'container' && (typeof x === 'string' || typeof x === 'number')) out[k] = redactedMark(String(x));
      else out[k] = walk(x, depth + 1, seen, clones);
    }
    return out;
  } finally {
    seen.delete(v);
  }
}

/**
 * A copy of a config subtree, log object or error with every credential replaced by
 * `#redacted=<8 hex>` ({@link redactedMark}):
 * - every string and number under a credential-looking key ({@link keyKind}), whole subtrees
 *   included (`secret: {value}`, `redis.password`, `aws.secretAccessKey`, a provider's
 *   `settings.apiKey`, JWT `verificationKeys`, a scalar `auth`/`jwt`);
 * - every value of a header map (`headers` at any level: an upstream's, a provider's, the
 *   tracing exporter's; `responseHeaders`), whatever the header's name;
 * - inside every other string, URLs and credentials as {@link redactText} finds them.
 * Errors become `{type, message, stack, code}` with their text redacted; functions, Maps, Sets
 * and buffers are left out; cycles and depth beyond 32 are cut. Booleans and null stay.
 * @param value any JSON-like value
 */
export function redactTree(value: unknown): unknown {
  return walk(value, 0, new Set(), false);
}

/**
 * {@link redactTree} for a log call: errors stay errors (of their own class, text redacted), so
 * pino serialises them as it always does (`type`, `message`, `stack`, cause).
 * @param value a log argument
 */
export function redactLogValue(value: unknown): unknown {
  return walk(value, 0, new Set(), true);
}
