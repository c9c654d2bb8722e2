/**
 * Head plausibility (docs/evm.md): the one rule (`judgeHeadFacts`), the chain state's `judgeHead`
 * that gathers its facts, and the shared-state entry point (`observeShared`), which must not let
 * one source move the network's latest or finalized head.
 */
import { expect } from 'chai';
import { CHAIN_STATE_SERVICE } from 'svc-proxy/plugins/evm-state';
import type { Network } from '../../../core/registry/project.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import { NetworkChainState, chainStateOf } from '../../../plugins/evm-state/chain.ts';
import {
  HEAD_MARGIN_BLOCKS,
  headAllowance,
  judgeHeadFacts,
  SOLE_REPORTER_GRACE_MS,
  UNKNOWN_BLOCK_TIME_ALLOWANCE,
  type HeadFacts,
} from '../../../plugins/evm-state/plausibility.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../../helpers/svc.ts';

const base: HeadFacts = {
  n: 0,
  kind: 'latest',
  acceptedLatest: 100,
  acceptedAt: 1_000_000,
  now: 1_000_000,
  blockTimeMs: 12_000,
  witnessLatest: -1,
  soleSource: false,
  reporterLatest: 100,
};
const judge = (f: Partial<HeadFacts>) => judgeHeadFacts({ ...base, ...f });

