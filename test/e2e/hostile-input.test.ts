/**
 * Bad input gets a clear error, never a crash (developers' guide "How we build"): malformed
 * params for every method family the EVM plugins inspect go through the full default preset in
 * front of a real anvil node. Each answer must be a JSON-RPC object with the caller's id and a
 * named error or a result — never svc's own internal failure (ErrInternal / id null / HTTP 500) —
 * and in a batch every well-formed neighbour still succeeds.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const HOSTILE: Array<[string, unknown]> = [
  ['eth_getLogs', [null]],
  ['eth_getLogs', ['x']],
  ['eth_getLogs', [{ fromBlock: 5, toBlock: {} }]],
  ['eth_getLogs', [{ fromBlock: 'latest', toBlock: '0x0', address: 7, topics: 'nope' }]],
  ['eth_getLogs', [{ fromBlock: '0xffffffffffffffffffff', toBlock: 'latest' }]],
  ['eth_getLogs', { fromBlock: '0x0' }],
  ['trace_filter', [[]]],
  ['eth_getBlockByNumber', []],
  ['eth_getBlockByNumber', [null, true]],
  ['eth_getBlockByNumber', [{}, false]],
  ['eth_getBlockByNumber', ['0x1e8480000000000000000000', false]],
  ['eth_getBlockByNumber', 'latest'],
  ['eth_blockNumber', [1, 2, 3]],
  ['eth_call', {}],
  ['eth_call', [{ to: 12 }, ['latest']]],
  ['eth_getBalance', ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', { blockNumber: 'nope' }]],
  ['eth_getTransactionReceipt', [123]],
  ['eth_getTransactionByHash', []],
  ['eth_sendRawTransaction', [123]],
  ['eth_sendRawTransaction', ['0xzz']],
  ['eth_sendRawTransaction', []],
  ['eth_newFilter', [{}]],
  ['eth_newFilter', [{ address: Array.from({ length: 5000 }, () => '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266') }]],
  ['eth_newFilter', [{ topics: [[{}]] }]],
  ['eth_newFilter', 'latest'],
  ['eth_newBlockFilter', [1]],
  ['eth_getFilterChanges', [{}]],
  ['eth_getFilterChanges', ['0x'.padEnd(10_000, 'f')]],
  ['eth_getFilterLogs', [null]],
  ['eth_uninstallFilter', []],
  ['eth_chainId', ['unexpected']],
  ['no_such_method', [1]],
];

describe('e2e: hostile params never crash svc (default preset, anvil)', () => {
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  before(async () => {
    anvil = await startAnvil({ chainId: 31337 });
    svc = await startSvc({
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [
            { id: 'anvil', endpoint: anvil.url, evm: { chainId: 31337 } },
            { id: 'anvil-2', endpoint: anvil.url.replace('127.0.0.1', 'localhost'), evm: { chainId: 31337 } },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  HOSTILE.forEach(([method, params], i) => {
    it(`${method} ${JSON.stringify(params)} gets a named JSON-RPC answer with the caller's id`, async () => {
      const res = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: `h${i}`, method, params });
      expect(res.status, res.text).to.not.equal(500);
      expect(res.json, res.text).to.be.an('object');
      expect(res.json.id, res.text).to.equal(`h${i}`);
      if (res.json.error) {
        expect(res.json.error.code, res.text).to.be.a('number');
        expect(res.json.error.message, res.text)
          .to.be.a('string')
          .and.not.match(/^internal error/);
      } else {
        expect(res.json, res.text).to.have.property('result');
      }
    });
  });

  it('a batch of every hostile call plus good ones: order kept, good ones succeed, no id null', async () => {
    const body = [
      { jsonrpc: '2.0', id: 'good-1', method: 'eth_blockNumber', params: [] },
      ...HOSTILE.map(([method, params], i) => ({ jsonrpc: '2.0', id: `h${i}`, method, params })),
      { jsonrpc: '2.0', id: 'good-2', method: 'eth_getBalance', params: ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest'] },
    ];
    const res = await svc.post('/main/evm/31337', body);
    expect(res.status).to.equal(200);
    const arr = res.json as Array<{ id: unknown; result?: unknown; error?: unknown }>;
    expect(arr.map((e) => e.id)).to.deep.equal(body.map((b) => b.id));
    expect(arr[0]).to.have.property('result');
    expect(arr[arr.length - 1]).to.have.property('result');
  });
});
