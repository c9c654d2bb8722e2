/**
 * Unit tests of `upstreams[].evm.blockAvailability` (plugins/evm-state/block-availability.ts,
 * earliest.ts, erpc.ts): eRPC's validation rules, the bounds computed from an upstream's latest
 * and earliest blocks, eRPC's earliest-block search and probes, the load-time rewrite of eRPC's
 * deprecated `nodeType` / `maxAvailableRecentBlocks` and of its whole-object inheritance, and the
 * request path against scriptable fake nodes (skip before dialling, -32014 when no upstream has
 * the block, the earliest block found by binary search).
 */
import { expect } from 'chai';
import { ConfigError, loadConfigObject } from '../../../config/load.ts';
import type { SchemaFragment } from '../../../config/schema.ts';
import { ErrEndpointExecutionException, ErrEndpointServerSideException, ErrEndpointUnsupported } from '../../../core/wire/errors.ts';
import { availabilitySpecOf, blockSpanOf, boundsOf, probeBlock, ProbeInconclusive, searchEarliest, type ProbeCall } from '../../../plugins/evm-state/index.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../../helpers/svc.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, unknown>;
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const state = (latest: number) => ({ latest, finalized: 0, syncing: false, lastPollAt: 1 });
const hex = (n: number) => `0x${n.toString(16)}`;

function configProblems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return (e as ConfigError).problems.map((p) => `${p.path}: ${p.message}`);
  }
  return expect.fail('expected a ConfigError');
}

describe('blockAvailability: bounds (eRPC rules)', () => {
  it('a bound sets exactly one of exactBlock, latestBlockMinus, earliestBlockPlus; exactBlock takes no probe/updateRate', () => {
    expect(configProblems(() => availabilitySpecOf({ blockAvailability: { lower: {} } }))[0]).to.match(
      /exactly one of exactBlock, latestBlockMinus, earliestBlockPlus/,
    );
    expect(configProblems(() => availabilitySpecOf({ blockAvailability: { lower: { exactBlock: 1, latestBlockMinus: 2 } } }))[0]).to.match(
      /mutually exclusive/,
    );
    expect(configProblems(() => availabilitySpecOf({ blockAvailability: { upper: { exactBlock: 1, probe: 'eventLogs' } } }))[0]).to.match(
      /earliestBlockPlus only/,
    );
    expect(configProblems(() => availabilitySpecOf({ blockAvailability: { lower: { exactBlock: 9 }, upper: { exactBlock: 5 } } }))[0]).to.match(
      /lower.exactBlock must be <= upper.exactBlock/,
    );
    expect(configProblems(() => availabilitySpecOf({ blockAvailability: { lower: { latestBlockMinus: 5 }, upper: { latestBlockMinus: 10 } } }))[0]).to.match(
      /lower.latestBlockMinus must be >= upper/,
    );
    expect(configProblems(() => availabilitySpecOf({ blockAvailability: { lower: { earliestBlockPlus: 10 }, upper: { earliestBlockPlus: 5 } } }))[0]).to.match(
      /lower.earliestBlockPlus must be <= upper/,
    );
    expect(availabilitySpecOf({})).to.equal(undefined);
    expect(availabilitySpecOf({ blockAvailability: { lower: null, upper: null } })).to.equal(undefined);
    expect(availabilitySpecOf({ blockAvailability: { lower: { earliestBlockPlus: 3, latestBlockMinus: null } } })).to.deep.equal({
      lower: { kind: 'earliestPlus', value: 3, probe: 'blockHeader', updateRateMs: 0 },
      upper: undefined,
    });
  });

  it("latestBlockMinus follows the upstream's own latest (unbounded while unknown); earliestBlockPlus is 0 + N until found; an empty range fails open", () => {
    const spec = availabilitySpecOf({ blockAvailability: { lower: { latestBlockMinus: 128 }, upper: { latestBlockMinus: 2 } } })!;
    expect(boundsOf(spec, state(1000), () => 0)).to.deep.equal({ min: 872, max: 998 });
    expect(boundsOf(spec, state(0), () => 0)).to.deep.equal({ min: undefined, max: undefined });
    const early = availabilitySpecOf({ blockAvailability: { lower: { earliestBlockPlus: 10, probe: 'callState' } } })!;
    expect(boundsOf(early, state(1000), () => 0)).to.deep.equal({ min: 10, max: undefined });
    expect(boundsOf(early, state(1000), (p) => (p === 'callState' ? 500 : 0))).to.deep.equal({ min: 510, max: undefined });
    const exact = availabilitySpecOf({ blockAvailability: { lower: { latestBlockMinus: 10 }, upper: { exactBlock: 50 } } })!;
    expect(boundsOf(exact, state(1000), () => 0)).to.deep.equal({}, 'min 990 > max 50: treated as unbounded');
  });

  it('blockSpanOf: numbers, ranges, earliest = 0; other tags and hashes have no number', () => {
    expect(blockSpanOf({ kind: 'number', number: 7 })).to.deep.equal({ lo: 7, hi: 7 });
    expect(blockSpanOf({ kind: 'tag', tag: 'earliest' })).to.deep.equal({ lo: 0, hi: 0 });
    expect(blockSpanOf({ kind: 'tag', tag: 'latest' })).to.deep.equal({});
    expect(blockSpanOf({ kind: 'range', from: { kind: 'number', number: 3 }, to: { kind: 'tag', tag: 'latest' } })).to.deep.equal({ lo: 3, hi: undefined });
    expect(blockSpanOf({ kind: 'hash', hash: '0x' + '1'.repeat(64) })).to.deep.equal({});
  });
});

