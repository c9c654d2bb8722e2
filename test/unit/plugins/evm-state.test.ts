/**
 * Unit tests of the evm-state plugin (spec §2.8 #7, #9, §3.1): the
 * pure helpers (syncing answers, block params, availability filter), the config defaults, and
 * the plugin's behaviour against scriptable fake upstreams whose heads the tests set: the state
 * poller (latest/finalized/syncing, forward-only counters, fallback finality depth, lags, block
 * time, wrong-chain and cordoned upstreams, failures), finality classification before the
 * failsafe plugin matches, tip enforcement with its directives, block availability and the
 * far-future `null`.
 */
import { expect } from 'chai';
import { FINALITY, type CallContext, type Finality } from '../../../core/pipeline/context.ts';
import { SYNCING } from 'svc-proxy/plugins/evm-state';
import { NO_CHAIN_STATE } from 'svc-proxy/plugins/evm-state';
import { createLogger, type Logger } from '../../../lib/logger.ts';
import { pino } from 'pino';
import { createProxy } from '../../../core/host/create.ts';
import { loadConfigObject } from '../../../config/load.ts';
import { DirectiveStage } from '../../../core/pipeline/stages.ts';
import { NetworkChainState, chainStateOf } from '../../../plugins/evm-state/chain.ts';
import type { Plugin } from '../../../core/host/proxy.ts';
import type { Network } from '../../../core/registry/project.ts';
import type { Upstream } from '../../../core/registry/upstream.ts';
import {
  behindBy,
  blockNumberOfBlock,
  blockNumberParamOf,
  blockTagOf,
  ErrUpstreamBlockBehind,
  ErrUpstreamNullTaggedBlock,
  EvmStatePlugin,
  evmStatePlugin,
  evmStateSchema,
  filterByAvailability,
  knownLatestOf,
  NOT_SYNCING_POLLS,
  pollNow,
  statePollerOf,
  syncingOf,
} from '../../../plugins/evm-state/index.ts';
import { failsafeEntryOf } from '../../../plugins/failsafe/index.ts';
import { selectionState } from '../../../plugins/selection/index.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../../helpers/svc.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const hex = (n: number) => `0x${n.toString(16)}`;

/** A fake node's chain, mutable by the test. */
interface FakeChain {
  latest: number;
  /** Finalized block, or how the `finalized` tag fails. */
  finalized: number | 'error' | 'null';
  /** `eth_syncing` answer. */
  syncing: unknown;
  /** Answer null to `eth_getBlockByNumber(latest)`. */
  nullLatest?: boolean;
}

function block(n: number) {
  return {
    number: hex(n),
    hash: `0x${n.toString(16).padStart(64, '0')}`,
    parentHash: `0x${'0'.repeat(64)}`,
    timestamp: hex(1_700_000_000 + n),
    transactions: [],
  };
}

/** A fake upstream answering from a {@link FakeChain}. */
async function fakeNode(chain: FakeChain, opts: { chainId?: number } = {}): Promise<FaultServer> {
  return startFaultServer({
    chainId: opts.chainId ?? CHAIN,
    handler: ({ method, params }) => {
      const p = Array.isArray(params) ? (params as unknown[]) : [];
      switch (method) {
        case 'eth_blockNumber':
          return hex(chain.latest);
        case 'eth_syncing':
          return chain.syncing;
        case 'eth_getBalance':
          return '0x1';
        case 'eth_getBlockByNumber': {
          const ref = p[0];
          if (ref === 'latest') return chain.nullLatest ? null : block(chain.latest);
          if (ref === 'finalized') {
            if (chain.finalized === 'error') throw new Error('invalid block tag finalized');
            return chain.finalized === 'null' ? null : block(chain.finalized);
          }
          if (typeof ref === 'string' && ref.startsWith('0x')) {
            const n = Number.parseInt(ref, 16);
            return n <= chain.latest ? block(n) : null;
          }
          return null;
        }
        default:
          return undefined;
      }
    },
  });
}

/** Keeps config order and honours cordons (so the tests choose who is asked first). */
const configOrder = (ups: { removeCordoned(): unknown }) => ups.removeCordoned();

interface SvcOpts {
  interval?: string;
  /** Extra network fields (merged; `evm` merged too). */
  net?: Record<string, unknown>;
  /** `selectionPolicy.evalFunc`; `null` = the default policy. */
  evalFunc?: unknown;
  /** Extra plugins appended after evm-state. */
  extra?: Plugin[];
  /** Upstream chain id overrides by upstream id. */
  chainIds?: Record<string, number>;
  /** The proxy's logger (default silent). */
  logger?: Logger;
}

function plugins(extra: Plugin[] = []): Plugin[] {
  return [...defaultPreset().filter((p) => p.name !== 'evm-state'), evmStatePlugin(), ...extra];
}

function startWith(servers: Record<string, FaultServer>, o: SvcOpts = {}): Promise<SvcHandle> {
  const { evm: netEvm, ...netRest } = (o.net ?? {}) as { evm?: Record<string, unknown> };
  const selectionPolicy = o.evalFunc === null ? { evalInterval: '1h' } : { evalInterval: '1h', evalFunc: o.evalFunc ?? configOrder };
  return startSvc(
    {
      ...NO_CACHE,
      logLevel: 'error',
      server: { includeErrorDetails: true },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN, ...(netEvm ?? {}) }, selectionPolicy, ...netRest }],
          upstreams: Object.entries(servers).map(([id, s]) => ({
            id,
            endpoint: s.url,
            evm: { chainId: o.chainIds?.[id] ?? CHAIN, statePollerInterval: o.interval ?? '100ms' },
          })),
        },
      ],
    },
    { plugins: plugins(o.extra), ...(o.logger ? { logger: o.logger } : {}) },
  );
}

