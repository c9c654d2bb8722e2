/**
 * Hostile class 5: node administration methods are not forwarded (docs/access.md "Node
 * administration methods are not forwarded"). An open RPC endpoint in front of a node the operator controls is
 * an invitation to mine, rewind, reset, re-fund, impersonate or stop it. Every family is sent
 * through svc in every way a client can: a single call, a batch element, pinned to each node,
 * skipping consensus, with an escaped method name, on the authenticated project; svc refuses it
 * before any upstream is dialled, and every node's state, read directly from anvil, is unchanged.
 */
import { expect } from 'chai';
import { ECHO, GATED, MAIN, NODE_IDS, SECRETS } from './config.ts';
import { hex, useDeployment, type SvcResponse } from './harness.ts';
import { chaosClass, scale } from './summary.ts';
import { ADDR0, ADDR1 } from '../e2e/fixtures.ts';

const ZERO32 = `0x${'00'.repeat(32)}`;

/** One or more methods of each family, with params a node would act on. */
const DENIED: Array<[string, unknown[]]> = [
  ['anvil_mine', ['0x5']],
  ['anvil_setBalance', [ADDR1, '0x1']],
  ['anvil_setCode', [ECHO, '0x00']],
  ['anvil_setStorageAt', [ECHO, '0x0', `0x${'11'.repeat(32)}`]],
  ['anvil_setNonce', [ADDR0, '0x99']],
  ['anvil_setAutomine', [false]],
  ['anvil_setBlockTimestampInterval', [100]],
  ['anvil_impersonateAccount', [ADDR1]],
  ['anvil_reset', []],
  ['anvil_setChainId', [1]],
  ['anvil_dropAllTransactions', []],
  ['hardhat_mine', ['0x2']],
  ['hardhat_setBalance', [ADDR1, '0x1']],
  ['hardhat_reset', []],
  ['evm_mine', []],
  ['evm_snapshot', []],
  ['evm_revert', ['0x0']],
  ['evm_increaseTime', [3600]],
  ['evm_setNextBlockTimestamp', [4_000_000_000]],
  ['evm_setAutomine', [false]],
  ['debug_setHead', ['0x0']],
  [
    'admin_addPeer',
    [
      'enode://a979fb575495b8d6db44f750317d0f4622bf4c2aa3365d6af7c284339968eef29b69ad0dce72a4d8db5ebb4968de0e3bec910127f134779fbcb0cb6d3331163c@52.16.188.185:30303',
    ],
  ],
  ['admin_nodeInfo', []],
  ['personal_newAccount', ['password']],
  ['personal_unlockAccount', [ADDR0, '', 0]],
  ['personal_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x1' }, '']],
  ['miner_stop', []],
  ['miner_setEtherbase', [ADDR1]],
  ['engine_forkchoiceUpdatedV3', [{ headBlockHash: ZERO32, safeBlockHash: ZERO32, finalizedBlockHash: ZERO32 }, null, null]],
  ['eth_sendTransaction', [{ from: ADDR0, to: ADDR1, value: '0x1' }]],
];

/** What an administration call could change on a node, read directly from it. */
async function nodeState(node: { rpc(m: string, p?: unknown[]): Promise<unknown> }): Promise<unknown[]> {
  return Promise.all([
    node.rpc('eth_blockNumber'),
    node.rpc('eth_getBlockByNumber', ['latest', false]).then((b) => (b as { hash: string }).hash),
    node.rpc('eth_getBalance', [ADDR1, 'latest']),
    node.rpc('eth_getTransactionCount', [ADDR0, 'latest']),
    node.rpc('eth_getCode', [ECHO, 'latest']),
    node.rpc('eth_getStorageAt', [ECHO, '0x0', 'latest']),
    node.rpc('anvil_getAutomine'),
    node.rpc('eth_chainId'),
    node.rpc('txpool_status'),
  ]);
}

