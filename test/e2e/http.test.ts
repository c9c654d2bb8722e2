/**
 * End-to-end HTTP rules (spec §4.1, §4.2, §4.5, §2.8, §2.9) through the real server in front
 * of a real anvil: routing and aliasing, early errors, batch rules, id fidelity, headers,
 * directives, metrics and the minimal preset.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { FetchRequest, JsonRpcProvider } from 'ethers';
import { createPublicClient, http } from 'viem';
import { foundry } from 'viem/chains';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { ADDR1, DEV_BALANCE, rpcBody } from './fixtures.ts';

const PKG_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const ENV_VAR = 'SVC_E2E_RESPONSE_HEADER';
const ENV_VALUE = `e2e-${process.pid}`;
const PATH = '/main/evm/31337';

/** Core headers every response must carry (spec §4.5, §9, §2.9 `server.responseHeaders`). */
function expectCoreHeaders(res: SvcResponse, withConfigured = true): void {
  expect(res.headers['content-type'], 'content-type').to.equal('application/json');
  expect(res.headers['x-svc-version'], 'x-svc-version').to.equal(PKG_VERSION);
  expect(res.headers['x-svc-commit'], 'x-svc-commit').to.be.a('string').and.not.equal('');
  if (withConfigured) {
    expect(res.headers['x-e2e-env'], 'env-expanded response header').to.equal(ENV_VALUE);
    expect(res.headers['x-e2e-static'], 'static response header').to.equal('yes');
  }
}

/** The named error of an svc error body (`error.data.code` with includeErrorDetails). */
function errorName(json: any): string | undefined {
  return json?.error?.data?.code;
}

