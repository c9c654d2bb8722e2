/**
 * Unit tests of the evm-interpolation plugin (spec §2.8 #5): the pure param
 * rewrite, then the plugin in a real svc in front of two fake upstreams whose network head is
 * set by hand through `chainStateOf(network)`.
 */
import { expect } from 'chai';
import { chainStateOf } from '../../../plugins/evm-state/chain.ts';
import type { Network } from '../../../core/registry/project.ts';
import { evmGetLogsPlugin } from '../../../plugins/evm-getlogs/index.ts';
import { DEFAULT_SKIP_METHODS, evmInterpolationPlugin, interpolateParams, type EvmInterpolationOptions } from '../../../plugins/evm-interpolation/index.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../../helpers/svc.ts';

const ADDR = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
const HASH = `0x${'ab'.repeat(32)}`;
const HEADS = { latest: 1000, finalized: 936 };

describe('evm-interpolation: interpolateParams (pure)', () => {
  it('latest and finalized become the known heads in hex at the method block position', () => {
    expect(interpolateParams('eth_getBalance', [ADDR, 'latest'], HEADS)).to.deep.equal([ADDR, '0x3e8']);
    expect(interpolateParams('eth_getBalance', [ADDR, 'finalized'], HEADS)).to.deep.equal([ADDR, '0x3a8']);
    expect(interpolateParams('eth_getCode', [ADDR, 'latest'], HEADS)).to.deep.equal([ADDR, '0x3e8']);
    expect(interpolateParams('eth_getTransactionCount', [ADDR, 'latest'], HEADS)).to.deep.equal([ADDR, '0x3e8']);
    expect(interpolateParams('eth_getStorageAt', [ADDR, '0x0', 'latest'], HEADS)).to.deep.equal([ADDR, '0x0', '0x3e8']);
    expect(interpolateParams('eth_call', [{ to: ADDR, data: '0x' }, 'latest'], HEADS)).to.deep.equal([{ to: ADDR, data: '0x' }, '0x3e8']);
  });

  it('keeps params after the block position (eth_call state overrides)', () => {
    const overrides = { [ADDR]: { balance: '0x1' } };
    expect(interpolateParams('eth_call', [{ to: ADDR }, 'latest', overrides], HEADS)).to.deep.equal([{ to: ADDR }, '0x3e8', overrides]);
  });

  it('safe, pending, earliest, hex numbers, hashes and EIP-1898 objects pass through', () => {
    for (const tag of ['safe', 'pending', 'earliest', '0x10', HASH]) expect(interpolateParams('eth_getBalance', [ADDR, tag], HEADS), tag).to.equal(undefined);
    expect(interpolateParams('eth_getBalance', [ADDR, { blockNumber: 'latest' }], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getBalance', [ADDR, { blockHash: HASH }], HEADS)).to.equal(undefined);
    // Tags are case-sensitive on the nodes too.
    expect(interpolateParams('eth_getBalance', [ADDR, 'LATEST'], HEADS)).to.equal(undefined);
  });

  it('a missing optional block param is not added', () => {
    expect(interpolateParams('eth_getBalance', [ADDR], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_call', [{ to: ADDR }], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getLogs', [{ address: ADDR }], HEADS)).to.equal(undefined);
  });

  it('a head that is not known (0) is never substituted', () => {
    expect(interpolateParams('eth_getBalance', [ADDR, 'latest'], { latest: 0, finalized: 0 })).to.equal(undefined);
    expect(interpolateParams('eth_getBalance', [ADDR, 'finalized'], { latest: 50, finalized: 0 })).to.equal(undefined);
    expect(interpolateParams('eth_getBalance', [ADDR, 'latest'], { latest: 50, finalized: 0 })).to.deep.equal([ADDR, '0x32']);
  });

  it('filters: fromBlock and toBlock, other fields kept; blockHash filters untouched', () => {
    const f = { address: [ADDR], topics: [null], fromBlock: 'finalized', toBlock: 'latest' };
    expect(interpolateParams('eth_getLogs', [f], HEADS)).to.deep.equal([{ address: [ADDR], topics: [null], fromBlock: '0x3a8', toBlock: '0x3e8' }]);
    expect(interpolateParams('eth_getLogs', [{ fromBlock: '0x1', toBlock: 'latest' }], HEADS)).to.deep.equal([{ fromBlock: '0x1', toBlock: '0x3e8' }]);
    expect(interpolateParams('eth_getLogs', [{ fromBlock: 'earliest', toBlock: 'pending' }], HEADS)).to.equal(undefined);
    expect(interpolateParams('trace_filter', [{ fromBlock: '0x1', toBlock: 'latest' }], HEADS)).to.deep.equal([{ fromBlock: '0x1', toBlock: '0x3e8' }]);
    expect(interpolateParams('eth_getLogs', [{ blockHash: HASH, fromBlock: 'latest' }], HEADS)).to.equal(undefined);
  });

  it('a filter without fromBlock keeps its toBlock tag (the node reads a missing fromBlock as its own latest)', () => {
    expect(interpolateParams('eth_getLogs', [{ toBlock: 'latest' }], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getLogs', [{ fromBlock: null, toBlock: 'latest' }], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getLogs', [{ fromBlock: 'latest' }], HEADS)).to.deep.equal([{ fromBlock: '0x3e8' }]);
  });

  it('a filter the substitution would invert (fromBlock above the known head) keeps its tag', () => {
    expect(interpolateParams('eth_getLogs', [{ fromBlock: '0x3e9', toBlock: 'latest' }], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getLogs', [{ fromBlock: '0x3e8', toBlock: 'latest' }], HEADS)).to.deep.equal([{ fromBlock: '0x3e8', toBlock: '0x3e8' }]);
  });

  it('never mutates the input array or filter object', () => {
    const p = [ADDR, 'latest'];
    const out = interpolateParams('eth_getBalance', p, HEADS);
    expect(p).to.deep.equal([ADDR, 'latest']);
    expect(out).to.not.equal(p);
    const f = { fromBlock: 'latest', toBlock: 'latest' };
    const fp = [f];
    const fout = interpolateParams('eth_getLogs', fp, HEADS);
    expect(f).to.deep.equal({ fromBlock: 'latest', toBlock: 'latest' });
    expect(fp[0]).to.equal(f);
    expect((fout as unknown[])[0]).to.not.equal(f);
  });

  it('methods without a block param, non-array params and object params are left alone', () => {
    expect(interpolateParams('eth_blockNumber', [], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getTransactionByHash', ['latest'], HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getBalance', undefined, HEADS)).to.equal(undefined);
    expect(interpolateParams('eth_getBalance', { 0: ADDR, 1: 'latest' }, HEADS)).to.equal(undefined);
  });

  it('eth_getBlockByNumber is skipped by default (tip enforcement handles it)', () => {
    expect(DEFAULT_SKIP_METHODS).to.deep.equal(['eth_getBlockByNumber']);
  });

  it('rejects a bad fallbackFreshnessMs at construction', () => {
    expect(() => evmInterpolationPlugin({ fallbackFreshnessMs: -1 })).to.throw(TypeError, /fallbackFreshnessMs/);
    expect(() => evmInterpolationPlugin({ fallbackFreshnessMs: Number.NaN })).to.throw(TypeError);
  });
});

describe('evm-interpolation: plugin in svc (two fake upstreams, head set by hand)', function () {
  this.timeout(15_000);

  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;
  let network: Network;

  const plugins = (opts?: EvmInterpolationOptions) => [
    ...defaultPreset().filter((p) => !['evm-interpolation', 'evm-getlogs'].includes(p.name)),
    evmInterpolationPlugin(opts),
    evmGetLogsPlugin(),
  ];
  /** Answers `0x1` for the state reads under test; everything else (eth_chainId included) keeps the built-in answer. */
  const handler = (req: { method: string }): unknown =>
    ['eth_getBalance', 'eth_getCode', 'eth_getStorageAt', 'eth_getTransactionCount', 'eth_call'].includes(req.method)
      ? '0x1'
      : req.method === 'eth_getLogs'
        ? []
        : undefined;
  const lastParams = (fs: FaultServer, method: string): unknown => [...fs.calls].reverse().find((c) => c.method === method)?.params;
  const body = (method: string, params: unknown[]) => ({ jsonrpc: '2.0', id: 1, method, params });
  const setHead = (latest: number, finalized = 0) => {
    const s = chainStateOf(network);
    for (const u of network.upstreams) {
      s.observeLatest(u, latest);
      if (finalized > 0) s.observeFinalized(u, finalized);
    }
  };

  async function start(opts?: EvmInterpolationOptions): Promise<void> {
    a = await startFaultServer({ handler });
    b = await startFaultServer({ handler });
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [
              { architecture: 'evm', evm: { chainId: 31337 }, failsafe: [{ matchMethod: 'eth_getStorageAt', hedge: { delay: '20ms', maxCount: 1 } }] },
            ],
            // The head is set by hand (setHead): no state poller learns the fake upstreams' 0x10.
            upstreamDefaults: { evm: { statePollerInterval: 0 } },
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: 31337 } },
              { id: 'b', endpoint: b.url, evm: { chainId: 31337 } },
            ],
          },
        ],
      },
      { plugins: plugins(opts) },
    );
    network = svc.proxy.projects.get('main')!.networks.get('evm:31337')!;
  }

  async function stop(): Promise<void> {
    await svc?.close();
    await a?.close();
    await b?.close();
  }

  describe('fresh head', () => {
    // A wide freshness window: the head set once stays fresh for the whole block of tests.
    before(() => start({ fallbackFreshnessMs: 60_000 }));
    after(stop);
    beforeEach(() => {
      a.reset();
      b.reset();
      setHead(1000, 936);
    });

    it('latest in eth_getBalance reaches the upstream as the known head in hex', async () => {
      const res = await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, 'latest']));
      expect(res.status).to.equal(200);
      expect(res.json.result).to.equal('0x1');
      const sent = lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance');
      expect(sent).to.deep.equal([ADDR, '0x3e8']);
    });

    it('finalized in eth_call becomes the known finalized block', async () => {
      await svc.post('/main/evm/31337', body('eth_call', [{ to: ADDR, data: '0x' }, 'finalized']));
      const sent = lastParams(a, 'eth_call') ?? lastParams(b, 'eth_call');
      expect(sent).to.deep.equal([{ to: ADDR, data: '0x' }, '0x3a8']);
    });

    it('every upstream a call reaches is asked about the same block (hedged call)', async () => {
      // Both answers are slow, so the hedge leg fires and both upstreams see the call.
      a.script({ kind: 'delay', ms: 150 });
      b.script({ kind: 'delay', ms: 150 });
      const res = await svc.post('/main/evm/31337', body('eth_getStorageAt', [ADDR, '0x0', 'latest']));
      expect(res.json.result).to.equal('0x1');
      const pa = a.calls.filter((c) => c.method === 'eth_getStorageAt').map((c) => c.params);
      const pb = b.calls.filter((c) => c.method === 'eth_getStorageAt').map((c) => c.params);
      expect(pa).to.have.length(1);
      expect(pb).to.have.length(1);
      expect(pa[0]).to.deep.equal([ADDR, '0x0', '0x3e8']);
      expect(pb[0]).to.deep.equal(pa[0]);
    });

    it('a sweep past a failing upstream asks the next one about the same block', async () => {
      a.setDefault({ kind: 'status', status: 503, body: 'down' });
      const res = await svc.post('/main/evm/31337', body('eth_getTransactionCount', [ADDR, 'latest']));
      expect(res.json.result).to.equal('0x1');
      const all = [...a.calls, ...b.calls].filter((c) => c.method === 'eth_getTransactionCount').map((c) => c.params);
      expect(all.length).to.be.greaterThanOrEqual(1);
      for (const p of all) expect(p).to.deep.equal([ADDR, '0x3e8']);
    });

    it('eth_getLogs fromBlock/toBlock tags become numbers', async () => {
      await svc.post('/main/evm/31337', body('eth_getLogs', [{ fromBlock: 'finalized', toBlock: 'latest', address: ADDR }]));
      const sent = lastParams(a, 'eth_getLogs') ?? lastParams(b, 'eth_getLogs');
      expect(sent).to.deep.equal([{ fromBlock: '0x3a8', toBlock: '0x3e8', address: ADDR }]);
    });

    it('safe, pending, earliest and EIP-1898 objects pass through', async () => {
      for (const ref of ['safe', 'pending', 'earliest', { blockHash: HASH }]) {
        await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, ref]));
        const sent = lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance');
        expect(sent).to.deep.equal([ADDR, ref]);
        a.reset();
        b.reset();
      }
    });

    it('a missing block param is not added', async () => {
      await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR]));
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR]);
    });

    it('eth_getBlockByNumber is not interpolated', async () => {
      await svc.post('/main/evm/31337', body('eth_getBlockByNumber', ['latest', false]));
      expect(lastParams(a, 'eth_getBlockByNumber') ?? lastParams(b, 'eth_getBlockByNumber')).to.deep.equal(['latest', false]);
    });

    it('the skip-interpolation header and query parameter turn it off', async () => {
      await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, 'latest']), { 'x-svc-skip-interpolation': 'true' });
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, 'latest']);
      a.reset();
      b.reset();
      await svc.post('/main/evm/31337?skip-interpolation=true', body('eth_getBalance', [ADDR, 'latest']));
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, 'latest']);
    });

    it('a batch: each element is interpolated on its own; the client ids come back unchanged', async () => {
      const res = await svc.post('/main/evm/31337', [
        { jsonrpc: '2.0', id: 'x', method: 'eth_getBalance', params: [ADDR, 'latest'] },
        { jsonrpc: '2.0', id: 'y', method: 'eth_getCode', params: [ADDR, 'finalized'] },
      ]);
      expect(res.json.map((r: { id: string }) => r.id)).to.deep.equal(['x', 'y']);
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, '0x3e8']);
      expect(lastParams(a, 'eth_getCode') ?? lastParams(b, 'eth_getCode')).to.deep.equal([ADDR, '0x3a8']);
    });
  });

  describe('stale or unknown head', () => {
    before(() => start({ fallbackFreshnessMs: 150 }));
    after(stop);
    beforeEach(() => {
      a.reset();
      b.reset();
    });

    it('an unknown head: the tag passes through', async () => {
      await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, 'latest']));
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, 'latest']);
    });

    it('a fresh head interpolates, the same head gone stale does not', async () => {
      setHead(2000);
      await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, 'latest']));
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, '0x7d0']);
      a.reset();
      b.reset();
      await new Promise((r) => setTimeout(r, 250));
      await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, 'latest']));
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, 'latest']);
    });

    it('finalized unknown while latest is fresh: finalized passes through, latest is interpolated', async () => {
      setHead(3000);
      await svc.post('/main/evm/31337', body('eth_getBalance', [ADDR, 'finalized']));
      expect(lastParams(a, 'eth_getBalance') ?? lastParams(b, 'eth_getBalance')).to.deep.equal([ADDR, 'finalized']);
    });
  });
});