describe('blockAvailability: earliest-block search and probes', () => {
  it('searchEarliest tries 0 and 1, then binary-searches [2, latest] (log2 probes)', async () => {
    for (const earliest of [0, 1, 2, 3, 777, 999_999, 1_000_000]) {
      const asked: number[] = [];
      const v = await searchEarliest(async (b) => (asked.push(b), b >= earliest), 1_000_000);
      expect(v).to.equal(earliest);
      expect(asked.length).to.be.at.most(2 + 21);
    }
    expect(await searchEarliest(async () => true, 0)).to.equal(0);
  });

  it('a failing probe stops the search (no bound is guessed)', async () => {
    let n = 0;
    const err = await searchEarliest(async (b) => {
      if (++n === 5) throw new ProbeInconclusive('timeout');
      return b > 100;
    }, 1000).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(ProbeInconclusive);
  });

  it('probes: blockHeader, callState, eventLogs, traceData read the answers as eRPC does', async () => {
    const call =
      (answers: Record<string, unknown>): ProbeCall =>
      async (method) => {
        const a = answers[method];
        if (a instanceof Error) throw a;
        return a;
      };
    expect(await probeBlock(call({ eth_getBlockByNumber: { hash: '0xab' } }), 'blockHeader', 5)).to.equal(true);
    expect(await probeBlock(call({ eth_getBlockByNumber: null }), 'blockHeader', 5)).to.equal(false);
    expect(await probeBlock(call({ eth_getBalance: '0x0' }), 'callState', 5)).to.equal(true);
    expect(await probeBlock(call({ eth_getBalance: new ErrEndpointExecutionException('missing trie node') }), 'callState', 5)).to.equal(false);
    expect(await probeBlock(call({ eth_getBlockByNumber: { hash: '0xab' }, eth_getLogs: [] }), 'eventLogs', 5)).to.equal(false);
    expect(await probeBlock(call({ eth_getBlockByNumber: { hash: '0xab' }, eth_getLogs: [{}] }), 'eventLogs', 5)).to.equal(true);
    expect(
      await probeBlock(
        call({ eth_getBlockByNumber: { hash: '0xab' }, trace_block: new ErrEndpointUnsupported('no'), debug_traceBlockByHash: [{ result: {} }] }),
        'traceData',
        5,
      ),
    ).to.equal(true);
    const unsupported = new ErrEndpointUnsupported('method not found');
    const none = await probeBlock(
      call({
        eth_getBlockByNumber: { hash: '0xab' },
        trace_block: unsupported,
        debug_traceBlockByHash: unsupported,
        trace_replayBlockTransactions: unsupported,
      }),
      'traceData',
      5,
    ).catch((e: unknown) => e);
    expect(none).to.be.instanceOf(ProbeInconclusive);
    const down = await probeBlock(call({ eth_getBlockByNumber: new ErrEndpointServerSideException('502') }), 'blockHeader', 5).catch((e: unknown) => e);
    expect(down).to.be.instanceOf(ProbeInconclusive);
  });
});