function networkOf(svc: SvcHandle): Network {
  const n = svc.proxy.projects.get('main')?.networks.get(`evm:${CHAIN}`);
  if (!n) throw new Error('no network');
  return n;
}

function upstreamOf(svc: SvcHandle, id: string): Upstream {
  const u = svc.proxy.projects.get('main')?.upstreams.get(id);
  if (!u) throw new Error(`no upstream ${id}`);
  return u;
}

const rpc = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id: 1, method, params });

/** The trace as `id=reason:outcome[:won]` strings. */
function trace(res: SvcResponse): string[] {
  const h = res.headers['x-svc-upstreams'];
  if (!h) return [];
  return h.split(';').map((seg) => {
    const eq = seg.lastIndexOf('=');
    const [reason, outcome, , won] = seg.slice(eq + 1).split(':');
    return `${seg.slice(0, eq)}=${reason}:${outcome}${won === 'won' ? ':won' : ''}`;
  });
}

const clientCalls = (s: FaultServer, method: string, p0?: unknown) =>
  s.calls.filter((c) => c.method === method && (p0 === undefined || (Array.isArray(c.params) && (c.params as unknown[])[0] === p0))).length;

describe('evm-state plugin: pure helpers', () => {
  it('syncingOf reads false, true, progress objects and the {Ok: bool} wrapper', () => {
    expect(syncingOf(false)).to.equal(false);
    expect(syncingOf(true)).to.equal(true);
    expect(syncingOf({ startingBlock: '0x0', currentBlock: '0x10', highestBlock: '0x20' })).to.equal(true);
    expect(syncingOf({ Ok: false })).to.equal(false);
    expect(syncingOf({ Ok: true })).to.equal(true);
    expect(syncingOf(null)).to.equal(undefined);
    expect(syncingOf('0x1')).to.equal(undefined);
    expect(syncingOf({})).to.equal(undefined);
  });

  it('reads block tags, block-number params and block objects', () => {
    expect(blockTagOf(['latest', false])).to.equal('latest');
    expect(blockTagOf(['finalized'])).to.equal('finalized');
    expect(blockTagOf(['0x10', false])).to.equal(undefined);
    expect(blockTagOf(undefined)).to.equal(undefined);
    expect(blockNumberParamOf(['0x10', false])).to.equal(16);
    expect(blockNumberParamOf(['latest'])).to.equal(undefined);
    expect(blockNumberParamOf([`0x${'ab'.repeat(32)}`])).to.equal(undefined);
    expect(blockNumberOfBlock({ number: '0x2a' })).to.equal(42);
    expect(blockNumberOfBlock(null)).to.equal(undefined);
    expect(blockNumberOfBlock({ number: 'nope' })).to.equal(undefined);
  });

  it('behindBy is the shortfall, undefined when level, ahead or the head is unknown', () => {
    expect(behindBy(90, 100)).to.equal(10);
    expect(behindBy(100, 100)).to.equal(undefined);
    expect(behindBy(110, 100)).to.equal(undefined);
    expect(behindBy(5, 0)).to.equal(undefined);
  });

  it('the errors are retryable -32014 with their own names', () => {
    const a = new ErrUpstreamBlockBehind('x');
    const b = new ErrUpstreamNullTaggedBlock('y');
    expect(a.retryable && b.retryable).to.equal(true);
    expect([a.code, b.code]).to.deep.equal([-32014, -32014]);
    expect([a.name, b.name]).to.deep.equal(['ErrUpstreamBlockBehind', 'ErrUpstreamNullTaggedBlock']);
  });

  describe('filterByAvailability', () => {
    const a = { id: 'a' } as Upstream;
    const b = { id: 'b' } as Upstream;
    const c = { id: 'c' } as Upstream;
    const stateWith = (heads: Array<[Upstream, number]>) => {
      const st = new NetworkChainState({ upstreams: heads.map(([u]) => u) } as unknown as Network);
      for (const [u, n] of heads) if (n > 0) st.of(u).advanceLatest(n);
      return st;
    };

    it('skips an upstream whose known head is below the block while another covers it', () => {
      const st = stateWith([
        [a, 100],
        [b, 120],
      ]);
      expect(filterByAvailability([a, b], 110, st)).to.deep.equal([b]);
      expect(filterByAvailability([a, b], 100, st)).to.deep.equal([a, b]);
    });

    it('forwards anyway when no candidate is known to cover the block', () => {
      const st = stateWith([
        [a, 100],
        [b, 120],
      ]);
      const input = [a, b];
      expect(filterByAvailability(input, 130, st)).to.equal(input);
    });

    it('keeps never-observed upstreams (they may have it) and keeps the order', () => {
      const st = stateWith([
        [a, 100],
        [c, 0],
        [b, 120],
      ]);
      expect(filterByAvailability([c, a, b], 110, st)).to.deep.equal([c, b]);
    });

    it('a node polled at genesis (latest 0) is known, and skipped', () => {
      const st = stateWith([
        [a, 0],
        [b, 120],
      ]);
      st.of(a).lastPollAt = Date.now();
      expect(knownLatestOf(st.peek(a))).to.equal(0);
      expect(knownLatestOf(st.peek(c))).to.equal(undefined);
      expect(filterByAvailability([a, b], 10, st)).to.deep.equal([b]);
    });
  });
});

