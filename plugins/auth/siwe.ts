/**
 * The `siwe` strategy: an EIP-4361 "Sign-In with Ethereum"
 * message, parsed with viem, accepted once, only for a configured domain, only within its time
 * window and only on the chain it names; its signer, recovered from the signature, is its
 * address, which is the user id. viem is imported on the first SIWE request only.
 *
 * A request presenting a SIWE message is refused with `ErrAuthUnauthorized` (HTTP 401, -32016)
 * saying why when the message:
 * - does not parse, or lacks its address, nonce (at least 8 alphanumeric characters), chain id,
 *   URI or `issuedAt`;
 * - names a domain outside `allowedDomains`;
 * - was issued in the future, is before its `notBefore`, is past its `expirationTime`, or (with
 *   no expiry) is older than `maxMessageAge`, each with `clockTolerance` of slack;
 * - is for another chain than the network of the URL (project auth: `/main/evm/31337` takes
 *   chain 31337 messages only; a project URL without a network refuses SIWE, since the chain
 *   must be known before the body is read). Doors without a network (admin, healthcheck) do not
 *   bind the chain;
 * - is not signed by its address;
 * - was used before (its domain, address and nonce are recorded until it expires: see
 *   siwe-nonces.ts), or the record store cannot say (fail closed).
 * Authentication runs once per HTTP request, so one message authenticates every call of one
 * request (a batch) and no other request.
 */
import { ErrAuthUnauthorized } from 'svc-proxy/plugin/errors';
import type { Accepted, Check } from './basic.ts';
import type { ConnectorConfig } from './connectors.ts';
import { NonceStoreFull, nonceId, type NonceStore } from './siwe-nonces.ts';

/** The `siwe` block of a strategy, validated, durations in ms. */
export interface SiweSettings {
  /** EIP-4361 `domain` values accepted (compared case-insensitively). */
  allowedDomains: string[];
  /** A message without `expirationTime` is refused once its `issuedAt` is this old, ms (default 1 day). */
  maxMessageAge?: number | string;
  /** Slack on `issuedAt`, `notBefore` and `expirationTime`, ms (default 60 s). */
  clockTolerance?: number | string;
  /** Where used messages are recorded; default: the auth block's first `database` connector, else memory. */
  nonces?: ConnectorConfig;
}

/** Default `maxMessageAge`, ms. */
export const DEFAULT_MAX_MESSAGE_AGE_MS = 86_400_000;
/** Default `clockTolerance`, ms. */
export const DEFAULT_CLOCK_TOLERANCE_MS = 60_000;

/** A 65-byte ECDSA signature (EOA accounts). */
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
/** EIP-4361: a nonce is at least 8 alphanumeric characters. */
const NONCE = /^[A-Za-z0-9]{8,}$/;
/** The chain of a network id. */
const EVM_NETWORK = /^evm:(\d+)$/;

let viemModules: Promise<[typeof import('viem/siwe'), typeof import('viem')]> | undefined;

/** A refusal saying why (never echoing more than a bounded domain of the client's). */
function refuse(why: string): ErrAuthUnauthorized {
  return new ErrAuthUnauthorized(`unauthorized: ${why}`);
}

function validDate(d: Date | undefined): boolean {
  return d === undefined || !Number.isNaN(d.getTime());
}

/**
 * Compiles a `siwe` strategy.
 * @param s the strategy's `siwe` settings
 * @param nonces the store recording used messages
 * @param bindChain whether the message's `chainId` must be the URL network's (project auth)
 * @param now clock, ms since the epoch (tests drive it)
 * @returns a check: undefined when the request presents no SIWE message; throws
 *   `ErrAuthUnauthorized` with the reason when it presents one that is refused
 */
export function siweCheck(s: SiweSettings, nonces: NonceStore, bindChain: boolean, now: () => number = Date.now): Check {
  const domains = new Set(s.allowedDomains.map((d) => d.toLowerCase()));
  const maxAgeMs = Number(s.maxMessageAge ?? DEFAULT_MAX_MESSAGE_AGE_MS);
  const toleranceMs = Number(s.clockTolerance ?? DEFAULT_CLOCK_TOLERANCE_MS);
  return async (creds, http): Promise<Accepted | undefined> => {
    if (!creds.siwe) return undefined;
    const { message, signature } = creds.siwe;
    if (!SIGNATURE.test(signature)) throw refuse('SIWE signature must be a 65-byte hex signature (0x + 130 hex digits)');
    viemModules ??= Promise.all([import('viem/siwe'), import('viem')]);
    const [siwe, viem] = await viemModules;
    let f: ReturnType<typeof siwe.parseSiweMessage>;
    try {
      f = siwe.parseSiweMessage(message);
    } catch {
      throw refuse('SIWE message does not parse as EIP-4361');
    }
    if (!f.domain || !f.address || !viem.isAddress(f.address, { strict: false }) || !f.uri || f.chainId === undefined || !f.issuedAt) {
      throw refuse('SIWE message does not parse as EIP-4361 (domain, address, URI, chain id and issuedAt are required)');
    }
    if (!f.nonce || !NONCE.test(f.nonce)) throw refuse('SIWE message nonce must be at least 8 alphanumeric characters');
    if (!validDate(f.issuedAt) || !validDate(f.expirationTime) || !validDate(f.notBefore))
      throw refuse('SIWE message has a date that is not an RFC 3339 date-time');
    if (!domains.has(f.domain.toLowerCase())) throw refuse(`SIWE message domain ${JSON.stringify(f.domain.slice(0, 64))} is not allowed`);

    const t = now();
    if (f.issuedAt.getTime() > t + toleranceMs) throw refuse('SIWE message issuedAt is in the future');
    if (f.notBefore && f.notBefore.getTime() > t + toleranceMs) throw refuse('SIWE message is not valid yet (notBefore is in the future)');
    // The last instant the message may be accepted: its expiry, else issuedAt + maxMessageAge.
    const until = (f.expirationTime ?? new Date(f.issuedAt.getTime() + maxAgeMs)).getTime() + toleranceMs;
    if (t > until) throw refuse(f.expirationTime ? 'SIWE message expired' : 'SIWE message expired (issued more than maxMessageAge ago)');

    if (bindChain) {
      const chain = http.networkId !== undefined ? EVM_NETWORK.exec(http.networkId)?.[1] : undefined;
      if (chain === undefined) throw refuse('SIWE needs the network in the URL (/<project>/evm/<chainId> or a network alias) to check the message chain id');
      if (String(f.chainId) !== chain) throw refuse(`SIWE message is for chain ${f.chainId}, this network is ${chain}`);
    }

    let signer: string;
    try {
      signer = await viem.recoverMessageAddress({ message, signature: signature as `0x${string}` });
    } catch {
      throw refuse('SIWE signature does not recover to an address');
    }
    if (signer.toLowerCase() !== f.address.toLowerCase()) throw refuse("SIWE signature was not made by the message's address");

    // Recorded last: only a valid, signed, current message uses up its nonce.
    let first: boolean;
    try {
      first = await nonces.claim(nonceId(f.domain, f.address, f.nonce), until - t);
    } catch (e) {
      throw refuse(e instanceof NonceStoreFull ? 'SIWE nonce store is full: message refused' : 'SIWE nonce store unavailable: message refused');
    }
    if (!first) throw refuse('SIWE message already used');
    return { userId: f.address.toLowerCase() };
  };
}
