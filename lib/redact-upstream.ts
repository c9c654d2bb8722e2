/**
 * Redaction of upstream-originated text: an error body that echoes the request URL or an auth
 * header must not carry a provider key to a client, a log line, a metric or a trace header. Every
 * such text passes through its upstream's {@link Redactor} where it arrives (the transport),
 * before any of those see it. ./redact.ts re-exports all of it next to the config, log and
 * error-text redaction.
 */
/** What replaces a secret. */
export const REDACTED = '#redacted';

/** Shortest path segment taken as a secret: shorter ones (`v2`, `rpc`, `eth`) are routing, not keys. */
export const MIN_SECRET_SEGMENT = 6;

function addForms(out: Set<string>, v: string): void {
  if (!v) return;
  out.add(v);
  let decoded = v;
  try {
    decoded = decodeURIComponent(v);
  } catch {
    // a malformed escape: keep the raw form only
  }
  out.add(decoded);
  out.add(encodeURIComponent(decoded));
  // As it appears inside a JSON string (an upstream echoing it in `error.data`).
  out.add(JSON.stringify(decoded).slice(1, -1));
}

/**
 * The secret parts of an upstream's config: URL user info, path segments of at least
 * {@link MIN_SECRET_SEGMENT} characters, every query value, every `jsonRpc.headers` value, and
 * the base64 form of Basic credentials, each raw, percent-decoded, percent-encoded and
 * JSON-escaped.
 * @param endpoint the upstream URL
 * @param headers `jsonRpc.headers`
 */
export function secretsOf(endpoint: string, headers: Readonly<Record<string, string>> = {}): string[] {
  const out = new Set<string>();
  let url: URL | undefined;
  try {
    url = new URL(endpoint);
  } catch {
    url = undefined;
  }
  if (url) {
    addForms(out, url.username);
    addForms(out, url.password);
    if (url.username || url.password) {
      const basic = Buffer.from(`${safeDecode(url.username)}:${safeDecode(url.password)}`).toString('base64');
      out.add(basic);
    }
    for (const seg of url.pathname.split('/')) if (seg.length >= MIN_SECRET_SEGMENT) addForms(out, seg);
    for (const [, v] of url.searchParams) addForms(out, v);
    // As written too: URLSearchParams reads `+` as a space, an upstream echoes the raw text.
    for (const pair of url.search.slice(1).split('&')) {
      const eq = pair.indexOf('=');
      if (eq >= 0) addForms(out, pair.slice(eq + 1));
    }
    // The whole query and path+query as written, in case an upstream echoes them joined.
    if (url.search.length > 1) addForms(out, url.search.slice(1));
  }
  for (const v of Object.values(headers)) {
    if (!v) continue;
    addForms(out, v);
    // `Bearer KEY` / `Basic B64`: the credential alone too.
    const sp = v.indexOf(' ');
    if (sp > 0 && sp < v.length - 1) addForms(out, v.slice(sp + 1));
  }
  // Never redact trivial strings (a one-letter password would rewrite every message).
  return [...out].filter((s) => s.length >= 3);
}

/**
 * A short excerpt of upstream text for a message or a log line: redacted first, then cut, so a
 * secret straddling the cut cannot leak its first characters.
 * @param redactor the upstream's redactor
 * @param text upstream-originated text
 * @param max longest excerpt, characters (default 200)
 */
export function excerptOf(redactor: Redactor, text: string, max = 200): string {
  const t = redactor.text(text.trim());
  return t.length > max ? `${t.slice(0, max)}…` : t;
}

/** Percent-decoding that keeps a malformed escape as written (a `%` in a password must not crash start-up). */
export function safeDecode(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/** Replaces an upstream's secrets in text. Linear in the text: one alternation of literals. */
export class Redactor {
  private readonly re?: RegExp;

  /** @param secrets literal strings to replace (see {@link secretsOf}) */
  constructor(secrets: readonly string[]) {
    // Longest first, so a secret that contains another is replaced whole.
    const list = [...new Set(secrets)].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
    if (list.length) this.re = new RegExp(list.map(escapeRegExp).join('|'), 'g');
  }

  /** True when there is nothing to redact for this upstream. */
  get empty(): boolean {
    return this.re === undefined;
  }

  /** The text with every secret replaced by {@link REDACTED}. */
  text(s: string): string {
    if (!this.re || s.length === 0) return s;
    this.re.lastIndex = 0;
    return s.replace(this.re, REDACTED);
  }
}
