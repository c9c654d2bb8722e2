/**
 * The auth plugin (spec §5, §4.2) on a real server in front of anvil: each
 * strategy accepting and rejecting, the 401 answers (a batch refused whole), the client address behind
 * trusted forwarders, directive grants and `X-SVC-User-Id`. JWTs are made here with jose, SIWE
 * messages signed here by a viem local account.
 */
import { expect } from 'chai';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { createSiweMessage } from 'viem/siwe';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

const SECRET = 'correct-horse-battery-staple-0123456789';
const call = (id: number | string = 1) => ({ jsonrpc: '2.0', id, method: 'eth_blockNumber', params: [] });

describe('e2e: auth strategies (spec §5)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let rsa: Awaited<ReturnType<typeof generateKeyPair>>;
  let rsaPem: string;
  const account = privateKeyToAccount(generatePrivateKey());

  const upstream = () => ({ id: 'anvil', endpoint: anvil.url, evm: { chainId: anvil.chainId } });
  const project = (id: string, strategies: unknown[], extra: object = {}) => ({
    id,
    networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
    upstreams: [upstream()],
    auth: { strategies },
    ...extra,
  });
  const path = (p: string) => `/${p}/evm/${anvil.chainId}`;

  before(async () => {
    anvil = await startAnvil();
    rsa = await generateKeyPair('RS256', { extractable: true });
    rsaPem = await exportSPKI(rsa.publicKey);
    svc = await startSvc({
      ...NO_CACHE,
      metrics: { enabled: true, port: 0 },
      server: { trustedIPForwarders: ['127.0.0.1'] },
      rateLimiters: { budgets: [{ id: 'gold', rules: [{ method: '*', maxCount: 1000, period: 'hour' }] }] },
      projects: [
        project('sec', [{ type: 'secret', secret: { value: SECRET, id: 'ops' } }]),
        project('net', [{ type: 'network', network: { allowedCIDRs: ['10.1.0.0/16'], allowedIPs: ['192.0.2.7'] } }]),
        project('local', [{ type: 'network', network: { allowLocalhost: true } }]),
        project('jwt', [
          {
            type: 'jwt',
            jwt: {
              allowedAlgorithms: ['RS256', 'HS256'],
              allowedIssuers: ['https://issuer.test'],
              allowedAudiences: ['svc'],
              verificationKeys: { rsa: rsaPem },
            },
          },
        ]),
        project('siwe', [{ type: 'siwe', siwe: { allowedDomains: ['dapp.test'] } }]),
        project(
          'grant',
          [
            { type: 'secret', secret: { value: 'directive-secret-0123456789' }, allowClientDirectives: '*' },
            { type: 'secret', secret: { value: 'header-user-secret-0123456789' }, trustUserIdHeader: true, allowClientDirectives: '*' },
          ],
          { allowClientDirectives: '' },
        ),
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  describe('secret', () => {
    it('is accepted from query `secret`, X-SVC-Secret-Token, Bearer and Basic; counted by secret id, never by value', async () => {
      for (const [p, headers] of [
        [`${path('sec')}?secret=${SECRET}`, {}],
        [path('sec'), { 'x-svc-secret-token': SECRET }],
        [path('sec'), { authorization: `Bearer ${SECRET}` }],
        [path('sec'), { authorization: `Basic ${Buffer.from(`user:${SECRET}`).toString('base64')}` }],
      ] as const) {
        const r = await svc.post(p, call(), headers);
        expect(r.status, p).to.equal(200);
        expect(r.json.result).to.match(/^0x/);
      }
      const metrics = await (await fetch(svc.metricsUrl as string)).text();
      expect(metrics).to.match(/svc_auth_secret_requests_total\{secret_id="ops"\} 4/);
      expect(metrics).not.to.include(SECRET);
    });

    it('a single request without it is HTTP 401, -32016 ErrAuthUnauthorized under its own id; nothing reaches anvil', async () => {
      for (const headers of [{}, { 'x-svc-secret-token': 'wrong' }, { authorization: `Bearer ${SECRET}x` }] as Array<Record<string, string>>) {
        const r = await svc.post(path('sec'), call(7), headers);
        expect(r.status).to.equal(401);
        expect(r.json.id).to.equal(7);
        expect(r.json.error.code).to.equal(-32016);
        expect(r.text).not.to.include(SECRET);
      }
    });

    it('a batch is refused whole: HTTP 401, and every element carries the error with its own id', async () => {
      const r = await svc.post(path('sec'), [call(1), call('two'), call(3)]);
      expect(r.status).to.equal(401);
      expect(r.json.map((e: { id: unknown }) => e.id)).to.deep.equal([1, 'two', 3]);
      for (const e of r.json) expect(e.error.code).to.equal(-32016);
    });
  });

  describe('network', () => {
    it('allowLocalhost lets a loopback client in; a listed CIDR or IP is required otherwise', async () => {
      expect((await svc.post(path('local'), call())).status).to.equal(200);
      expect((await svc.post(path('net'), call())).status).to.equal(401);
    });

    it('X-Forwarded-For is read only behind a trusted forwarder, right to left, skipping trusted hops; ::ffff: is normalised', async () => {
      // 127.0.0.1 (the socket peer) is a trusted forwarder in this config.
      expect((await svc.post(path('net'), call(), { 'x-forwarded-for': '10.1.2.3' })).status).to.equal(200);
      expect((await svc.post(path('net'), call(), { 'x-forwarded-for': '::ffff:10.1.9.9' })).status).to.equal(200);
      expect((await svc.post(path('net'), call(), { 'x-forwarded-for': '192.0.2.7, 127.0.0.1' })).status).to.equal(200);
      // The client's own claim to the left of an untrusted hop is not believed.
      expect((await svc.post(path('net'), call(), { 'x-forwarded-for': '10.1.2.3, 203.0.113.9' })).status).to.equal(401);
      expect((await svc.post(path('net'), call(), { 'x-forwarded-for': 'not-an-ip' })).status).to.equal(401);
    });

    it('without trusted forwarders the header is ignored', async () => {
      const plain = await startSvc({
        ...NO_CACHE,
        metrics: { enabled: false },
        projects: [project('net', [{ type: 'network', network: { allowedCIDRs: ['10.1.0.0/16'] } }])],
      });
      try {
        expect((await plain.post(path('net'), call(), { 'x-forwarded-for': '10.1.2.3' })).status).to.equal(401);
      } finally {
        await plain.close();
      }
    });
  });

  describe('jwt', () => {
    const token = (claims: Record<string, unknown>, opts: { exp?: string | number; iss?: string; aud?: string } = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'rsa' })
        .setIssuer(opts.iss ?? 'https://issuer.test')
        .setAudience(opts.aud ?? 'svc')
        .setIssuedAt()
        .setExpirationTime(opts.exp ?? '5m')
        .sign(rsa.privateKey);

    it('a valid RS256 token (Bearer or query `jwt`) passes with its subject as the user', async () => {
      const t = await token({ sub: 'alice' });
      expect((await svc.post(path('jwt'), call(), { authorization: `Bearer ${t}` })).status).to.equal(200);
      expect((await svc.post(`${path('jwt')}?jwt=${t}`, call())).status).to.equal(200);
    });

    it('rejects an expired token, a wrong issuer or audience, alg none, and HS256 signed with the RSA public key', async () => {
      const expired = await token({ sub: 'a' }, { exp: Math.floor(Date.now() / 1000) - 60 });
      const wrongIss = await token({ sub: 'a' }, { iss: 'https://evil.test' });
      const wrongAud = await token({ sub: 'a' }, { aud: 'other' });
      const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const none = `${b64({ alg: 'none' })}.${b64({ sub: 'a', iss: 'https://issuer.test', aud: 'svc', exp: Math.floor(Date.now() / 1000) + 300 })}.`;
      // Algorithm confusion: the published PEM used as an HMAC secret.
      const confused = await new SignJWT({ sub: 'a' })
        .setProtectedHeader({ alg: 'HS256', kid: 'rsa' })
        .setIssuer('https://issuer.test')
        .setAudience('svc')
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(rsaPem));
      for (const t of [expired, wrongIss, wrongAud, none, confused, 'not.a.jwt']) {
        const r = await svc.post(path('jwt'), call(), { authorization: `Bearer ${t}` });
        expect(r.status).to.equal(401);
        expect(r.json.error.code).to.equal(-32016);
      }
    });

    it('a known budget in the rlm claim passes; an unknown budget rejects the token', async () => {
      expect((await svc.post(path('jwt'), call(), { authorization: `Bearer ${await token({ sub: 'a', rlm: 'gold' })}` })).status).to.equal(200);
      expect((await svc.post(path('jwt'), call(), { authorization: `Bearer ${await token({ sub: 'a', rlm: 'platinum' })}` })).status).to.equal(401);
    });
  });

  describe('siwe', () => {
    const message = (over: Partial<Parameters<typeof createSiweMessage>[0]> = {}) =>
      createSiweMessage({
        address: account.address,
        chainId: anvil.chainId,
        domain: 'dapp.test',
        nonce: `abcdefgh${++nonces}`,
        uri: 'https://dapp.test',
        version: '1',
        issuedAt: new Date(),
        ...over,
      });
    let nonces = 0;

    it('a message signed by its address passes, from headers (base64) or query', async () => {
      const m = message();
      const signature = await account.signMessage({ message: m });
      expect((await svc.post(path('siwe'), call(), { 'x-siwe-message': Buffer.from(m).toString('base64'), 'x-siwe-signature': signature })).status).to.equal(
        200,
      );
      // Each message is accepted once (test/e2e/siwe.test.ts): the query form gets its own.
      const q = message();
      const qSignature = await account.signMessage({ message: q });
      expect((await svc.post(`${path('siwe')}?message=${encodeURIComponent(q)}&signature=${qSignature}`, call())).status).to.equal(200);
    });

    it('rejects another domain, an expired message, a not-yet-valid one and a signature by another key', async () => {
      const other = privateKeyToAccount(generatePrivateKey());
      const cases = [
        { m: message({ domain: 'evil.test' }), by: account },
        { m: message({ expirationTime: new Date(Date.now() - 60_000) }), by: account },
        { m: message({ notBefore: new Date(Date.now() + 3_600_000) }), by: account },
        { m: message(), by: other },
      ];
      for (const c of cases) {
        const signature = await c.by.signMessage({ message: c.m });
        const r = await svc.post(path('siwe'), call(), { 'x-siwe-message': Buffer.from(c.m).toString('base64'), 'x-siwe-signature': signature });
        expect(r.status).to.equal(401);
      }
    });
  });

  describe('directive grants and X-SVC-User-Id (spec §2.8 rule c)', () => {
    it("§2.8 (c) — a strategy's allowClientDirectives is granted to its callers over the project's empty one", async () => {
      // use-upstream naming nothing fails only when the directive is honoured.
      const granted = await svc.post(path('grant'), call(), { 'x-svc-secret-token': 'directive-secret-0123456789', 'x-svc-use-upstream': 'nobody' });
      expect(granted.json.error?.message ?? '').to.match(/exhausted|no upstream/i);
    });

    it('§2.8 (c) — a caller named by X-SVC-User-Id gets no grant: the project value (none) applies', async () => {
      const r = await svc.post(path('grant'), call(), {
        'x-svc-secret-token': 'header-user-secret-0123456789',
        'x-svc-user-id': 'bob',
        'x-svc-use-upstream': 'nobody',
      });
      expect(r.status).to.equal(200);
      expect(r.json.result).to.match(/^0x/);
    });
  });
});
