/**
 * The admin's guard against DNS rebinding. A page on `evil.example` whose name an attacker
 * re-points at svc's address is same-origin to the browser: it may read `/admin/ui` data and
 * post to `/admin`, with no `Origin` check to stop it. What it cannot choose is the `Host` header
 * (the attacker's name). So where the admin is guarded only by an ambient credential (a
 * `network` strategy: the browser's own address), a request whose Host is a name svc was not
 * told about is refused; an IP literal or `localhost` always passes. With a secret, JWT, SIWE or
 * database strategy, the page has no credential to send and the guard is off unless
 * `admin.allowedHosts` is set.
 */
import { isIP } from 'node:net';
import { SvcError } from 'svc-proxy/plugin/errors';

/** Longest Host name compared, characters (a longer one is refused). */
const MAX_HOST = 253;

/** Host guard settings: the names allowed, and whether the guard applies. */
export interface HostGuardSettings {
  /** `admin.allowedHosts`: names (no port) that may reach the admin, case-insensitive; `*.x` matches subdomains. */
  allowedHosts: readonly string[];
  /** True when every admin strategy is `network` (an ambient credential). */
  ambientOnly: boolean;
}

/** The hostname of a Host header value, lower-cased, without port or IPv6 brackets. */
export function hostnameOf(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') > 0 ? h.indexOf(']') : undefined);
  const colon = h.lastIndexOf(':');
  return colon >= 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
}

/**
 * Whether a request with this Host header may reach the admin.
 * @param host the Host header as sent ('' when absent: HTTP/1.0 clients, allowed: no browser sends none)
 */
export function hostAllowed(host: string, s: HostGuardSettings): boolean {
  if (!s.ambientOnly && s.allowedHosts.length === 0) return true;
  if (host === '') return true;
  const name = hostnameOf(host);
  if (name.length > MAX_HOST) return false;
  if (isIP(name) !== 0 || name === 'localhost') return true;
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  for (const a of s.allowedHosts) {
    const allowed = a.toLowerCase();
    if (allowed === bare) return true;
    if (allowed.startsWith('*.') && bare.endsWith(allowed.slice(1))) return true;
  }
  return false;
}

/** A request to the admin under a Host the guard does not allow (HTTP 403, the auth error's code -32016). */
export class ErrAdminHostRefused extends SvcError {
  static override readonly defaultCode = -32016;
  static override readonly httpStatus = 403;
}

/** The refusal of a Host the guard does not allow. */
export function hostRefusal(host: string): ErrAdminHostRefused {
  return new ErrAdminHostRefused(
    `admin: Host ${JSON.stringify(hostnameOf(host).slice(0, 64))} is neither an IP address, localhost nor in admin.allowedHosts (a DNS-rebinding guard)`,
  );
}