describe('chain state (plugins/evm-state/chain.ts) additions used by evm-state', () => {
  const a = { id: 'a' } as Upstream;
  const w = { id: 'wrong' } as Upstream;

  it('the evm-state plugin keeps the chain state and every plugin reads it through host.chainState; without the plugin nothing is known', () => {
    const build = (plugins: Plugin[]) =>
      createProxy({
        config: { projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }] }] },
        plugins,
        logger: createLogger('silent'),
      });
    const withState = build(defaultPreset());
    const net = { id: 'evm:1', upstreams: [a] } as unknown as Network;
    expect(networkChainState(withState, net)).to.equal(chainStateOf(net));
    chainStateOf(net).observeLatest(a, 42);
    expect(networkChainState(withState, net).highestLatest).to.equal(42);
    const without = build(defaultPreset().filter((p) => p.name !== 'evm-state'));
    expect(networkChainState(without, net)).to.equal(NO_CHAIN_STATE);
    expect([
      networkChainState(without, net).highestLatest,
      networkChainState(without, net).blockTimeMs,
      networkChainState(without, net).isHeadFresh(),
    ]).to.deep.equal([0, undefined, false]);
  });

  it("countedUpstreams narrows highestLatest/highestFinalized (default: the network's upstreams)", () => {
    const st = new NetworkChainState({ upstreams: [a, w] } as unknown as Network);
    st.observeLatest(a, 100);
    st.observeFinalized(a, 90);
    st.of(w).advanceLatest(5000);
    st.observeFinalized(w, 4000);
    expect([st.highestLatest, st.highestFinalized]).to.deep.equal([5000, 4000]);
    st.countedUpstreams = () => [a];
    expect([st.highestLatest, st.highestFinalized]).to.deep.equal([100, 90]);
  });

  it('resyncHead un-stalls the block-time estimate after a bogus head stops counting', () => {
    const clock = { t: 1_000_000 };
    const st = new NetworkChainState({ upstreams: [a, w] } as unknown as Network, () => clock.t);
    st.observeLatest(a, 100);
    st.observeLatest(w, 5_000_000);
    st.countedUpstreams = () => [a];
    expect(st.resyncHead()).to.equal(true);
    expect(st.resyncHead()).to.equal(false);
    expect(st.isHeadFresh()).to.equal(false);
    for (let n = 101; n <= 104; n++) {
      clock.t += 1000;
      st.observeLatest(a, n);
    }
    expect(st.isHeadFresh()).to.equal(true);
    expect(st.blockTimeMs).to.equal(1000);
  });
});

describe('evm-state plugin: config', () => {
  it('owns upstreams[].evm.statePollerInterval and networks[].evm.{fallbackFinalityDepth,maxRetryableBlockDistance} with their defaults', () => {
    const { config } = loadConfigObject(
      {
        projects: [
          {
            id: 'main',
            networks: [
              { architecture: 'evm', evm: { chainId: 1 } },
              { architecture: 'evm', evm: { chainId: 2, fallbackFinalityDepth: 64, maxRetryableBlockDistance: 10 } },
            ],
            upstreams: [
              { id: 'a', endpoint: 'http://127.0.0.1:9', evm: { chainId: 1 } },
              { id: 'b', endpoint: 'http://127.0.0.1:9', evm: { chainId: 2, statePollerInterval: '2s' } },
            ],
          },
        ],
      },
      { fragments: [evmStateSchema] },
    );
    const p = config.projects[0]!;
    expect(p.networks[0]!.settings.evm).to.include({ fallbackFinalityDepth: 1024, maxRetryableBlockDistance: 128 });
    expect(p.networks[1]!.settings.evm).to.include({ fallbackFinalityDepth: 64, maxRetryableBlockDistance: 10 });
    expect(p.upstreams[0]!.settings.evm).to.include({ statePollerInterval: 30_000 });
    expect(p.upstreams[1]!.settings.evm).to.include({ statePollerInterval: 2000 });
  });

  it('rejects a negative fallbackFinalityDepth and a bad duration', () => {
    const bad =
      (evm: object, up: object = {}) =>
      () =>
        loadConfigObject(
          {
            projects: [
              {
                id: 'main',
                networks: [{ architecture: 'evm', evm: { chainId: 1, ...evm } }],
                upstreams: [{ endpoint: 'http://127.0.0.1:9', evm: { chainId: 1, ...up } }],
              },
            ],
          },
          { fragments: [evmStateSchema] },
        );
    expect(bad({ fallbackFinalityDepth: -1 })).to.throw(/fallbackFinalityDepth/);
    expect(bad({}, { statePollerInterval: 'soon' })).to.throw(/statePollerInterval/);
  });

  it('rejects a non-positive maxPollTimeoutMs option', () => {
    expect(() => evmStatePlugin({ maxPollTimeoutMs: 0 })).to.throw(RangeError);
  });
});

