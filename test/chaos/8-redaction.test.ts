/**
 * Hostile class 8: redaction (docs/access.md "Admin endpoint": redaction; "Limits and
 * security": secrets). The deployment's config holds every kind of credential (test/chaos/config.ts
 * `SECRETS`): upstream header values, a paid provider's URL user info, path key and query key,
 * provider settings, auth secrets, a JWT key, a database password, an exporter token. The
 * attacker reads everything svc will show it (admin views with a stolen admin secret, error
 * messages with details on, answers pinned to the provider that is down) and hopes the operator
 * ships logs somewhere readable. This file runs last: the harness has scanned every answer and
 * every trace-level log line of the whole hostile suite, and none may hold a secret.
 */
import { expect } from 'chai';
import { SignJWT } from 'jose';
import { GATED, MAIN, SECRETS } from './config.ts';
import { useDeployment, type SvcResponse } from './harness.ts';
import { chaosClass, scale } from './summary.ts';

const REDACTED = /#redacted=[0-9a-f]{8}/;

describe('chaos [8] redaction: no credential in admin views, errors, headers or logs', function () {
  this.timeout(120_000);
  const cls = chaosClass(8, 'redaction');
  const dep = useDeployment();

  const noSecretIn = (what: string, r: SvcResponse) => {
    const text = `${JSON.stringify(r.headers)}\n${r.text}`;
    for (const [name, value] of Object.entries(SECRETS)) expect(text.includes(value), `${name} in ${what}`).to.equal(false);
  };

  it('svc_config and svc_project show no upstream header value and no credential-looking config value, redacted rather than dropped', async () => {
    for (let i = 0; i < scale(1); i++) {
      const config = await dep().admin('svc_config');
      const main = await dep().admin('svc_project', ['main']);
      const gated = await dep().admin('svc_project', ['gated']);
      const taxonomy = await dep().admin('svc_taxonomy');
      cls.attack(4);
      for (const [what, r] of [
        ['svc_config', config],
        ['svc_project main', main],
        ['svc_project gated', gated],
        ['svc_taxonomy', taxonomy],
      ] as const) {
        expect(r.status, `${what}: ${r.text.slice(0, 200)}`).to.equal(200);
        noSecretIn(what, r);
      }
      // Where the secrets were, the views say so.
      const upstream = config.json.result.projects[0].upstreams[0];
      for (const h of ['X-Api-Key', 'X-Chaos-Route']) {
        expect(upstream.headers[h], h).to.match(REDACTED);
        expect(main.json.result.config.upstreams[0].headers[h], h).to.match(REDACTED);
      }
      const vendor = config.json.result.projects[1].upstreams[0];
      expect(vendor.endpoint).to.match(/^http:\/\/#redacted=[0-9a-f]{8}@127\.0\.0\.1:\d+\/#redacted=[0-9a-f]{8}$/);
      expect(gated.text).to.match(REDACTED);
    }
  });

  it('no admin view without the admin secret, and no secret in the refusal', async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { 'x-svc-secret-token': SECRETS.projectSecret },
      { authorization: `Bearer ${SECRETS.upstreamBearer}` },
    ];
    for (const headers of attempts) {
      const r = await dep().post('/admin', { jsonrpc: '2.0', id: 1, method: 'svc_config' }, headers);
      cls.attack();
      expect(r.status).to.equal(401);
      expect(r.json.result).to.equal(undefined);
    }
  });

  it('error messages carry no credential: calls pinned to the provider that is down, rejected credentials, failing calls with details on', async () => {
    const token = await new SignJWT({ sub: 'chaos' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(SECRETS.jwtKey));
    const forged = await new SignJWT({ sub: 'chaos' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('not-the-key-0123456789abcdef'));
    const body = { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', 'latest'] };
    let detailed = 0;
    for (let i = 0; i < scale(3); i++) {
      const answers = await Promise.all([
        dep().post(GATED, body, { 'x-svc-secret-token': SECRETS.projectSecret, 'x-svc-use-upstream': 'vendor' }),
        dep().post(`${GATED}?use-upstream=vendor`, body, { authorization: `Bearer ${token}` }),
        dep().post(GATED, [body, { ...body, id: 2, method: 'eth_chainId', params: [] }], {
          'x-svc-secret-token': SECRETS.projectSecret,
          'x-svc-use-upstream': 'vendor|a',
        }),
        dep().post(GATED, body, { authorization: `Bearer ${forged}` }),
        dep().post(GATED, body, { 'x-svc-secret-token': `${SECRETS.projectSecret}x` }),
        dep().post(`${GATED}?secret=wrong`, body),
        dep().post(MAIN, { ...body, method: 'eth_call', params: [{ to: '0x0000000000000000000000000000000000000bad', data: '0x' }, 'latest'] }),
        dep().post(`/gated/evm/999999`, body, { 'x-svc-secret-token': SECRETS.projectSecret }),
      ]);
      cls.attack(answers.length);
      answers.forEach((r, k) => noSecretIn(`answer ${k}`, r));
      // The pinned calls failed on the provider and said why (details on): the text is there, redacted.
      if (answers[0]!.json?.error?.data !== undefined) detailed++;
      expect(answers[0]!.json?.error, answers[0]!.text).to.be.an('object');
      expect(answers[3]!.status).to.equal(401);
      expect(answers[4]!.status).to.equal(401);
    }
    expect(detailed, 'errors carried their details').to.be.above(0);
  });

  it('no secret in any answer, response header, /metrics scrape or trace-level log line of the whole hostile suite', async () => {
    await dep().metric('svc_upstream_request_total');
    cls.attack();
    // svc logs little per call even at trace; the lines that matter are the provider's failures.
    expect(dep().logCount(), 'trace logging produced output').to.be.above(20);
    expect(dep().scannedAnswers()).to.be.above(20);
    cls.note(`${dep().scannedAnswers()} answers and ${dep().logCount()} log lines scanned`);
    expect(dep().leaks(), 'secrets seen').to.deep.equal([]);
    // The provider's failures were logged (redacted), so the scan saw them.
    expect(
      dep().logs.some((l) => JSON.stringify(l).includes('vendor')),
      'log lines about the provider that is down',
    ).to.equal(true);
  });
});