describe('e2e: HTTP rules through the real server', function () {
  this.timeout(30_000);

  let anvil: AnvilHandle;
  /** Main instance: alias, three upstreams with tags, small limits, response headers, a locked project. */
  let svc: SvcHandle;
  const prevEnv = process.env[ENV_VAR];

  const upstreams = () => [
    { id: 'a', endpoint: anvil.url, evm: { chainId: 31337 } },
    { id: 'b', endpoint: `http://localhost:${anvil.port}`, evm: { chainId: 31337 }, tags: ['tier:primary'] },
    { id: 'c', endpoint: anvil.url, evm: { chainId: 31337 }, tags: ['tier:backup'] },
  ];

  before(async () => {
    anvil = await startAnvil();
    process.env[ENV_VAR] = ENV_VALUE;
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: {
        maxBodySize: '1kb',
        maxBatchSize: 5,
        responseHeaders: { 'X-E2E-Env': `\${${ENV_VAR}}`, 'X-E2E-Static': 'yes' },
      },
      projects: [
        { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 }, alias: 'local' }], upstreams: upstreams() },
        { id: 'locked', allowClientDirectives: '!use-upstream', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: upstreams() },
      ],
    });
  });

  after(async () => {
    if (prevEnv === undefined) delete process.env[ENV_VAR];
    else process.env[ENV_VAR] = prevEnv;
    await svc?.close();
    await anvil?.stop();
  });

  describe('routing (spec §4.1)', () => {
    it('POST /<project>/evm/<chainId>', async () => {
      const res = await svc.post(PATH, rpcBody('eth_chainId', []));
      expect(res.status).to.equal(200);
      expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
      expectCoreHeaders(res);
    });

    it('POST /<project>/<network alias>', async () => {
      const res = await svc.post('/main/local', rpcBody('eth_chainId', [], 'alias'));
      expect(res.status).to.equal(200);
      expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 'alias', result: '0x7a69' });
    });

    it('§2.8 ¶5 — POST /<project> with body networkId', async () => {
      const res = await svc.post('/main', { ...rpcBody('eth_chainId', [], 3), networkId: 'evm:31337' });
      expect(res.status).to.equal(200);
      expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 3, result: '0x7a69' });
    });

    it('a bad networkId inside one batch element is that element’s error in a 200 array', async () => {
      const res = await svc.post('/main', [
        { ...rpcBody('eth_chainId', [], 1), networkId: 'evm:31337' },
        { ...rpcBody('eth_chainId', [], 2), networkId: 'evm:999999' },
        { ...rpcBody('eth_chainId', [], 3), networkId: 'not-a-network' },
        rpcBody('eth_chainId', [], 4),
      ]);
      expect(res.status).to.equal(200);
      expect(res.json.map((x: { id: number }) => x.id)).to.deep.equal([1, 2, 3, 4]);
      expect(res.json[0].result).to.equal('0x7a69');
      for (const i of [1, 2, 3]) {
        expect(res.json[i].result, `element ${i}`).to.equal(undefined);
        expect(res.json[i].error.code, `element ${i}`).to.equal(-32602);
        expect(errorName(res.json[i]), `element ${i}`).to.equal('ErrNetworkNotSupported');
      }
    });

    it('unknown project: 404 ErrProjectNotFound whatever the body', async () => {
      const bodies: string[] = [JSON.stringify(rpcBody('eth_chainId', [])), '{not json', JSON.stringify([rpcBody('eth_chainId', [])]), '', 'x'.repeat(4000)];
      for (const body of bodies) {
        for (const path of ['/nope/evm/31337', '/nope', '/nope/local']) {
          const res = await svc.post(path, body);
          expect(res.status, `${path} ${body.slice(0, 20)}`).to.equal(404);
          // A call that can be read keeps its id (an array: one error per element); else id null.
          const answer = Array.isArray(res.json) ? res.json[0] : res.json;
          expect(answer.id).to.equal(body.startsWith('{"') || body.startsWith('[{') ? 1 : null);
          expect(answer.error.code).to.equal(-32602);
          expect(errorName(answer)).to.equal('ErrProjectNotFound');
          expectCoreHeaders(res);
        }
      }
    });

    it('unknown chain or alias: 404 ErrNetworkNotSupported', async () => {
      for (const path of ['/main/evm/999999', '/main/evm/abc', '/main/nosuchalias', '/main/evm/31337/extra']) {
        const res = await svc.post(path, rpcBody('eth_chainId', []));
        expect(res.status, path).to.equal(404);
        expect(errorName(res.json), path).to.equal('ErrNetworkNotSupported');
        expectCoreHeaders(res);
      }
    });

    // Regression: `decodeURIComponent` on the path segments (core/http/server.ts createServer) threw a
    // URIError for a malformed percent-encoding, which became ErrInternal / HTTP 500.
    it('a malformed percent-encoding in the path is a client error, not an internal one', async () => {
      for (const path of ['/main/%zz', '/%E0%A4%A/evm/31337']) {
        const res = await svc.post(path, rpcBody('eth_chainId', []));
        expect(errorName(res.json), path).to.not.equal('ErrInternal');
        expect(res.status, path).to.be.oneOf([400, 404]);
        expectCoreHeaders(res);
      }
    });

    it('non-POST on a proxy path is a healthcheck envelope, not JSON-RPC', async () => {
      const res = await svc.send('GET', PATH);
      expect(res.status).to.equal(200);
      expect(res.json).to.be.an('object');
      expect(res.json.jsonrpc).to.equal(undefined);
      expect(res.json.status).to.equal('OK');
    });

    describe('aliasing rules', () => {
      let aliased: SvcHandle;

      before(async () => {
        aliased = await startSvc({
          ...NO_CACHE,
          logLevel: 'error',
          server: {
            aliasing: {
              rules: [
                { matchDomain: 'arch.test', serveProject: 'main', serveArchitecture: 'evm' },
                { matchDomain: 'chain.test', serveProject: 'main', serveArchitecture: 'evm', serveChain: 31337 },
                { matchDomain: '*', serveProject: 'main' },
              ],
            },
          },
          projects: [
            {
              id: 'main',
              networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
              upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: 31337 } }],
            },
          ],
        });
      });

      after(async () => {
        await aliased?.close();
      });

      it('/evm/<chainId> with the project aliased', async () => {
        const res = await aliased.post('/evm/31337', rpcBody('eth_chainId', []));
        expect(res.status).to.equal(200);
        expect(res.json.result).to.equal('0x7a69');
      });

      it('/<chainId> with project and architecture aliased', async () => {
        const res = await aliased.post('/31337', rpcBody('eth_chainId', []), { host: 'arch.test' });
        expect(res.status).to.equal(200);
        expect(res.json.result).to.equal('0x7a69');
      });

      it('/ on a domain aliased to project, architecture and chain', async () => {
        const res = await aliased.post('/', rpcBody('eth_chainId', []), { host: 'chain.test' });
        expect(res.status).to.equal(200);
        expect(res.json.result).to.equal('0x7a69');
      });

      it('the configured project id still routes first', async () => {
        const res = await aliased.post(PATH, rpcBody('eth_chainId', []));
        expect(res.json.result).to.equal('0x7a69');
      });

      it('unknown chain under an alias: 404 ErrNetworkNotSupported', async () => {
        const res = await aliased.post('/evm/999999', rpcBody('eth_chainId', []));
        expect(res.status).to.equal(404);
        expect(errorName(res.json)).to.equal('ErrNetworkNotSupported');
      });
    });
  });

  describe('bodies and batches (spec §4.2)', () => {
    it('malformed JSON: 400, -32700, id null', async () => {
      for (const body of ['{"jsonrpc":"2.0","id":1,', '[{"jsonrpc":"2.0"', 'hello']) {
        const res = await svc.post(PATH, body);
        expect(res.status, body).to.equal(400);
        expect(res.json.id).to.equal(null);
        expect(res.json.error.code).to.equal(-32700);
        expect(errorName(res.json)).to.equal('ErrJsonRpcRequestUnmarshal');
        expectCoreHeaders(res);
      }
    });

    it('body over server.maxBodySize: 413', async () => {
      const body = JSON.stringify(rpcBody('eth_getBalance', [ADDR1, 'latest', 'x'.repeat(1100)]));
      expect(body.length).to.be.greaterThan(1024);
      const res = await svc.post(PATH, body);
      expect(res.status).to.equal(413);
      expect(res.json.error.code).to.equal(-32600);
      expectCoreHeaders(res);
    });

    it('a body just under server.maxBodySize is served', async () => {
      const base = JSON.stringify(rpcBody('eth_chainId', []));
      const body = base.replace('{', `{"pad":"${'p'.repeat(1024 - base.length - 9)}",`);
      expect(body.length).to.be.at.most(1024);
      const res = await svc.post(PATH, body);
      expect(res.status).to.equal(200);
      expect(res.json.result).to.equal('0x7a69');
    });

    it('batch over server.maxBatchSize: 400, -32600', async () => {
      const res = await svc.post(
        PATH,
        [1, 2, 3, 4, 5, 6].map((i) => rpcBody('eth_chainId', [], i)),
      );
      expect(res.status).to.equal(400);
      expect(res.json.error.code).to.equal(-32600);
      expectCoreHeaders(res);
    });

    it('a batch of exactly server.maxBatchSize is served', async () => {
      const res = await svc.post(
        PATH,
        [1, 2, 3, 4, 5].map((i) => rpcBody('eth_chainId', [], i)),
      );
      expect(res.status).to.equal(200);
      expect(res.json).to.have.length(5);
    });

    it('empty batch: 200 []', async () => {
      const res = await svc.post(PATH, '[]');
      expect(res.status).to.equal(200);
      expect(res.text).to.equal('[]');
      expectCoreHeaders(res);
    });

    it('an element without jsonrpc: -32600 with the caller’s id (single and in a batch)', async () => {
      const single = await svc.post(PATH, { id: 42, method: 'eth_chainId', params: [] });
      expect(single.status).to.equal(400);
      expect(single.json.id).to.equal(42);
      expect(single.json.error.code).to.equal(-32600);
      const batch = await svc.post(PATH, [
        { id: 'x', method: 'eth_chainId' },
        rpcBody('eth_chainId', [], 'y'),
        { jsonrpc: '1.0', id: 7, method: 'eth_chainId' },
        5,
      ]);
      expect(batch.status).to.equal(200);
      expect(batch.json.map((x: { id: unknown }) => x.id)).to.deep.equal(['x', 'y', 7, null]);
      expect(batch.json[0].error.code).to.equal(-32600);
      expect(batch.json[1].result).to.equal('0x7a69');
      expect(batch.json[2].error.code).to.equal(-32600);
      expect(batch.json[3].error.code).to.equal(-32600);
    });

    it('ids: an integer above 2^53 comes back byte-for-byte', async () => {
      const res = await svc.post(PATH, '{"jsonrpc":"2.0","id":123456789012345678901,"method":"eth_chainId"}');
      expect(res.status).to.equal(200);
      expect(res.text).to.contain('"id":123456789012345678901');
      expect(res.text).to.contain('"result":"0x7a69"');
      const batch = await svc.post(
        PATH,
        '[{"jsonrpc":"2.0","id":98765432109876543210,"method":"eth_chainId"},{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_chainId"}]',
      );
      expect(batch.status).to.equal(200);
      expect(batch.text).to.contain('"id":98765432109876543210');
      expect(batch.text).to.contain('"id":9007199254740993');
    });

    it('ids: strings, null and zero are kept', async () => {
      for (const id of ['abc', '', '0x1', 'ünïcødé "quoted"', null, 0, -5, 1.5]) {
        const res = await svc.post(PATH, rpcBody('eth_chainId', [], id as string | number | null));
        expect(res.status).to.equal(200);
        expect(res.json.id, JSON.stringify(id)).to.deep.equal(id);
        expect(res.json.result).to.equal('0x7a69');
      }
    });

    it('a viem call without params works (viem omits empty params)', async () => {
      const sent: string[] = [];
      const pub = createPublicClient({
        chain: foundry,
        transport: http(`${svc.url}${PATH}`, {
          onFetchRequest: (_req, init) => {
            sent.push(String(init.body));
          },
        }),
      });
      expect(await pub.getChainId()).to.equal(31337);
      const bn = await pub.getBlockNumber({ cacheTime: 0 });
      expect(typeof bn).to.equal('bigint');
      const bodies = sent.map((s) => JSON.parse(s) as Record<string, unknown>);
      expect(
        bodies.some((b) => b.method === 'eth_chainId' && !('params' in b)),
        sent.join(' | '),
      ).to.equal(true);
      expect(
        bodies.some((b) => b.method === 'eth_blockNumber' && !('params' in b)),
        sent.join(' | '),
      ).to.equal(true);
    });

    it('a raw call without params and with null params works', async () => {
      const res = await svc.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber' });
      expect(res.json.result).to.match(/^0x[0-9a-f]+$/);
      const res2 = await svc.post(PATH, { jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: null });
      expect(res2.json.result).to.equal('0x7a69');
    });
  });

  describe('response headers (spec §4.5, §2.9)', () => {
    it('a single call carries the counters, the winner and the trace', async () => {
      const res = await svc.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest']));
      expect(BigInt(res.json.result)).to.equal(DEV_BALANCE);
      expectCoreHeaders(res);
      expect(res.headers['x-svc-attempts']).to.equal('1');
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
      expect(res.headers['x-svc-upstream-retries']).to.equal('0');
      expect(res.headers['x-svc-upstream-hedges']).to.equal('0');
      expect(res.headers['x-svc-network-attempts']).to.equal('1');
      expect(res.headers['x-svc-network-retries']).to.equal('0');
      expect(res.headers['x-svc-network-hedges']).to.equal('0');
      expect(res.headers['x-svc-upstream']).to.equal('a');
      expect(res.headers['x-svc-duration']).to.match(/^\d+$/);
      expect(res.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won$/);
      expect(res.headers['x-svc-cache-attempts']).to.equal(undefined);
      expect(res.headers['x-svc-consensus-slots']).to.equal(undefined);
    });

    it('a batch gets one aggregated set: counters summed, no X-SVC-Upstream, traces concatenated', async () => {
      const res = await svc.post(PATH, [rpcBody('net_version', [], 1), rpcBody('eth_blockNumber', [], 2), rpcBody('eth_getBalance', [ADDR1, 'latest'], 3)]);
      expect(res.status).to.equal(200);
      expectCoreHeaders(res);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('3');
      expect(res.headers['x-svc-network-attempts']).to.equal('3');
      expect(res.headers['x-svc-attempts']).to.equal('3');
      expect(res.headers['x-svc-upstream']).to.equal(undefined);
      expect(res.headers['x-svc-duration']).to.match(/^\d+$/);
      expect(res.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won;a=primary:success:\d+:won;a=primary:success:\d+:won$/);
    });

    it('a batch with an invalid element counts only the routed calls', async () => {
      const res = await svc.post(PATH, [{ id: 1, method: 'net_version' }, rpcBody('net_version', [], 2)]);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
      expect(res.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won$/);
    });

    it('eth_chainId answered from config: zero counters, no winner, no trace; in a batch it adds no attempt', async () => {
      const res = await svc.post(PATH, rpcBody('eth_chainId', []));
      expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
      expectCoreHeaders(res);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('0');
      expect(res.headers['x-svc-network-attempts']).to.equal('0');
      expect(res.headers['x-svc-upstream']).to.equal(undefined);
      expect(res.headers['x-svc-upstreams']).to.equal(undefined);
      const batch = await svc.post(PATH, [rpcBody('eth_chainId', [], 1), rpcBody('net_version', [], 2)]);
      expect(batch.json.map((x: { result: string }) => x.result)).to.deep.equal(['0x7a69', '31337']);
      expect(batch.headers['x-svc-upstream-attempts']).to.equal('1');
      expect(batch.headers['x-svc-upstreams']).to.match(/^a=primary:success:\d+:won$/);
    });

    it('early errors carry the core headers and zero counters, but no trace (spec §4.5 "always")', async () => {
      const res = await svc.post('/nope', rpcBody('eth_chainId', []));
      expect(res.status).to.equal(404);
      expectCoreHeaders(res);
      for (const h of [
        'x-svc-attempts',
        'x-svc-upstream-attempts',
        'x-svc-upstream-retries',
        'x-svc-upstream-hedges',
        'x-svc-network-attempts',
        'x-svc-network-retries',
        'x-svc-network-hedges',
      ]) {
        expect(res.headers[h], h).to.equal('0');
      }
      expect(res.headers['x-svc-upstreams']).to.equal(undefined);
      expect(res.headers['x-svc-duration']).to.equal(undefined);
      // A malformed body and an oversized batch are early errors too.
      const bad = await svc.post('/main/evm/31337', '{"jsonrpc":');
      expect(bad.status).to.equal(400);
      expect(bad.headers['x-svc-attempts']).to.equal('0');
    });

    describe('server.executionHeaders', () => {
      let summary: SvcHandle;
      let off: SvcHandle;
      const cfg = (mode: string) => ({
        ...NO_CACHE,
        logLevel: 'error',
        server: { executionHeaders: mode },
        projects: [
          { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [{ id: 'a', endpoint: anvil.url, evm: { chainId: 31337 } }] },
        ],
      });

      before(async () => {
        summary = await startSvc(cfg('summary'));
        off = await startSvc(cfg('off'));
      });

      after(async () => {
        await summary?.close();
        await off?.close();
      });

      it('summary: counters, no X-SVC-Upstreams', async () => {
        const res = await summary.post(PATH, rpcBody('net_version', []));
        expect(res.json.result).to.equal('31337');
        expectCoreHeaders(res, false);
        expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
        expect(res.headers['x-svc-network-attempts']).to.equal('1');
        expect(res.headers['x-svc-upstream']).to.equal('a');
        expect(res.headers['x-svc-upstreams']).to.equal(undefined);
        const batch = await summary.post(PATH, [rpcBody('net_version', [], 1), rpcBody('net_version', [], 2)]);
        expect(batch.headers['x-svc-upstream-attempts']).to.equal('2');
        expect(batch.headers['x-svc-upstreams']).to.equal(undefined);
      });

      it('off: no diagnostics except version and commit', async () => {
        const res = await off.post(PATH, rpcBody('net_version', []));
        expect(res.json.result).to.equal('31337');
        expectCoreHeaders(res, false);
        const diag = Object.keys(res.headers).filter((h) => h.startsWith('x-svc-') && h !== 'x-svc-version' && h !== 'x-svc-commit');
        expect(diag).to.deep.equal([]);
      });
    });
  });

  describe('directives: use-upstream (spec §2.8 #4)', () => {
    const pick = async (selector: string, project = 'main', headers?: Record<string, string>): Promise<SvcResponse> => {
      const q = selector === '' ? '' : `?use-upstream=${encodeURIComponent(selector)}`;
      // net_version, not eth_chainId: the latter is answered from config without any upstream.
      return svc.post(`/${project}/evm/31337${q}`, rpcBody('net_version', []), headers);
    };

    it('without a selector the first upstream in config order serves', async () => {
      const res = await pick('');
      expect(res.headers['x-svc-upstream']).to.equal('a');
    });

    it('by id', async () => {
      for (const id of ['a', 'b', 'c']) {
        const res = await pick(id);
        expect(res.json.result).to.equal('31337');
        expect(res.headers['x-svc-upstream'], id).to.equal(id);
        expect(res.headers['x-svc-upstreams']).to.match(new RegExp(`^${id}=primary:success:\\d+:won$`));
      }
    });

    it('§2.8 #4 — by tag', async () => {
      expect((await pick('tier:primary')).headers['x-svc-upstream']).to.equal('b');
      expect((await pick('tier:backup')).headers['x-svc-upstream']).to.equal('c');
      expect((await pick('tier:*')).headers['x-svc-upstream']).to.equal('b');
    });

    it('§2.8 #4 — with ! negation (ids only)', async () => {
      expect((await pick('!a')).headers['x-svc-upstream']).to.equal('b');
      expect((await pick('!a & !b')).headers['x-svc-upstream']).to.equal('c');
      // A negated tag matches ids only: no id is "tier:primary", so it excludes nothing and only
      // `!a` narrows the choice: b (tagged tier:primary) serves. An ignored selector would give a
      // (the first upstream), a negation that also matched tags would exclude b and give c.
      expect((await pick('!a & !tier:primary')).headers['x-svc-upstream']).to.equal('b');
    });

    it('§2.8 #4 — with | alternation', async () => {
      expect((await pick('nomatch|c')).headers['x-svc-upstream']).to.equal('c');
      expect((await pick('c|tier:primary')).headers['x-svc-upstream']).to.equal('b');
    });

    it('the query value is trimmed', async () => {
      expect((await pick('  c  ')).headers['x-svc-upstream']).to.equal('c');
    });

    it('§4.1 ¶1 — by header X-SVC-Use-Upstream; the query wins over the header', async () => {
      const viaHeader = await svc.post(PATH, rpcBody('net_version', []), { 'X-SVC-Use-Upstream': 'c' });
      expect(viaHeader.headers['x-svc-upstream']).to.equal('c');
      const both = await pick('b', 'main', { 'X-SVC-Use-Upstream': 'c' });
      expect(both.headers['x-svc-upstream']).to.equal('b');
    });

    it('§7 ErrUpstreamsExhausted — a selector matching nothing: ErrUpstreamsExhausted', async () => {
      const res = await pick('zzz');
      expect(res.json.result).to.equal(undefined);
      expect(errorName(res.json)).to.equal('ErrUpstreamsExhausted');
    });

    it('allowClientDirectives "!use-upstream" at project level ignores the query and the header', async () => {
      const q = await pick('c', 'locked');
      expect(q.json.result).to.equal('31337');
      expect(q.headers['x-svc-upstream']).to.equal('a');
      const h = await svc.post('/locked/evm/31337', rpcBody('net_version', []), { 'X-SVC-Use-Upstream': 'c' });
      expect(h.headers['x-svc-upstream']).to.equal('a');
      const nothing = await pick('zzz', 'locked');
      expect(nothing.json.result).to.equal('31337');
    });
  });

  describe('metrics (spec §6)', () => {
    it('/metrics exposes upstream request counters and received calls with agent_name', async () => {
      expect(svc.metricsUrl).to.be.a('string');
      const req = new FetchRequest(`${svc.url}${PATH}`);
      req.setHeader('user-agent', 'ethers/6.17.0 (e2e)');
      const provider = new JsonRpcProvider(req, 31337, { staticNetwork: true, cacheTimeout: -1 });
      try {
        expect(await provider.getBalance(ADDR1)).to.be.a('bigint');
      } finally {
        provider.destroy();
      }
      await svc.post(`${PATH}?user-agent=${encodeURIComponent('viem/2.57.20')}`, rpcBody('eth_chainId', []), { 'user-agent': 'curl/8.0' });
      const res = await fetch(svc.metricsUrl!);
      expect(res.status).to.equal(200);
      const text = await res.text();
      expect(text).to.match(/^svc_upstream_request_total\{[^}]*project="main"[^}]*upstream="a"[^}]*\} [1-9]\d*$/m);
      expect(text).to.match(/^svc_upstream_request_total\{[^}]*category="eth_getBalance"[^}]*\} [1-9]\d*$/m);
      // The duration histogram (bound children) counts the same requests.
      expect(text).to.match(
        /^svc_upstream_request_duration_seconds_count\{project="main",vendor="[^"]*",network="evm:31337",upstream="a",category="eth_getBalance"\} [1-9]\d*$/m,
      );
      expect(text).to.match(/^svc_network_request_received_total\{[^}]*network="evm:31337"[^}]*agent_name="ethers"[^}]*\} [1-9]\d*$/m);
      // The `user-agent` query overrides the header.
      expect(text).to.match(/^svc_network_request_received_total\{[^}]*category="eth_chainId"[^}]*agent_name="viem"[^}]*\} [1-9]\d*$/m);
      expect(text).to.not.match(/agent_name="curl"/);
    });
  });

  describe('minimal preset', () => {
    let minimal: SvcHandle;

    before(async () => {
      // No configured chain id: the upstream joins evm:31337 only after its eth_chainId probe.
      minimal = await startSvc(
        {
          logLevel: 'error',
          projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [{ id: 'only', endpoint: anvil.url }] }],
        },
        { preset: 'minimal' },
      );
      const net = minimal.proxy.projects.get('main')!.networks.get('evm:31337')!;
      await waitFor(() => net.upstreams.length === 1);
    });

    after(async () => {
      await minimal?.close();
    });

    it('still forwards single calls and batches', async () => {
      const res = await minimal.post(PATH, rpcBody('eth_chainId', []));
      expect(res.status).to.equal(200);
      expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
      expectCoreHeaders(res, false);
      expect(res.headers['x-svc-upstream-attempts']).to.equal(undefined);
      const batch = await minimal.post(PATH, [rpcBody('eth_blockNumber', [], 1), rpcBody('eth_getBalance', [ADDR1, 'latest'], 2)]);
      expect(batch.json.map((x: { id: number }) => x.id)).to.deep.equal([1, 2]);
      expect(BigInt(batch.json[1].result) >= DEV_BALANCE).to.equal(true);
      expect(minimal.metricsUrl).to.equal(undefined);
    });
  });
});
