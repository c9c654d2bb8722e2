/**
 * Call deadlines (spec §4.2): `server.maxTimeout` is the deadline of one call counted
 * from when it starts. Calls that start together share one AbortController and one timer; the
 * calls of a batch larger than `batchConcurrency` wait for a slot and get their own full deadline
 * when they start.
 */
import { expect } from 'chai';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

describe('e2e: call deadlines in batches', function () {
  this.timeout(20_000);
  let up: FaultServer;
  let svc: SvcHandle;
  before(async () => {
    up = await startFaultServer();
    svc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      server: { maxTimeout: '400ms', batchConcurrency: 1 },
      projects: [
        {
          id: 'main',
          networkDefaults: { multiplexing: false, failsafe: [] },
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
          upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: CHAIN, statePollerInterval: 0 }, failsafe: [] }],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await up?.close();
  });

  it('a batch queued behind batchConcurrency: each call gets its own maxTimeout from when it starts', async () => {
    up.reset();
    // Three calls one after the other, 250 ms each: 750 ms in all, each well inside its own 400 ms.
    up.script({ kind: 'delay', ms: 250 }, { kind: 'delay', ms: 250 }, { kind: 'delay', ms: 250 });
    const batch = [1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', `0x${id}`] }));
    const r = await svc.post(PATH, batch);
    expect((r.json as Array<{ id: number; result?: unknown; error?: unknown }>).map((a) => [a.id, a.error === undefined])).to.deep.equal([
      [1, true],
      [2, true],
      [3, true],
    ]);
  });

  it('a call over its own deadline still fails with a timeout', async () => {
    up.reset();
    up.script({ kind: 'delay', ms: 800 });
    const r = await svc.post(PATH, { jsonrpc: '2.0', id: 9, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', '0x9'] });
    expect(r.json.error).to.not.equal(undefined);
    expect(r.json.error.data.code).to.match(/Timeout|Exceeded/);
  });
});
