/**
 * Hostile class 9: a lying upstream (docs/development.md "Hostile suite"). One upstream of
 * three tells lies a real node tells (a load balancer routing to a node on another network or
 * mid-resync, a buggy node reporting a block from the future, a malformed body): no lie of one
 * upstream decides what other clients are served, nor what is cached. Each case runs its own
 * deployment (test/chaos/lying.ts: one anvil behind three lying proxies); the fleet and
 * WebSocket cases are in 9-lying-upstream-fleet.test.ts.
 */
import { expect } from 'chai';
import { startAnvil } from '../helpers/anvil.ts';
import { NO_CACHE, waitFor, type SvcResponse } from '../helpers/svc.ts';
import { ADDR0, ADDR1, ADDR2 } from '../e2e/fixtures.ts';
import { MEMORY_CACHE, callUntil, hex, startLying } from './lying.ts';
import { chaosClass, scale } from './summary.ts';

/** A head no node of the test reaches: 2^31 - 1. */
const FAR = 0x7fffffff;
/** Runtime code that emits one empty LOG0: PUSH0 PUSH0 LOG0 STOP. */
const LOGGER = '0x00000000000000000000000000000000000010c0';

describe('chaos [9] lying upstream: one upstream never decides what every client is served', function () {
  this.timeout(120_000);
  const cls = chaosClass(9, 'lying upstream');

  it('duplicate result members (plain and \\u-escaped) under 2-of-3 consensus: the forged block is never served nor cached', async () => {
    const d = await startLying({
      blocks: 100,
      config: MEMORY_CACHE,
      network: { failsafe: [{ matchMethod: 'eth_getBlockByNumber', consensus: { maxParticipants: 3, agreementThreshold: 2 } }, { matchMethod: '*' }] },
    });
    try {
      const wrong: string[] = [];
      // Finalized blocks (anvil's finalized is 64 behind latest): cached for good once served.
      for (const [i, key] of ['"result"', '"res\\u0075lt"'].entries()) {
        for (let k = 0; k < scale(1); k++) {
          const n = hex(10 + i * 10 + k);
          const truth = (await d.node.rpc('eth_getBlockByNumber', [n, false])) as Record<string, unknown>;
          // Larger than the true block, so a "largest member of the winning group" picks it.
          const forged = JSON.stringify({ ...truth, hash: `0x${'66'.repeat(32)}`, extraData: `0x${'ee'.repeat(512)}` });
          d.proxies[0]!.lieRaw('eth_getBlockByNumber', (call, id) =>
            call.params[0] === n ? `{"jsonrpc":"2.0","id":${id},"result":${forged},${key}:${JSON.stringify(truth)}}` : undefined,
          );
          const first = await d.rpc('eth_getBlockByNumber', [n, false]);
          cls.attack();
          if (JSON.stringify(first.json?.result) !== JSON.stringify(truth))
            wrong.push(`${key} ${n} first answer: hash ${first.json?.result?.hash ?? first.text.slice(0, 80)}`);
          let hit: SvcResponse | undefined;
          await waitFor(async () => (hit = await d.rpc('eth_getBlockByNumber', [n, false])).headers['x-svc-cache'] === 'HIT', 5000);
          if (JSON.stringify(hit!.json.result) !== JSON.stringify(truth)) wrong.push(`${key} ${n} cached answer: hash ${hit!.json.result?.hash}`);
        }
      }
      expect(wrong, 'forged blocks served').to.deep.equal([]);
      expect(d.proxies[0]!.told('eth_getBlockByNumber'), 'the liar was asked and lied').to.be.at.least(2);
    } finally {
      await d.stop();
    }
  });

  it('an upstream answering eth_blockNumber 0x7fffffff a few times, then behaving: no client is served 0x7fffffff, during or after the lie', async () => {
    const d = await startLying({ blocks: 5, config: NO_CACHE });
    try {
      const liar = d.proxies[0]!;
      liar.lie('eth_blockNumber', () => hex(FAR), 3);
      const during = await callUntil(
        () => d.rpc('eth_blockNumber', []),
        () => liar.told('eth_blockNumber') === 3,
        scale(60),
      );
      const after = await callUntil(
        () => d.rpc('eth_blockNumber', []),
        () => false,
        scale(20),
      );
      cls.attack(during.length + after.length);
      expect(liar.told('eth_blockNumber'), 'the liar was asked').to.be.at.least(1);
      const head = Number(await d.node.rpc('eth_blockNumber'));
      const heads = [...during, ...after].map((r) => r.json?.result as string);
      expect(heads.filter((h) => h === hex(FAR)).length, `0x7fffffff served (${heads.length} answers)`).to.equal(0);
      expect(
        heads.every((h) => typeof h === 'string' && Number(h) <= head),
        `every answer at most the real head ${head}: ${[...new Set(heads)].join(' ')}`,
      ).to.equal(true);
    } finally {
      await d.stop();
    }
  });

  it('one far-future finalized block: after anvil_reorg the abandoned block hash is never served as a cache HIT', async () => {
    const d = await startLying({ blocks: 10, config: MEMORY_CACHE });
    try {
      const liar = d.proxies[0]!;
      const real = (await d.node.rpc('eth_getBlockByNumber', ['latest', false])) as Record<string, unknown>;
      liar.lie('eth_getBlockByNumber', (call) => (call.params[0] === 'finalized' ? { ...real, number: hex(FAR), hash: `0x${'77'.repeat(32)}` } : undefined), 1);
      await waitFor(() => liar.told() === 1, 5000);
      cls.attack();
      const n = hex(Number(real.number) - 1);
      // Read a few times, so a cache that takes the block for final holds it (an honest svc
      // may cache it as unfinalized, or not at all: no hit is required here).
      const old = ((await d.node.rpc('eth_getBlockByNumber', [n, false])) as { hash: string }).hash;
      for (let i = 0; i < 3; i++) expect((await d.rpc('eth_getBlockByNumber', [n, false])).json?.result?.hash).to.equal(old);

      const state = (await import('../../plugins/evm-state/chain.ts')).chainStateOf(d.svc.proxy.projects.get('main')!.networks.get('evm:31337')!);
      const seen = state.lastReorg?.at ?? 0;
      await d.node.rpc('anvil_reorg', [3, [[{ from: ADDR0, to: ADDR1, value: '0x9' }, 0]]]);
      const fresh = ((await d.node.rpc('eth_getBlockByNumber', [n, false])) as { hash: string }).hash;
      expect(fresh, 'anvil replaced the block').to.not.equal(old);
      // The reorg is seen by the state poller (100 ms) within a few polls; a poisoned
      // finality may hide it, so the wait is bounded and its outcome not asserted.
      await waitFor(() => (state.lastReorg?.at ?? 0) > seen, 3000).catch(() => undefined);
      const answers: string[] = [];
      for (let i = 0; i < scale(10); i++) {
        const r = await d.rpc('eth_getBlockByNumber', [n, false]);
        cls.attack();
        answers.push(`${r.headers['x-svc-cache']} ${r.json?.result?.hash === old ? 'old' : r.json?.result?.hash === fresh ? 'new' : r.text.slice(0, 80)}`);
      }
      const stale = answers.filter((a) => a.endsWith(' old'));
      expect(stale.length, `answers from the abandoned block among ${answers.length}: ${answers.slice(0, 10).join(', ')}`).to.equal(0);
    } finally {
      await d.stop();
    }
  });

  it('an upstream that passed the eth_chainId probe on 31337 and then forwards to a chain-1 node: within a few polls no answer comes from chain 1', async () => {
    const d = await startLying({ blocks: 5, config: NO_CACHE });
    const other = await startAnvil({ chainId: 1 });
    try {
      await other.rpc('anvil_mine', ['0x5']);
      await d.node.rpc('anvil_setBalance', [ADDR2, '0x1111']);
      await other.rpc('anvil_setBalance', [ADDR2, '0x2222']);
      const liar = d.proxies[0]!;
      const mark = liar.calls.length;
      liar.retarget(other.url);
      cls.attack();
      // A few state polls of the liar (every 100 ms) after the switch; bounded by time too, in
      // case a fixed svc stops polling an upstream it took out of rotation.
      await waitFor(() => liar.calls.slice(mark).filter((c) => c.method === 'eth_getBlockByNumber').length >= 10, 5000).catch(() => undefined);
      const answers = await callUntil(
        () => d.rpc('eth_getBalance', [ADDR2, 'latest']),
        () => false,
        scale(40),
      );
      const ids = await callUntil(
        () => d.rpc('eth_chainId', []),
        () => false,
        scale(10),
      );
      cls.attack(answers.length + ids.length);
      const balances = answers.map((r) => (r.json?.result as string | undefined) ?? `error ${r.json?.error?.code}`);
      expect(balances.filter((b) => b === '0x2222').length, `answers from chain 1 among ${balances.length}`).to.equal(0);
      expect(balances.filter((b) => b === '0x1111').length, 'the honest upstreams still serve').to.equal(balances.length);
      expect(ids.map((r) => r.json?.result)).to.deep.equal(ids.map(() => hex(31337)));
    } finally {
      await other.stop();
      await d.stop();
    }
  });

  it("a lagging node answering null eth_getBalance, eth_getTransactionCount, eth_getCode and empty eth_getLogs by blockHash: the other upstreams' answers are served", async () => {
    const d = await startLying({ blocks: 5, config: NO_CACHE });
    try {
      const liar = d.proxies[0]!;
      await d.node.rpc('anvil_setCode', [LOGGER, '0x5f5fa000']);
      const frozen = Number(await d.node.rpc('eth_blockNumber'));
      const frozenBlock = await d.node.rpc('eth_getBlockByNumber', [hex(frozen), false]);
      // The liar stays at `frozen`: its head says so, and it knows nothing above it.
      const above = (p: unknown) => (typeof p === 'string' && p.startsWith('0x') && Number(p) > frozen) || (typeof p === 'object' && p !== null);
      liar.lie('eth_getBlockByNumber', (c) => (c.params[0] === 'latest' ? frozenBlock : undefined));
      liar.lie('eth_blockNumber', () => hex(frozen));
      for (const m of ['eth_getBalance', 'eth_getTransactionCount', 'eth_getCode']) liar.lie(m, (c) => (above(c.params[1]) ? null : undefined));
      liar.lie('eth_getLogs', (c) => ((c.params[0] as { blockHash?: string }).blockHash ? [] : undefined));
      const tx = (await d.node.rpc('eth_sendTransaction', [{ from: ADDR0, to: LOGGER, value: '0x7' }])) as string;
      await waitFor(async () => (await d.node.rpc('eth_getTransactionReceipt', [tx])) !== null, 5000);
      const receipt = (await d.node.rpc('eth_getTransactionReceipt', [tx])) as { blockNumber: string; blockHash: string };
      await d.node.rpc('anvil_mine', ['0x2']);
      // svc has seen the honest upstreams' head (their polls, every 100 ms).
      await waitFor(async () => Number((await d.rpc('eth_blockNumber', [])).json?.result) >= Number(receipt.blockNumber) + 2, 5000);

      // State the network has at that block, read by number and by hash (EIP-1898).
      const reads: Array<[string, string, unknown]> = [];
      for (const [m, who] of [
        ['eth_getBalance', LOGGER],
        ['eth_getTransactionCount', ADDR0],
        ['eth_getCode', LOGGER],
      ] as const) {
        for (const at of [receipt.blockNumber, { blockHash: receipt.blockHash }]) reads.push([m, who, at]);
      }
      const truths = await Promise.all(reads.map(([m, who, at]) => d.node.rpc(m, [who, at])));
      const wrong: string[] = [];
      for (let i = 0; i < scale(5); i++) {
        for (const [k, [m, who, at]] of reads.entries()) {
          const got = await d.rpc(m, [who, at]);
          cls.attack();
          if (got.json?.result !== truths[k]) wrong.push(`${m} at ${typeof at === 'string' ? at : 'its hash'}: ${got.text.slice(0, 100)}`);
        }
        const logs = await d.rpc('eth_getLogs', [{ blockHash: receipt.blockHash }]);
        cls.attack();
        if (!Array.isArray(logs.json?.result) || logs.json.result.length !== 1) wrong.push(`logs by hash: ${logs.text.slice(0, 100)}`);
      }
      expect(liar.told(), 'the lagging node was asked').to.be.at.least(1);
      expect([...new Set(wrong)], `answers of the lagging node served (${wrong.length})`).to.deep.equal([]);
    } finally {
      await d.stop();
    }
  });
});
