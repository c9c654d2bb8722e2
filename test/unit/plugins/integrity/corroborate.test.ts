/**
 * The corroborated and authoritative levels (spec §2.8 #10) over real anvil
 * nodes: an honest peer (the same node), a peer on another fork (a second anvil whose block 1
 * holds other transactions), a peer that errs, one that lacks the block, one that lies about a
 * block's hash; and the level resolution from directive, headerMode and profiles.
 */
import { expect } from 'chai';
import { ConfigError } from '../../../../core/plugin-errors.ts';
import {
  Anchors,
  authoritative,
  checkIntrinsic,
  CheckFailure,
  compileIntegrity,
  corroborate,
  loadLibs,
  MAX_ANCHORS,
  resolveLevel,
  type IntegrityLibs,
  type Peer,
} from '../../../../plugins/integrity/index.ts';
import { startAnvil, type AnvilHandle } from '../../../helpers/anvil.ts';
import { clone, fails, flip, mineChain, type ChainData } from './chain.ts';

const peerOf = (id: string, a: AnvilHandle): Peer => ({ id, getBlock: (n) => a.rpc('eth_getBlockByNumber', [n, false]) });

describe('integrity: corroborated and authoritative on real anvil nodes', function () {
  this.timeout(60_000);
  let libs: IntegrityLibs;
  let c: ChainData;
  let fork: AnvilHandle;
  let honest: Peer;
  let forked: Peer;
  const failing: Peer = { id: 'down', getBlock: () => Promise.reject(new Error('connection refused')) };
  const lacking: Peer = { id: 'behind', getBlock: () => Promise.resolve(null) };

  before(async () => {
    libs = await loadLibs();
    [c, fork] = await Promise.all([mineChain(), startAnvil()]);
    // The fork node mines two empty blocks: same numbers, other hashes.
    await fork.rpc('anvil_mine', ['0x2']);
    honest = peerOf('honest', c.anvil);
    forked = peerOf('fork', fork);
  });
  after(async () => {
    await Promise.all([c?.anvil.stop(), fork?.stop()]);
  });

  const anchorsOf = (method: string, params: unknown, result: unknown) => checkIntrinsic(libs, method, params, result);

  describe('corroborated', () => {
    it('confirms a block, receipts and logs with an honest peer', async () => {
      await corroborate(libs.viem, await anchorsOf('eth_getBlockByNumber', ['0x1', true], c.block), [honest]);
      await corroborate(libs.viem, await anchorsOf('eth_getBlockReceipts', ['0x1'], c.blockReceipts), [honest]);
      await corroborate(libs.viem, await anchorsOf('eth_getLogs', [c.logsFilter], c.logs), [honest]);
      await corroborate(libs.viem, await anchorsOf('eth_getTransactionByHash', [c.block.transactions[0].hash], c.block.transactions[0]), [honest]);
    });

    it('fails when the only peers with the block are on another fork (corroborated.fork)', async () => {
      const e = await fails(corroborate(libs.viem, await anchorsOf('eth_getLogs', [c.logsFilter], c.logs), [forked, lacking]), 'corroborated.fork');
      expect(e.message).to.include('fork has 0x');
    });

    it('asks the next peer when one is on another fork, and passes on its confirmation', async () => {
      await corroborate(libs.viem, await anchorsOf('eth_getLogs', [c.logsFilter], c.logs), [forked, honest]);
    });

    it('skips a peer that errs or lacks the block, then confirms', async () => {
      await corroborate(libs.viem, await anchorsOf('eth_getBlockByNumber', ['0x2', true], c.block2), [failing, lacking, honest]);
    });

    it('fails when no peer has the block (corroborated.unconfirmed) or no peer exists (corroborated.noPeer)', async () => {
      const a = await anchorsOf('eth_getBlockByNumber', ['0x2', true], c.block2);
      await fails(corroborate(libs.viem, a, [failing, lacking]), 'corroborated.unconfirmed');
      await fails(corroborate(libs.viem, a, []), 'corroborated.noPeer');
    });

    it('does not take the word of a peer whose block does not match its own header', async () => {
      const liar: Peer = {
        id: 'liar',
        getBlock: async (n) => {
          const b = await c.anvil.rpc('eth_getBlockByNumber', [n, false]);
          return { ...b, stateRoot: flip(b.stateRoot) };
        },
      };
      await fails(corroborate(libs.viem, await anchorsOf('eth_getBlockByNumber', ['0x1', false], c.blockHashes), [liar]), 'corroborated.unconfirmed');
    });

    it('catches a log that passes intrinsic checks but is not in the confirmed block bloom (corroborated.bloom)', async () => {
      const logs = clone(c.logs);
      logs[0].topics[1] = `0x${'99'.repeat(32)}`;
      const a = await anchorsOf('eth_getLogs', [c.logsFilter], logs);
      await fails(corroborate(libs.viem, a, [honest]), 'corroborated.bloom');
    });

    it(`fails an answer resting on more than ${MAX_ANCHORS} blocks (corroborated.tooManyBlocks)`, async () => {
      const a = new Anchors();
      for (let i = 0; i <= MAX_ANCHORS; i++) a.add(BigInt(i), `0x${i.toString(16).padStart(64, '0')}`, 't');
      let asked = 0;
      await fails(corroborate(libs.viem, a, [{ id: 'x', getBlock: async () => (asked++, null) }]), 'corroborated.tooManyBlocks');
      expect(asked).to.equal(0);
    });

    it('asks at most 4 blocks at once', async () => {
      const a = new Anchors();
      for (let i = 0; i < 12; i++) a.add(BigInt(i), `0x${i.toString(16).padStart(64, '0')}`, 't');
      let inFlight = 0;
      let most = 0;
      const slow: Peer = {
        id: 'slow',
        getBlock: async () => {
          most = Math.max(most, ++inFlight);
          await new Promise((r) => setTimeout(r, 5));
          inFlight--;
          return null;
        },
      };
      await fails(corroborate(libs.viem, a, [slow]), 'corroborated.unconfirmed');
      expect(most).to.be.within(1, 4);
    });
  });

  describe('authoritative', () => {
    const settings = { maxParticipants: 5, agreementThreshold: 2 };

    it('passes with enough agreeing votes, the answer included', async () => {
      const a = await anchorsOf('eth_getLogs', [c.logsFilter], c.logs);
      await authoritative(libs.viem, a, [honest, failing], settings);
      // A tie with another hash is not "more": the answer still wins.
      await authoritative(libs.viem, a, [forked, honest], settings);
    });

    it('fails below the threshold or when another hash has more votes (authoritative.consensus)', async () => {
      const a = await anchorsOf('eth_getBlockByNumber', ['0x1', true], c.block);
      await fails(authoritative(libs.viem, a, [lacking, failing], settings), 'authoritative.consensus');
      const e = await fails(
        authoritative(libs.viem, a, [forked, { ...forked, id: 'fork-2' }, lacking], { maxParticipants: 4, agreementThreshold: 1 }),
        'authoritative.consensus',
      );
      expect(e.message).to.include('another hash has more');
    });

    it('asks only maxParticipants - 1 peers; a threshold of 1 needs none', async () => {
      const a = await anchorsOf('eth_getBlockByNumber', ['0x1', true], c.block);
      await fails(authoritative(libs.viem, a, [lacking, honest], { maxParticipants: 2, agreementThreshold: 2 }), 'authoritative.consensus');
      await authoritative(libs.viem, a, [], { maxParticipants: 5, agreementThreshold: 1 });
    });

    it('checks logs against the bloom of an agreeing block (authoritative.bloom)', async () => {
      const logs = clone(c.logs);
      logs[1].topics[1] = `0x${'99'.repeat(32)}`;
      await fails(authoritative(libs.viem, await anchorsOf('eth_getLogs', [c.logsFilter], logs), [honest], settings), 'authoritative.bloom');
    });
  });
});

