/**
 * End-to-end `retry.emptyResultDelay` (eRPC's data-unavailable retry delay), seen from a client,
 * against a real anvil node that does not mine until told (automine off), through the default
 * preset: a transaction is sent and is pending, a client asks for its receipt with
 * `X-SVC-Retry-Empty: true` and the block is mined 200 ms later.
 * - With `retry: {maxAttempts: 2, emptyResultDelay: 500ms}` the empty first round is followed by
 *   a wait of 500 ms (the chain's block time is not known yet), and the second round finds the
 *   mined receipt: the client gets it after ~500 ms, `X-SVC-Network-Retries: 1`, and
 *   `svc_network_data_unavailable_wait_seconds` holds the wait.
 * - Without it, the second round follows at once (backoff `delay` 0) and the client gets the
 *   empty answer before the block is mined.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const FROM = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const TO = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

describe('e2e: retry.emptyResultDelay (data not there yet)', function () {
  this.timeout(30_000);
  let node: AnvilHandle;
  let paced: SvcHandle;
  let eager: SvcHandle;

  const start = (retry: Record<string, unknown>) =>
    startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [{ matchMethod: '*', retry }] }],
          upstreams: [{ id: 'node', endpoint: node.url, evm: { chainId: CHAIN } }],
        },
      ],
    });

  before(async () => {
    node = await startAnvil({ chainId: CHAIN });
    await node.rpc('evm_setAutomine', [false]);
    paced = await start({ maxAttempts: 2, emptyResultDelay: '500ms' });
    eager = await start({ maxAttempts: 2 });
  });
  after(async () => {
    await paced?.close();
    await eager?.close();
    await node?.stop();
  });

  /** Sends a transfer that stays pending until the next `evm_mine`. */
  const pendingTx = async (): Promise<string> => (await node.rpc('eth_sendTransaction', [{ from: FROM, to: TO, value: '0x1' }])) as string;

  it('waits emptyResultDelay before the next round, and the client gets the receipt mined meanwhile', async () => {
    const hash = await pendingTx();
    const mined = new Promise<void>((resolve, reject) => setTimeout(() => node.rpc('evm_mine', []).then(() => resolve(), reject), 200));
    const t0 = performance.now();
    const res = await paced.post(PATH, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-empty': 'true' });
    const ms = performance.now() - t0;
    await mined;
    expect(res.json.result?.transactionHash).to.equal(hash);
    expect(res.json.result.status).to.equal('0x1');
    expect(ms).to.be.within(495, 1500);
    expect(res.headers['x-svc-network-retries']).to.equal('1');
    const text = await (await fetch(paced.metricsUrl as string)).text();
    const sum = text
      .split('\n')
      .find((l) => l.startsWith('svc_network_data_unavailable_wait_seconds_sum{') && l.includes('category="eth_getTransactionReceipt"'));
    expect(Number(sum?.slice(sum.lastIndexOf(' ') + 1))).to.equal(0.5);
  });

  it('without emptyResultDelay the next round follows at once: the client gets the empty answer before the block is mined', async () => {
    const hash = await pendingTx();
    const t0 = performance.now();
    const res = await eager.post(PATH, rpcBody('eth_getTransactionReceipt', [hash]), { 'x-svc-retry-empty': 'true' });
    const ms = performance.now() - t0;
    expect(res.json.result).to.equal(null);
    expect(res.headers['x-svc-network-retries']).to.equal('1');
    expect(ms).to.be.below(400);
    await node.rpc('evm_mine', []);
  });
});
