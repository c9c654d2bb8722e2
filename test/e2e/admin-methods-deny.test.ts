/**
 * End-to-end node administration deny list (select plugin): against a real anvil node, every
 * family of node administration methods sent through svc is refused with
 * `ErrUpstreamMethodIgnored` (-32601, HTTP 200) before any upstream is dialled, and the node's
 * state, read directly from anvil, does not move; in a batch only that element fails; the
 * upstream's health and metrics count nothing. `allowMethods` on the network, or on one upstream,
 * is the documented opt-in for a devnet.
 */
import { expect } from 'chai';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { ADDR0, ADDR1, DEV_BALANCE, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

/** One method of each family, with params a node would act on. */
const DENIED: Array<[string, unknown[]]> = [
  ['anvil_mine', ['0x5']],
  ['anvil_setBalance', [ADDR1, '0x1']],
  ['hardhat_mine', ['0x2']],
  ['evm_mine', []],
  ['evm_snapshot', []],
  ['evm_revert', ['0x0']],
  ['evm_increaseTime', [3600]],
  ['debug_setHead', ['0x0']],
  [
    'admin_addPeer',
    [
      'enode://a979fb575495b8d6db44f750317d0f4622bf4c2aa3365d6af7c284339968eef29b69ad0dce72a4d8db5ebb4968de0e3bec910127f134779fbcb0cb6d3331163c@52.16.188.185:30303',
    ],
  ],
  ['personal_newAccount', ['password']],
  ['personal_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x1' }, '']],
  ['miner_stop', []],
  ['txpool_clear', []],
  [
    'engine_forkchoiceUpdatedV3',
    [{ headBlockHash: `0x${'00'.repeat(32)}`, safeBlockHash: `0x${'00'.repeat(32)}`, finalizedBlockHash: `0x${'00'.repeat(32)}` }, null, null],
  ],
  ['clique_propose', [ADDR1, true]],
  ['eth_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x1' }]],
];

/** What a node administration call could change, read directly from anvil. */
async function nodeState(anvil: AnvilHandle): Promise<{ block: string; balance: string; nonce: string }> {
  const [block, balance, nonce] = await Promise.all([
    anvil.rpc('eth_blockNumber'),
    anvil.rpc('eth_getBalance', [ADDR1, 'latest']),
    anvil.rpc('eth_getTransactionCount', [ADDR0, 'latest']),
  ]);
  return { block, balance, nonce } as { block: string; balance: string; nonce: string };
}

/** Asserts a refused call: svc's error, nothing dialled. */
function expectRefused(res: SvcResponse, method: string): void {
  expect(res.status, `${method}: ${res.text}`).to.equal(200);
  expect(res.json.error, `${method}: ${res.text}`).to.be.an('object');
  expect(res.json.error.code, method).to.equal(-32601);
  expect(res.json.error.message, method).to.contain(method).and.contain('allowMethods');
  expect(res.headers['x-svc-error'], method).to.equal('ErrUpstreamMethodIgnored');
  expect(res.headers['x-svc-upstream-attempts'], method).to.equal('0');
  expect(res.headers, method).to.not.have.property('x-svc-upstreams');
  expect(res.headers, method).to.not.have.property('x-svc-upstream');
}

function network(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' }, ...extra };
}

async function ready(svc: SvcHandle, ids: string[]): Promise<void> {
  const project = svc.proxy.projects.get('main')!;
  await waitFor(() => ids.every((id) => project.upstreams.get(id)?.state === 'ready'));
}

