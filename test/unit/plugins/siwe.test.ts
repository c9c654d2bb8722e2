/**
 * The `siwe` strategy's rules (plugins/auth/siwe.ts, siwe-nonces.ts) on a fake
 * clock with the memory nonce store: accepted once, the time window with its clock tolerance,
 * the allowed domains, the chain of the URL's network, the signer, and a store that cannot
 * answer refusing (fail closed). Messages are built with viem's `createSiweMessage` and signed by
 * a viem local account.
 */
import { expect } from 'chai';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createSiweMessage } from 'viem/siwe';
import type { HttpRequestInfo } from '../../../core/plugin-api.ts';
import { ErrAuthUnauthorized } from '../../../core/plugin-errors.ts';
import type { Credentials } from '../../../plugins/auth/credentials.ts';
import { siweCheck, type SiweSettings } from '../../../plugins/auth/siwe.ts';
import { MemoryNonceStore, nonceId, type NonceStore } from '../../../plugins/auth/siwe-nonces.ts';

const T0 = Date.parse('2030-01-01T00:00:00Z');
const account = privateKeyToAccount(generatePrivateKey());
const other = privateKeyToAccount(generatePrivateKey());
const SETTINGS: SiweSettings = { allowedDomains: ['dapp.test'], maxMessageAge: 3_600_000, clockTolerance: 30_000 };
let seq = 0;

const http = (networkId: string | undefined): HttpRequestInfo => ({
  headers: {},
  query: {},
  remoteAddress: '127.0.0.1',
  clientAddress: '127.0.0.1',
  host: 'svc',
  path: '/',
  networkId,
});
const message = (over: Partial<Parameters<typeof createSiweMessage>[0]> = {}) =>
  createSiweMessage({
    address: account.address,
    chainId: 31337,
    domain: 'dapp.test',
    nonce: `nonce${String(++seq).padStart(6, '0')}`,
    uri: 'https://dapp.test/login',
    version: '1',
    issuedAt: new Date(T0),
    ...over,
  });
const creds = async (m: string, by = account): Promise<Credentials> => ({ secrets: [], siwe: { message: m, signature: await by.signMessage({ message: m }) } });

/** The check's refusal text, or 'accepted:<userId>'. */
async function outcome(check: ReturnType<typeof siweCheck>, c: Credentials, networkId: string | null = 'evm:31337'): Promise<string> {
  try {
    const r = await check(c, http(networkId ?? undefined));
    return r ? `accepted:${r.userId}` : 'none';
  } catch (e) {
    expect(e).to.be.instanceOf(ErrAuthUnauthorized);
    return (e as Error).message;
  }
}