describe('evm-state plugin: state poller', function () {
  this.timeout(15_000);
  const servers: FaultServer[] = [];
  let svc: SvcHandle | undefined;
  const node = async (chain: FakeChain, opts?: { chainId?: number }) => {
    const s = await fakeNode(chain, opts);
    servers.push(s);
    return s;
  };

  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('reads latest, finalized and eth_syncing at bootstrap, concurrently, through the upstream chain', async () => {
    const a = await node({ latest: 100, finalized: 90, syncing: false });
    svc = await startWith({ a }, { interval: '1h' });
    const st = chainStateOf(networkOf(svc));
    const u = upstreamOf(svc, 'a');
    await waitFor(() => st.peek(u)?.latest === 100 && st.peek(u)?.finalized === 90);
    expect(st.highestLatest).to.equal(100);
    expect(st.highestFinalized).to.equal(90);
    expect(clientCalls(a, 'eth_getBlockByNumber', 'latest')).to.equal(1);
    expect(clientCalls(a, 'eth_getBlockByNumber', 'finalized')).to.equal(1);
    expect(clientCalls(a, 'eth_syncing')).to.equal(1);
    const last = statePollerOf(svc.proxy, u)?.last;
    expect(last).to.include({ latest: 100, finalized: 90, finalizedFromFallback: false, syncing: false });
    expect(EvmStatePlugin.stateOf(networkOf(svc))).to.equal(st);
  });

  it("polls again every statePollerInterval; a poll sets the upstream's counters, down too (a resynced node)", async () => {
    const chain: FakeChain = { latest: 100, finalized: 90, syncing: false };
    const a = await node(chain);
    svc = await startWith({ a }, { interval: '50ms' });
    const st = chainStateOf(networkOf(svc));
    const u = upstreamOf(svc, 'a');
    await waitFor(() => st.peek(u)?.latest === 100);
    chain.latest = 150;
    chain.finalized = 140;
    await waitFor(() => st.peek(u)?.latest === 150 && st.peek(u)?.finalized === 140);
    // A node restored from an old snapshot, or resyncing: its poll is its truth, so a head it once
    // reported (a lie, say) stops counting at once (head plausibility, docs/evm.md).
    chain.latest = 120;
    chain.finalized = 100;
    const polls = clientCalls(a, 'eth_getBlockByNumber', 'latest');
    await waitFor(() => clientCalls(a, 'eth_getBlockByNumber', 'latest') >= polls + 2);
    expect(st.peek(u)?.latest).to.equal(120);
    expect(st.peek(u)?.finalized).to.equal(100);
    expect(st.highestLatest).to.equal(120);
    expect(statePollerOf(svc.proxy, u)?.last?.latest).to.equal(120);
  });

  it('without a usable finalized tag (error or null) uses latest - fallbackFinalityDepth, floored at 0', async () => {
    const a = await node({ latest: 2000, finalized: 'error', syncing: false });
    const b = await node({ latest: 1500, finalized: 'null', syncing: false });
    const c = await node({ latest: 10, finalized: 'error', syncing: false });
    svc = await startWith({ a, b, c }, { interval: '1h' });
    const st = chainStateOf(networkOf(svc));
    await waitFor(() => [...networkOf(svc!).upstreams].every((u) => statePollerOf(svc!.proxy, u)?.last !== undefined));
    expect(st.peek(upstreamOf(svc, 'a'))?.finalized).to.equal(2000 - 1024);
    expect(st.peek(upstreamOf(svc, 'b'))?.finalized).to.equal(1500 - 1024);
    expect(st.peek(upstreamOf(svc, 'c'))?.finalized).to.equal(0);
    expect(statePollerOf(svc.proxy, upstreamOf(svc, 'a'))?.last).to.include({ finalizedFromFallback: true });
    expect(st.highestFinalized).to.equal(2000 - 1024);
  });

  it('honours networks[].evm.fallbackFinalityDepth', async () => {
    const a = await node({ latest: 500, finalized: 'error', syncing: false });
    svc = await startWith({ a }, { interval: '1h', net: { evm: { fallbackFinalityDepth: 100 } } });
    const st = chainStateOf(networkOf(svc));
    await waitFor(() => st.peek(upstreamOf(svc!, 'a'))?.finalized === 400);
  });

  it('feeds block-head and finalization lag into the health tracker', async () => {
    const a = await node({ latest: 100, finalized: 80, syncing: false });
    const b = await node({ latest: 130, finalized: 100, syncing: false });
    svc = await startWith({ a, b }, { interval: '50ms' });
    const health = svc.proxy.projects.get('main')!.health;
    await waitFor(() => health.snapshot('a').blockHeadLag === 30 && health.snapshot('a').finalizationLag === 20);
    expect(health.snapshot('b').blockHeadLag).to.equal(0);
    expect(health.snapshot('b').finalizationLag).to.equal(0);
  });

  it('a syncing upstream is excluded by the default policy until 4 consecutive polls say it is not', async () => {
    const chainA: FakeChain = { latest: 100, finalized: 90, syncing: { startingBlock: '0x0', currentBlock: '0x64', highestBlock: '0x100' } };
    const a = await node(chainA);
    const b = await node({ latest: 100, finalized: 90, syncing: false });
    svc = await startWith({ a, b }, { interval: '1h', evalFunc: null });
    const u = upstreamOf(svc, 'a');
    const network = networkOf(svc);
    await waitFor(() => SYNCING.get(u));
    await waitFor(() => selectionState(svc!.proxy, 'main', network.id)?.excluded.a === 'syncing');
    const r = await svc.post(PATH, rpc('eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']));
    expect(r.headers['x-svc-upstream']).to.equal('b');
    chainA.syncing = false;
    for (let i = 1; i < NOT_SYNCING_POLLS; i++) {
      await pollNow(svc.proxy, network);
      expect(SYNCING.get(u), `after ${i} not-syncing polls`).to.equal(true);
    }
    await pollNow(svc.proxy, network);
    expect(SYNCING.get(u)).to.equal(false);
    await waitFor(() => selectionState(svc!.proxy, 'main', network.id)?.excluded.a === undefined);
    // A syncing answer again excludes it at once.
    chainA.syncing = true;
    await pollNow(svc.proxy, network);
    expect(SYNCING.get(u)).to.equal(true);
  });

  it('§3.1 ¶2 — a cordoned upstream is still polled, but no longer counts towards the network head', async () => {
    const chainA: FakeChain = { latest: 200, finalized: 150, syncing: false };
    const a = await node(chainA);
    const b = await node({ latest: 100, finalized: 90, syncing: false });
    svc = await startWith({ a, b }, { interval: '50ms' });
    const st = chainStateOf(networkOf(svc));
    await waitFor(() => upstreamOf(svc!, 'a').state === 'ready' && st.highestLatest === 200);
    svc.proxy.projects.get('main')!.health.cordon('a', '*', 'test');
    await waitFor(() => st.highestLatest === 100 && st.highestFinalized === 90);
    chainA.latest = 210;
    await waitFor(() => st.peek(upstreamOf(svc!, 'a'))?.latest === 210);
    expect(st.highestLatest).to.equal(100);
    svc.proxy.projects.get('main')!.health.uncordon('a', '*');
    await waitFor(() => st.highestLatest === 210);
  });

  it('a wrong-chain upstream is taken out: its head stops counting and it is no longer polled', async () => {
    const good = await node({ latest: 100, finalized: 90, syncing: false });
    const wrong = await node({ latest: 5_000_000, finalized: 4_000_000, syncing: false }, { chainId: 1 });
    svc = await startWith({ good, wrong }, { interval: '50ms' });
    const st = chainStateOf(networkOf(svc));
    const w = upstreamOf(svc, 'wrong');
    await waitFor(() => w.state === 'failed');
    // Stopped, and dropped once it left the network (upstreamLeft).
    await waitFor(() => statePollerOf(svc!.proxy, w)?.isStopped ?? true);
    // The good upstream's first poll may land after the wrong one's probe failed: wait for it,
    // then the wrong chain's far head must not be what counts.
    await waitFor(() => st.highestLatest > 0 && st.highestFinalized > 0);
    expect(st.highestLatest).to.equal(100);
    expect(st.highestFinalized).to.equal(90);
    // A poll sent just before the stop may still arrive after this sample on a loaded machine: at most that one. A live poller
    // (every 50 ms) would make about ten in this window.
    const polls = wrong.calls.length;
    await new Promise((r) => setTimeout(r, 500));
    expect(wrong.calls.length - polls).to.be.at.most(1);
  });

  it('an upstream still unverified does not count while a verified one exists', async () => {
    const a = await node({ latest: 100, finalized: 90, syncing: false });
    svc = await startWith({ a }, { interval: '1h' });
    const network = networkOf(svc);
    const st = chainStateOf(network);
    await waitFor(() => st.highestLatest === 100 && upstreamOf(svc!, 'a').state === 'ready');
    // A probing upstream with a bogus head joins: it does not move the network head.
    const late = svc.proxy.addUpstreamFromConfig(svc.proxy.projects.get('main')!, { id: 'late', endpoint: 'http://127.0.0.1:9', evm: { chainId: CHAIN } });
    st.of(late).advanceLatest(9_999_999);
    expect(late.state).to.not.equal('ready');
    expect(st.highestLatest).to.equal(100);
  });

  it('a poll failure never throws out of the timer; the poller keeps trying', async () => {
    const a = await node({ latest: 100, finalized: 90, syncing: false });
    svc = await startWith({ a }, { interval: '50ms' });
    const u = upstreamOf(svc, 'a');
    const st = chainStateOf(networkOf(svc));
    await waitFor(() => st.peek(u)?.latest === 100);
    a.setDefault({ kind: 'status', status: 503, body: 'down' });
    const poller = statePollerOf(svc.proxy, u)!;
    await waitFor(() => poller.last?.latest === undefined && poller.last?.errors.latest !== undefined);
    expect(st.peek(u)?.latest).to.equal(100);
    a.setDefault({ kind: 'ok' });
    await waitFor(() => poller.last?.latest === 100);
  });

  it('polls are never swept to another upstream, and they count in metrics', async () => {
    const a = await node({ latest: 100, finalized: 90, syncing: false });
    const b = await node({ latest: 100, finalized: 90, syncing: false });
    a.setDefault({ kind: 'status', status: 500, body: 'broken' });
    svc = await startWith({ a, b }, { interval: '1h' });
    const network = networkOf(svc);
    await waitFor(
      () => statePollerOf(svc!.proxy, upstreamOf(svc!, 'a'))?.last !== undefined && statePollerOf(svc!.proxy, upstreamOf(svc!, 'b'))?.last !== undefined,
    );
    await pollNow(svc.proxy, network);
    // b answered exactly its own two polls, never a's.
    expect(clientCalls(b, 'eth_getBlockByNumber', 'latest')).to.equal(2);
    expect(clientCalls(b, 'eth_syncing')).to.equal(2);
    const metrics = await (await fetch(svc.metricsUrl!)).text();
    expect(metrics).to.match(/svc_upstream_request_total\{[^}]*upstream="a"[^}]*category="eth_syncing"[^}]*\} 2/);
    expect(metrics).to.match(/svc_upstream_request_total\{[^}]*upstream="b"[^}]*category="eth_getBlockByNumber"[^}]*\} 4/);
    expect(metrics).to.match(/svc_upstream_latest_block\{[^}]*upstream="b"\} 100/);
    expect(metrics).to.match(/svc_upstream_block_head_lag\{[^}]*upstream="b"\} 0/);
  });

  it('statePollerInterval 0 disables the poller of that upstream; shutdown stops every poller', async () => {
    const a = await node({ latest: 100, finalized: 90, syncing: false });
    const b = await node({ latest: 100, finalized: 90, syncing: false });
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: CHAIN, statePollerInterval: 0 } },
              { id: 'b', endpoint: b.url, evm: { chainId: CHAIN, statePollerInterval: '30ms' } },
            ],
          },
        ],
      },
      { plugins: plugins() },
    );
    const pb = statePollerOf(svc.proxy, upstreamOf(svc, 'b'))!;
    await waitFor(() => clientCalls(b, 'eth_syncing') >= 3);
    expect(a.calls.filter((c) => c.method !== 'eth_chainId')).to.deep.equal([]);
    expect(statePollerOf(svc.proxy, upstreamOf(svc, 'a'))).to.equal(undefined);
    // Its head is still learnt from answers.
    const r = await svc.post(PATH, rpc('eth_blockNumber'), { 'x-svc-use-upstream': 'a' });
    expect(r.json.result).to.equal(hex(100));
    expect(chainStateOf(networkOf(svc)).peek(upstreamOf(svc, 'a'))?.latest).to.equal(100);
    await svc.close();
    expect(pb.isStopped).to.equal(true);
    const after = b.calls.length;
    await new Promise((r) => setTimeout(r, 120));
    expect(b.calls.length).to.equal(after);
  });

  it('estimates the block time (EMA) from the heads it sees', async () => {
    const t0 = Date.now();
    const chain: FakeChain = { latest: 1000, finalized: 'error', syncing: false };
    const a = await node(chain);
    const timer = setInterval(() => {
      chain.latest = 1000 + Math.floor((Date.now() - t0) / 40);
    }, 5);
    try {
      svc = await startWith({ a }, { interval: '30ms' });
      const st = chainStateOf(networkOf(svc));
      expect(st.blockTimeMs).to.equal(undefined);
      await waitFor(() => st.blockTimeMs !== undefined, 5000);
      expect(st.blockTimeMs).to.be.within(15, 200);
    } finally {
      clearInterval(timer);
    }
  });
});

