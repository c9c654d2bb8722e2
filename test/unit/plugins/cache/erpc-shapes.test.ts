/**
 * eRPC's cache connector shapes through the real config loader (the cache plugin's normalize):
 * `driver: dynamodb` becomes `driver: keyv` with @keyv/dynamo, keys without an equivalent are
 * refused with their reason; failsafe entries take `matchFinality` as one value and eRPC's
 * adaptive duration objects; redis `addr` becomes `uri`.
 */
import { expect } from 'chai';
import { loadConfigObject } from '../../../../config/load.ts';
import type { SchemaFragment } from '../../../../config/schema.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { problemsOf } from '../../../helpers/config-problems.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, unknown>;
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const cacheOf = (connector: Doc): Doc => ({ database: { evmJsonRpcCache: { connectors: [{ id: 'c', ...connector }], policies: [{ connector: 'c' }] } } });
const connectorOf = (doc: Doc) => (((doc.database as Doc).evmJsonRpcCache as Doc).connectors as Doc[])[0] as Doc;
function problems(raw: unknown): Array<{ path: string; message: string }> {
  return problemsOf(() => load(raw));
}

describe("cache: eRPC's connector shapes", () => {
  it('driver dynamodb becomes driver keyv with @keyv/dynamo (table, region, endpoint, secret credentials, timeouts, retries)', () => {
    const { document, rewrites } = load(
      cacheOf({
        driver: 'dynamodb',
        dynamodb: {
          table: 'svc_cache',
          region: 'us-east-1',
          endpoint: 'http://localhost:8000',
          getTimeout: '200ms',
          setTimeout: '2s',
          maxRetries: 2,
          lockRetryInterval: '100ms',
          auth: { mode: 'secret', accessKeyID: 'AK', secretAccessKey: 'SK' },
        },
      }),
    );
    const c = connectorOf(document);
    expect(c.driver).to.equal('keyv');
    expect(c).to.not.have.property('dynamodb');
    expect(c.keyv).to.deep.equal({
      adapter: '@keyv/dynamo',
      readTimeout: '200ms',
      writeTimeout: '2s',
      options: {
        tableName: 'svc_cache',
        region: 'us-east-1',
        endpoint: 'http://localhost:8000',
        maxAttempts: 3,
        credentials: { accessKeyId: 'AK', secretAccessKey: 'SK' },
      },
    });
    const r = rewrites.find((x) => x.path === 'database.evmJsonRpcCache.connectors[0].driver');
    expect(r, 'recorded').to.not.equal(undefined);
    expect(JSON.stringify(r?.to)).to.not.contain('SK');
  });

  it('dynamodb without a table gets svc_json_rpc_cache; auth env adds nothing, file keeps the profile', () => {
    const env = connectorOf(load(cacheOf({ driver: 'dynamodb', dynamodb: { auth: { mode: 'env' } } })).document);
    expect(env.keyv).to.deep.equal({ adapter: '@keyv/dynamo', options: { tableName: 'svc_json_rpc_cache' } });
    const file = connectorOf(load(cacheOf({ driver: 'dynamodb', dynamodb: { region: 'eu-west-1', auth: { mode: 'file', profile: 'cache' } } })).document);
    expect((file.keyv as Doc).options).to.deep.equal({ tableName: 'svc_json_rpc_cache', region: 'eu-west-1', profile: 'cache' });
  });

  it('dynamodb keys without an equivalent in @keyv/dynamo are refused with their reason', () => {
    const p = problems(
      cacheOf({
        driver: 'dynamodb',
        dynamodb: {
          partitionKeyName: 'g',
          rangeKeyName: 'r',
          reverseIndexName: 'i',
          ttlAttributeName: 't',
          initTimeout: '5s',
          auth: { mode: 'file', credentialsFile: '/x' },
        },
      }),
    );
    const at = (k: string) => p.find((x) => x.path === `database.evmJsonRpcCache.connectors[0].dynamodb.${k}`)?.message ?? '';
    expect(at('partitionKeyName')).to.match(/own table layout/);
    expect(at('rangeKeyName')).to.match(/own table layout/);
    expect(at('reverseIndexName')).to.match(/pointer keys/);
    expect(at('ttlAttributeName')).to.match(/TTL/);
    expect(at('initTimeout')).to.match(/first use/);
    expect(at('auth.credentialsFile')).to.match(/AWS_SHARED_CREDENTIALS_FILE/);
  });

  it("failsafeForGets as one object with matchFinality as one value (any case, or eRPC's number) becomes a list of names", () => {
    const { document } = load(
      cacheOf({
        driver: 'memory',
        failsafeForGets: { matchMethod: 'eth_call', matchFinality: 'UNFINALIZED', timeout: { duration: '100ms' } },
        failsafeForSets: [{ matchFinality: 2 }],
      }),
    );
    const c = connectorOf(document);
    expect(c.failsafeForGets).to.deep.equal([{ matchMethod: 'eth_call', matchFinality: ['unfinalized'], timeout: { duration: '100ms' } }]);
    expect((c.failsafeForSets as Doc[])[0]?.matchFinality).to.deep.equal(['realtime']);
  });

  it("eRPC's adaptive duration objects become their fixed base; a hedge quantile is refused by name", () => {
    const { document } = load(
      cacheOf({
        driver: 'memory',
        failsafeForGets: [{ hedge: { delay: { base: '20ms', min: '5ms' }, maxCount: 1 }, timeout: { duration: { base: '400ms' } } }],
      }),
    );
    const e = (connectorOf(document).failsafeForGets as Doc[])[0] as Doc;
    expect(e.hedge).to.deep.equal({ delay: '20ms', maxCount: 1 });
    expect(e.timeout).to.deep.equal({ duration: '400ms' });
    const p = problems(cacheOf({ driver: 'memory', failsafeForGets: [{ hedge: { delay: { base: '20ms', quantile: 0.9 } } }] }));
    expect(p.map((x) => x.path)).to.include('database.evmJsonRpcCache.connectors[0].failsafeForGets[0].hedge.quantile');
  });

  it('redis addr becomes uri on a cache connector', () => {
    const c = connectorOf(load(cacheOf({ driver: 'redis', redis: { addr: 'cache.local:6379' } })).document);
    expect((c.redis as Doc).uri).to.equal('redis://cache.local:6379');
  });
});
