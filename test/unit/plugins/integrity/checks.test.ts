/**
 * The intrinsic checks of the integrity plugin (spec §2.8 #10) on REAL anvil
 * answers: every check passes on what anvil returned, and fails, naming the check, on a copy
 * with one field changed. Headers are checked on every fork from Berlin (pre-London) to Prague.
 */
import { expect } from 'chai';
import { keccak256, type Hex } from 'viem';
import { checkIntrinsic, CheckFailure, loadLibs, type IntegrityLibs } from '../../../../plugins/integrity/index.ts';
import { headerHash } from '../../../../plugins/integrity/checks/block.ts';
import { parseBloom } from '../../../../plugins/integrity/bloom.ts';
import { clone, fails, flip, mineChain, TOPIC0, TOPIC0_B, TOPIC1, type ChainData } from './chain.ts';

describe('integrity: intrinsic checks on real anvil data', function () {
  this.timeout(60_000);
  let libs: IntegrityLibs;
  let c: ChainData;

  before(async () => {
    libs = await loadLibs();
    c = await mineChain();
  });
  after(async () => {
    await c?.anvil.stop();
  });

  const run = (method: string, params: unknown, result: unknown) => checkIntrinsic(libs, method, params, result);

  describe('blocks', () => {
    it('anvil mined every transaction type into block 1, with logs', () => {
      expect(c.block.transactions.map((t: { type: string }) => t.type)).to.deep.equal(['0x0', '0x1', '0x2', '0x2', '0x4']);
      expect(c.logs).to.have.length(2);
    });

    it('passes the full block, the hashes-only block, by number and by hash, and returns its anchor', async () => {
      const a = await run('eth_getBlockByNumber', ['0x1', true], c.block);
      expect(a.list()).to.deep.equal([{ number: 1n, hash: c.block.hash.toLowerCase(), logs: [], isBlock: true }]);
      await run('eth_getBlockByNumber', ['0x1', false], c.blockHashes);
      await run('eth_getBlockByHash', [c.block.hash, true], c.block);
      await run('eth_getBlockByNumber', ['0x2', true], c.block2);
      await run('eth_getBlockByNumber', ['latest', true], c.block2);
    });

    it('fails a block whose header field changed (block.hash)', async () => {
      for (const f of ['stateRoot', 'receiptsRoot', 'logsBloom', 'parentHash', 'requestsHash', 'parentBeaconBlockRoot']) {
        const b = clone(c.block);
        b[f] = flip(b[f]);
        await fails(run('eth_getBlockByNumber', ['0x1', true], b), 'block.hash');
      }
      const b = clone(c.block);
      b.timestamp = `0x${(BigInt(b.timestamp) + 1n).toString(16)}`;
      await fails(run('eth_getBlockByNumber', ['0x1', true], b), 'block.hash');
    });

    it('fails a block whose hash field was replaced (block.hash)', async () => {
      const b = clone(c.block);
      b.hash = flip(b.hash);
      await fails(run('eth_getBlockByNumber', ['0x1', false], b), 'block.hash');
    });

    it('fails another block than the one asked for (block.request)', async () => {
      await fails(run('eth_getBlockByNumber', ['0x2', true], c.block), 'block.request');
      await fails(run('eth_getBlockByHash', [c.block2.hash, true], c.block), 'block.request');
    });

    it('fails a transaction whose field changed (tx.hash)', async () => {
      for (let i = 0; i < c.block.transactions.length; i++) {
        const b = clone(c.block);
        b.transactions[i].value = `0x${(BigInt(b.transactions[i].value) + 1n).toString(16)}`;
        await fails(run('eth_getBlockByNumber', ['0x1', true], b), 'tx.hash');
      }
    });

    it('fails a block with a transaction dropped or reordered (block.transactionsRoot, block.tx)', async () => {
      const dropped = clone(c.block);
      dropped.transactions.pop();
      await fails(run('eth_getBlockByNumber', ['0x1', true], dropped), 'block.transactionsRoot');
      const swapped = clone(c.block);
      [swapped.transactions[0], swapped.transactions[1]] = [swapped.transactions[1], swapped.transactions[0]];
      await fails(run('eth_getBlockByNumber', ['0x1', true], swapped), 'block.tx');
      const moved = clone(c.block);
      moved.transactions[0].blockHash = c.block2.hash;
      await fails(run('eth_getBlockByNumber', ['0x1', true], moved), 'block.tx');
    });

    it('fails a block with its transactions emptied (block.transactionsRoot) or a withdrawal added (block.withdrawalsRoot)', async () => {
      const empty = clone(c.block);
      empty.transactions = [];
      await fails(run('eth_getBlockByNumber', ['0x1', true], empty), 'block.transactionsRoot');
      const w = clone(c.block);
      w.withdrawals = [{ index: '0x0', validatorIndex: '0x1', address: '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc', amount: '0x10' }];
      await fails(run('eth_getBlockByNumber', ['0x1', true], w), 'block.withdrawalsRoot');
    });

    it('a null or empty answer and an unchecked method pass with no anchors', async () => {
      expect((await run('eth_getBlockByNumber', ['0x99', true], null)).size).to.equal(0);
      expect((await run('eth_getLogs', [{}], [])).size).to.equal(0);
      expect((await run('eth_getBalance', [], '0x1')).size).to.equal(0);
    });
  });

  describe('transactions', () => {
    it('passes each transaction type by hash and by block and index', async () => {
      for (const t of c.block.transactions) {
        const a = await run('eth_getTransactionByHash', [t.hash], t);
        expect(a.list()[0]?.hash).to.equal(c.block.hash.toLowerCase());
        await run('eth_getTransactionByBlockNumberAndIndex', ['0x1', t.transactionIndex], t);
        await run('eth_getTransactionByBlockHashAndIndex', [c.block.hash, t.transactionIndex], t);
      }
    });

    it('fails a tampered transaction (tx.hash) and another one than asked (tx.request)', async () => {
      const t = clone(c.block.transactions[2]);
      t.to = '0x0000000000000000000000000000000000000001';
      await fails(run('eth_getTransactionByHash', [t.hash], t), 'tx.hash');
      const other = c.block.transactions[1];
      await fails(run('eth_getTransactionByHash', [c.block.transactions[0].hash], other), 'tx.request');
      await fails(run('eth_getTransactionByBlockNumberAndIndex', ['0x1', '0x0'], other), 'tx.request');
      await fails(run('eth_getTransactionByBlockNumberAndIndex', ['0x2', '0x1'], other), 'tx.request');
      await fails(run('eth_getTransactionByBlockHashAndIndex', [c.block2.hash, '0x1'], other), 'tx.request');
    });
  });

  describe('receipts', () => {
    it('passes every receipt and the block receipts, with the log in the anchor', async () => {
      for (const r of c.receipts) await run('eth_getTransactionReceipt', [r.transactionHash], r);
      const a = await run('eth_getBlockReceipts', ['0x1'], c.blockReceipts);
      expect(a.list()).to.have.length(1);
      expect(a.list()[0]?.logs).to.have.length(1);
      await run('eth_getBlockReceipts', [c.block.hash], c.blockReceipts);
      await run('eth_getBlockReceipts', [{ blockHash: c.block.hash }], c.blockReceipts);
      await run('eth_getBlockReceipts', ['latest'], c.blockReceipts);
    });

    it('fails a receipt moved to another block (receipt.log) and another receipt than asked (receipt.request)', async () => {
      const withLog = c.receipts.find((r) => r.logs.length > 0) as Record<string, any>;
      const moved = clone(withLog);
      moved.blockHash = c.block2.hash;
      moved.blockNumber = '0x2';
      await fails(run('eth_getTransactionReceipt', [moved.transactionHash], moved), 'receipt.log');
      await fails(run('eth_getTransactionReceipt', [c.receipts[0]?.transactionHash], withLog), 'receipt.request');
    });

    it('fails a log missing from its receipt bloom (receipt.bloom)', async () => {
      const withLog = c.receipts.find((r) => r.logs.length > 0) as Record<string, any>;
      const zeroed = clone(withLog);
      zeroed.logsBloom = `0x${'00'.repeat(256)}`;
      await fails(run('eth_getTransactionReceipt', [zeroed.transactionHash], zeroed), 'receipt.bloom');
      const topic = clone(withLog);
      topic.logs[0].topics[1] = `0x${'99'.repeat(32)}`;
      await fails(run('eth_getTransactionReceipt', [topic.transactionHash], topic), 'receipt.bloom');
    });

    it('fails block receipts of another block (receipt.block), out of order (receipt.index), mixed (receipt.block)', async () => {
      await fails(run('eth_getBlockReceipts', ['0x2'], c.blockReceipts), 'receipt.block');
      await fails(run('eth_getBlockReceipts', [c.block2.hash], c.blockReceipts), 'receipt.block');
      const swapped = clone(c.blockReceipts);
      [swapped[0], swapped[1]] = [swapped[1], swapped[0]];
      await fails(run('eth_getBlockReceipts', ['0x1'], swapped), 'receipt.index');
      const mixed = clone(c.blockReceipts);
      mixed[1].blockHash = c.block2.hash;
      await fails(run('eth_getBlockReceipts', ['0x1'], mixed), 'receipt.block');
    });
  });

  describe('logs', () => {
    it('passes the logs of blocks 1..2 with and without an address/topic filter', async () => {
      const a = await run('eth_getLogs', [c.logsFilter], c.logs);
      expect(a.list().map((x) => x.number)).to.deep.equal([1n, 2n]);
      await run('eth_getLogs', [{ ...c.logsFilter, topics: [[TOPIC0, TOPIC0_B], TOPIC1] }], c.logs);
      await run('eth_getLogs', [{ ...c.logsFilter, topics: [null, TOPIC1], address: c.logs.map((l) => l.address.toUpperCase().replace('0X', '0x')) }], c.logs);
      await run('eth_getLogs', [{ blockHash: c.block.hash }], c.logs.slice(0, 1));
      await run('eth_getLogs', [{ fromBlock: 'earliest', toBlock: 'latest' }], c.logs);
    });

    it('fails a log outside the range or block (logs.range)', async () => {
      await fails(run('eth_getLogs', [{ fromBlock: '0x2', toBlock: '0x2' }], c.logs), 'logs.range');
      await fails(run('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x1' }], c.logs), 'logs.range');
      await fails(run('eth_getLogs', [{ blockHash: c.block2.hash }], c.logs), 'logs.range');
    });

    it('fails a log not matching the address or topics (logs.address, logs.topics)', async () => {
      await fails(run('eth_getLogs', [{ ...c.logsFilter, address: '0x0000000000000000000000000000000000000001' }], c.logs), 'logs.address');
      await fails(run('eth_getLogs', [{ ...c.logsFilter, topics: [TOPIC0] }], c.logs), 'logs.topics');
      await fails(run('eth_getLogs', [{ ...c.logsFilter, topics: [null, TOPIC0] }], c.logs), 'logs.topics');
    });

    it('fails duplicates (logs.duplicate) and two hashes for one block (logs.block)', async () => {
      await fails(run('eth_getLogs', [c.logsFilter], [...c.logs, c.logs[0]]), 'logs.duplicate');
      const forked = clone(c.logs);
      forked[1].blockNumber = '0x1';
      await fails(run('eth_getLogs', [c.logsFilter], forked), 'logs.block');
    });
  });

  describe('bloom', () => {
    it('finds every log address and topic in the block bloom and misses others', () => {
      const bloom = parseBloom(libs.viem, c.block.logsBloom, 'test');
      const log = c.logs[0] as { address: Hex; topics: Hex[] };
      expect(bloom.has(log.address)).to.equal(true);
      for (const t of log.topics) expect(bloom.has(t)).to.equal(true);
      // Items absent from a 2-item bloom: a handful of random topics, nearly all must miss.
      const misses = Array.from({ length: 16 }, (_, i) => keccak256(`0x${i.toString(16).padStart(2, '0')}`)).filter((t) => !bloom.has(t));
      expect(misses.length).to.be.greaterThan(12);
      expect(parseBloom(libs.viem, `0x${'00'.repeat(256)}`, 'test').has(log.address)).to.equal(false);
    });

    it('rejects a bloom that is not 256 bytes', async () => {
      expect(() => parseBloom(libs.viem, '0x00', 'x')).to.throw(CheckFailure);
    });
  });
});

