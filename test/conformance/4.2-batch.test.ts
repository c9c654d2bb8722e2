/**
 * Conformance of inbound batches (docs/interface.md §4.2) against a real anvil node. §4.2 #6 (an
 * internal failure) is triggered by a test plugin whose own code throws for one method; §4.2 #7
 * (the client gone mid-batch) by an upstream that never answers.
 */
import { expect } from 'chai';
import { request } from 'undici';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { barrier, startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import type { Plugin } from '../../core/host/proxy.ts';
import { UpstreamStage } from '../../core/pipeline/stages.ts';
import { defaultPreset } from '../../presets/default.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const call = (id: unknown, method = 'eth_chainId', params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });
const errorName = (e: any): string | undefined => e?.error?.data?.code;

/** A plugin whose own code throws for method `test_boom` (svc failing, not the upstream). */
const throwing: Plugin = {
  name: 'test-throwing',
  apply(proxy) {
    proxy.hooks.upstream.tap({ name: 'test-throwing', stage: UpstreamStage.TIMEOUT }, (inner) => (c) => {
      if (c.method === 'test_boom') throw new TypeError('plugin bug (test)');
      return inner(c);
    });
  },
};

describe('conformance §4.2: inbound batches', function () {
  this.timeout(20_000);
  let anvil: AnvilHandle;
  let hang: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    [anvil, hang] = await Promise.all([startAnvil({ chainId: CHAIN }), startFaultServer({ chainId: CHAIN })]);
    hang.setDefault({ kind: 'hang' });
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }],
          },
          {
            id: 'hang',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'hang', endpoint: hang.url, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
          },
        ],
      },
      { plugins: [...defaultPreset(), throwing] },
    );
  });
  after(async () => {
    await svc?.close();
    await Promise.all([anvil?.stop(), hang?.close()]);
  });

  it('§4.2 #1 — a body whose first byte is [ is a batch (even a batch of one), with no configuration', async () => {
    const res = await svc.post(PATH, `[${JSON.stringify(call(1))}]`);
    expect(res.status).to.equal(200);
    expect(res.json).to.deep.equal([{ jsonrpc: '2.0', id: 1, result: '0x7a69' }]);
    const single = await svc.post(PATH, call(1));
    expect(single.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
  });

  it('§4.2 #2 — sub-requests run in parallel, the answer keeps request order, one failure does not abort the others', async () => {
    const batch = [
      call('a', 'eth_blockNumber'),
      call('b', 'eth_getBlockByNumber', ['not-a-block', false]),
      call('c'),
      call('d', 'eth_nope'),
      call('e', 'net_version'),
    ];
    const res = await svc.post(PATH, batch);
    expect(res.json.map((e: { id: string }) => e.id)).to.deep.equal(['a', 'b', 'c', 'd', 'e']);
    expect(res.json[0].result).to.match(/^0x/);
    expect(res.json).to.have.length(5);
    expect(res.json[1].error.code, 'invalid params').to.equal(-32602);
    expect(res.json[2].result).to.equal('0x7a69');
    expect(res.json[3].error.code, 'method not found').to.equal(-32601);
    expect(res.json[4].result).to.equal(String(CHAIN));
    // Parallel: the upstream holds each call until all three are in flight at once; one at a
    // time, the first would never be answered (and the batch would fail by its deadline).
    const three = barrier(3);
    hang.script(...Array.from({ length: 3 }, () => ({ kind: 'barrier' as const, barrier: three })));
    const slow = await svc.post('/hang/evm/31337', [
      call(1, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', '0x1']),
      call(2, 'eth_getBalance', ['0x0000000000000000000000000000000000000002', '0x1']),
      call(3, 'eth_getBalance', ['0x0000000000000000000000000000000000000003', '0x1']),
    ]);
    expect(slow.json.map((e: { id: number }) => e.id)).to.deep.equal([1, 2, 3]);
    expect(slow.json.map((e: { result?: string }) => e.result)).to.deep.equal(['0x0', '0x0', '0x0']);
  });

  it('§4.2 #3 — a batch is HTTP 200 even when every element fails; each element holds result or error', async () => {
    const res = await svc.post(PATH, [call(1, 'eth_nope'), call(2, 'eth_getBlockByNumber', ['bad', false]), { jsonrpc: '2.0', id: 3 }]);
    expect(res.status).to.equal(200);
    expect(res.json).to.have.length(3);
    for (const e of res.json) {
      expect(e).to.have.property('error');
      expect(e).not.to.have.property('result');
    }
    // Method not found, invalid params, invalid request (no method).
    expect(res.json.map((e: { id: number; error: { code: number } }) => [e.id, e.error.code])).to.deep.equal([
      [1, -32601],
      [2, -32602],
      [3, -32600],
    ]);
  });

  it('§4.2 #4 — an empty array answers [] with HTTP 200', async () => {
    const res = await svc.post(PATH, '[]');
    expect(res.status).to.equal(200);
    expect(res.text).to.equal('[]');
  });

  it('§4.2 #5 — a body that starts with [ but does not parse is HTTP 400 ErrJsonRpcRequestUnmarshal', async () => {
    for (const body of ['[{"jsonrpc":"2.0"', '[1,', '[}']) {
      const res = await svc.post(PATH, body);
      expect(res.status, body).to.equal(400);
      expect(errorName(Array.isArray(res.json) ? res.json[0] : res.json), body).to.equal('ErrJsonRpcRequestUnmarshal');
    }
  });

  it('§4.2 #6 — an internal failure of one sub-request is an element with id null and code -32603; the others are served', async () => {
    const res = await svc.post(PATH, [call(1), call(2, 'test_boom'), call(3)]);
    expect(res.status).to.equal(200);
    expect(res.json[0]).to.deep.equal({ jsonrpc: '2.0', id: 1, result: '0x7a69' });
    expect(res.json[1].id).to.equal(null);
    expect(res.json[1].error.code).to.equal(-32603);
    expect(res.json[2]).to.deep.equal({ jsonrpc: '2.0', id: 3, result: '0x7a69' });
  });

  it('§4.2 #7 — a client gone mid-batch: the answers are dropped, the calls end as cancellations (no upstream fault) and svc keeps serving', async () => {
    const before = hang.calls.length;
    const ac = new AbortController();
    const batch = [
      call(1, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', '0x2']),
      call(2, 'eth_getBalance', ['0x0000000000000000000000000000000000000002', '0x2']),
    ];
    const pending = request(`${svc.url}/hang/evm/${CHAIN}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(batch),
      signal: ac.signal,
    }).catch(() => 'aborted');
    await waitFor(() => hang.calls.length >= before + 2);
    ac.abort();
    expect(await pending).to.equal('aborted');
    // The calls end as cancellations: nothing is charged to the upstream.
    await new Promise((r) => setTimeout(r, 100));
    expect(svc.proxy.projects.get('hang')!.health.snapshot('hang').errorRate).to.equal(0);
    // The process is unharmed: the next batch is served.
    const next = await svc.post(PATH, [call(1), call(2)]);
    expect(next.json.map((e: { result: string }) => e.result)).to.deep.equal(['0x7a69', '0x7a69']);
  });

  it('§4.2 #8 — the answer is streamed with one aggregated set of diagnostic headers', async () => {
    // Large enough to stream (no content-length; chunked).
    const big = Array.from({ length: 300 }, (_, i) => call(i, 'eth_getBlockByNumber', ['0x0', true]));
    const res = await svc.post(PATH, big);
    expect(res.status).to.equal(200);
    expect(res.json).to.have.length(300);
    expect(res.headers['transfer-encoding']).to.equal('chunked');
    expect(res.headers['content-length']).to.equal(undefined);
    // One set: every counter once, summed over the elements; no per-call upstream header.
    expect(res.headers['x-svc-upstream-attempts']).to.match(/^\d+$/);
    expect(Number(res.headers['x-svc-upstream-attempts'])).to.be.at.least(1);
    expect(res.headers['x-svc-upstream']).to.equal(undefined);
    expect(res.headers['x-svc-version']).to.be.a('string').and.not.include(',');
  });
});
