/**
 * The `secret` and `network` strategies (spec §5.2, §5.3).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { BlockList } from 'node:net';
import type { HttpRequestInfo } from 'svc-proxy/plugin';
import { inList } from 'svc-proxy/util';
import type { Credentials } from './credentials.ts';

/** What an accepting strategy says about the caller. */
export interface Accepted {
  userId: string;
  /** Budget named by the credential itself (a JWT claim, an API key record), beating the strategy's. */
  rateLimitBudget?: string;
}

/** A compiled strategy: the caller it accepts, or undefined. */
export type Check = (creds: Credentials, http: HttpRequestInfo) => Accepted | undefined | Promise<Accepted | undefined>;

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/**
 * `secret`: any presented secret-like value equal to `secret.value`. Both sides are SHA-256
 * digested first and compared with `timingSafeEqual`, so neither the length nor a prefix of the
 * configured value leaks through timing.
 * @param value the configured secret
 * @param id the `secret_id` this strategy reports (never the value)
 * @param onAccept called once per accepted request (the `svc_auth_secret_requests_total` counter)
 */
export function secretCheck(value: string, id: string, onAccept: () => void): Check {
  const want = digest(value);
  return (creds) => {
    let ok = false;
    // Every candidate is compared (no early exit), so timing does not say which one matched.
    for (const s of creds.secrets) ok = timingSafeEqual(digest(s), want) || ok;
    if (!ok) return undefined;
    onAccept();
    return { userId: id };
  };
}

/**
 * `network`: the resolved client address (lib/client-address.ts) in the allow-list.
 * @param list allowed CIDRs, IPs and, with `allowLocalhost`, the loopback ranges
 */
export function networkCheck(list: BlockList): Check {
  return (_creds, http) => (http.clientAddress !== '' && inList(list, http.clientAddress) ? { userId: http.clientAddress } : undefined);
}