describe('siwe strategy: once, in its window, on its domain and chain', () => {
  let now = T0;
  const clock = () => now;
  let store: MemoryNonceStore;
  let check: ReturnType<typeof siweCheck>;
  beforeEach(() => {
    now = T0;
    store = new MemoryNonceStore(1000, clock);
    check = siweCheck(SETTINGS, store, true, clock);
  });

  it('accepts a message once: the second use of the same message is refused', async () => {
    const c = await creds(message());
    expect(await outcome(check, c)).to.equal(`accepted:${account.address.toLowerCase()}`);
    expect(await outcome(check, c)).to.equal('unauthorized: SIWE message already used');
    // A fresh message (new nonce) from the same account passes.
    expect(await outcome(check, await creds(message()))).to.match(/^accepted:/);
  });

  it('binds the message to the chain of the URL network', async () => {
    expect(await outcome(check, await creds(message({ chainId: 1 })))).to.equal('unauthorized: SIWE message is for chain 1, this network is 31337');
    expect(await outcome(check, await creds(message({ chainId: 1 })), 'evm:1')).to.match(/^accepted:/);
    expect(await outcome(check, await creds(message()), null)).to.match(/^unauthorized: SIWE needs the network in the URL/);
    // A door without a network (admin, healthcheck) does not bind the chain.
    const door = siweCheck(SETTINGS, new MemoryNonceStore(10, clock), false, clock);
    expect(await outcome(door, await creds(message({ chainId: 1 })), null)).to.match(/^accepted:/);
  });

  it('a refused message does not use up its nonce: the same nonce on the right chain still passes', async () => {
    const nonce = 'sharednonce1';
    expect(await outcome(check, await creds(message({ nonce, chainId: 1 })))).to.match(/is for chain 1/);
    expect(await outcome(check, await creds(message({ nonce }), other))).to.equal("unauthorized: SIWE signature was not made by the message's address");
    expect(await outcome(check, await creds(message({ nonce })))).to.match(/^accepted:/);
  });

  it('refuses an expired message, one before its notBefore, one issued in the future, each beyond the clock tolerance', async () => {
    expect(await outcome(check, await creds(message({ expirationTime: new Date(T0 - 31_000), issuedAt: new Date(T0 - 120_000) })))).to.equal(
      'unauthorized: SIWE message expired',
    );
    expect(await outcome(check, await creds(message({ expirationTime: new Date(T0 - 29_000), issuedAt: new Date(T0 - 120_000) })))).to.match(/^accepted:/);
    expect(await outcome(check, await creds(message({ notBefore: new Date(T0 + 31_000) })))).to.equal(
      'unauthorized: SIWE message is not valid yet (notBefore is in the future)',
    );
    expect(await outcome(check, await creds(message({ notBefore: new Date(T0 + 29_000) })))).to.match(/^accepted:/);
    expect(await outcome(check, await creds(message({ issuedAt: new Date(T0 + 31_000) })))).to.equal('unauthorized: SIWE message issuedAt is in the future');
  });

  it('without expirationTime a message expires maxMessageAge after issuedAt', async () => {
    const c = await creds(message({ issuedAt: new Date(T0 - 3_600_000 - 31_000) }));
    expect(await outcome(check, c)).to.equal('unauthorized: SIWE message expired (issued more than maxMessageAge ago)');
  });

  it('refuses a domain outside allowedDomains (case-insensitive match otherwise), a short nonce and a malformed signature', async () => {
    expect(await outcome(check, await creds(message({ domain: 'evil.test' })))).to.equal('unauthorized: SIWE message domain "evil.test" is not allowed');
    expect(await outcome(check, await creds(message({ domain: 'DAPP.test' })))).to.match(/^accepted:/);
    expect(await outcome(check, { secrets: [], siwe: { message: message(), signature: '0x1234' } })).to.match(
      /^unauthorized: SIWE signature must be a 65-byte hex signature/,
    );
    const short = message().replace(/Nonce: \w+/, 'Nonce: abc');
    expect(await outcome(check, await creds(short))).to.equal('unauthorized: SIWE message nonce must be at least 8 alphanumeric characters');
    expect(await outcome(check, await creds('hello'))).to.match(/^unauthorized: SIWE message does not parse/);
  });

  it('no SIWE credential: the strategy says nothing (another strategy may accept)', async () => {
    expect(await outcome(check, { secrets: ['x'] })).to.equal('none');
  });

  it('a store that fails refuses the message (fail closed)', async () => {
    const broken: NonceStore = { claim: () => Promise.reject(new Error('ECONNREFUSED')) };
    const failing = siweCheck(SETTINGS, broken, true, clock);
    expect(await outcome(failing, await creds(message()))).to.equal('unauthorized: SIWE nonce store unavailable: message refused');
  });

  it('records a message until its expiry plus tolerance, then forgets it', async () => {
    const c = await creds(message({ nonce: 'forgetme01', expirationTime: new Date(T0 + 60_000) }));
    expect(await outcome(check, c)).to.match(/^accepted:/);
    now = T0 + 60_000 + 29_000;
    expect(await outcome(check, c)).to.equal('unauthorized: SIWE message already used');
    now = T0 + 60_000 + 31_000;
    // Refused as expired, and no longer held by the store (its record expired with it).
    expect(await outcome(check, c)).to.equal('unauthorized: SIWE message expired');
    expect(await store.claim(nonceId('dapp.test', account.address, 'forgetme01'), 1)).to.equal(true);
  });
});

describe('memory nonce store', () => {
  it('claims an id once until its TTL passes, and refuses new ids (fails closed) when full of live ones', async () => {
    // lru-cache reads a start time of 0 as "no start": the fake clock starts later.
    let now = 10_000;
    const store = new MemoryNonceStore(2, () => now);
    expect(await store.claim('a', 1000)).to.equal(true);
    expect(await store.claim('a', 1000)).to.equal(false);
    expect(await store.claim('b', 5000)).to.equal(true);
    let refused: unknown;
    await store.claim('c', 1000).catch((e: unknown) => (refused = e));
    expect((refused as Error).message).to.match(/full/);
    now = 11_001;
    // 'a' expired: its slot is free again, and 'a' may be claimed again.
    expect(await store.claim('c', 1000)).to.equal(true);
    expect(await store.claim('b', 1000)).to.equal(false);
  });

  it('nonce ids are hashes of domain, address and nonce, case-insensitive on domain and address', () => {
    expect(nonceId('Dapp.test', '0xABCD', 'n1')).to.equal(nonceId('dapp.test', '0xabcd', 'n1'));
    expect(nonceId('dapp.test', '0xabcd', 'n1')).to.not.equal(nonceId('dapp.test', '0xabcd', 'n2'));
    expect(nonceId('dapp.test', '0xabcd', 'n1')).to.match(/^[0-9a-f]{64}$/);
  });
});
