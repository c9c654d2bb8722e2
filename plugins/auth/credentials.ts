/**
 * Credentials of a request (spec §5.2, §5.5), read from headers and query only,
 * before directives and before the body: `X-SVC-Secret-Token`, `Authorization` (Bearer, Basic),
 * `X-Siwe-Message`/`X-Siwe-Signature`, and the query parameters `secret`, `jwt`,
 * `message`/`signature`. Every value is bounded: an oversized one is treated as absent, so a
 * client cannot make a strategy hash or parse megabytes.
 */
import type { HttpRequestInfo } from 'svc-proxy/plugin';

/** Longest secret or API key read, characters. */
export const MAX_SECRET_CHARS = 1024;
/** Longest JWT or SIWE message read, characters. */
export const MAX_TOKEN_CHARS = 8192;
/** Longest `X-SVC-User-Id` kept, characters. */
export const MAX_USER_ID_CHARS = 128;

/** What a request presents, each field undefined when absent or oversized. */
export interface Credentials {
  /** Secret-like values in the order they are tried: query `secret`, `X-SVC-Secret-Token`, Bearer token, Basic password. */
  secrets: string[];
  /** A JWT: query `jwt`, else the Bearer token. */
  jwt?: string;
  /** An EIP-4361 message and its signature: headers, else query `message`/`signature`. */
  siwe?: { message: string; signature: string };
}

function header(http: HttpRequestInfo, name: string): string | undefined {
  const v = http.headers[name];
  return typeof v === 'string' ? v : Array.isArray(v) ? v[0] : undefined;
}

function bounded(v: string | undefined, max: number): string | undefined {
  return v !== undefined && v !== '' && v.length <= max ? v : undefined;
}

/**
 * A SIWE message from a header: headers cannot hold line breaks, so clients send it base64
 * encoded (or with `\n` escapes); a query value is already URL-decoded.
 */
function siweMessageOf(raw: string): string {
  if (raw.includes(' wants you to sign in')) return raw.replace(/\\n/g, '\n');
  const decoded = Buffer.from(raw, 'base64').toString('utf8');
  return decoded.includes(' wants you to sign in') ? decoded : raw;
}

/**
 * Reads every credential a request presents.
 * @param http the request's headers and query
 */
export function credentialsOf(http: HttpRequestInfo): Credentials {
  const secrets: string[] = [];
  const push = (v: string | undefined) => {
    const b = bounded(v, MAX_SECRET_CHARS);
    if (b !== undefined && !secrets.includes(b)) secrets.push(b);
  };
  push(http.query.secret);
  push(header(http, 'x-svc-secret-token'));
  let bearer: string | undefined;
  const authz = bounded(header(http, 'authorization'), MAX_TOKEN_CHARS);
  if (authz !== undefined) {
    const space = authz.indexOf(' ');
    const scheme = space === -1 ? '' : authz.slice(0, space).toLowerCase();
    const value = space === -1 ? '' : authz.slice(space + 1).trim();
    if (scheme === 'bearer') bearer = value || undefined;
    else if (scheme === 'basic') {
      const pair = Buffer.from(value, 'base64').toString('utf8');
      const colon = pair.indexOf(':');
      push(colon === -1 ? pair : pair.slice(colon + 1));
    }
  }
  push(bearer);
  const jwt = bounded(http.query.jwt, MAX_TOKEN_CHARS) ?? bearer;
  const message = bounded(header(http, 'x-siwe-message') ?? http.query.message, MAX_TOKEN_CHARS);
  const signature = bounded(header(http, 'x-siwe-signature') ?? http.query.signature, 512);
  return { secrets, jwt, siwe: message && signature ? { message: siweMessageOf(message), signature } : undefined };
}

/**
 * The `X-SVC-User-Id` header, bounded, or undefined.
 * @param http the request
 */
export function userIdHeader(http: HttpRequestInfo): string | undefined {
  const v = header(http, 'x-svc-user-id')?.trim();
  return v ? v.slice(0, MAX_USER_ID_CHARS) : undefined;
}
