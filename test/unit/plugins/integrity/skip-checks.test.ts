/**
 * eRPC's `checks.<id>.enabled: false` in svc: read into `integrity.skipChecks` at load time (ids
 * sharing one svc check go together), and each skipped check lets through, on real anvil answers,
 * exactly the fault it would have caught, while the other checks still catch theirs.
 */
import { expect } from 'chai';
import { ConfigError, loadConfigObject } from '../../../../config/load.ts';
import type { SchemaFragment } from '../../../../config/schema.ts';
import { checkIntrinsic, compileIntegrity, ERPC_SKIPPABLE, loadLibs, SKIPPABLE_CHECKS, type IntegrityLibs } from '../../../../plugins/integrity/index.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { clone, fails, flip, mineChain, type ChainData } from './chain.ts';
import { EMPTY_TRIE_ROOT } from '../../../../plugins/integrity/checks/block.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, unknown>;
const load = (integrity: Doc) =>
  loadConfigObject(
    {
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: 1 }, integrity }],
          upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 } }],
        },
      ],
    },
    { fragments: FRAGMENTS, env: {} },
  );
const problems = (integrity: Doc): string[] => {
  try {
    load(integrity);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => `${p.path}: ${p.message}`);
    throw e;
  }
  return [];
};

describe("integrity: eRPC's per-check switches (checks.<id>.enabled: false)", function () {
  this.timeout(60_000);

  it('every turnable eRPC check names one of the checks svc can skip', () => {
    for (const [id, svc] of Object.entries(ERPC_SKIPPABLE)) expect(SKIPPABLE_CHECKS as readonly string[], id).to.include(svc);
  });

  it('are read into skipChecks with a rewrite line; ids sharing a svc check go together', () => {
    const { config, rewrites } = load({
      level: 'intrinsic',
      checks: { getLogsFilterSanity: { enabled: false }, blockByHashIdentity: { enabled: false }, blockByNumberIdentity: { enabled: false } },
    });
    const integrity = config.projects[0]!.networks[0]!.settings.integrity as Doc;
    expect(integrity.skipChecks).to.deep.equal(['block.request', 'logs.filter']);
    expect(rewrites.map((r) => r.path)).to.include('projects[0].networks[0].integrity.skipChecks');
    const p = problems({ level: 'intrinsic', checks: { blockHashRecompute: { enabled: false } } });
    expect(p.join('\n')).to.match(/blockHashRecompute\.enabled: svc's block\.hash check also does headerFieldShapes: turn it off too/);
    expect(problems({ level: 'intrinsic', checks: { blockHashRecompute: { enabled: false }, headerFieldShapes: { enabled: false } } })).to.deep.equal([]);
    expect(problems({ level: 'intrinsic', checks: { logMetadata: { enabled: false } } }).join('\n')).to.match(/cannot turn it off alone/);
    expect(problems({ skipChecks: ['block.shape'] }).join('\n')).to.include('projects[0].networks[0].integrity.skipChecks');
    expect(compileIntegrity({ skipChecks: ['tx.request'] }).skip.has('tx.request')).to.equal(true);
  });

  it("eRPC's documented HyperEVM network (transactionsRootRecompute and receiptsRootRecompute off) validates: the recompute alone is skipped", () => {
    const { config } = load({
      level: 'authoritative',
      checks: { transactionsRootRecompute: { enabled: false }, receiptsRootRecompute: { enabled: false } },
    });
    expect((config.projects[0]!.networks[0]!.settings.integrity as Doc).skipChecks).to.deep.equal(['block.transactionsRoot']);
    expect(
      (load({ level: 'intrinsic', checks: { transactionsRootConsistency: { enabled: false } } }).config.projects[0]!.networks[0]!.settings.integrity as Doc)
        .skipChecks,
    ).to.deep.equal(['block.transactionCount']);
  });

  describe('on real anvil answers', () => {
    let libs: IntegrityLibs;
    let c: ChainData;
    before(async () => {
      libs = await loadLibs();
      c = await mineChain();
    });
    after(async () => {
      await c?.anvil.stop();
    });
    const run = (method: string, params: unknown, result: unknown, ...skip: string[]) => checkIntrinsic(libs, method, params, result, new Set(skip));

    it('block.request: another block than asked passes; a changed header still fails block.hash', async () => {
      await run('eth_getBlockByNumber', ['0x2', true], c.block, 'block.request');
      await run('eth_getBlockByHash', [c.block2.hash, true], c.block, 'block.request');
      const b = clone(c.block);
      b.stateRoot = flip(b.stateRoot);
      await fails(run('eth_getBlockByNumber', ['0x1', true], b, 'block.request'), 'block.hash');
    });

    it('block.hash: a changed header passes; another block than asked still fails block.request', async () => {
      const b = clone(c.block);
      b.stateRoot = flip(b.stateRoot);
      await run('eth_getBlockByNumber', ['0x1', true], b, 'block.hash');
      await fails(run('eth_getBlockByNumber', ['0x2', true], c.block, 'block.hash'), 'block.request');
    });

    it('block.tx and block.transactionsRoot: reordered transactions pass only with both off', async () => {
      const b = clone(c.block);
      b.transactions.reverse();
      await fails(run('eth_getBlockByNumber', ['0x1', true], b, 'block.transactionsRoot'), 'block.tx');
      await fails(run('eth_getBlockByNumber', ['0x1', true], b, 'block.tx'), 'block.transactionsRoot');
      await run('eth_getBlockByNumber', ['0x1', true], b, 'block.tx', 'block.transactionsRoot');
    });

    it('block.transactionCount and block.transactionsRoot each let their own fault through: transactions under the empty root, and a root over transactions the list leaves out', async () => {
      // The header hash covers the root: block.hash is off so each root fault reaches its own check.
      const underEmpty = clone(c.block);
      underEmpty.transactionsRoot = EMPTY_TRIE_ROOT;
      await fails(run('eth_getBlockByNumber', ['0x1', true], underEmpty, 'block.hash', 'block.transactionsRoot'), 'block.transactionCount');
      await run('eth_getBlockByNumber', ['0x1', true], underEmpty, 'block.hash', 'block.transactionsRoot', 'block.transactionCount');
      // Phantom transactions (a chain's system transactions, sent by the zero address) are not counted.
      const phantom = clone(underEmpty);
      for (const tx of phantom.transactions as Doc[]) tx.from = '0x0000000000000000000000000000000000000000';
      await run('eth_getBlockByNumber', ['0x1', true], phantom, 'block.hash', 'block.transactionsRoot', 'block.tx');
      const hashesOnly = clone(underEmpty);
      hashesOnly.transactions = (hashesOnly.transactions as Doc[]).map((tx) => tx.hash);
      await run('eth_getBlockByNumber', ['0x1', false], hashesOnly, 'block.hash', 'block.transactionsRoot');
      // A chain's system transactions in the root but not in the list (HyperEVM): only the recompute judges it.
      const omitted = clone(c.block);
      omitted.transactions = [];
      await fails(run('eth_getBlockByNumber', ['0x1', true], omitted, 'block.hash'), 'block.transactionsRoot');
      await run('eth_getBlockByNumber', ['0x1', true], omitted, 'block.hash', 'block.transactionsRoot');
    });

    it('receipt.request, receipt.block, receipt.index: each lets its own fault through', async () => {
      const r0 = c.receipts[0] as Doc;
      await fails(run('eth_getTransactionReceipt', [c.receipts[1]?.transactionHash], r0), 'receipt.request');
      await run('eth_getTransactionReceipt', [c.receipts[1]?.transactionHash], r0, 'receipt.request');
      await fails(run('eth_getBlockReceipts', ['0x2'], c.blockReceipts), 'receipt.block');
      await run('eth_getBlockReceipts', ['0x2'], c.blockReceipts, 'receipt.block');
      const swapped = clone(c.blockReceipts);
      [swapped[0], swapped[1]] = [swapped[1], swapped[0]];
      await fails(run('eth_getBlockReceipts', ['0x1'], swapped, 'receipt.block'), 'receipt.index');
    });

    it('logs.filter: logs outside the asked range pass; tx.request: another transaction than asked passes', async () => {
      const narrow = { ...c.logsFilter, toBlock: '0x0' };
      await fails(run('eth_getLogs', [narrow], c.logs), 'logs.range');
      await run('eth_getLogs', [narrow], c.logs, 'logs.filter');
      const tx = c.block.transactions[0];
      const other = c.block.transactions[1].hash;
      await fails(run('eth_getTransactionByHash', [other], tx), 'tx.request');
      await run('eth_getTransactionByHash', [other], tx, 'tx.request');
    });
  });
});
