/**
 * Conformance, spec §9 (versioning): version and commit headers on every kind of response of a
 * real svc, the credits version with cost headers on, and the corrupt-record error for stored
 * API keys written without a userId (as older versions could).
 */
import { expect } from 'chai';
import { VERSION } from '../../core/wire/version.ts';
import { checkedRecord } from '../../plugins/auth/api-keys/store.ts';
import { rpc, startCoreFixture, type CoreFixture } from './fixture-core.ts';

describe('conformance: §9 versioning', function () {
  this.timeout(20_000);
  let f: CoreFixture;
  before(async () => {
    f = await startCoreFixture({ server: { costHeaders: true } });
  });
  after(() => f?.close());

  it('§9 #1 — every response carries X-SVC-Version and X-SVC-Commit; X-SVC-Credits-Version names the version of the price tables', async () => {
    const responses = [
      await f.svc.post(f.path, rpc('eth_blockNumber', [])),
      await f.svc.post(f.path, [rpc('eth_blockNumber', [], 1), rpc('eth_chainId', [], 2)]),
      await f.svc.post(f.path, '{not json'),
      await f.svc.post('/main/evm/424242', rpc('eth_chainId', [])),
      await f.svc.post('/nope/evm/1', rpc('eth_chainId', [])),
      await f.svc.send('GET', '/healthcheck'),
      await f.svc.send('GET', '/healthcheck?eval=bogus'),
      await f.admin('svc_taxonomy'),
      await f.svc.post('/admin', rpc('svc_taxonomy')),
      await f.svc.send('OPTIONS', f.path, undefined, { origin: 'https://app.example', 'access-control-request-method': 'POST' }),
    ];
    for (const r of responses) {
      expect(r.headers['x-svc-version'], `status ${r.status}`).to.equal(VERSION);
      expect(r.headers['x-svc-commit'], `status ${r.status}`).to.be.a('string').that.is.not.empty;
    }
    expect(responses[0]!.headers['x-svc-credits-version']).to.equal(VERSION);
  });

  it('§9 #2 — a stored key record written without a userId fails with the corrupt-record error', () => {
    const older = {
      key: 'k_old_0123456789abcdef0123456789abcdef',
      enabled: true,
      createdAt: '2020-01-01T00:00:00.000Z',
      updatedAt: '2020-01-01T00:00:00.000Z',
    };
    expect(() => checkedRecord(older)).to.throw('missing or invalid userId in current data');
    expect(() => checkedRecord({ ...older, userId: '' })).to.throw('missing or invalid userId in current data');
    expect(checkedRecord({ ...older, userId: 'alice' }).userId).to.equal('alice');
  });
});
