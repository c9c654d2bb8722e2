/**
 * Config, log and error-text redaction (lib/redact.ts `keyKind`, `redactText`, `redactTree`;
 * lib/logger.ts `LOG_REDACTION`): every credential-looking key at any depth, every header map,
 * URLs' user info, path and query, in admin views, log lines and error messages.
 */
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { keyKind, redactText, redactTree, redactUrl } from '../../../lib/redact.ts';
import { LOG_REDACTION, redactChildren } from '../../../lib/logger.ts';
import { asSvcError } from '../../../core/wire/errors.ts';

const MARK = /#redacted=[0-9a-f]{8}/;

describe('core redaction: keys, text, trees, logs', () => {
  describe('keyKind', () => {
    const table: Array<[string, 'plain' | 'credential' | 'container']> = [
      ['key', 'credential'],
      ['apiKey', 'credential'],
      ['APIKEY', 'credential'],
      ['api_key', 'credential'],
      ['X-Api-Key', 'credential'],
      ['secret', 'credential'],
      ['clientSecret', 'credential'],
      ['secretAccessKey', 'credential'],
      ['token', 'credential'],
      ['accesstoken', 'credential'],
      ['auth_token', 'credential'],
      ['password', 'credential'],
      ['passwd', 'credential'],
      ['PASSWORD', 'credential'],
      ['authorization', 'credential'],
      ['Bearer', 'credential'],
      ['credentials', 'credential'],
      ['privateKey', 'credential'],
      ['mnemonic', 'credential'],
      ['sessionId', 'credential'],
      ['Cookie', 'credential'],
      ['verificationKeys', 'credential'],
      ['dkey', 'credential'],
      ['clientId', 'credential'],
      ['auth', 'container'],
      ['jwt', 'container'],
      ['keyPrefix', 'plain'],
      ['author', 'plain'],
      ['monkey', 'plain'],
      ['endpoint', 'plain'],
      ['connectionUri', 'plain'],
      ['trustUserIdHeader', 'plain'],
      ['id', 'plain'],
    ];
    for (const [name, kind] of table) it(`${name} → ${kind}`, () => expect(keyKind(name)).to.equal(kind));
  });

  describe('redactText', () => {
    // [text, secrets that must be gone, parts that must stay]
    const table: Array<[string, string[], string[]]> = [
      ['failed https://eth.example.com/v2/abcdef123456?apikey=XYZ999.', ['abcdef123456', 'XYZ999'], ['https://eth.example.com/', 'failed ']],
      ['redis://:pw12345@10.0.0.1:6379/0 is down', ['pw12345'], ['10.0.0.1:6379', 'is down']],
      ['postgres://svc:dbPass77@db:5432/svc?sslmode=require', ['dbPass77'], ['db:5432']],
      ['wss://user:wsPass88@node.example/ws', ['wsPass88', 'user:'], ['node.example']],
      ['alchemy://ALCHEMYKEY123', ['ALCHEMYKEY123'], ['alchemy://']],
      ['evm+drpc://DRPCKEY456 and quicknode://QNKEY789?tagIds=1', ['DRPCKEY456', 'QNKEY789'], ['evm+drpc://', 'quicknode://']],
      ['dkey=DRPCKEY123 network=ethereum', ['DRPCKEY123'], ['network=ethereum']],
      ['{"clientId":"thirdwebCid1","vendor":"thirdweb"}', ['thirdwebCid1'], ['"vendor":"thirdweb"']],
      ['https://lb.drpc.org/ogrpc?network=ethereum&dkey=DK99887766', ['DK99887766', 'ethereum'], ['https://lb.drpc.org/']],
      ['https://eth-mainnet.g.alchemy.com/v2/ALCHKEY1234', ['ALCHKEY1234'], ['https://eth-mainnet.g.alchemy.com/']],
      ['password=hunter22 user=bob', ['hunter22'], ['user=bob']],
      ['{"apiKey":"sekret123","id":"x"}', ['sekret123'], ['"id":"x"']],
      ['X-Api-Key: K1234567', ['K1234567'], ['X-Api-Key']],
      ['Authorization: Bearer abc.def.ghi', ['abc.def.ghi'], ['Authorization']],
      ['sent Basic dTpzZWNyZXRWYWx1ZQ==', ['dTpzZWNyZXRWYWx1ZQ=='], ['sent Basic ']],
      ['mnemonic: "test test test junk"', ['test', 'junk'], ['mnemonic: "']],
      ['client_secret=cs_0123456&grant=x', ['cs_0123456'], ['grant=x']],
    ];
    for (const [text, gone, kept] of table) {
      it(JSON.stringify(text), () => {
        const out = redactText(text);
        for (const g of gone) expect(out, out).to.not.include(g);
        for (const k of kept) expect(out).to.include(k);
        expect(out).to.match(MARK);
      });
    }
    it('leaves text without credentials as written', () => {
      for (const t of [
        'connect ECONNREFUSED 127.0.0.1:6379',
        'unauthorized: the API key store could not be read',
        'missing or invalid userId in current data',
        'SIWE message is for chain 1, this network is 31337',
        'at run (file:///srv/svc/core/host/proxy.ts:10:3)',
        'upstream http://10.0.0.5:8545 answered 503',
        'repository-evm:1-https://rpc.example#redacted=1a2b3',
      ]) {
        expect(redactText(t)).to.equal(t);
      }
    });
    it('redactUrl keeps only the origin', () => {
      expect(redactUrl('https://host.example/v2/KEY123456')).to.match(/^https:\/\/host\.example\/#redacted=[0-9a-f]{8}$/);
      expect(redactUrl('http://10.0.0.5:8545')).to.equal('http://10.0.0.5:8545');
    });
  });

  describe('redactTree', () => {
    const config = {
      server: { responseHeaders: { 'X-Internal': 'respHeaderValue1' }, trustedIPHeaders: ['X-Forwarded-For'] },
      tracing: { headers: { authorization: 'Bearer exporterTok1' } },
      projects: [
        {
          id: 'main',
          upstreams: [
            {
              id: 'u',
              endpoint: 'https://u:userinfoPw1@rpc.example/v3/pathKey123456?key=qKey1',
              headers: { 'X-Api-Key': 'resolvedHeader1' },
              jsonRpc: { headers: { 'X-Api-Key': 'jsonRpcHeader1' }, supportsBatch: true },
              settings: { nested: { deeper: { apiKey: 'deepKey1', region: 'eu' } } },
            },
          ],
          providers: [{ id: 'p', settings: { apiKey: 'providerKey1', token: 'providerTok1' }, jsonRpc: { headers: { Cookie: 'cookie1' } } }],
          auth: {
            strategies: [
              { type: 'secret', secret: { value: 'secretValue1' } },
              { type: 'jwt', jwt: { allowedAlgorithms: ['HS256'], verificationKeys: { k: 'hsKey1' } } },
              {
                type: 'database',
                connector: { id: 'db', driver: 'redis', redis: { uri: 'redis://:redisPw1@h:6379', password: 'redisPw2', keyPrefix: 'svc_auth:' } },
              },
            ],
          },
          cors: { allowCredentials: true, allowedHeaders: ['Authorization'] },
        },
      ],
      misc: { mnemonic: 'word word word', privateKey: '0xprivate1', session: 'sess1', passwd: 12345678, list: [{ password: 'listPw1' }] },
    };
    const SECRETS = [
      'respHeaderValue1',
      'exporterTok1',
      'userinfoPw1',
      'pathKey123456',
      'qKey1',
      'resolvedHeader1',
      'jsonRpcHeader1',
      'deepKey1',
      'providerKey1',
      'providerTok1',
      'cookie1',
      'secretValue1',
      'hsKey1',
      'redisPw1',
      'redisPw2',
      'word word word',
      '0xprivate1',
      'sess1',
      '12345678',
      'listPw1',
    ];

    it('no secret value appears anywhere in the redacted JSON', () => {
      const text = JSON.stringify(redactTree(config));
      for (const s of SECRETS) expect(text.includes(s), s).to.equal(false);
    });

    it('keeps what is not a secret: ids, types, booleans, header names, key prefixes, origins', () => {
      const out = redactTree(config) as any;
      expect(out.server.trustedIPHeaders).to.deep.equal(['X-Forwarded-For']);
      expect(out.projects[0].upstreams[0].id).to.equal('u');
      expect(out.projects[0].upstreams[0].jsonRpc.supportsBatch).to.equal(true);
      expect(out.projects[0].upstreams[0].jsonRpc.headers['X-Api-Key']).to.match(MARK);
      expect(out.projects[0].upstreams[0].headers['X-Api-Key']).to.match(MARK);
      expect(out.projects[0].upstreams[0].endpoint).to.match(/^https:\/\/#redacted=[0-9a-f]{8}@rpc\.example\/#redacted=[0-9a-f]{8}$/);
      expect(out.projects[0].upstreams[0].settings.nested.deeper.region).to.equal('eu');
      expect(out.projects[0].auth.strategies.map((s: { type: string }) => s.type)).to.deep.equal(['secret', 'jwt', 'database']);
      expect(out.projects[0].auth.strategies[1].jwt.allowedAlgorithms).to.deep.equal(['HS256']);
      expect(out.projects[0].auth.strategies[2].connector.redis.keyPrefix).to.equal('svc_auth:');
      expect(out.projects[0].cors).to.deep.equal({ allowCredentials: true, allowedHeaders: ['Authorization'] });
    });

    it('equal values get equal marks within a process', () => {
      const out = redactTree({ a: { password: 'same' }, b: { password: 'same' }, c: { password: 'other' } }) as Record<string, { password: string }>;
      expect(out.a.password).to.equal(out.b.password);
      expect(out.a.password).to.not.equal(out.c.password);
    });

    it('errors become {type, message, stack} with their text redacted; cycles and functions are cut', () => {
      const cyclic: Record<string, unknown> = { f: () => 1 };
      cyclic.self = cyclic;
      const out = redactTree({ err: new Error('connect to redis://:errPw123@h:1 failed'), cyclic }) as any;
      expect(out.err.type).to.equal('Error');
      expect(JSON.stringify(out)).to.not.include('errPw123');
      expect(out.cyclic.self).to.equal('[circular]');
      expect(out.cyclic).to.not.have.property('f');
    });
  });

  describe('log lines (LOG_REDACTION) and internal errors', () => {
    const capture = () => {
      const lines: string[] = [];
      const stream = new Writable({
        write(chunk, _enc, done) {
          lines.push(String(chunk));
          done();
        },
      });
      return { logger: redactChildren(pino({ level: 'trace', ...LOG_REDACTION }, stream)), text: () => lines.join('') };
    };

    it('redacts objects, messages, format arguments, Error arguments and child bindings', () => {
      const { logger, text } = capture();
      logger.info(
        { upstream: 'u', headers: { 'x-api-key': 'logHeader1' }, cfg: { redis: { password: 'logPw1' } } },
        'dialled https://rpc.example/v2/logPathKey1',
      );
      logger.warn('failed for %s', 'postgres://svc:logDbPw1@db/svc');
      logger.error(new Error('token=logTok1234 rejected'));
      logger.child({ apiKey: 'childKey1' }).child({ session: 'grandChild1', scope: 'inner' }).debug('child line');
      const out = text();
      for (const s of ['logHeader1', 'logPw1', 'logPathKey1', 'logDbPw1', 'logTok1234', 'childKey1', 'grandChild1']) expect(out.includes(s), s).to.equal(false);
      expect(out).to.include('"upstream":"u"');
      expect(out).to.include('child line');
      expect(out).to.include('"scope":"inner"');
      expect(out).to.include('"type":"Error"');
    });

    it('asSvcError redacts a foreign error message (a driver quoting its connection string)', () => {
      const err = asSvcError(new Error('getaddrinfo ENOTFOUND for postgres://svc:drvPw123@nohost/db'));
      expect(err.message).to.not.include('drvPw123');
      expect(JSON.stringify(err.toDetails())).to.not.include('drvPw123');
    });
  });
});
