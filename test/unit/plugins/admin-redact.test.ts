/**
 * Redaction of the admin config views (plugins/admin/redact.ts).
 */
import { expect } from 'chai';
import { redactConfig, redactUrl } from '../../../plugins/admin/redact.ts';

const MARK = /^#redacted=[0-9a-f]{8}$/;

describe('admin config redaction', () => {
  it('keeps only the origin of a URL with credentials, a path or a query', () => {
    expect(redactUrl('https://host.example/v2/KEY123456')).to.match(/^https:\/\/host\.example\/#redacted=[0-9a-f]{8}$/);
    expect(redactUrl('redis://:pw@10.0.0.1:6379/0')).to.match(/^redis:\/\/#redacted=[0-9a-f]{8}@10\.0\.0\.1:6379\/#redacted=[0-9a-f]{8}$/);
    expect(redactUrl('https://host.example/?key=abc')).to.not.include('abc');
    expect(redactUrl('http://10.0.0.5:8545')).to.equal('http://10.0.0.5:8545');
  });

  it('redacts every value under a secret-like key, jsonRpc headers, and URLs at any depth', () => {
    const out = redactConfig({
      a: { secret: { value: 's1', id: 'x' } },
      redis: { password: 'p', uri: 'redis://u:p@h:1' },
      aws: { secretAccessKey: 'k' },
      providers: [{ settings: { apiKey: 'key', region: 'eu' } }],
      upstreams: [{ endpoint: 'https://h/v2/KEY', jsonRpc: { headers: { 'X-Custom': 'v' }, supportsBatch: true } }],
      jwt: { verificationKeys: { k: 'hs-secret' } },
      plain: 'text',
      n: 3,
    }) as Record<string, any>;
    expect(out.a.secret.value).to.match(MARK);
    expect(out.redis.password).to.match(MARK);
    expect(out.redis.uri).to.not.include(':p@');
    expect(out.aws.secretAccessKey).to.match(MARK);
    expect(out.providers[0].settings.apiKey).to.match(MARK);
    expect(out.providers[0].settings.region).to.equal('eu');
    expect(out.upstreams[0].endpoint).to.not.include('KEY');
    expect(out.upstreams[0].jsonRpc.headers['X-Custom']).to.match(MARK);
    expect(out.upstreams[0].jsonRpc.supportsBatch).to.equal(true);
    expect(out.jwt.verificationKeys.k).to.match(MARK);
    expect(out.plain).to.equal('text');
    expect(out.n).to.equal(3);
  });

  it('equal values get equal marks within a process, so an operator can compare them', () => {
    const out = redactConfig({ a: { password: 'same' }, b: { password: 'same' }, c: { password: 'other' } }) as Record<string, { password: string }>;
    expect(out.a.password).to.equal(out.b.password);
    expect(out.a.password).to.not.equal(out.c.password);
  });
});