describe('head plausibility (docs/evm.md)', () => {
  describe('the rule', () => {
    it('bootstrap: nothing accepted yet is plausible; a sole source or a witness confirms', () => {
      expect(judge({ n: 0x7fffffff, acceptedLatest: 0 })).to.equal('plausible');
      expect(judge({ n: 50, acceptedLatest: 0, soleSource: true })).to.equal('confirmed');
      expect(judge({ n: 50, acceptedLatest: 0, witnessLatest: 50 })).to.equal('confirmed');
    });

    it('a latest head far beyond the block time and margin is implausible; at or below the accepted head it is confirmed', () => {
      expect(judge({ n: 0x7fffffff })).to.equal('implausible');
      expect(judge({ n: 100 })).to.equal('confirmed');
      expect(judge({ n: 90 })).to.equal('confirmed');
      expect(judge({ n: 100 + HEAD_MARGIN_BLOCKS })).to.equal('plausible');
      expect(judge({ n: 101 + HEAD_MARGIN_BLOCKS })).to.equal('implausible');
    });

    it('the allowance grows with the time since the accepted head (twice the block-time rate), or is the default while the block time is unknown', () => {
      // 10 blocks' time at 12 s: 20 more blocks allowed.
      expect(judge({ n: 100 + HEAD_MARGIN_BLOCKS + 20, now: base.now + 120_000 })).to.equal('plausible');
      expect(judge({ n: 100 + HEAD_MARGIN_BLOCKS + 21, now: base.now + 120_000 })).to.equal('implausible');
      expect(judge({ n: 100 + UNKNOWN_BLOCK_TIME_ALLOWANCE, blockTimeMs: undefined })).to.equal('plausible');
      expect(judge({ n: 101 + UNKNOWN_BLOCK_TIME_ALLOWANCE, blockTimeMs: undefined })).to.equal('implausible');
      expect(headAllowance(-5, 1000)).to.equal(HEAD_MARGIN_BLOCKS);
    });

    it('another source reporting at least as high, or being the only source, confirms a far head', () => {
      expect(judge({ n: 5000, witnessLatest: 5000 })).to.equal('confirmed');
      expect(judge({ n: 5001, witnessLatest: 5000 })).to.equal('implausible');
      expect(judge({ n: 5000, soleSource: true })).to.equal('confirmed');
    });

    it("a finalized block above the accepted latest head, or above the reporter's own, is implausible, even from a sole source", () => {
      expect(judge({ kind: 'finalized', n: 0x7fffffff, soleSource: true })).to.equal('implausible');
      expect(judge({ kind: 'finalized', n: 101 })).to.equal('implausible');
      expect(judge({ kind: 'finalized', n: 95, reporterLatest: 90 })).to.equal('implausible');
      expect(judge({ kind: 'finalized', n: 90 })).to.equal('confirmed');
      expect(judge({ kind: 'finalized', n: 90, acceptedLatest: 0, reporterLatest: 0 })).to.equal('plausible');
    });

    it("another replica's word at start-up is not believed until an upstream here has reported (genesis counts), then judged against that report", () => {
      const hearsay = { hearsay: true, acceptedLatest: 0 };
      expect(judge({ ...hearsay, n: 900_000_000 })).to.equal('implausible');
      expect(judge({ ...hearsay, n: 20 })).to.equal('implausible');
      expect(judge({ ...hearsay, n: 20, witnessLatest: 0 })).to.equal('plausible');
      expect(judge({ ...hearsay, n: 900_000_000, witnessLatest: 0 })).to.equal('implausible');
      expect(judge({ ...hearsay, kind: 'finalized', n: 5 })).to.equal('implausible');
      expect(judge({ ...hearsay, kind: 'finalized', n: 5, witnessLatest: 10 })).to.equal('plausible');
      expect(judge({ ...hearsay, kind: 'finalized', n: 11, witnessLatest: 10 })).to.equal('implausible');
      // Never a sole source: one replica's word cannot vouch for itself.
      expect(judge({ hearsay: true, n: 5000, soleSource: true })).to.equal('implausible');
    });

    it('a number that is not a safe non-negative integer is implausible', () => {
      for (const n of [Number.NaN, -1, 2 ** 60, 1.5]) expect(judge({ n }), String(n)).to.equal('implausible');
    });
  });

  describe('NetworkChainState.judgeHead', () => {
    const a = { id: 'a' } as Upstream;
    const b = { id: 'b' } as Upstream;
    const c = { id: 'c' } as Upstream;
    const make = (ups: Upstream[]) => new NetworkChainState({ upstreams: ups } as unknown as Network, () => 1_000_000);

    it("its own report is no witness; another upstream's last report is, whatever its verdict", () => {
      const st = make([a, b, c]);
      st.observeLatest(a, 10);
      st.of(a).reported = 10;
      // Nothing vouched yet (start-up): judged against the other reports only.
      expect(st.judgeHead(10 + UNKNOWN_BLOCK_TIME_ALLOWANCE, 'latest', b)).to.equal('plausible');
      expect(st.judgeHead(5000, 'latest', b)).to.equal('implausible');
      st.of(a).vouched = true;
      expect(st.judgeHead(5000, 'latest', b)).to.equal('implausible');
      st.of(b).reported = 5000;
      expect(st.judgeHead(5000, 'latest', b)).to.equal('implausible');
      expect(st.judgeHead(5000, 'latest', c)).to.equal('confirmed');
    });

    it('the only upstream that reported, once the others were asked and stayed silent, is the only source; time alone is not enough', () => {
      let now = 1_000_000;
      const st = new NetworkChainState({ upstreams: [a, b] } as unknown as Network, () => now);
      st.of(a).reported = 10;
      // b never reported: right after start a's report is only plausible...
      expect(st.judgeHead(10, 'latest', a)).to.equal('plausible');
      now += SOLE_REPORTER_GRACE_MS;
      // ...and still after the grace while b's poll has not finished (a machine short of CPU): a cannot vouch for itself...
      expect(st.judgeHead(10, 'latest', a)).to.equal('plausible');
      // ...until b's poll finished without a head (down, refusing): a is the only source there is, and confirms itself.
      st.of(b).silent = true;
      expect(st.judgeHead(10, 'latest', a)).to.equal('confirmed');
      st.of(b).reported = 8;
      expect(st.judgeHead(5000, 'latest', a)).to.equal('implausible');
    });

    it("a silent upstream's poll failing before the grace ends does not make the first reporter the only source early", () => {
      let now = 1_000_000;
      const st = new NetworkChainState({ upstreams: [a, b] } as unknown as Network, () => now);
      st.of(a).reported = 10;
      st.of(b).silent = true;
      expect(st.judgeHead(10, 'latest', a)).to.equal('plausible');
      now += SOLE_REPORTER_GRACE_MS;
      expect(st.judgeHead(10, 'latest', a)).to.equal('confirmed');
    });

    it("another replica's word reaching a replica whose upstreams have not reported yet is not believed; once one reported (even genesis) it is judged against that", () => {
      const st = make([a, b]);
      expect(st.judgeHead(20, 'latest', undefined, true)).to.equal('implausible');
      expect(st.judgeHead(20, 'latest')).to.equal('plausible');
      st.of(a).reported = 0;
      expect(st.judgeHead(20, 'latest', undefined, true)).to.equal('plausible');
      expect(st.judgeHead(900_000_000, 'latest', undefined, true)).to.equal('implausible');
    });

    it('the only upstream of a network confirms its own far head (nothing could corroborate it), never a finalized block above the head', () => {
      const st = make([a]);
      st.observeLatest(a, 10);
      st.of(a).vouched = true;
      expect(st.judgeHead(5000, 'latest', a)).to.equal('confirmed');
      expect(st.judgeHead(5000, 'finalized', a)).to.equal('implausible');
    });
  });

  describe('observeShared (heads another replica saw)', function () {
    this.timeout(20_000);
    let a: FaultServer;
    let b: FaultServer;
    let svc: SvcHandle;
    after(async () => {
      await svc?.close();
      await a?.close();
      await b?.close();
    });

    it('a far-future latest or finalized head is recorded nowhere; a plausible one is', async () => {
      a = await startFaultServer();
      b = await startFaultServer();
      svc = await startSvc({
        logLevel: 'error',
        metrics: { enabled: false },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: [a, b].map((s, i) => ({ id: `u${i}`, endpoint: s.url, evm: { chainId: 31337, statePollerInterval: '1h' } })),
          },
        ],
        ...NO_CACHE,
      });
      const network = svc.proxy.projects.get('main')!.networks.get('evm:31337')!;
      const st = chainStateOf(network);
      await waitFor(() => st.highestLatest === 0x10, 5000);
      const service = svc.proxy.services.get(CHAIN_STATE_SERVICE)!;
      const u0 = network.upstreams.find((u) => u.id === 'u0')!;
      service.observeShared!(network, u0, 900_000_000, 0);
      service.observeShared!(network, u0, 0, 900_000_000);
      expect(st.highestLatest).to.equal(0x10);
      expect(st.highestFinalized).to.be.at.most(0x10);
      service.observeShared!(network, u0, 0x12, 0);
      expect(st.highestLatest).to.equal(0x12);
    });
  });
});
