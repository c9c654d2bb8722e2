/**
 * End-to-end consensus (as eRPC does; spec §4.5, §6) on three real anvil
 * nodes made to disagree with `anvil_setBalance` and `anvil_mine`: agreement, a minority
 * outvoted, disputes and each behaviour, low participants, errors that vote, skip-consensus,
 * eth_sendRawTransaction to every slot, the headers summed over a batch, the metrics, and the
 * punishment cordon and its release, all read from outside.
 */
import { expect } from 'chai';
import { parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { chainStateOf } from '../../plugins/evm-state/chain.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** Accounts nobody else touches, one per test that sets balances. */
const acct = (n: number): Hex => `0x${(0xc0ffee00 + n).toString(16).padStart(40, '0')}` as Hex;
const rpc = (method: string, params: unknown[], id: unknown = 1) => ({ jsonrpc: '2.0', id, method, params });
/** anvil dev account #2 (funded on every node). */
const PK2 = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const DEAD = 'http://127.0.0.1:1/';

describe('e2e: consensus over three anvil nodes', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  const open: SvcHandle[] = [];

  /** svc in front of the cluster with one consensus entry (or the given upstreams). */
  async function svcWith(consensus: Record<string, unknown>, upstreams?: unknown[], extra: Record<string, unknown> = {}): Promise<SvcHandle> {
    const svc = await startSvc({
      ...NO_CACHE,
      server: { executionHeaders: 'all' },
      metrics: { enabled: true, port: 0 },
      projects: [
        {
          id: 'main',
          networks: [
            {
              architecture: 'evm',
              evm: { chainId: CHAIN },
              selectionPolicy: { evalInterval: '1h', evalFunc: (ups: { removeCordoned(): unknown }) => ups.removeCordoned() },
              failsafe: [{ matchMethod: '*', consensus }],
              ...extra,
            },
          ],
          upstreams: upstreams ?? cluster.upstreams({ evm: { statePollerInterval: '100ms' } }),
        },
      ],
    });
    open.push(svc);
    const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    await waitFor(() => network.upstreams.filter((u) => !u.config.endpoint.startsWith(DEAD)).every((u) => u.state === 'ready'));
    return svc;
  }

  const metric = async (svc: SvcHandle, name: string, labels: Record<string, string> = {}): Promise<number> => {
    const text = await (await fetch(svc.metricsUrl as string)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith(name) || line.startsWith('#')) continue;
      const rest = line.slice(name.length);
      if (rest[0] !== '{' && rest[0] !== ' ') continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return 0;
  };
  const balance = (svc: SvcHandle, who: Hex, headers: Record<string, string> = {}): Promise<SvcResponse> =>
    svc.post(PATH, rpc('eth_getBalance', [who, 'latest']), headers);
  const setBalances = async (who: Hex, values: bigint[]) => {
    for (let i = 0; i < values.length; i++) await cluster.node(i).rpc('anvil_setBalance', [who, `0x${(values[i] as bigint).toString(16)}`]);
  };

  before(async () => {
    cluster = await startAnvilCluster({ count: 3, chainId: CHAIN });
  });
  afterEach(async () => {
    while (open.length) await open.pop()!.close();
  });
  after(async () => {
    await cluster?.stop();
  });

  it('§6 svc_network_consensus_rounds_total — three agreeing nodes: the answer, X-SVC-Consensus-Slots 3, every slot traced as consensus_slot, one round counted as agreement', async () => {
    const svc = await svcWith({ maxParticipants: 3 });
    await setBalances(acct(1), [5n, 5n, 5n]);
    const res = await balance(svc, acct(1));
    expect(res.json.result).to.equal('0x5');
    expect(res.headers['x-svc-consensus-slots']).to.equal('3');
    expect(res.headers).to.not.have.property('x-svc-consensus-disputes');
    expect(res.headers).to.not.have.property('x-svc-consensus-low-participants');
    const segments = res.headers['x-svc-upstreams']!.split(';');
    expect(segments).to.have.length(3);
    for (const s of segments) expect(s).to.match(/^anvil-\d=consensus_slot:success:\d+/);
    expect(await metric(svc, 'svc_network_consensus_rounds_total')).to.equal(1);
    expect(await metric(svc, 'svc_network_consensus_outcome_total', { outcome: 'agreement' })).to.equal(1);
  });

  it('a minority answer is outvoted: the two agreeing nodes win and only their attempts are :won', async () => {
    const svc = await svcWith({ maxParticipants: 3, preferLargerResponses: false });
    await setBalances(acct(2), [7n, 7n, 9n]);
    const res = await balance(svc, acct(2));
    expect(res.json.result).to.equal('0x7');
    const won = res.headers['x-svc-upstreams']!.split(';')
      .filter((s) => s.endsWith(':won'))
      .map((s) => s.split('=')[0]);
    expect(won).to.not.include('anvil-2');
    expect(['anvil-0', 'anvil-1']).to.include(res.headers['x-svc-upstream']);
  });

  it('a dispute returns ErrConsensusDispute (HTTP 200, -32603) with the groups in error.data by default', async () => {
    const svc = await svcWith({ maxParticipants: 3 });
    await setBalances(acct(3), [1n, 2n, 3n]);
    const res = await balance(svc, acct(3));
    expect(res.status).to.equal(200);
    expect(res.json.error.code).to.equal(-32603);
    expect(res.json.error.message).to.match(/consensus dispute/);
    const groups = res.json.error.data.groups as { hash: string; upstreams: string[]; count: number }[];
    expect(groups).to.have.length(3);
    expect(groups.flatMap((g) => g.upstreams).sort()).to.deep.equal(['anvil-0', 'anvil-1', 'anvil-2']);
    for (const g of groups) expect(g.hash).to.match(/^[0-9a-f]{16}$/);
    expect(res.headers['x-svc-consensus-disputes']).to.equal('1');
    expect(await metric(svc, 'svc_network_consensus_outcome_total', { outcome: 'dispute' })).to.equal(1);
  });

  it('disputeBehavior acceptMostCommonValidResult answers from a tied dispute; preferBlockHeadLeader takes the node with the highest head', async () => {
    await setBalances(acct(4), [11n, 12n, 13n]);
    const common = await svcWith({ maxParticipants: 3, disputeBehavior: 'acceptMostCommonValidResult' });
    const a = await balance(common, acct(4));
    expect(['0xb', '0xc', '0xd']).to.include(a.json.result);
    expect(a.headers['x-svc-consensus-disputes']).to.equal('1');
    await common.close();

    // anvil-1 mines ahead; the balance call is pinned to block 0 so every node can answer it.
    await cluster.mine(1, 3);
    const leader = await svcWith({ maxParticipants: 3, disputeBehavior: 'preferBlockHeadLeader' });
    const network = leader.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
    const st = chainStateOf(network);
    const head1 = await cluster.head(1);
    await waitFor(() => st.peek(network.upstreams.find((u) => u.id === 'anvil-1')!)?.latest === head1);
    try {
      // Every node answers its own balance: a dispute, which goes to the node with the highest head.
      const res = await leader.post(PATH, rpc('eth_getBalance', [acct(4), '0x0']));
      expect(res.json.result).to.equal('0xc');
      expect(res.headers['x-svc-consensus-disputes']).to.equal('1');
    } finally {
      // The other nodes catch up, so later tests see one head.
      await cluster.mine(0, 3);
      await cluster.mine(2, 3);
    }
  });

  it('onlyBlockHeadLeader answers a dispute with the node whose head is highest', async () => {
    await setBalances(acct(5), [21n, 22n, 23n]);
    await cluster.mine(1, 1);
    try {
      const head1 = await cluster.head(1);
      const svc = await svcWith({ maxParticipants: 3, disputeBehavior: 'onlyBlockHeadLeader' });
      const network = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
      const st = chainStateOf(network);
      await waitFor(() => st.peek(network.upstreams.find((u) => u.id === 'anvil-1')!)?.latest === head1);
      // Each node's own latest state (no interpolation to one height): three answers, a dispute.
      const res = await svc.post(PATH, rpc('eth_getBalance', [acct(5), 'latest']), {
        'x-svc-skip-interpolation': 'true',
        'x-svc-enforce-highest-block': 'false',
      });
      expect(res.json.result).to.equal('0x16');
      expect(res.headers['x-svc-consensus-disputes']).to.equal('1');
      expect(res.headers['x-svc-upstream']).to.equal('anvil-1');
    } finally {
      await cluster.mine(0, 1);
      await cluster.mine(2, 1);
    }
  });

  it('low participants: one live node of three is accepted by default (header counted), and an error with returnError', async () => {
    const ups = [
      cluster.upstreams()[0],
      { id: 'dead-1', endpoint: DEAD, evm: { chainId: CHAIN } },
      { id: 'dead-2', endpoint: `${DEAD}x`, evm: { chainId: CHAIN } },
    ];
    await setBalances(acct(6), [31n]);
    const accept = await svcWith({ maxParticipants: 3 }, ups);
    const a = await balance(accept, acct(6));
    expect(a.json.result).to.equal('0x1f');
    expect(a.headers['x-svc-consensus-low-participants']).to.equal('1');
    expect(await metric(accept, 'svc_network_consensus_outcome_total', { outcome: 'low_participants' })).to.equal(1);
    await accept.close();
    const strict = await svcWith({ maxParticipants: 3, lowParticipantsBehavior: 'returnError' }, ups);
    const b = await balance(strict, acct(6));
    expect(b.status).to.equal(200);
    expect(b.json.error.code).to.equal(-32603);
    expect(b.json.error.message).to.match(/consensus low participants/);
    expect(b.json.error.data.groups).to.deep.equal([{ hash: b.json.error.data.groups[0].hash, upstreams: ['anvil-0'], count: 1 }]);
  });

  it('errors that are facts about the chain vote: a revert agreed on by every node reaches the client as the node sent it', async () => {
    const svc = await svcWith({ maxParticipants: 3 });
    // Calling a contract-less address with calldata succeeds; INVALID opcode code deployed with anvil_setCode reverts.
    for (let i = 0; i < 3; i++) await cluster.node(i).rpc('anvil_setCode', [acct(7), '0x60006000fd']);
    const res = await svc.post(PATH, rpc('eth_call', [{ to: acct(7), data: '0x' }, 'latest']));
    expect(res.json.error, JSON.stringify(res.json)).to.exist;
    expect(res.json.error.code).to.not.equal(-32603);
    expect(res.headers['x-svc-consensus-slots']).to.equal('3');
    expect(res.headers).to.not.have.property('x-svc-consensus-disputes');
  });

  it('§2.8 #6 — skip-consensus bypasses the round: one upstream answers and no round is counted', async () => {
    const svc = await svcWith({ maxParticipants: 3 });
    await setBalances(acct(8), [1n, 2n, 3n]);
    const res = await balance(svc, acct(8), { 'x-svc-skip-consensus': 'true' });
    expect(res.json.result).to.match(/^0x[123]$/);
    expect(res.headers).to.not.have.property('x-svc-consensus-slots');
    expect(res.headers['x-svc-upstreams']!.split(';')).to.have.length(1);
    expect(await metric(svc, 'svc_network_consensus_rounds_total')).to.equal(0);
  });

  it('a batch sums the consensus headers over its calls', async () => {
    const svc = await svcWith({ maxParticipants: 3 });
    await setBalances(acct(9), [4n, 4n, 4n]);
    await setBalances(acct(10), [1n, 2n, 3n]);
    const res = await svc.post(PATH, [rpc('eth_getBalance', [acct(9), 'latest'], 1), rpc('eth_getBalance', [acct(10), 'latest'], 2)]);
    expect(res.json[0].result).to.equal('0x4');
    expect(res.json[1].error.message).to.match(/consensus dispute/);
    expect(res.headers['x-svc-consensus-slots']).to.equal('6');
    expect(res.headers['x-svc-consensus-disputes']).to.equal('1');
  });

  it('eth_sendRawTransaction goes to every slot and returns the first answer: every node pools the transaction', async () => {
    const svc = await svcWith({ maxParticipants: 3 });
    for (let i = 0; i < 3; i++) await cluster.node(i).rpc('evm_setAutomine', [false]);
    try {
      const account = privateKeyToAccount(PK2);
      const nonce = Number(await cluster.node(0).rpc('eth_getTransactionCount', [account.address, 'latest']));
      const raw = await account.signTransaction({
        chainId: CHAIN,
        type: 'eip1559',
        to: acct(11),
        value: 1n,
        nonce,
        gas: 21000n,
        maxFeePerGas: parseGwei('20'),
        maxPriorityFeePerGas: parseGwei('1'),
      });
      const res = await svc.post(PATH, rpc('eth_sendRawTransaction', [raw]));
      expect(res.json.result).to.match(/^0x[0-9a-f]{64}$/);
      await waitFor(async () => {
        const seen = await Promise.all([0, 1, 2].map((i) => cluster.node(i).rpc('eth_getTransactionByHash', [res.json.result])));
        return seen.every((t) => t !== null);
      }, 3000);
    } finally {
      for (let i = 0; i < 3; i++) await cluster.node(i).rpc('evm_setAutomine', [true]);
    }
  });

  it('punishMisbehavior cordons a node that keeps losing ("misbehaving in consensus") and releases it after sitOutPenalty', async () => {
    // preferLargerResponses (the default) waits for the third slot, so the loser's vote is counted.
    // A sit-out long enough that a loaded machine samples it while it lasts (the cordon event counter is the race-free witness).
    const svc = await svcWith({ maxParticipants: 3, punishMisbehavior: { disputeThreshold: 2, disputeWindow: '1m', sitOutPenalty: '3s' } });
    await setBalances(acct(12), [8n, 8n, 6n]);
    const labels = { upstream: 'anvil-2', reason: 'misbehaving in consensus' };
    expect((await balance(svc, acct(12))).json.result).to.equal('0x8');
    expect(await metric(svc, 'svc_upstream_cordoned', labels)).to.equal(0);
    const second = await balance(svc, acct(12));
    expect(second.json.result).to.equal('0x8');
    await waitFor(async () => (await metric(svc, 'svc_upstream_cordon_event_total', { upstream: 'anvil-2', action: 'cordon' })) === 1, 5000);
    expect(await metric(svc, 'svc_upstream_cordoned', labels)).to.equal(1);
    // While cordoned it gets no slot.
    const during = await balance(svc, acct(12));
    expect(during.headers['x-svc-consensus-slots']).to.equal('2');
    expect(during.headers['x-svc-upstreams']).to.not.include('anvil-2');
    await waitFor(async () => (await metric(svc, 'svc_upstream_cordoned', labels)) === 0, 10_000);
    expect(await metric(svc, 'svc_upstream_cordon_event_total', { upstream: 'anvil-2', action: 'uncordon' })).to.equal(1);
  });
});
