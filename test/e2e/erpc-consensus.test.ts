/**
 * eRPC's consensus keys through the real server against three anvil nodes made to disagree, from
 * an eRPC-shaped YAML file: `preferHighestValueFor` (the highest nonce wins over the others),
 * `disputeLogLevel` (an outvoted node is logged at the level set) with `misbehaviorsDestination`
 * (the round appended to a JSONL file in eRPC's record shape), and `fireAndForget` (a
 * transaction reaches every node although the first answer returned at once). `svc validate
 * --print` takes the file and its output validates again.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import pino from 'pino';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { parse as parseYaml } from 'yaml';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** anvil dev account #5 (funded on every node). */
const PK5 = '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba';
const WHO = '0x00000000000000000000000000000000c0ffee77';

function erpcYaml(upstreams: string, dir: string): string {
  return `
logLevel: info
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
          - matchMethod: "eth_getTransactionCount"
            consensus:
              maxParticipants: 3
              agreementThreshold: 1
              preferHighestValueFor:
                eth_getTransactionCount: [result]
          - matchMethod: "eth_getBalance"
            consensus:
              maxParticipants: 3
              # Three must agree, so every slot is awaited; the most common answer is served.
              agreementThreshold: 3
              disputeBehavior: acceptMostCommonValidResult
              disputeLogLevel: error
              misbehaviorsDestination:
                type: file
                path: ${dir}
                filePattern: "{method}-{networkId}"
          - matchMethod: "eth_sendRawTransaction"
            consensus:
              maxParticipants: 3
              agreementThreshold: 1
              fireAndForget: true
    upstreams:
${upstreams}
`;
}

describe("e2e: eRPC's consensus keys (preferHighestValueFor, disputeLogLevel, misbehaviorsDestination, fireAndForget)", function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let svc: SvcHandle;
  let dir: string;
  let yaml: string;
  const logs: Array<{ level: number; msg: string; method?: string; misbehaving?: string[] }> = [];

  before(async () => {
    cluster = await startAnvilCluster({ count: 3, chainId: CHAIN });
    dir = mkdtempSync(join(tmpdir(), 'svc-misbehaviors-e2e-'));
    const ups = cluster
      .upstreams()
      .map((u) => `      - { id: ${u.id}, type: evm, endpoint: "${u.endpoint}", evm: { chainId: ${CHAIN}, statePollerInterval: 200ms } }`)
      .join('\n');
    yaml = erpcYaml(ups, join(dir, 'misbehaviors'));
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) logs.push(JSON.parse(l));
        cb();
      },
    });
    svc = await startSvc(parseYaml(yaml) as object, { logger: pino({ level: 'info' }, sink) });
    await waitFor(() => [...svc.proxy.projects.get('main')!.upstreams.values()].every((u) => u.state === 'ready'));
  });

  after(async () => {
    await svc?.close();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('preferHighestValueFor: the highest nonce of the three nodes is the answer, though no two agree', async () => {
    const nonces = [5, 9, 7];
    for (let i = 0; i < 3; i++) await cluster.node(i).rpc('anvil_setNonce', [WHO, `0x${(nonces[i] as number).toString(16)}`]);
    const r = await svc.post(PATH, rpcBody('eth_getTransactionCount', [WHO, 'latest']));
    expect(r.json.result, r.text).to.equal('0x9');
    expect(r.headers['x-svc-upstream']).to.equal('anvil-1');
    expect(r.headers['x-svc-consensus-slots']).to.equal('3');
    // The lower nonces were outvoted, logged at the default level (warn).
    const line = logs.find((l) => l.method === 'eth_getTransactionCount');
    expect(line?.level).to.equal(40);
    // In the order their answers arrived: any order.
    expect(line?.misbehaving).to.have.members(['anvil-0', 'anvil-2']);
  });

  it('disputeLogLevel error and misbehaviorsDestination: the dispute, naming the outvoted node, is logged at error and the round written as one JSON line', async () => {
    await cluster.node(0).rpc('anvil_setBalance', [WHO, '0x7']);
    await cluster.node(1).rpc('anvil_setBalance', [WHO, '0x7']);
    await cluster.node(2).rpc('anvil_setBalance', [WHO, '0x9']);
    const r = await svc.post(PATH, rpcBody('eth_getBalance', [WHO, 'latest']));
    expect(r.json.result).to.equal('0x7');
    const line = logs.find((l) => l.method === 'eth_getBalance');
    expect(line?.level).to.equal(50); // pino's error
    expect(line?.misbehaving).to.deep.equal(['anvil-2']);
    const file = join(dir, 'misbehaviors', `eth_getBalance-evm_${CHAIN}.jsonl`);
    // Written off the request path (the folder too): wait for the whole line.
    await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').endsWith('\n'));
    const records = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records).to.have.length(1);
    const rec = records[0];
    expect(rec).to.include({ projectId: 'main', networkId: `evm:${CHAIN}`, method: 'eth_getBalance' });
    expect(rec.policy).to.include({ maxParticipants: 3, agreementThreshold: 3 });
    expect(rec.analysis.outcome).to.equal('dispute');
    expect(rec.winner.upstreamId).to.be.oneOf(['anvil-0', 'anvil-1']);
    expect(rec.participants.find((p: { upstreamId: string }) => p.upstreamId === 'anvil-2').response).to.equal('0x9');
  });

  it('fireAndForget: eth_sendRawTransaction answers with the first hash and still reaches every node', async () => {
    const account = privateKeyToAccount(PK5);
    const nonce = Number.parseInt(await cluster.node(0).rpc('eth_getTransactionCount', [account.address, 'latest']), 16);
    const raw = await account.signTransaction({
      chainId: CHAIN,
      type: 'eip1559',
      to: WHO,
      value: 1n,
      nonce,
      gas: 21000n,
      maxFeePerGas: parseGwei('20'),
      maxPriorityFeePerGas: parseGwei('1'),
    });
    const r = await svc.post(PATH, rpcBody('eth_sendRawTransaction', [raw]));
    expect(r.json.result, r.text).to.equal(keccak256(raw as Hex));
    await waitFor(async () => {
      const found = await Promise.all([0, 1, 2].map((i) => cluster.node(i).rpc('eth_getTransactionByHash', [keccak256(raw as Hex)])));
      return found.every((t) => t !== null);
    });
  });

  it('svc validate --print takes the file in its shape; the printed config validates again', async () => {
    await ensureBuilt();
    const run = (args: string[]) => runSvcCli(args, dir);
    writeFileSync(join(dir, 'erpc.yaml'), yaml);
    const r = await run(['validate', '--config', 'erpc.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    const printed = parseYaml(r.out) as { projects: Array<{ networks: Array<{ failsafe: Array<{ consensus: Record<string, unknown> }> }> }> };
    expect(printed.projects[0]?.networks[0]?.failsafe[2]?.consensus.fireAndForget).to.equal(true);
    writeFileSync(join(dir, 'printed.yaml'), r.out);
    const again = await run(['validate', '--config', 'printed.yaml', '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
  });
});
