/**
 * eRPC's network `evm` keys svc honours (docs/migrating-from-erpc.md): `safeBlockSource` (which
 * calls name the `safe` tag), `emptyResultConfidence` (when an empty answer is truthful),
 * `idempotentTransactionBroadcast` (schema and reader) and `fallbackStatePollerDebounce` (accepted,
 * removed with a rewrite line; a bad value is a problem naming the key).
 */
import { expect } from 'chai';
import type { Network, SchemaFragment } from 'svc-proxy/plugin';
import { loadConfigObject } from '../../../config/load.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { namesSafeTag, safeBlockSourceOf } from '../../../plugins/evm-state/index.ts';
import { emptyResultConfidenceOf, isTruthfulEmptyFor } from '../../../plugins/evm-retries/index.ts';
import { idempotentBroadcastOf } from '../../../plugins/evm-methods/index.ts';
import { problemsOf } from '../../helpers/config-problems.ts';

const fragments = defaultPreset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));

function networkWith(evm: Record<string, unknown>): Network {
  return { config: { settings: { evm } } } as unknown as Network;
}

function load(evm: Record<string, unknown>, defaults: Record<string, unknown> = {}) {
  return loadConfigObject(
    {
      projects: [
        {
          id: 'main',
          networkDefaults: { evm: defaults },
          networks: [{ architecture: 'evm', evm: { chainId: 1, ...evm } }],
          upstreams: [{ id: 'a', endpoint: 'http://127.0.0.1:1', evm: { chainId: 1 } }],
        },
      ],
    },
    { fragments },
  );
}

