/**
 * `healthCheck.auth` (spec §5.2, §5.3, §5.7): a probe passes when any one strategy accepts it.
 * `secret`: query `secret=` or header `X-SVC-Secret-Token`, compared in constant time over
 * SHA-256 digests (so neither the length nor a prefix of the secret leaks through timing).
 * `network`: the peer address against `allowedCIDRs` (node:net BlockList) and, when
 * `allowLocalhost`, the loopback ranges.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import type { Context } from 'koa';
import { ConfigError } from '../../core/plugin-api.ts';
import type { HealthAuthStrategy } from './schema.ts';

/** Longest secret read from a request, characters (client input is bounded). */
const MAX_SECRET_LENGTH = 1024;

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** A compiled strategy: does it accept this request? */
type Check = (k: Context) => boolean;

const compiled = new WeakMap<readonly HealthAuthStrategy[], Check[]>();

/**
 * Builds the CIDR allow-list of a `network` strategy.
 * @throws ConfigError on a CIDR that does not parse
 */
export function blockListOf(cidrs: readonly string[], allowLocalhost: boolean): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const [addr = '', bits] = c.split('/');
    const type = isIPv4(addr) ? 'ipv4' : isIPv6(addr) ? 'ipv6' : undefined;
    const prefix = bits === undefined ? (type === 'ipv4' ? 32 : 128) : Number(bits);
    if (!type || !Number.isInteger(prefix) || prefix < 0 || prefix > (type === 'ipv4' ? 32 : 128)) throw new ConfigError([{ path: 'healthCheck.auth', message: `invalid CIDR "${c}"` }]);
    list.addSubnet(addr, prefix, type);
  }
  if (allowLocalhost) {
    list.addSubnet('127.0.0.0', 8, 'ipv4');
    list.addAddress('::1', 'ipv6');
  }
  return list;
}

function compile(s: HealthAuthStrategy): Check {
  if (s.type === 'secret') {
    const want = digest(s.secret.value);
    return (k) => {
      const q = k.query.secret;
      const given = (typeof q === 'string' ? q : undefined) ?? k.get('x-svc-secret-token');
      return given !== '' && given.length <= MAX_SECRET_LENGTH && timingSafeEqual(digest(given), want);
    };
  }
  const list = blockListOf(s.network.allowedCIDRs ?? [], s.network.allowLocalhost ?? false);
  return (k) => {
    let ip = k.req.socket.remoteAddress ?? '';
    // An IPv4 client on a dual-stack listener shows as ::ffff:a.b.c.d.
    if (ip.startsWith('::ffff:') && isIPv4(ip.slice(7))) ip = ip.slice(7);
    const type = isIPv4(ip) ? 'ipv4' : isIPv6(ip) ? 'ipv6' : undefined;
    return type !== undefined && list.check(ip, type);
  };
}

/** Whether any strategy lets the request in. */
export function authorize(strategies: readonly HealthAuthStrategy[], k: Context): boolean {
  let checks = compiled.get(strategies);
  if (!checks) compiled.set(strategies, (checks = strategies.map(compile)));
  return checks.some((c) => c(k));
}