describe('integrity: block hashes across forks', function () {
  this.timeout(60_000);
  for (const fork of ['berlin', 'london', 'shanghai', 'cancun', 'prague']) {
    it(`recomputes ${fork} block hashes and transactions roots`, async () => {
      const libs = await loadLibs();
      const c = await mineChain(fork);
      try {
        expect(headerHash(libs.viem, c.block)).to.equal(c.block.hash);
        expect(headerHash(libs.viem, c.block2)).to.equal(c.block2.hash);
        await checkIntrinsic(libs, 'eth_getBlockByNumber', ['0x1', true], c.block);
        await checkIntrinsic(libs, 'eth_getBlockByNumber', ['0x2', true], c.block2);
        await checkIntrinsic(libs, 'eth_getBlockReceipts', ['0x1'], c.blockReceipts);
        await checkIntrinsic(libs, 'eth_getLogs', [c.logsFilter], c.logs);
        const genesis = await c.anvil.rpc('eth_getBlockByNumber', ['0x0', true]);
        await checkIntrinsic(libs, 'eth_getBlockByNumber', ['0x0', true], genesis);
        const bad = clone(c.block);
        bad.gasUsed = `0x${(BigInt(bad.gasUsed) + 1n).toString(16)}`;
        await fails(checkIntrinsic(libs, 'eth_getBlockByNumber', ['0x1', true], bad), 'block.hash');
      } finally {
        await c.anvil.stop();
      }
    });
  }
});