describe("eRPC's network evm keys", () => {
  describe('safeBlockSource', () => {
    it('finds the safe tag at the block parameter, either end of a range, and where eRPC looks for eth_createAccessList / eth_newFilter', () => {
      expect(namesSafeTag('eth_getBlockByNumber', ['safe', false])).to.equal(true);
      expect(namesSafeTag('eth_getBalance', ['0x00000000000000000000000000000000000000aa', 'safe'])).to.equal(true);
      expect(namesSafeTag('eth_call', [{ to: '0x00000000000000000000000000000000000000aa' }, 'safe'])).to.equal(true);
      expect(namesSafeTag('eth_getLogs', [{ fromBlock: '0x1', toBlock: 'safe' }])).to.equal(true);
      expect(namesSafeTag('eth_createAccessList', [{}, 'safe'])).to.equal(true);
      expect(namesSafeTag('eth_newFilter', [{ fromBlock: 'safe' }])).to.equal(true);
    });

    it('leaves other tags, numbers, hashes and methods without a block alone', () => {
      expect(namesSafeTag('eth_getBlockByNumber', ['latest', false])).to.equal(false);
      expect(namesSafeTag('eth_getBlockByNumber', ['finalized', false])).to.equal(false);
      expect(namesSafeTag('eth_getBlockByNumber', ['0x10', false])).to.equal(false);
      expect(namesSafeTag('eth_getBalance', ['0x00000000000000000000000000000000000000aa'])).to.equal(false); // latest by default
      expect(namesSafeTag('eth_getLogs', [{ blockHash: `0x${'ab'.repeat(32)}` }])).to.equal(false);
      expect(namesSafeTag('eth_chainId', [])).to.equal(false);
      expect(namesSafeTag('eth_newFilter', [null])).to.equal(false);
      expect(namesSafeTag('eth_createAccessList', 'safe')).to.equal(false);
    });

    it('is read from the network settings, and validated as a non-empty selector of at most 256 characters', () => {
      expect(safeBlockSourceOf(networkWith({ safeBlockSource: 'tier:trusted' }))).to.equal('tier:trusted');
      expect(safeBlockSourceOf(networkWith({}))).to.equal(undefined);
      const { config } = load({}, { safeBlockSource: 'tier:trusted' });
      expect(config.projects[0]?.networks[0]?.settings.evm).to.deep.include({ safeBlockSource: 'tier:trusted' });
      const problems = problemsOf(() => load({ safeBlockSource: '' }));
      expect(problems.map((p) => p.path)).to.include('projects[0].networks[0].evm.safeBlockSource');
      expect(problemsOf(() => load({ safeBlockSource: 'x'.repeat(257) })).map((p) => p.path)).to.include('projects[0].networks[0].evm.safeBlockSource');
    });
  });

  describe('emptyResultConfidence', () => {
    const chain = { highestLatest: 1000, highestFinalized: 900 };
    const block = (n: number) => [`0x${n.toString(16)}`, false];

    it("blockHead (eRPC's default): an empty answer is truthful only beyond the latest head plus maxRetryableBlockDistance", () => {
      const n = networkWith({});
      expect(emptyResultConfidenceOf(n)).to.equal('blockHead');
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(950), chain, n)).to.equal(false);
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(1128), chain, n)).to.equal(false);
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(1129), chain, n)).to.equal(true);
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(1001), chain, networkWith({ maxRetryableBlockDistance: 0 }))).to.equal(true);
    });

    it('finalizedBlock: an empty answer above the finalized head is truthful (not retried); at or below it, retried', () => {
      const n = networkWith({ emptyResultConfidence: 'finalizedBlock' });
      expect(emptyResultConfidenceOf(n)).to.equal('finalizedBlock');
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(900), chain, n)).to.equal(false);
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(901), chain, n)).to.equal(true);
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(950), chain, n)).to.equal(true);
      // Tags and hashes never qualify; an unknown finalized head fails open (retried), as in eRPC.
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', ['latest', false], chain, n)).to.equal(false);
      expect(isTruthfulEmptyFor('eth_getTransactionByHash', [`0x${'ab'.repeat(32)}`], chain, n)).to.equal(false);
      expect(isTruthfulEmptyFor('eth_getBlockByNumber', block(950), { highestLatest: 1000, highestFinalized: 0 }, n)).to.equal(false);
    });

    it('accepts blockHead and finalizedBlock only, naming the key otherwise', () => {
      expect(load({ emptyResultConfidence: 'finalizedBlock' }).config.projects[0]?.networks[0]?.settings.evm).to.deep.include({
        emptyResultConfidence: 'finalizedBlock',
      });
      expect(problemsOf(() => load({ emptyResultConfidence: 'latest' })).map((p) => p.path)).to.include('projects[0].networks[0].evm.emptyResultConfidence');
    });
  });

  describe('idempotentTransactionBroadcast', () => {
    it('is on unless set to false; only a boolean is accepted', () => {
      expect(idempotentBroadcastOf(networkWith({}))).to.equal(true);
      expect(idempotentBroadcastOf(networkWith({ idempotentTransactionBroadcast: true }))).to.equal(true);
      expect(idempotentBroadcastOf(networkWith({ idempotentTransactionBroadcast: false }))).to.equal(false);
      expect(load({ idempotentTransactionBroadcast: false }).config.projects[0]?.networks[0]?.settings.evm).to.deep.include({
        idempotentTransactionBroadcast: false,
      });
      expect(problemsOf(() => load({ idempotentTransactionBroadcast: 'no' })).map((p) => p.path)).to.include(
        'projects[0].networks[0].evm.idempotentTransactionBroadcast',
      );
    });
  });

  describe('fallbackStatePollerDebounce', () => {
    it('is accepted on networks and networkDefaults and removed, with a rewrite line saying why it changes nothing', () => {
      const { config, rewrites } = load({ fallbackStatePollerDebounce: '200ms' }, { fallbackStatePollerDebounce: 5000 });
      expect(config.projects[0]?.networks[0]?.settings.evm).to.not.have.property('fallbackStatePollerDebounce');
      const lines = rewrites.filter((r) => r.path.endsWith('evm.fallbackStatePollerDebounce'));
      expect(lines.map((r) => r.path)).to.have.members([
        'projects[0].networkDefaults.evm.fallbackStatePollerDebounce',
        'projects[0].networks[0].evm.fallbackStatePollerDebounce',
      ]);
      for (const r of lines) expect(String(r.to)).to.match(/^\(removed: svc polls each upstream only on its statePollerInterval timer/);
    });

    it('a value that is not a duration above 0 is a problem naming the key', () => {
      for (const bad of ['soon', 0, '0s', true]) {
        const problems = problemsOf(() => load({ fallbackStatePollerDebounce: bad }));
        expect(
          problems.map((p) => p.path),
          String(bad),
        ).to.include('projects[0].networks[0].evm.fallbackStatePollerDebounce');
      }
    });
  });
});
