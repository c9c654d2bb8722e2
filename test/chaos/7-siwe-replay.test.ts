/**
 * Hostile class 7: SIWE messages (docs/access.md "Auth": accepted once, on the chain of the URL's
 * network). An attacker who captured one signed message (a proxy log, a browser extension, a
 * shared link) replays it: as sent, through another transport (query parameters, base64 without
 * padding, a `\n`-escaped header), many times at once to win a race, or signed for another chain
 * (chain 1) against this one (31337). Every replay is refused with 401; exactly one request is
 * ever served per message. Messages are built with viem's `createSiweMessage` and signed with
 * `privateKeyToAccount(...).signMessage`; used messages are recorded in the deployment's Redis.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createSiweMessage } from 'viem/siwe';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CHAIN, GATED, SIWE_DOMAIN } from './config.ts';
import { useDeployment, type SvcResponse } from './harness.ts';
import { chaosClass, scale } from './summary.ts';

const call = (id: number | string = 1) => ({ jsonrpc: '2.0', id, method: 'eth_blockNumber', params: [] });

describe('chaos [7] SIWE replays: one signed message serves one request, on its chain only', function () {
  this.timeout(120_000);
  const cls = chaosClass(7, 'SIWE replays and cross-chain messages');
  const dep = useDeployment();
  const account = privateKeyToAccount(generatePrivateKey());
  const other = privateKeyToAccount(generatePrivateKey());

  const message = (over: Partial<Parameters<typeof createSiweMessage>[0]> = {}) =>
    createSiweMessage({
      address: account.address,
      chainId: CHAIN,
      domain: SIWE_DOMAIN,
      nonce: `chaos${randomBytes(8).toString('hex')}`,
      uri: `https://${SIWE_DOMAIN}/login`,
      version: '1',
      issuedAt: new Date(),
      ...over,
    });
  const sign = (m: string, by = account) => by.signMessage({ message: m });
  /** The transports one captured (message, signature) pair can be presented through. */
  const transports: Array<[string, (m: string, sig: string) => [string, Record<string, string>]]> = [
    ['base64 headers', (m, sig) => [GATED, { 'x-siwe-message': Buffer.from(m).toString('base64'), 'x-siwe-signature': sig }]],
    ['base64 without padding', (m, sig) => [GATED, { 'x-siwe-message': Buffer.from(m).toString('base64').replace(/=+$/, ''), 'x-siwe-signature': sig }]],
    ['\\n-escaped header', (m, sig) => [GATED, { 'x-siwe-message': m.replace(/\n/g, '\\n'), 'x-siwe-signature': sig }]],
    ['query parameters', (m, sig) => [`${GATED}?message=${encodeURIComponent(m)}&signature=${sig}`, {}]],
  ];
  const send = (how: (typeof transports)[number][1], m: string, sig: string, body: unknown = call()) => {
    const [path, headers] = how(m, sig);
    return dep().post(path, body, headers);
  };
  const refused = (r: SvcResponse, why: RegExp, what: string) => {
    expect(r.status, `${what}: ${r.text}`).to.equal(401);
    expect(r.json?.error?.code, what).to.equal(-32016);
    expect(r.json.error.message, what).to.match(why);
    expect(r.json.result, what).to.equal(undefined);
  };

  it('a SIWE replay is refused through every transport once the message was used', async () => {
    for (let i = 0; i < scale(2); i++) {
      for (const [first, how] of transports) {
        const m = message();
        const sig = await sign(m);
        const ok = await send(how, m, sig);
        expect(ok.status, `${first}: ${ok.text}`).to.equal(200);
        expect(ok.json.result).to.match(/^0x/);
        for (const [name, replay] of transports) {
          refused(await send(replay, m, sig), /SIWE message already used/, `used via ${first}, replayed via ${name}`);
          cls.attack();
        }
      }
    }
  });

  it('one SIWE message sent by many concurrent requests is served exactly once', async () => {
    for (let i = 0; i < scale(2); i++) {
      const m = message();
      const sig = await sign(m);
      const n = 8;
      const all = await Promise.all(Array.from({ length: n }, (_, k) => send(transports[k % transports.length]![1], m, sig)));
      cls.attack(n);
      expect(all.filter((r) => r.status === 200).length, all.map((r) => r.status).join(' ')).to.equal(1);
      for (const r of all.filter((x) => x.status !== 200)) refused(r, /SIWE message already used/, 'a concurrent copy');
    }
  });

  it('one SIWE message authenticates one request: a batch, then no further request', async () => {
    const m = message();
    const sig = await sign(m);
    const batch = await send(transports[0]![1], m, sig, [call(1), call(2), call(3)]);
    expect(batch.status).to.equal(200);
    expect(batch.json).to.have.length(3);
    // A refused batch is refused whole: HTTP 401, the error in every element under its id (docs/http-interface.md "Early refusals").
    const replay = await send(transports[0]![1], m, sig, [call(4), call(5)]);
    cls.attack();
    expect(replay.status).to.equal(401);
    expect((replay.json as Array<{ id: unknown }>).map((el) => el.id)).to.deep.equal([4, 5]);
    for (const el of replay.json as Array<{ error?: { code: number; message: string }; result?: unknown }>) {
      expect(el.result).to.equal(undefined);
      expect(el.error?.code).to.equal(-32016);
      expect(el.error?.message).to.match(/SIWE message already used/);
    }
    refused(await send(transports[3]![1], m, sig), /SIWE message already used/, 'the same message on a single call');
    cls.attack();
  });

  it('a message signed for chain 1 is refused on chain 31337, and a re-signed message reusing a used nonce is refused', async () => {
    for (let i = 0; i < scale(2); i++) {
      const m1 = message({ chainId: 1 });
      for (const [name, how] of transports) {
        refused(await send(how, m1, await sign(m1)), new RegExp(`SIWE message is for chain 1, this network is ${CHAIN}`), `chain 1 via ${name}`);
        cls.attack();
      }
      // The nonce is the message's identity: signing it again (a new issuedAt) does not revive it.
      const nonce = `chaos${randomBytes(8).toString('hex')}`;
      const first = message({ nonce });
      expect((await send(transports[0]![1], first, await sign(first))).status).to.equal(200);
      const again = message({ nonce, issuedAt: new Date(Date.now() + 1000) });
      refused(await send(transports[0]![1], again, await sign(again)), /SIWE message already used/, 'same nonce, new issuedAt');
      cls.attack();
    }
  });

  it('a message whose signer is not its address, or for another domain, or on a URL without a network is refused', async () => {
    const m = message();
    refused(await send(transports[0]![1], m, await sign(m, other)), /unauthorized/, 'signed by another key');
    const evil = message({ domain: 'evil.chaos.test' });
    refused(await send(transports[0]![1], evil, await sign(evil)), /domain "evil\.chaos\.test" is not allowed/, 'another domain');
    // The chain must be known before the body is read: the project URL alone refuses SIWE.
    const bare = message();
    const res = await dep().post(
      '/gated',
      { ...call(), networkId: `evm:${CHAIN}` },
      { 'x-siwe-message': Buffer.from(bare).toString('base64'), 'x-siwe-signature': await sign(bare) },
    );
    refused(res, /unauthorized/, 'a URL without a network');
    cls.attack(3);
    // The message signed by the right key still works once: the refusals above did not use it up.
    expect((await send(transports[0]![1], m, await sign(m))).status).to.equal(200);
  });
});
