/**
 * The client's address (`network` strategy; `perIP` budgets): the socket peer,
 * unless that peer is a trusted forwarder (`server.trustedIPForwarders`, default none); only then
 * are the forwarding headers (`server.trustedIPHeaders`, default `X-Forwarded-For`) read, right to
 * left, skipping trusted forwarders, and the first untrusted address is the client. A client can
 * therefore never choose its own address by sending a header to a svc that trusts no forwarder.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** Longest forwarding header read, characters; longer ones are read from their right end only. */
const MAX_FORWARDED_CHARS = 4096;
/** Most hops read from a forwarding header (right to left). */
const MAX_HOPS = 32;

/**
 * The IP family of an address, or undefined when it is not a literal IP.
 * @param ip a normalised address
 */
export function ipFamily(ip: string): 'ipv4' | 'ipv6' | undefined {
  return isIPv4(ip) ? 'ipv4' : isIPv6(ip) ? 'ipv6' : undefined;
}

/**
 * An address as rules see it: `::ffff:a.b.c.d` (an IPv4 client on a dual-stack listener) becomes
 * `a.b.c.d`, a `[v6]` or `v4:port` form from a header loses its brackets and port, and
 * surrounding blanks go.
 * @param raw an address from the socket or a forwarding header
 * @returns the address, or '' when it is not a literal IP
 */
export function normalizeIp(raw: string): string {
  let ip = raw.trim();
  if (ip.startsWith('[')) ip = ip.slice(1, ip.indexOf(']') === -1 ? undefined : ip.indexOf(']'));
  else if (ip.includes('.') && ip.lastIndexOf(':') > ip.lastIndexOf('.') && ip.indexOf(':') === ip.lastIndexOf(':')) ip = ip.slice(0, ip.indexOf(':'));
  if (ip.toLowerCase().startsWith('::ffff:') && isIPv4(ip.slice(7))) ip = ip.slice(7);
  return ipFamily(ip) ? ip : '';
}

/**
 * A BlockList of IPs and CIDRs (`a.b.c.d`, `a.b.c.d/n`, `v6`, `v6/n`).
 * @param entries addresses or CIDRs
 * @param path config path named in the error
 * @throws Error naming `path` and the entry that does not parse
 */
export function addressList(entries: readonly string[], path: string): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [addr = '', bits, extra] = entry.trim().split('/');
    const ip = normalizeIp(addr);
    const family = ipFamily(ip);
    const max = family === 'ipv4' ? 32 : 128;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (!family || extra !== undefined || !(prefix >= 0 && prefix <= max)) throw new Error(`${path}: "${entry.slice(0, 64)}" is not an IP address or CIDR`);
    list.addSubnet(ip, prefix, family);
  }
  return list;
}

/** Whether `ip` (normalised) is in `list`. */
export function inList(list: BlockList, ip: string): boolean {
  const family = ipFamily(ip);
  return family !== undefined && list.check(ip, family);
}

/**
 * Resolves client addresses for one server config.
 */
export class ClientAddressResolver {
  private readonly forwarders: BlockList | undefined;
  private readonly headers: readonly string[];
  /** The last socket peer normalised: keep-alive clients repeat it, and this runs per request. */
  private lastPeer = '';
  private lastDirect = '';

  /**
   * @param trustedForwarders `server.trustedIPForwarders`: IPs or CIDRs of proxies whose headers are believed
   * @param trustedHeaders `server.trustedIPHeaders`: header names, first present one wins
   * @throws Error when a forwarder entry is not an IP or CIDR
   */
  constructor(trustedForwarders: readonly string[], trustedHeaders: readonly string[]) {
    this.forwarders = trustedForwarders.length > 0 ? addressList(trustedForwarders, 'server.trustedIPForwarders') : undefined;
    this.headers = trustedHeaders.map((h) => h.toLowerCase());
  }

  /**
   * The client address of a request.
   * @param peer the socket's remote address
   * @param headers the request's lower-cased headers
   * @returns a normalised IP, or '' when none is known
   */
  resolve(peer: string, headers: Readonly<Record<string, string | string[] | undefined>>): string {
    if (peer !== this.lastPeer) {
      this.lastPeer = peer;
      this.lastDirect = normalizeIp(peer);
    }
    const direct = this.lastDirect;
    if (!this.forwarders || !inList(this.forwarders, direct)) return direct;
    for (const name of this.headers) {
      const raw = headers[name];
      const value = Array.isArray(raw) ? raw.join(',') : raw;
      if (!value) continue;
      const hops = value.slice(-MAX_FORWARDED_CHARS).split(',');
      let last = direct;
      for (let i = hops.length - 1, n = 0; i >= 0 && n < MAX_HOPS; i--, n++) {
        const ip = normalizeIp(hops[i] as string);
        // A hop that is not an IP was written by the client or a broken proxy: the client is unknown.
        if (ip === '') return '';
        if (!inList(this.forwarders, ip)) return ip;
        last = ip;
      }
      return last;
    }
    return direct;
  }
}
