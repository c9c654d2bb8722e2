/**
 * Fresh means fresh (spec §2.8 #3): a realtime answer (`eth_blockNumber`, `latest` reads) is
 * never older than the head svc already knows, and once the next block is due svc asks an
 * upstream instead of serving the previous head until the cache TTL. Measured the way a wallet
 * feels it: viem's `waitForTransactionReceipt` through svc (default preset, zero-config cache)
 * and directly against anvil mining every second, started together for the same transaction.
 */
import { expect } from 'chai';
import { createPublicClient, createWalletClient, http, type Hex } from 'viem';
import { foundry } from 'viem/chains';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';

const DEV0 = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const DEV1 = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
/** viem's block-number polling interval, ms: a quarter of the block time. */
const POLL_MS = 250;
const ROUNDS = 8;

describe('e2e: fresh realtime answers, viem receipt wait through svc vs direct (anvil --block-time 1)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  before(async () => {
    anvil = await startAnvil({ chainId: 31337, blockTime: 1 });
    svc = await startSvc({
      logLevel: 'error',
      metrics: { enabled: false },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
          upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: 31337 } }],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it(`through svc within 10% of direct over ${ROUNDS} transactions`, async () => {
    const direct = createPublicClient({ chain: foundry, transport: http(anvil.url), pollingInterval: POLL_MS });
    const proxied = createPublicClient({ chain: foundry, transport: http(`${svc.url}/main/evm/31337`), pollingInterval: POLL_MS });
    const wallet = createWalletClient({ chain: foundry, transport: http(anvil.url), account: DEV0 });
    // svc learns the block time from the heads it sees (a few blocks); the race is run after that.
    const st = chainStateOf(svc.proxy.projects.get('main')!.networks.get('evm:31337')!);
    await waitFor(async () => {
      await proxied.getBlockNumber({ cacheTime: 0 });
      return st.blockTimeMs !== undefined;
    }, 20_000);
    let directMs = 0;
    let svcMs = 0;
    const per: string[] = [];
    for (let round = -1; round < ROUNDS; round++) {
      const hash: Hex = await wallet.sendTransaction({ to: DEV1, value: 1n });
      const t0 = performance.now();
      const timed = (client: typeof direct) =>
        client.waitForTransactionReceipt({ hash, pollingInterval: POLL_MS }).then((r) => ({ r, ms: performance.now() - t0 }));
      const [d, s] = await Promise.all([timed(direct), timed(proxied)]);
      expect(s.r.blockHash).to.equal(d.r.blockHash);
      if (round < 0) continue;
      directMs += d.ms;
      svcMs += s.ms;
      per.push(`${Math.round(d.ms)}/${Math.round(s.ms)}`);
    }
    expect(svcMs, `direct/svc ms per transaction: ${per.join(' ')}`).to.be.at.most(directMs * 1.1);
  });
});
