/**
 * eRPC's `consensus.requiredParticipants` from eRPC-shaped YAML, against four anvil nodes (three
 * tagged `tier:cheap`, one `tier:premium`, listed last):
 *
 * - minParticipants: with maxParticipants 2, the premium node is among the two participants of
 *   every round (promoted to the front), and the round still has two slots;
 * - minAgreement: when the three cheap nodes agree and the premium node answers otherwise, the
 *   cheap group wins by count but holds no premium node, so the round is a dispute
 *   (ErrConsensusDispute, counted in X-SVC-Consensus-Disputes and the outcome metric) although
 *   disputeBehavior is acceptMostCommonValidResult; when the premium node agrees, it is answered.
 */
import { expect } from 'chai';
import type { Hex } from 'viem';
import { parse as parseYaml } from 'yaml';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const IDS = ['cheap-0', 'cheap-1', 'cheap-2', 'premium'];

const yaml = (consensus: string, upstreams: string) => `
logLevel: warn
database:
  evmJsonRpcCache:
    connectors: []
    policies: []
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
        failsafe:
          - matchMethod: "eth_getBalance"
            consensus:
${consensus}
    upstreams:
${upstreams}
`;

describe("e2e: eRPC's consensus.requiredParticipants, against three cheap anvil nodes and one premium", function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let svc: SvcHandle | undefined;

  before(async () => {
    cluster = await startAnvilCluster({ count: 4, chainId: CHAIN, ids: IDS });
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });
  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });

  async function start(consensus: string): Promise<SvcHandle> {
    const ups = IDS.map(
      (id) =>
        `      - { id: ${id}, endpoint: "${cluster.node(id).url}", tags: ["tier:${id === 'premium' ? 'premium' : 'cheap'}"], evm: { chainId: ${CHAIN}, statePollerInterval: 200ms } }`,
    ).join('\n');
    const config = parseYaml(yaml(consensus, ups)) as Record<string, unknown>;
    const s = await startSvc({ ...config, server: { executionHeaders: 'all' }, metrics: { enabled: true, port: 0 } });
    await waitFor(() => [...s.proxy.projects.get('main')!.upstreams.values()].every((u) => u.state === 'ready'), 15_000);
    return s;
  }
  const who = (n: number) => `0x00000000000000000000000000000000000a11${n.toString(16).padStart(2, '0')}` as Hex;
  const setBalances = async (addr: Hex, values: bigint[]) => {
    for (let i = 0; i < IDS.length; i++) await cluster.node(IDS[i] as string).rpc('anvil_setBalance', [addr, `0x${(values[i] as bigint).toString(16)}`]);
  };
  const balance = (s: SvcHandle, addr: Hex) => s.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [addr, 'latest'] });
  const metric = async (s: SvcHandle, name: string, labels: Record<string, string>): Promise<number> => {
    const text = await (await fetch(s.metricsUrl as string)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };

  it('minParticipants: the premium node is one of the two participants of every round', async () => {
    svc = await start(`              maxParticipants: 2
              agreementThreshold: 2
              requiredParticipants:
                - tag: "tier:prem*"
                  minParticipants: 1`);
    for (let i = 0; i < 4; i++) {
      await setBalances(who(i), [5n, 5n, 5n, 5n]);
      const r = await balance(svc, who(i));
      expect(r.json.result, r.text).to.equal('0x5');
      expect(r.headers['x-svc-consensus-slots']).to.equal('2');
      const asked = r.headers['x-svc-upstreams']!.split(';').map((s) => s.split('=')[0]);
      expect(asked).to.have.length(2);
      expect(asked).to.include('premium');
    }
  });

  it('minAgreement: a winner without a premium node is a dispute, whatever disputeBehavior says', async () => {
    svc = await start(`              maxParticipants: 4
              agreementThreshold: 2
              disputeBehavior: acceptMostCommonValidResult
              requiredParticipants:
                - tag: "tier:premium"
                  minParticipants: 1
                  minAgreement: 1`);
    await setBalances(who(10), [7n, 7n, 7n, 9n]);
    const r = await balance(svc, who(10));
    expect(r.status).to.equal(200);
    expect(r.json.result, r.text).to.equal(undefined);
    expect(r.json.error.code).to.equal(-32603);
    expect(r.json.error.message).to.match(/consensus dispute.*minAgreement/);
    expect(r.headers['x-svc-consensus-disputes']).to.equal('1');
    expect(await metric(svc, 'svc_network_consensus_outcome_total', { outcome: 'dispute' })).to.equal(1);

    // The premium node agrees with the others: answered.
    await setBalances(who(11), [7n, 7n, 7n, 7n]);
    const ok = await balance(svc, who(11));
    expect(ok.json.result, ok.text).to.equal('0x7');
    expect(ok.headers).to.not.have.property('x-svc-consensus-disputes');
    expect(await metric(svc, 'svc_network_consensus_outcome_total', { outcome: 'agreement' })).to.equal(1);
  });
});