describe("blockAvailability: eRPC's legacy keys and inheritance at load time", () => {
  const project = (upstreams: Doc[], defaults?: Doc): Doc => ({
    projects: [
      {
        id: 'main',
        networks: [{ evm: { chainId: 1 } }],
        ...(defaults ? { upstreamDefaults: { evm: defaults } } : {}),
        upstreams: upstreams.map((evm, i) => ({ id: `u${i}`, endpoint: `http://127.0.0.1:${8545 + i}`, evm: { chainId: 1, ...evm } })),
      },
    ],
  });
  const evmOf = (r: ReturnType<typeof load>, i: number) => r.config.projects[0]!.upstreams[i]!.settings.evm as Doc;

  it('maxAvailableRecentBlocks N → lower.latestBlockMinus N; nodeType full → 128; archive → no window', () => {
    const r = load(project([{ maxAvailableRecentBlocks: 1000 }, { nodeType: 'full' }, { nodeType: 'archive' }]));
    expect(evmOf(r, 0).blockAvailability).to.deep.equal({ lower: { latestBlockMinus: 1000 } });
    expect(evmOf(r, 1).blockAvailability).to.deep.equal({ lower: { latestBlockMinus: 128 } });
    expect(evmOf(r, 2)).to.not.have.property('blockAvailability');
    expect(evmOf(r, 2)).to.not.have.property('nodeType');
    expect(r.rewrites.map((w) => w.path)).to.include.members([
      'projects[0].upstreams[0].evm.maxAvailableRecentBlocks',
      'projects[0].upstreams[1].evm.nodeType',
    ]);
  });

  it('upstreamDefaults.evm.blockAvailability fills only upstreams without a window of their own, and wins over nodeType full', () => {
    const r = load(
      project([{}, { blockAvailability: { upper: { exactBlock: 50 } } }, { nodeType: 'full' }, { maxAvailableRecentBlocks: 64 }], {
        blockAvailability: { lower: { latestBlockMinus: 604800 } },
      }),
    );
    expect(availabilitySpecOf(evmOf(r, 0))).to.deep.include({ lower: { kind: 'latestMinus', value: 604800, probe: 'blockHeader', updateRateMs: 0 } });
    expect(availabilitySpecOf(evmOf(r, 1))).to.deep.equal(
      { lower: undefined, upper: { kind: 'exact', value: 50, probe: 'blockHeader', updateRateMs: 0 } },
      'its own window, whole',
    );
    expect(availabilitySpecOf(evmOf(r, 2))?.lower?.value).to.equal(604800);
    expect(availabilitySpecOf(evmOf(r, 3))?.lower?.value).to.equal(64);
  });

  it("a bound kind of its own replaces the default's kind (no mixed bound)", () => {
    const r = load(project([{ blockAvailability: { lower: { exactBlock: 5 } } }], { blockAvailability: { lower: { latestBlockMinus: 128 } } }));
    expect(availabilitySpecOf(evmOf(r, 0))?.lower).to.deep.equal({ kind: 'exact', value: 5, probe: 'blockHeader', updateRateMs: 0 });
  });

  it('refuses maxAvailableRecentBlocks next to blockAvailability, and an unknown nodeType', () => {
    expect(configProblems(() => load(project([{ maxAvailableRecentBlocks: 10, blockAvailability: { lower: { exactBlock: 1 } } }])))[0]).to.match(
      /maxAvailableRecentBlocks and blockAvailability are both set/,
    );
    expect(configProblems(() => load(project([{ nodeType: 'light' }])))[0]).to.match(/nodeType must be full, archive or unknown/);
  });
});