describe('chaos [5] node administration methods: refused, the nodes unchanged', function () {
  this.timeout(180_000);
  const cls = chaosClass(5, 'node administration methods');
  const dep = useDeployment();
  let before: unknown[][] = [];

  const states = () => Promise.all(dep().nodes.map(nodeState));
  const body = (method: string, params: unknown[], id = 1) => ({ jsonrpc: '2.0', id, method, params });
  function refused(res: SvcResponse | { json: { error?: { code: number; message: string } } }, method: string, how: string): void {
    expect(res.json?.error?.code, `${method} ${how}: ${JSON.stringify(res.json).slice(0, 200)}`).to.equal(-32601);
    expect(res.json.error!.message, `${method} ${how}`).to.contain('allowMethods');
  }

  beforeEach(async () => {
    await dep().settled();
    before = await states();
  });
  afterEach(async () => {
    expect(await states(), 'every node, read directly').to.deep.equal(before);
    // An effect that shows only when the next block is mined (a timestamp interval, a next
    // timestamp, a chain id) would make one node's next block differ from the others'.
    await dep().everyNode('anvil_mine', ['0x1']);
    await dep().settled();
  });

  it('every family is refused as a single call, pinned to each node and skipping consensus, with nothing dialled', async () => {
    const ways: Array<[string, Record<string, string>]> = [
      ['plain', {}],
      ...NODE_IDS.map((id): [string, Record<string, string>] => [`pinned to ${id}`, { 'x-svc-use-upstream': id }]),
      ['skip-consensus', { 'x-svc-skip-consensus': 'true' }],
    ];
    for (let i = 0; i < scale(1); i++) {
      for (const [method, params] of DENIED) {
        for (const [how, headers] of ways) {
          const res = await dep().post(MAIN, body(method, params), headers);
          cls.attack();
          refused(res, method, how);
          expect(res.headers['x-svc-error'], `${method} ${how}`).to.equal('ErrUpstreamMethodIgnored');
          expect(res.headers['x-svc-upstream-attempts'], `${method} ${how}`).to.equal('0');
        }
      }
    }
  });

  it('every family is refused as a batch element, on the authenticated project too, while its neighbours are served', async () => {
    const head = before[0]![0];
    for (const [path, headers] of [
      [MAIN, {}],
      [GATED, { 'x-svc-secret-token': SECRETS.projectSecret }],
    ] as Array<[string, Record<string, string>]>) {
      for (let i = 0; i < scale(1); i++) {
        const batch = DENIED.flatMap(([method, params], k) => [body(method, params, 2 * k), body('eth_blockNumber', [], 2 * k + 1)]);
        const res = await dep().post(path, batch, headers);
        cls.attack(DENIED.length);
        expect(res.status, res.text.slice(0, 200)).to.equal(200);
        const byId = new Map((res.json as Array<{ id: number }>).map((el) => [el.id, el]));
        DENIED.forEach(([method], k) => {
          refused({ json: byId.get(2 * k) as { error?: { code: number; message: string } } }, method, `in a batch on ${path}`);
          expect(byId.get(2 * k + 1), 'neighbour').to.deep.include({ result: head });
        });
      }
    }
  });

  it('escaped, re-cased and padded method names never reach a node as an administration method', async () => {
    const escaped = (m: string) => m.replace('_', '\\u005f');
    for (let i = 0; i < scale(1); i++) {
      for (const [method, params] of DENIED) {
        // The same name written with an escape is the same name: refused as such.
        const res = await dep().post(MAIN, `{"jsonrpc":"2.0","id":1,"method":"${escaped(method)}","params":${JSON.stringify(params)}}`);
        cls.attack();
        refused(res, method, 'escaped');
        // Other spellings are other methods: whatever svc answers, no node may act on them
        // (checked after the test); a name with spaces is not a method name at all.
        for (const other of [method.toUpperCase(), method[0]!.toUpperCase() + method.slice(1), ` ${method}`, `${method}\\u0000`]) {
          const r = await dep().post(MAIN, `{"jsonrpc":"2.0","id":1,"method":"${other}","params":${JSON.stringify(params)}}`);
          cls.attack();
          expect(r.json?.error, `${JSON.stringify(other)}: ${r.text.slice(0, 200)}`).to.be.an('object');
        }
      }
    }
  });
});
