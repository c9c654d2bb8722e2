/**
 * The `jwt` strategy, verified with jose: signature, `exp`/`nbf`, issuer,
 * audience, required claims and the algorithm allow-list. A key is only ever used for its own
 * kind of algorithm: a PEM or JWK public key for asymmetric algorithms, a plain string only for
 * HS*, so an HS256 token "signed" with a published RSA public key is refused (algorithm
 * confusion), and `none` is never accepted.
 */
import type { JWTVerifyGetKey, JWK, importSPKI } from 'jose';

/** A verification key as jose takes it. */
type Key = Awaited<ReturnType<typeof importSPKI>> | Uint8Array;
import { ConfigError } from 'svc-proxy/plugin/errors';
import type { Accepted, Check } from './basic.ts';

/** The `jwt` block of a strategy, validated, durations in ms. */
export interface JwtSettings {
  allowedAlgorithms: string[];
  allowedIssuers?: string[];
  allowedAudiences?: string[];
  requiredClaims?: string[];
  verificationKeys?: Record<string, string>;
  jwksUrl?: string;
  userIdClaim?: string;
  rateLimitBudgetClaim?: string;
  clockTolerance?: number | string;
}

/** A configured key, by kind. */
type KeySource = { kind: 'pem'; text: string } | { kind: 'jwk'; jwk: JWK } | { kind: 'secret'; bytes: Uint8Array };

let joseModule: Promise<typeof import('jose')> | undefined;
/** jose, loaded on the first JWT strategy (most deployments have none). */
function jose(): Promise<typeof import('jose')> {
  return (joseModule ??= import('jose'));
}

function sourceOf(text: string, path: string): KeySource {
  const t = text.trim();
  if (t.startsWith('-----BEGIN')) {
    if (!t.includes('PUBLIC KEY')) throw new ConfigError([{ path, message: 'a PEM verification key must be a public key (SPKI "BEGIN PUBLIC KEY")' }]);
    return { kind: 'pem', text: t };
  }
  if (t.startsWith('{')) {
    try {
      return { kind: 'jwk', jwk: JSON.parse(t) as JWK };
    } catch {
      throw new ConfigError([{ path, message: 'a verification key starting with "{" must be a JWK in JSON' }]);
    }
  }
  return { kind: 'secret', bytes: new TextEncoder().encode(t) };
}

/**
 * Compiles a `jwt` strategy.
 * @param s the strategy's `jwt` settings
 * @param path config path for errors
 * @param budgetExists whether a budget id is declared in `rateLimiters.budgets[]`
 * @throws ConfigError on `none` in the algorithms, a key that does not parse, or no key source at all
 */
export function jwtCheck(s: JwtSettings, path: string, budgetExists: (id: string) => boolean): Check {
  const algorithms = s.allowedAlgorithms.filter((a) => a.toLowerCase() !== 'none');
  if (algorithms.length !== s.allowedAlgorithms.length)
    throw new ConfigError([{ path: `${path}.jwt.allowedAlgorithms`, message: '"none" is never accepted: an unsigned token proves nothing' }]);
  const sources = new Map(Object.entries(s.verificationKeys ?? {}).map(([kid, text]) => [kid, sourceOf(text, `${path}.jwt.verificationKeys.${kid}`)]));
  if (sources.size === 0 && !s.jwksUrl) throw new ConfigError([{ path: `${path}.jwt`, message: 'needs verificationKeys or jwksUrl' }]);
  const userClaim = s.userIdClaim ?? 'sub';
  const budgetClaim = s.rateLimitBudgetClaim ?? 'rlm';
  const imported = new Map<string, Promise<Key>>();
  let remote: JWTVerifyGetKey | undefined;

  /** The key of one configured source for one algorithm, or undefined when the kinds do not match. */
  const keyFor = async (kid: string, src: KeySource, alg: string): Promise<Key | undefined> => {
    const symmetric = alg.startsWith('HS');
    if (symmetric !== (src.kind === 'secret')) return undefined;
    if (src.kind === 'secret') return src.bytes;
    const cacheKey = `${kid}\u0000${alg}`;
    let p = imported.get(cacheKey);
    if (!p) {
      const j = await jose();
      p = src.kind === 'pem' ? j.importSPKI(src.text, alg) : (j.importJWK(src.jwk, alg) as Promise<Key>);
      imported.set(cacheKey, p);
    }
    return p.catch(() => undefined);
  };

  const verifyWith = async (token: string, key: Key | JWTVerifyGetKey) => {
    const j = await jose();
    const opts = {
      algorithms,
      issuer: s.allowedIssuers,
      audience: s.allowedAudiences,
      requiredClaims: s.requiredClaims,
      clockTolerance: Math.floor(Number(s.clockTolerance ?? 0) / 1000),
    };
    return typeof key === 'function' ? j.jwtVerify(token, key, opts) : j.jwtVerify(token, key, opts);
  };

  return async (creds): Promise<Accepted | undefined> => {
    const token = creds.jwt;
    if (!token || token.split('.').length !== 3) return undefined;
    const j = await jose();
    let header: { alg?: string; kid?: string };
    try {
      header = j.decodeProtectedHeader(token);
    } catch {
      return undefined;
    }
    const alg = header.alg ?? '';
    if (!algorithms.includes(alg)) return undefined;
    const candidates = header.kid !== undefined && sources.has(header.kid) ? [[header.kid, sources.get(header.kid) as KeySource] as const] : [...sources];
    let payload: Record<string, unknown> | undefined;
    for (const [kid, src] of candidates) {
      const key = await keyFor(kid, src, alg);
      if (!key) continue;
      try {
        payload = (await verifyWith(token, key)).payload;
        break;
      } catch {
        // Wrong key, expired, wrong issuer…: try the next key; no key passing is a rejection.
      }
    }
    if (!payload && s.jwksUrl) {
      remote ??= j.createRemoteJWKSet(new URL(s.jwksUrl));
      try {
        payload = (await verifyWith(token, remote)).payload;
      } catch {
        payload = undefined;
      }
    }
    if (!payload) return undefined;
    const user = payload[userClaim];
    if (typeof user !== 'string' || user === '') return undefined;
    const budget = payload[budgetClaim];
    if (budget !== undefined && (typeof budget !== 'string' || !budgetExists(budget))) return undefined;
    return { userId: user.slice(0, 128), rateLimitBudget: budget };
  };
}