describe('blockAvailability: request path (fake nodes)', function () {
  this.timeout(15_000);
  const CHAIN = 31337;
  const servers: FaultServer[] = [];
  let svc: SvcHandle | undefined;

  /** A node at head `latest` that serves blocks from `earliest` on (null below, "missing trie node" for state). */
  const node = async (latest: number, earliest = 0) => {
    const s = await startFaultServer({
      chainId: CHAIN,
      handler: ({ method, params }) => {
        const p = Array.isArray(params) ? (params as unknown[]) : [];
        const n = typeof p[0] === 'string' && p[0].startsWith('0x') ? Number.parseInt(p[0], 16) : latest;
        if (method === 'eth_blockNumber') return hex(latest);
        if (method === 'eth_syncing') return false;
        if (method === 'eth_getBlockByNumber')
          return n > latest || n < earliest
            ? null
            : { number: hex(n), hash: `0x${n.toString(16).padStart(64, '0')}`, parentHash: `0x${'0'.repeat(64)}`, timestamp: hex(n), transactions: [] };
        return undefined;
      },
    });
    servers.push(s);
    return s;
  };

  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  const start = (ups: Array<{ id: string; s: FaultServer; evm?: Doc }>) =>
    startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [
              {
                architecture: 'evm',
                evm: { chainId: CHAIN },
                selectionPolicy: { evalInterval: '1h', evalFunc: (u: { removeCordoned(): unknown }) => u.removeCordoned() },
                failsafe: [{ matchMethod: '*', retry: { maxAttempts: 1 } }],
              },
            ],
            upstreams: ups.map(({ id, s, evm }) => ({ id, endpoint: s.url, evm: { chainId: CHAIN, statePollerInterval: '100ms', ...evm } })),
          },
        ],
      },
      { preset: 'default' },
    );
  const call = (method: string, params: unknown[]) => svc!.post(`/main/evm/${CHAIN}`, { jsonrpc: '2.0', id: 1, method, params });
  const headOf = (id: string) =>
    networkChainState(svc!.proxy, svc!.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!).peek(svc!.proxy.projects.get('main')!.upstreams.get(id)!)
      ?.latest ?? 0;

  it("a call for a block below a pruned upstream's latestBlockMinus window skips it before dialling; recent blocks still go to it", async () => {
    const pruned = await node(1000);
    const archive = await node(1000);
    svc = await start([
      { id: 'pruned', s: pruned, evm: { blockAvailability: { lower: { latestBlockMinus: 100 } } } },
      { id: 'archive', s: archive },
    ]);
    await waitFor(() => headOf('pruned') === 1000 && headOf('archive') === 1000);
    pruned.reset();
    const old = await call('eth_getBlockByNumber', [hex(10), false]);
    expect(old.headers['x-svc-upstream']).to.equal('archive');
    expect(pruned.calls.filter((c) => c.method === 'eth_getBlockByNumber' && (c.params as unknown[])[0] === hex(10))).to.have.length(0);
    const recent = await call('eth_getBlockByNumber', [hex(950), false]);
    expect(recent.headers['x-svc-upstream']).to.equal('pruned');
    // A getLogs range reaching below the window skips it too.
    const logs = await call('eth_getLogs', [{ fromBlock: hex(850), toBlock: hex(990) }]);
    expect(logs.headers['x-svc-upstream']).to.equal('archive');
  });

  it('when no upstream\'s window has the block: -32014 "block not available", nothing dialled', async () => {
    const a = await node(1000);
    svc = await start([{ id: 'a', s: a, evm: { blockAvailability: { lower: { exactBlock: 500 } } } }]);
    await waitFor(() => headOf('a') === 1000);
    a.reset();
    const res = await call('eth_getBlockByNumber', [hex(10), false]);
    expect(res.json.error.code).to.equal(-32014);
    expect(res.json.error.message).to.match(/block not available: block 10 .*a serves 500\.\.head/);
    expect(a.calls.filter((c) => c.method === 'eth_getBlockByNumber' && (c.params as unknown[])[0] === hex(10))).to.have.length(0);
  });

  it('earliestBlockPlus: the earliest block is found by binary search; calls below it skip the upstream', async () => {
    const pruned = await node(5000, 4321);
    const archive = await node(5000);
    svc = await start([
      { id: 'pruned', s: pruned, evm: { blockAvailability: { lower: { earliestBlockPlus: 0 } } } },
      { id: 'archive', s: archive },
    ]);
    await waitFor(async () => /svc_upstream_earliest_block\{[^}]*upstream="pruned"[^}]*\} 4321/.test(await svc!.proxy.metrics.metrics()));
    expect((await call('eth_getBlockByNumber', [hex(4320), false])).headers['x-svc-upstream']).to.equal('archive');
    expect((await call('eth_getBlockByNumber', [hex(4321), false])).headers['x-svc-upstream']).to.equal('pruned');
    const probes = pruned.calls.filter((c) => c.method === 'eth_getBlockByNumber' && /^0x/.test(String((c.params as unknown[])[0])));
    expect(probes.length).to.be.lessThan(20, 'a binary search, not a scan');
  });
});