describe('e2e: node administration methods are refused by default', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    // A few blocks, so that evm_revert/debug_setHead would have something to undo.
    await anvil.rpc('anvil_mine', ['0x3']);
  });

  after(async () => {
    await anvil?.stop();
  });

  describe('default preset, no allowMethods', () => {
    let svc: SvcHandle;

    before(async () => {
      svc = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        server: { includeErrorDetails: true },
        projects: [{ id: 'main', networks: [network()], upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }] }],
      });
      await ready(svc, ['anvil']);
    });

    after(async () => {
      await svc?.close();
    });

    it('every family is refused with ErrUpstreamMethodIgnored (-32601, HTTP 200) and the node does not change', async () => {
      const before = await nodeState(anvil);
      for (const [method, params] of DENIED) {
        const res = await svc.post(PATH, rpcBody(method, params));
        expectRefused(res, method);
        expect(res.json.error.data?.details, method).to.deep.equal({ method, network: `evm:${CHAIN}` });
      }
      expect(await nodeState(anvil)).to.deep.equal(before);
      expect(before.balance).to.equal(`0x${DEV_BALANCE.toString(16)}`);
    });

    it('in a batch only the refused element fails; its neighbours are served', async () => {
      const before = await nodeState(anvil);
      const res = await svc.post(PATH, [
        rpcBody('evm_mine', [], 1),
        rpcBody('eth_blockNumber', [], 2),
        rpcBody('anvil_setBalance', [ADDR1, '0x1'], 3),
        rpcBody('eth_getBalance', [ADDR1, 'latest'], 4),
      ]);
      expect(res.status).to.equal(200);
      expect(res.json).to.have.length(4);
      expect(res.json[0].id).to.equal(1);
      expect(res.json[0].error.code).to.equal(-32601);
      expect(res.json[1]).to.include({ id: 2, result: before.block });
      expect(res.json[2].error.code).to.equal(-32601);
      expect(res.json[3]).to.include({ id: 4, result: before.balance });
      expect(res.headers['x-svc-error']).to.equal('ErrUpstreamMethodIgnored');
      // Only the two reads reached the node.
      expect(res.headers['x-svc-upstream-attempts']).to.equal('2');
      expect(await nodeState(anvil)).to.deep.equal(before);
    });

    it("the upstream's health and metrics count nothing for refused calls", async () => {
      const health = svc.proxy.projects.get('main')!.health;
      // A forwarded call is counted (so the absence below means something).
      expect((await svc.post(PATH, rpcBody('eth_gasPrice', []))).json.result).to.match(/^0x/);
      const all = health.snapshot('anvil', '*').requests;
      for (const [method, params] of DENIED) await svc.post(PATH, rpcBody(method, params));
      for (const [method] of DENIED) expect(health.snapshot('anvil', method).requests, method).to.equal(0);
      expect(health.snapshot('anvil', '*').requests).to.equal(all);
      const text = await (await fetch(svc.metricsUrl!)).text();
      expect(text).to.match(/^svc_upstream_request_total\{[^}]*category="eth_gasPrice"[^}]*\} 1$/m);
      expect(health.snapshot('anvil', 'eth_gasPrice').requests).to.equal(1);
      for (const [method] of DENIED) {
        for (const metric of ['svc_upstream_request_total', 'svc_upstream_request_errors_total', 'svc_upstream_request_duration_seconds_count']) {
          expect(text, `${metric} for ${method}`).to.not.match(new RegExp(`^${metric}\\{[^}]*category="${method}"`, 'm'));
        }
      }
    });

    it('reads of the same families stay forwarded: txpool_status, txpool_content, txpool_inspect', async () => {
      for (const method of ['txpool_status', 'txpool_content', 'txpool_inspect']) {
        const res = await svc.post(PATH, rpcBody(method, []));
        expect(res.json.error, `${method}: ${res.text}`).to.equal(undefined);
        expect(res.json.result, method).to.be.an('object');
        expect(res.headers['x-svc-upstream'], method).to.equal('anvil');
      }
    });
  });

  it('the minimal preset refuses them too', async () => {
    const svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }],
          },
        ],
      },
      { preset: 'minimal' },
    );
    try {
      await ready(svc, ['anvil']);
      const before = await nodeState(anvil);
      const res = await svc.post(PATH, rpcBody('evm_mine', []));
      expect(res.json.error.code, res.text).to.equal(-32601);
      expect(res.json.error.message).to.contain('evm_mine');
      expect(await nodeState(anvil)).to.deep.equal(before);
    } finally {
      await svc.close();
    }
  });

  describe("allowMethods: ['anvil_*', 'evm_*'] on the network (the devnet opt-in)", () => {
    let svc: SvcHandle;

    before(async () => {
      svc = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [network({ allowMethods: ['anvil_*', 'evm_*'] })],
            upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }],
          },
        ],
      });
      await ready(svc, ['anvil']);
    });

    after(async () => {
      await svc?.close();
    });

    it('anvil_mine and evm_mine go through and mine on the node', async () => {
      const start = Number.parseInt((await nodeState(anvil)).block, 16);
      const mined = await svc.post(PATH, rpcBody('anvil_mine', ['0x3']));
      expect(mined.json.error, mined.text).to.equal(undefined);
      expect(mined.headers['x-svc-upstream']).to.equal('anvil');
      expect(Number.parseInt((await nodeState(anvil)).block, 16)).to.equal(start + 3);
      const one = await svc.post(PATH, rpcBody('evm_mine', []));
      expect(one.json.error, one.text).to.equal(undefined);
      expect(Number.parseInt((await nodeState(anvil)).block, 16)).to.equal(start + 4);
    });

    it('families it does not name stay refused', async () => {
      const before = await nodeState(anvil);
      for (const [method, params] of DENIED.filter(([m]) => !m.startsWith('anvil_') && !m.startsWith('evm_')))
        expectRefused(await svc.post(PATH, rpcBody(method, params)), method);
      expect(await nodeState(anvil)).to.deep.equal(before);
    });
  });

  describe("allowMethods: ['anvil_*', 'evm_*'] on one upstream", () => {
    let svc: SvcHandle;
    let paid: FaultServer;

    before(async () => {
      paid = await startFaultServer({ chainId: CHAIN });
      svc = await startSvc({
        ...NO_CACHE,
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            networks: [network()],
            upstreams: [
              // Asked first for everything else; never for the devnet's own methods.
              { id: 'paid', endpoint: paid.url, evm: { chainId: CHAIN } },
              // `ignoreMethods: []` keeps it serving every other method too (allowMethods alone would imply ignoreMethods ["*"]).
              { id: 'dev', endpoint: anvil.url, evm: { chainId: CHAIN }, allowMethods: ['anvil_*', 'evm_*'], ignoreMethods: [] },
            ],
          },
        ],
      });
      await ready(svc, ['paid', 'dev']);
    });

    after(async () => {
      await svc?.close();
      await paid?.close();
    });

    it('anvil_mine goes to that upstream only and mines on the node', async () => {
      const start = Number.parseInt((await nodeState(anvil)).block, 16);
      const res = await svc.post(PATH, rpcBody('anvil_mine', ['0x2']));
      expect(res.json.error, res.text).to.equal(undefined);
      expect(res.headers['x-svc-upstream']).to.equal('dev');
      expect(res.headers['x-svc-upstream-attempts']).to.equal('1');
      expect(Number.parseInt((await nodeState(anvil)).block, 16)).to.equal(start + 2);
      expect(paid.calls.map((c) => c.method)).to.not.include('anvil_mine');
      // The upstream still serves everything else when pinned.
      const version = await svc.post(PATH, rpcBody('net_version', []), { 'x-svc-use-upstream': 'dev' });
      expect(version.json.result, version.text).to.equal(String(CHAIN));
    });

    it('methods it does not name stay refused, and reach neither upstream', async () => {
      const seen = paid.calls.length;
      const before = await nodeState(anvil);
      expectRefused(await svc.post(PATH, rpcBody('debug_setHead', ['0x0'])), 'debug_setHead');
      expectRefused(await svc.post(PATH, rpcBody('eth_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x1' }])), 'eth_sendTransaction');
      expect(paid.calls.slice(seen).map((c) => c.method)).to.not.include.members(['debug_setHead', 'eth_sendTransaction']);
      expect(await nodeState(anvil)).to.deep.equal(before);
    });
  });
});