describe('integrity: level resolution', () => {
  const net = compileIntegrity({
    profiles: { indexer: { eth_getLogs: 'corroborated', 'eth_getTransaction*': 'intrinsic', '*': 'off' }, strict: { 'eth_*': 'authoritative' } },
  });
  const deny = compileIntegrity({ headerMode: 'deny', profiles: net.profiles.size ? { indexer: { eth_getLogs: 'corroborated' } } : {} });

  it('takes a level name (trimmed, any case) or a profile', () => {
    expect(resolveLevel('intrinsic', undefined, net, 'eth_getLogs')).to.deep.equal({ level: 'intrinsic', shown: true });
    expect(resolveLevel(' Corroborated ', undefined, net, 'eth_call').level).to.equal('corroborated');
    expect(resolveLevel('indexer', undefined, net, 'eth_getLogs').level).to.equal('corroborated');
    expect(resolveLevel('indexer', undefined, net, 'eth_getTransactionReceipt').level).to.equal('intrinsic');
    expect(resolveLevel('indexer', undefined, net, 'eth_blockNumber').level).to.equal('off');
    expect(resolveLevel('strict', undefined, net, 'eth_getBlockByNumber').level).to.equal('authoritative');
    expect(resolveLevel('strict', undefined, net, 'debug_traceBlock').level).to.equal('off');
  });

  it('ignores an unknown value: the configured default, else off', () => {
    expect(resolveLevel('paranoid', 'intrinsic', net, 'eth_getLogs').level).to.equal('intrinsic');
    expect(resolveLevel('paranoid', undefined, net, 'eth_getLogs')).to.deep.equal({ level: 'off', shown: true });
  });

  it('with headerMode deny applies only the configured value', () => {
    expect(resolveLevel('authoritative', undefined, deny, 'eth_getLogs')).to.deep.equal({ level: 'off', shown: true });
    expect(resolveLevel('authoritative', 'indexer', deny, 'eth_getLogs').level).to.equal('corroborated');
    expect(resolveLevel('off', 'intrinsic', deny, 'eth_getLogs').level).to.equal('intrinsic');
  });

  it('reports nothing when neither the request nor config names a level', () => {
    expect(resolveLevel(undefined, undefined, net, 'eth_getLogs')).to.deep.equal({ level: 'off', shown: false });
    expect(resolveLevel('', undefined, net, 'eth_getLogs').shown).to.equal(false);
  });

  it('refuses a profile named like a level', () => {
    expect(() => compileIntegrity({ profiles: { Intrinsic: { '*': 'off' } } })).to.throw(ConfigError, /named like a level/);
  });
});
