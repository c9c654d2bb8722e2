/**
 * eRPC's `evm.servedTip.enabledFor` from an eRPC-shaped YAML, against two real anvil nodes at
 * different heights: with the served tip on for `latest`, the network serves the block a
 * majority of its upstreams have (of two, the lower) for `eth_blockNumber`, whichever node
 * answers, and interpolates `latest` to it; without it (eRPC's default max mode) the highest.
 * The file also validates and re-validates through `svc validate --print` (clusterDelta dropped).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startRecordingProxy } from '../helpers/recording-proxy.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startSvc, type SvcHandle, waitFor } from '../helpers/svc.ts';
import { runSvcCli, type CliRun } from '../helpers/svc-cli.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const AHEAD = 12;
const BEHIND = 5;
/** anvil's first funded account. */
const ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const toHex = (n: number) => `0x${n.toString(16)}`;

const YAML = (servedTip: string) => `
logLevel: warn
metrics: { enabled: false }
database:
  evmJsonRpcCache:
    connectors: []
    policies: []
projects:
  - id: main
    networks:
      - architecture: evm
        evm:
          chainId: ${CHAIN}
${servedTip}
    upstreams:
      - id: ahead
        endpoint: __AHEAD__
        evm: { chainId: ${CHAIN}, statePollerInterval: 100ms }
      - id: behind
        endpoint: __BEHIND__
        evm: { chainId: ${CHAIN}, statePollerInterval: 100ms }
`;

/** eRPC's documented shape, with its deprecated clusterDelta (ignored by eRPC, dropped by svc). */
const SERVED = `          servedTip:
            enabledFor: ["latest", "finalized"]
            clusterDelta: 2`;

describe('e2e: eRPC evm.servedTip from YAML, against two anvil nodes at different heights', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let svc: SvcHandle | undefined;

  before(async () => {
    cluster = await startAnvilCluster({ count: 2, ids: ['ahead', 'behind'] });
    await cluster.mine('ahead', AHEAD);
    await cluster.mine('behind', BEHIND);
    expect(await cluster.heads()).to.deep.equal([AHEAD, BEHIND]);
  });
  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });

  const fill = (yaml: string) => yaml.replaceAll('__AHEAD__', cluster.node('ahead').url).replaceAll('__BEHIND__', cluster.node('behind').url);
  const blockNumber = async (s: SvcHandle, headers: Record<string, string> = {}) => {
    const r = await s.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }, headers);
    expect(r.json?.result, r.text).to.be.a('string');
    return { n: Number.parseInt(r.json.result as string, 16), upstream: r.headers['x-svc-upstream'] };
  };
  /** Both heads polled: the poller has seen the behind node (its lag shows). */
  const polled = (s: SvcHandle) => waitFor(() => s.proxy.projects.get('main')!.health.snapshot('behind', '*').blockHeadLag === AHEAD - BEHIND, 10_000);

  it('served tip on for latest: eth_blockNumber is the block both nodes have, even when the node ahead answers', async () => {
    svc = await startSvc(parseYaml(fill(YAML(SERVED))) as object);
    const s = svc;
    await polled(s);
    expect((await blockNumber(s)).n).to.equal(BEHIND);
    const fromAhead = await blockNumber(s, { 'x-svc-use-upstream': 'ahead' });
    expect(fromAhead).to.deep.equal({ n: BEHIND, upstream: 'ahead' });
  });

  it('served tip on: `latest` is interpolated to that block, so the node ahead is asked for it too', async () => {
    const recorder = await startRecordingProxy(cluster.node('ahead').url);
    try {
      svc = await startSvc(parseYaml(YAML(SERVED).replace('__AHEAD__', recorder.url).replace('__BEHIND__', cluster.node('behind').url)) as object);
      const s = svc;
      await polled(s);
      // `latest` is interpolated only while the network head is fresh (a poll within its window): on a loaded machine a call may
      // find it a moment old and go as `latest`; the next ones are interpolated.
      await waitFor(async () => {
        const r = await s.post(PATH, { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: [ADDRESS, 'latest'] }, { 'x-svc-use-upstream': 'ahead' });
        expect(r.json?.result, r.text).to.match(/^0x/);
        return recorder.callsOf('eth_getBalance').some((c) => (c.params as unknown[])[1] !== 'latest');
      }, 10_000);
      // Interpolated, it is always the served tip (the block both nodes have), never the node ahead's head.
      const blocks = recorder.callsOf('eth_getBalance').map((c) => (c.params as unknown[])[1]);
      const interpolated = blocks.filter((b) => b !== 'latest');
      expect(interpolated).to.not.be.empty;
      expect(
        interpolated.every((b) => b === toHex(BEHIND)),
        JSON.stringify(blocks),
      ).to.equal(true);
    } finally {
      await recorder.close();
    }
  });

  it("without servedTip (eRPC's default max mode) the network serves the highest head", async () => {
    svc = await startSvc(parseYaml(fill(YAML(''))) as object);
    const s = svc;
    await polled(s);
    expect((await blockNumber(s)).n).to.equal(AHEAD);
    expect((await blockNumber(s, { 'x-svc-use-upstream': 'behind' })).n).to.equal(AHEAD);
  });
});

describe('e2e: eRPC servedTip YAML through svc validate --print', function () {
  this.timeout(60_000);
  let dir: string;
  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-erpc-tip-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function run(args: string[]): Promise<CliRun> {
    return runSvcCli(args, dir);
  }

  it('validates, drops clusterDelta with a line saying why, and the print re-validates unchanged', async () => {
    writeFileSync(join(dir, 'tip.yaml'), YAML(SERVED).replace('__AHEAD__', 'http://127.0.0.1:8545').replace('__BEHIND__', 'http://127.0.0.1:8546'));
    const r = await run(['validate', '--config', 'tip.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    expect(r.out).to.match(/# {3}projects\[0\]\.networks\[0\]\.evm\.servedTip\.clusterDelta: 2 -> \(removed: deprecated in eRPC, which ignores it/);
    const printed = parseYaml(r.out) as { projects: Array<{ networks: Array<{ evm: { servedTip: unknown } }> }> };
    expect(printed.projects[0]?.networks[0]?.evm.servedTip).to.deep.equal({ enabledFor: ['latest', 'finalized'] });
    writeFileSync(join(dir, 'printed.yaml'), r.out);
    const again = await run(['validate', '--config', 'printed.yaml', '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
  });
});
