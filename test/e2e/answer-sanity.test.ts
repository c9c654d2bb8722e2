/**
 * End-to-end: answers that cannot be right are upstream faults (spec §7). A lagging fake
 * upstream (head 2, first in config order) answers `null` to `eth_getBalance` and `[]` to any
 * `eth_getLogs`; a real anvil node is the network's head. Neither answer is served while anvil
 * has the real one, and with only the liar left the client gets an error, never the null.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { builtinResult, startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { ADDR0, rpcBody } from './fixtures.ts';

const CHAIN = 31337;

/** A contract creation whose init code is `PUSH1 0 PUSH1 0 LOG0`: one log, no runtime code. */
const LOG_INIT_CODE = '0x60006000a000';

describe('e2e: answers that cannot be right move the call to another upstream', function () {
  this.timeout(60_000);

  let node: AnvilHandle;
  let liar: FaultServer;
  let svc: SvcHandle;
  let logBlockHash: string;
  const path = `/main/evm/${CHAIN}`;

  before(async () => {
    node = await startAnvil({ chainId: CHAIN });
    await node.rpc('anvil_mine', ['0x5']);
    const tx = (await node.rpc('eth_sendTransaction', [{ from: ADDR0, data: LOG_INIT_CODE }])) as string;
    // anvil can answer the hash before its receipt is readable on a busy machine: wait for it.
    let receipt: { blockHash: string; logs: unknown[] } | null = null;
    await waitFor(async () => (receipt = (await node.rpc('eth_getTransactionReceipt', [tx])) as typeof receipt) !== null, 10_000);
    if (!receipt) throw new Error('unreachable: waitFor saw a receipt');
    expect((receipt as { logs: unknown[] }).logs).to.have.length(1);
    logBlockHash = (receipt as { blockHash: string }).blockHash;
    await node.rpc('anvil_mine', ['0x2']);
    liar = await startFaultServer({
      chainId: CHAIN,
      handler: ({ method, params }) => {
        if (method === 'eth_blockNumber') return '0x2';
        if (method === 'eth_getBalance') return null;
        if (method === 'eth_getLogs') return [];
        if (method === 'eth_getBlockByNumber') {
          const p0 = Array.isArray(params) ? params[0] : undefined;
          return builtinResult(method, [typeof p0 === 'string' && p0.startsWith('0x') ? p0 : '0x2'], CHAIN);
        }
        return undefined;
      },
    });
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          // The policy re-evaluates every hour: the order stays config order during the suite.
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
          upstreams: [
            { id: 'liar', endpoint: liar.url, evm: { chainId: CHAIN } },
            { id: 'anvil', endpoint: node.url, evm: { chainId: CHAIN } },
          ],
        },
      ],
    });
    const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => net.upstreams.length === 2 && net.upstreams.every((u) => u.state === 'ready'));
    expect(net.upstreams.map((u) => u.id)).to.deep.equal(['liar', 'anvil']);
    // Both heads known: the liar's 2, anvil's 8.
    await waitFor(async () => Number((await svc.post(path, rpcBody('eth_blockNumber', []))).json?.result) >= 8);
  });

  after(async () => {
    await svc?.close();
    await liar?.close();
    await node?.stop();
  });

  it('a null eth_getBalance at a block both upstreams have is not served: anvil answers it', async () => {
    liar.calls.length = 0;
    const res = await svc.post(path, rpcBody('eth_getBalance', [ADDR0, '0x1']));
    expect(res.json.error, res.text).to.equal(undefined);
    expect(res.json.result)
      .to.be.a('string')
      .that.matches(/^0x[0-9a-f]+$/);
    expect(res.json.result).to.equal(await node.rpc('eth_getBalance', [ADDR0, '0x1']));
    expect(
      liar.calls.some((c) => c.method === 'eth_getBalance'),
      'the liar was asked first',
    ).to.equal(true);
  });

  it('an empty eth_getLogs by a blockHash beyond the lagging upstream head is not served', async () => {
    liar.calls.length = 0;
    const res = await svc.post(path, rpcBody('eth_getLogs', [{ blockHash: logBlockHash }]));
    expect(res.json.error, res.text).to.equal(undefined);
    expect(res.json.result).to.have.length(1);
    expect(
      liar.calls.some((c) => c.method === 'eth_getLogs'),
      'the liar was asked first',
    ).to.equal(true);
  });
});
