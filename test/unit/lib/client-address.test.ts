/**
 * The client address (lib/client-address.ts): forwarding headers are read
 * only behind a trusted forwarder, right to left, skipping trusted hops.
 */
import { expect } from 'chai';
import { addressList, ClientAddressResolver, inList, normalizeIp } from '../../../lib/client-address.ts';

describe('client address behind trusted forwarders', () => {
  it('normalises ::ffff:a.b.c.d, brackets and ports; anything else is not an address', () => {
    expect(normalizeIp('::ffff:10.0.0.1')).to.equal('10.0.0.1');
    expect(normalizeIp(' 10.0.0.1:5555 ')).to.equal('10.0.0.1');
    expect(normalizeIp('[2001:db8::1]:443')).to.equal('2001:db8::1');
    expect(normalizeIp('2001:db8::1')).to.equal('2001:db8::1');
    expect(normalizeIp('unknown')).to.equal('');
    expect(normalizeIp('')).to.equal('');
  });

  it('builds lists of IPs and CIDRs and names the entry that does not parse', () => {
    const l = addressList(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32'], 'x');
    expect(inList(l, '10.9.8.7')).to.equal(true);
    expect(inList(l, '192.0.2.7')).to.equal(true);
    expect(inList(l, '192.0.2.8')).to.equal(false);
    expect(inList(l, '2001:db8::5')).to.equal(true);
    expect(inList(l, '')).to.equal(false);
    for (const bad of ['10.0.0.0/33', 'nope', '10.0.0.0/8/1', '::1/129'])
      expect(() => addressList([bad], 'server.trustedIPForwarders')).to.throw(/server\.trustedIPForwarders: .* is not an IP address or CIDR/);
  });

  it('ignores forwarding headers unless the peer is trusted', () => {
    const none = new ClientAddressResolver([], ['X-Forwarded-For']);
    expect(none.resolve('::ffff:127.0.0.1', { 'x-forwarded-for': '10.1.1.1' })).to.equal('127.0.0.1');
    const r = new ClientAddressResolver(['127.0.0.1', '10.0.0.0/8'], ['X-Real-IP', 'X-Forwarded-For']);
    expect(r.resolve('203.0.113.1', { 'x-forwarded-for': '10.1.1.1' })).to.equal('203.0.113.1');
  });

  it('reads right to left, skipping trusted hops; the first untrusted one is the client', () => {
    const r = new ClientAddressResolver(['127.0.0.1', '10.0.0.0/8'], ['X-Forwarded-For']);
    expect(r.resolve('127.0.0.1', { 'x-forwarded-for': '198.51.100.1, 203.0.113.5, 10.2.3.4' })).to.equal('203.0.113.5');
    expect(r.resolve('127.0.0.1', { 'x-forwarded-for': '10.2.3.4, 10.5.5.5' })).to.equal('10.2.3.4');
    expect(r.resolve('127.0.0.1', { 'x-forwarded-for': 'garbage, 10.5.5.5' })).to.equal('');
    expect(r.resolve('127.0.0.1', {})).to.equal('127.0.0.1');
    // The first configured header that is present wins.
    const r2 = new ClientAddressResolver(['127.0.0.1'], ['X-Real-IP', 'X-Forwarded-For']);
    expect(r2.resolve('127.0.0.1', { 'x-real-ip': '198.51.100.9', 'x-forwarded-for': '203.0.113.5' })).to.equal('198.51.100.9');
  });

  it('reads at most the last 4 KiB of a huge header', () => {
    const r = new ClientAddressResolver(['127.0.0.1'], ['X-Forwarded-For']);
    const huge = `${'1.1.1.1, '.repeat(100_000)}198.51.100.3`;
    const t0 = performance.now();
    expect(r.resolve('127.0.0.1', { 'x-forwarded-for': huge })).to.equal('198.51.100.3');
    expect(performance.now() - t0).to.be.below(200);
  });
});