describe('evm-state plugin: request path', function () {
  this.timeout(15_000);
  const servers: FaultServer[] = [];
  let svc: SvcHandle | undefined;
  const node = async (chain: FakeChain) => {
    const s = await fakeNode(chain);
    servers.push(s);
    return s;
  };

  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  /** a (asked first) lags at 100/80, b leads at 120/100; both polled and verified. */
  async function laggingFirst(o: SvcOpts = {}) {
    const chainA: FakeChain = { latest: 100, finalized: 80, syncing: false };
    const chainB: FakeChain = { latest: 120, finalized: 100, syncing: false };
    const a = await node(chainA);
    const b = await node(chainB);
    svc = await startWith({ a, b }, { interval: '1h', ...o });
    const st = chainStateOf(networkOf(svc));
    await waitFor(
      () => upstreamOf(svc!, 'a').state === 'ready' && upstreamOf(svc!, 'b').state === 'ready' && st.highestLatest === 120 && st.highestFinalized === 100,
    );
    return { a, b, chainA, chainB, st };
  }

  describe('finality', () => {
    it('sets the FINALITY slot before the failsafe plugin matches its entries', async () => {
      const atDirectives: Array<[string, Finality]> = [];
      const entries: Array<[string, number | undefined]> = [];
      const spy: Plugin = {
        name: 'spy',
        apply(proxy) {
          // Between evm-state (RESOLVE - 50) and the failsafe plugin's directives tap (RESOLVE + 10).
          proxy.hooks.directives.tap({ name: 'spy', stage: DirectiveStage.RESOLVE + 5 }, (d, ctx) => {
            atDirectives.push([ctx.request.method, FINALITY.get(ctx)]);
            return d;
          });
          proxy.hooks.callDone.tap('spy', (ctx: CallContext) => {
            if (!ctx.internal && ctx.record.attempts.length > 0) entries.push([ctx.request.method, failsafeEntryOf(ctx)?.timeout?.duration]);
          });
        },
      };
      await laggingFirst({
        extra: [spy],
        net: {
          failsafe: [
            { matchFinality: ['finalized'], timeout: { duration: '5s' } },
            { matchFinality: ['unfinalized'], timeout: { duration: '6s' } },
            // Matched in the directives hook: realtime calls skip tip enforcement.
            { matchFinality: ['realtime'], timeout: { duration: '7s' }, directiveDefaults: { enforceHighestBlock: false } },
          ],
        },
      });
      const addr = '0x0000000000000000000000000000000000000001';
      await svc!.post(PATH, rpc('eth_getBalance', [addr, hex(50)]));
      await svc!.post(PATH, rpc('eth_getBalance', [addr, hex(110)]));
      await svc!.post(PATH, rpc('eth_getBalance', [addr, 'latest']));
      await svc!.post(PATH, rpc('eth_chainId'));
      await svc!.post(PATH, rpc('eth_getTransactionByHash', [`0x${'11'.repeat(32)}`]));
      const latest = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(atDirectives).to.deep.equal([
        ['eth_getBalance', 'finalized'],
        ['eth_getBalance', 'unfinalized'],
        ['eth_getBalance', 'realtime'],
        ['eth_chainId', 'finalized'],
        ['eth_getTransactionByHash', 'unknown'],
        ['eth_getBlockByNumber', 'realtime'],
      ]);
      expect(entries.filter(([m]) => m !== 'eth_chainId')).to.deep.equal([
        ['eth_getBalance', 5000],
        ['eth_getBalance', 6000],
        ['eth_getBalance', 7000],
        ['eth_getTransactionByHash', undefined],
        ['eth_getBlockByNumber', 7000],
      ]);
      // The realtime entry's directiveDefaults applied: the lagging first answer was accepted.
      expect(latest.json.result.number).to.equal(hex(100));
    });

    it('a young chain that finalized only block 0 is known: block 0 is finalized, later blocks unfinalized, not unknown', async () => {
      const seen: Finality[] = [];
      const spy: Plugin = {
        name: 'spy',
        apply(proxy) {
          proxy.hooks.directives.tap({ name: 'spy', stage: DirectiveStage.RESOLVE + 5 }, (d, ctx) => {
            if (!ctx.internal) seen.push(FINALITY.get(ctx));
            return d;
          });
        },
      };
      const a = await node({ latest: 5, finalized: 0, syncing: false });
      svc = await startWith({ a }, { interval: '1h', extra: [spy] });
      const st = chainStateOf(networkOf(svc));
      await waitFor(() => st.highestLatest === 5 && st.finalizedKnown);
      expect(st.highestFinalized).to.equal(0);
      const addr = '0x0000000000000000000000000000000000000001';
      await svc.post(PATH, rpc('eth_getBalance', [addr, hex(0)]));
      await svc.post(PATH, rpc('eth_getBalance', [addr, hex(3)]));
      expect(seen).to.deep.equal(['finalized', 'unfinalized']);
    });
  });

  describe('enforce-highest-block (spec §2.8 #7)', () => {
    it('eth_getBlockByNumber(latest) behind the known head is re-routed to an upstream that has it', async () => {
      const { a } = await laggingFirst();
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(r.json.result.number).to.equal(hex(120));
      expect(r.headers['x-svc-upstream']).to.equal('b');
      expect(trace(r)).to.deep.equal(['a=primary:error', 'b=sweep:success:won']);
      expect(clientCalls(a, 'eth_getBlockByNumber', 'latest')).to.equal(2);
      const metrics = await (await fetch(svc!.metricsUrl!)).text();
      expect(metrics).to.match(/svc_upstream_stale_block_total\{[^}]*upstream="a"[^}]*category="eth_getBlockByNumber"\} 1/);
    });

    it('eth_getBlockByNumber(finalized) never answers below the highest known finalized block', async () => {
      await laggingFirst();
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['finalized', false]));
      expect(r.json.result.number).to.equal(hex(100));
      expect(r.headers['x-svc-upstream']).to.equal('b');
    });

    it('eth_blockNumber behind the known head is re-routed', async () => {
      await laggingFirst();
      const r = await svc!.post(PATH, rpc('eth_blockNumber'));
      expect(r.json.result).to.equal(hex(120));
      expect(r.headers['x-svc-upstream']).to.equal('b');
    });

    it('when every upstream is behind: the highest answer seen (never an error); eth_blockNumber is raised to the known head', async () => {
      const { chainB } = await laggingFirst();
      chainB.latest = 110; // b's known head stays 120 (forward-only)
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(r.json.error).to.equal(undefined);
      expect(r.json.result.number).to.equal(hex(110));
      expect(r.headers['x-svc-upstream']).to.equal('b');
      expect(trace(r)).to.deep.equal(['a=primary:error', 'b=sweep:success:won']);
      const n = await svc!.post(PATH, rpc('eth_blockNumber'));
      expect(n.json.result).to.equal(hex(120));
    });

    it('still answers when the leader is down and the rest are behind', async () => {
      const { b } = await laggingFirst();
      b.setDefault({ kind: 'status', status: 503, body: 'down' });
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(r.json.result.number).to.equal(hex(100));
      expect(r.headers['x-svc-upstream']).to.equal('a');
      const n = await svc!.post(PATH, rpc('eth_blockNumber'));
      expect(n.json.result).to.equal(hex(120));
    });

    it('a lagging answer is served at once when every upstream ahead got no answer on its last attempt, with one warning', async () => {
      const lines: string[] = [];
      const { b } = await laggingFirst({ logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }) });
      b.setDefault({ kind: 'status', status: 503, body: 'down' });
      // The first call still asks the leader (it was up): its 503 makes it down, and the highest
      // answer seen (the lagging one) is served after it.
      const first = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(first.json.result.number).to.equal(hex(100));
      expect(trace(first)).to.deep.equal(['a=primary:success:won', 'b=sweep:error']);
      // From then on nothing ahead answers: the lagging answer is served without waiting on it.
      const next = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(next.json.result.number).to.equal(hex(100));
      expect(trace(next)).to.deep.equal(['a=primary:success:won']);
      expect(lines.filter((l) => l.includes('every upstream ahead got no answer'))).to.have.length(1);
    });

    it('enforce-highest-block: false (header, query or directiveDefaults) takes the first answer', async () => {
      await laggingFirst();
      const h = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]), { 'x-svc-enforce-highest-block': 'false' });
      expect(h.json.result.number).to.equal(hex(100));
      expect(h.headers['x-svc-upstream']).to.equal('a');
      const q = await svc!.post(`${PATH}?enforce-highest-block=false`, rpc('eth_blockNumber'));
      expect(q.json.result).to.equal(hex(100));
    });

    it('directiveDefaults.enforceHighestBlock false turns it off for the network', async () => {
      await laggingFirst({ net: { directiveDefaults: { enforceHighestBlock: false } } });
      const r = await svc!.post(PATH, rpc('eth_blockNumber'));
      expect(r.json.result).to.equal(hex(100));
    });

    it('a newer head in an answer advances that upstream at once (eth_blockNumber and latest)', async () => {
      const { chainB, st } = await laggingFirst();
      chainB.latest = 130;
      const r = await svc!.post(PATH, rpc('eth_blockNumber'));
      expect(r.json.result).to.equal(hex(130));
      expect(st.peek(upstreamOf(svc!, 'b'))?.latest).to.equal(130);
      expect(st.highestLatest).to.equal(130);
      expect(svc!.proxy.projects.get('main')!.health.snapshot('a').blockHeadLag).to.equal(30);
      chainB.latest = 131;
      await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(st.highestLatest).to.equal(131);
    });
  });

  describe('enforce-non-null-tagged-blocks (spec §2.8 #9)', () => {
    it('§2.8 #9 — a null tagged block retries elsewhere; the directive off returns the null', async () => {
      const { chainA } = await laggingFirst();
      chainA.nullLatest = true;
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(r.json.result.number).to.equal(hex(120));
      expect(trace(r)).to.deep.equal(['a=primary:error', 'b=sweep:success:won']);
      const off = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]), { 'x-svc-enforce-non-null-tagged-blocks': 'false' });
      expect(off.json.result).to.equal(null);
      expect(off.headers['x-svc-upstream']).to.equal('a');
    });

    it('when every upstream answers null the call fails with the null-block cause, before lenient validators run', async () => {
      let lenientSawNull = 0;
      const lenient: Plugin = {
        name: 'lenient',
        apply(proxy) {
          // Like retry-empty (stage 100): it would keep the null as a fallback answer.
          proxy.hooks.validate.tap({ name: 'lenient', stage: 100 }, (ctx, r) => {
            if (!ctx.internal && r.result === null) lenientSawNull++;
            return undefined;
          });
        },
      };
      const { chainA, chainB } = await laggingFirst({ extra: [lenient] });
      chainA.nullLatest = true;
      chainB.nullLatest = true;
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', ['latest', false]));
      expect(r.json.error.code).to.equal(-32014);
      expect(JSON.stringify(r.json.error.data)).to.include('ErrUpstreamNullTaggedBlock');
      expect(lenientSawNull).to.equal(0);
    });
  });

  describe('block availability', () => {
    it("a block above an upstream's known head skips it while another covers the block", async () => {
      const { a } = await laggingFirst();
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(110), false]));
      expect(r.json.result.number).to.equal(hex(110));
      expect(trace(r)).to.deep.equal(['b=primary:success:won']);
      expect(clientCalls(a, 'eth_getBlockByNumber', hex(110))).to.equal(0);
      const bal = await svc!.post(PATH, rpc('eth_getBalance', ['0x0000000000000000000000000000000000000001', hex(115)]));
      expect(bal.headers['x-svc-upstream']).to.equal('b');
      // At or below a's head: a serves as usual.
      const low = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(100), false]));
      expect(low.headers['x-svc-upstream']).to.equal('a');
    });

    it('a block no candidate is known to have is forwarded anyway', async () => {
      const { a, chainB } = await laggingFirst();
      chainB.latest = 125; // b has it, but svc has not seen it yet
      const r = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(125), false]));
      expect(clientCalls(a, 'eth_getBlockByNumber', hex(125))).to.equal(1);
      expect(r.json.result).to.not.equal(undefined);
    });

    it('eth_getBlockByNumber beyond head + maxRetryableBlockDistance answers null without an upstream call', async () => {
      const { a, b } = await laggingFirst({ net: { evm: { maxRetryableBlockDistance: 10 } } });
      const far = await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(131), false]));
      expect(far.json.result).to.equal(null);
      expect(clientCalls(a, 'eth_getBlockByNumber', hex(131)) + clientCalls(b, 'eth_getBlockByNumber', hex(131))).to.equal(0);
      expect(trace(far)).to.deep.equal([]);
      await svc!.post(PATH, rpc('eth_getBlockByNumber', [hex(130), false]));
      expect(clientCalls(a, 'eth_getBlockByNumber', hex(130)) + clientCalls(b, 'eth_getBlockByNumber', hex(130))).to.be.greaterThan(0);
    });
  });
});
