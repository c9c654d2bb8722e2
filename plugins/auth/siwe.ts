/**
 * The `siwe` strategy (issue #13 item 1): an EIP-4361 "Sign-In with Ethereum" message, parsed
 * and checked with viem (domain allow-list, `expirationTime`, `notBefore`), its signer recovered
 * from the signature and compared with the message's address. The address is the user id.
 * viem is imported on the first SIWE request only.
 */
import type { Accepted, Check } from './basic.ts';

/** The `siwe` block of a strategy, validated, durations in ms. */
export interface SiweSettings {
  allowedDomains: string[];
  maxMessageAge?: number | string;
}

let viemModules: Promise<[typeof import('viem/siwe'), typeof import('viem')]> | undefined;

/**
 * Compiles a `siwe` strategy.
 * @param s the strategy's `siwe` settings
 */
export function siweCheck(s: SiweSettings): Check {
  const domains = new Set(s.allowedDomains.map((d) => d.toLowerCase()));
  const maxAgeMs = Number(s.maxMessageAge ?? 86_400_000);
  return async (creds): Promise<Accepted | undefined> => {
    if (!creds.siwe || !/^0x[0-9a-fA-F]{130}$/.test(creds.siwe.signature)) return undefined;
    viemModules ??= Promise.all([import('viem/siwe'), import('viem')]);
    const [siwe, viem] = await viemModules;
    const { message, signature } = creds.siwe;
    let fields: ReturnType<typeof siwe.parseSiweMessage>;
    try {
      fields = siwe.parseSiweMessage(message);
    } catch {
      return undefined;
    }
    if (!fields.domain || !fields.address || !domains.has(fields.domain.toLowerCase())) return undefined;
    const now = new Date();
    // viem checks the domain, expirationTime and notBefore; a message that never expires is
    // still refused once its issuedAt is older than maxMessageAge.
    if (!siwe.validateSiweMessage({ message: fields, domain: fields.domain, time: now })) return undefined;
    if (!fields.expirationTime && (!fields.issuedAt || now.getTime() - fields.issuedAt.getTime() > maxAgeMs)) return undefined;
    try {
      const signer = await viem.recoverMessageAddress({ message, signature: signature as `0x${string}` });
      if (signer.toLowerCase() !== fields.address.toLowerCase()) return undefined;
    } catch {
      return undefined;
    }
    return { userId: fields.address.toLowerCase() };
  };
}
