/**
 * Hostile class 3: reorgs (docs/caching.md: reorg-aware entries in every tier). Every node
 * replaces its top blocks with `anvil_reorg` (sent to the nodes directly, never through svc);
 * once svc's state poller (100 ms) has seen it, no tier serves anything from the abandoned chain:
 * a block by number, state at a number, a receipt by hash, logs in a range, the latest block.
 * The attacker's goal: keep clients on a chain that no longer exists (a double spend's victim
 * reading a receipt that was reorged away).
 */
import { expect } from 'chai';
import { LOGGER, MAIN, TIERS } from './config.ts';
import { hex, useDeployment, waitFor } from './harness.ts';
import { chaosClass, scale } from './summary.ts';
import { ADDR0, ADDR1 } from '../e2e/fixtures.ts';

describe('chaos [3] reorgs: no answer from an abandoned chain after one poll', function () {
  this.timeout(180_000);
  const cls = chaosClass(3, 'reorgs');
  const dep = useDeployment();

  /** The reads whose cached answers must not outlive the reorg. */
  const reads = (n: number, tx: string): Array<[string, string, unknown[]]> => [
    ['block by number', 'eth_getBlockByNumber', [hex(n), false]],
    ['state at a number', 'eth_getBalance', [LOGGER, hex(n + 1)]],
    ['receipt by hash', 'eth_getTransactionReceipt', [tx]],
    ['transaction by hash', 'eth_getTransactionByHash', [tx]],
    ['logs in a range', 'eth_getLogs', [{ fromBlock: hex(n), toBlock: hex(n + 1), address: LOGGER }]],
    ['latest block', 'eth_getBlockByNumber', ['latest', false]],
  ];

  it('after anvil_reorg on every node and one poll, no tier (memory, Redis, PostgreSQL) serves a block, state, receipt, transaction, logs or latest block of the abandoned chain', async () => {
    const rounds = scale(1);
    const stale: string[] = [];
    /** Tiers that held the latest block before a reorg in some round. */
    const latestCached = new Set<string>();
    for (let round = 0; round < rounds; round++) {
      await dep().settled();
      const { hash: tx, block: n } = await dep().mineTx({ from: ADDR0, to: LOGGER, value: '0x7' });
      await dep().everyNode('anvil_mine', ['0x2']);
      await dep().settled();

      // Every read cached in every tier (each tier read alone until it answers a hit). The latest
      // block is a realtime entry: once svc has estimated the block time from these bursts of
      // blocks (a few ms apart) it serves for a few ms at most, so it is cached only in the first
      // rounds; a round where it never hits cannot serve it stale either.
      const before = new Map<string, unknown>();
      for (const [what, method, params] of reads(n, tx)) {
        const realtime = what === 'latest block';
        for (const tier of TIERS) {
          let last = '';
          const hit = await waitFor(
            async () => {
              const r = await dep().post(MAIN, { jsonrpc: '2.0', id: 1, method, params }, dep().onlyTier(tier));
              before.set(what, r.json.result);
              last = `${r.headers['x-svc-cache']} ${r.text.slice(0, 200)}`;
              return r.headers['x-svc-cache'] === 'HIT';
            },
            realtime ? 1000 : 5000,
          ).then(
            () => true,
            (e: Error) => {
              if (realtime) return false;
              throw new Error(`round ${round}: ${what} never a hit in ${tier} (${e.message}); last answer: ${last}`);
            },
          );
          if (hit && realtime) latestCached.add(tier);
        }
      }
      expect((before.get('receipt by hash') as { blockNumber: string }).blockNumber).to.equal(hex(n));
      expect(before.get('logs in a range')).to.have.length(1);

      // The top four blocks (n-1 .. n+2) replaced at the same height on every node; the new
      // chain sends 9 wei from another account instead.
      const st = dep().chainState();
      const seen = st.lastReorg?.at ?? 0;
      await dep().everyNode('anvil_reorg', [4, [[{ from: ADDR1, to: LOGGER, value: '0x9' }, 0]]]);
      cls.attack(3);
      await waitFor(() => (st.lastReorg?.at ?? 0) > seen, 5000);

      for (const [what, method, params] of reads(n, tx)) {
        const direct = await dep().node('a').rpc(method, params);
        expect(direct, `the node's ${what} changed`).to.not.deep.equal(before.get(what));
        for (const tier of TIERS) {
          const got = await dep().post(MAIN, { jsonrpc: '2.0', id: 1, method, params }, dep().onlyTier(tier));
          cls.attack();
          if (JSON.stringify(got.json.result) !== JSON.stringify(direct))
            stale.push(`round ${round}, ${tier}: ${what} (X-SVC-Cache ${got.headers['x-svc-cache']})`);
        }
      }
    }
    expect(stale, 'answers from the abandoned chain').to.deep.equal([]);
    expect([...latestCached].sort(), 'the latest block was cached in every tier before some reorg').to.deep.equal([...TIERS].sort());
    cls.note(`${rounds} reorg(s) of depth 4`);
  });
});
