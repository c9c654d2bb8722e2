/**
 * Conformance of the proxy endpoint (docs/interface.md §4.1) against a real anvil node: every
 * path form of the table, the array answer for array input, the preflight and the non-POST
 * healthcheck envelope. One svc for the file (two projects, aliasing rules matched on Host).
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const call = (id: unknown, method = 'eth_chainId', params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });
const errorName = (e: any): string | undefined => e?.error?.data?.code;

describe('conformance §4.1: proxy endpoint', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    const project = (id: string, extra: object = {}) => ({
      id,
      networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, alias: 'local' }],
      upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }],
      ...extra,
    });
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: {
        aliasing: {
          rules: [
            { matchDomain: 'arch.test', serveProject: 'main', serveArchitecture: 'evm' },
            { matchDomain: 'chain.test', serveProject: 'main', serveArchitecture: 'evm', serveChain: CHAIN },
            { matchDomain: '*', serveProject: 'main' },
          ],
        },
      },
      projects: [project('main'), project('web', { cors: { allowedOrigins: ['https://app.example'] } })],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — a request object gets {jsonrpc, id, result}; an array gets an array', async () => {
    const single = await svc.post(`/main/evm/${CHAIN}`, call(7));
    expect(single.status).to.equal(200);
    expect(single.headers['content-type']).to.equal('application/json');
    expect(single.json).to.deep.equal({ jsonrpc: '2.0', id: 7, result: '0x7a69' });
    const failing = await svc.post(`/main/evm/${CHAIN}`, call(8, 'eth_getBlockByNumber', ['not-a-block', false]));
    expect(failing.json).to.have.keys('jsonrpc', 'id', 'error');
    const batch = await svc.post(`/main/evm/${CHAIN}`, [call(1), call('two')]);
    expect(batch.json).to.deep.equal([
      { jsonrpc: '2.0', id: 1, result: '0x7a69' },
      { jsonrpc: '2.0', id: 'two', result: '0x7a69' },
    ]);
    // Optional body field networkId when the path names only the project.
    const byBody = await svc.post('/main', { ...call(9), networkId: `evm:${CHAIN}` });
    expect(byBody.json).to.deep.equal({ jsonrpc: '2.0', id: 9, result: '0x7a69' });
  });

  it('§4.1 POST / /<project>/<architecture>/<chainId> (e.g. architecture evm) — array input refused before routing still gets an array, one error per element', async () => {
    const res = await svc.post('/main/evm/999999', [call(1), call(2)]);
    expect(res.status).to.equal(404);
    expect(res.json).to.be.an('array').with.length(2);
    expect(res.json.map((e: { id: unknown }) => e.id)).to.deep.equal([1, 2]);
    for (const e of res.json) expect(errorName(e)).to.equal('ErrNetworkNotSupported');
  });

  it('§4.1 POST / /<project>/<network_alias> — the network alias routes like the chain id', async () => {
    const res = await svc.post('/main/local', call('alias'));
    expect(res.status).to.equal(200);
    expect(res.json).to.deep.equal({ jsonrpc: '2.0', id: 'alias', result: '0x7a69' });
  });

  it('§4.1 POST / alias forms: /evm/<chainId> (project aliased), /<chainId> (project and architecture aliased), / on a domain aliased to project, architecture and chain — each form reaches the network', async () => {
    for (const [path, host] of [
      [`/evm/${CHAIN}`, 'any.test'],
      [`/${CHAIN}`, 'arch.test'],
      ['/', 'chain.test'],
    ] as const) {
      const res = await svc.post(path, call(path), { host });
      expect(res.status, `${host}${path}`).to.equal(200);
      expect(res.json, `${host}${path}`).to.deep.equal({ jsonrpc: '2.0', id: path, result: '0x7a69' });
    }
  });

  it('§4.1 OPTIONS — a preflight on a proxy path gets the CORS answer, not JSON-RPC', async () => {
    const origin = 'https://app.example';
    const res = await svc.send('OPTIONS', `/web/evm/${CHAIN}`, undefined, {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    });
    expect(res.status).to.equal(204);
    expect(res.headers['access-control-allow-origin']).to.equal(origin);
    expect(res.headers['access-control-allow-methods']).to.match(/POST/);
    expect(res.text).to.equal('');
  });

  it('§4.1 other — a GET on a proxy path is a healthcheck: a JSON health envelope, not JSON-RPC', async () => {
    for (const path of [`/main/evm/${CHAIN}`, '/main/local']) {
      const res = await svc.send('GET', path);
      expect(res.status, path).to.equal(200);
      expect(res.json, path).to.be.an('object').that.has.property('status', 'OK');
      expect(res.json.jsonrpc, path).to.equal(undefined);
      expect(res.json.result, path).to.equal(undefined);
    }
  });
});
