/**
 * eRPC's `evm.servedTip.guaranteedMethods` and `maxRegressionBlocks` from eRPC-shaped YAML,
 * against real anvil nodes (eth_blockNumber is pinned to the served tip):
 *
 * - guaranteedMethods: two nodes ahead ignore `trace_*`, one trace-capable node is behind; the
 *   served tip is floored to the block the trace-capable node has, for every call (eRPC clamps
 *   the network's tip), and without the key it is the plain majority pick;
 * - maxRegressionBlocks: four nodes at 2000, then two are reverted (evm_revert) to block 10, so
 *   the majority pick falls 1990 blocks under the second-highest head. By default (1024) the
 *   last corroborated pick (2000) is still served; with -1, or a tolerance above 1990, the pick
 *   (10) is served at once. (The one-minute fail-open is covered with a fake clock in the unit
 *   tests: no test waits a minute.)
 */
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { startSvc, type SvcHandle, waitFor } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

const yaml = (servedTip: string, upstreams: string) => `
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
          servedTip:
${servedTip}
    upstreams:
${upstreams}
`;

const upstream = (id: string, url: string, extra = '') => `      - id: ${id}
        endpoint: ${url}
        evm: { chainId: ${CHAIN}, statePollerInterval: 100ms }${extra}`;

async function blockNumber(s: SvcHandle): Promise<number> {
  const r = await s.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  expect(r.json?.result, r.text).to.be.a('string');
  return Number.parseInt(r.json.result as string, 16);
}

describe('e2e: eRPC servedTip.guaranteedMethods, against anvil nodes where only a node behind serves trace_*', function () {
  this.timeout(60_000);
  const AHEAD = 14;
  const BEHIND = 6;
  let cluster: AnvilCluster;
  let svc: SvcHandle | undefined;

  before(async () => {
    cluster = await startAnvilCluster({ count: 3, ids: ['full-1', 'full-2', 'archive'] });
    await cluster.mine('full-1', AHEAD);
    await cluster.mine('full-2', AHEAD);
    await cluster.mine('archive', BEHIND);
  });
  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });

  /** @param everyIgnores a pattern every node ignores too */
  const ups = (everyIgnores?: string) => {
    const all = everyIgnores ? `, "${everyIgnores}"` : '';
    return [
      upstream('full-1', cluster.node('full-1').url, `\n        ignoreMethods: ["trace_*"${all}]`),
      upstream('full-2', cluster.node('full-2').url, `\n        ignoreMethods: ["trace_*"${all}]`),
      upstream('archive', cluster.node('archive').url, everyIgnores ? `\n        ignoreMethods: ["${everyIgnores}"]` : ''),
    ].join('\n');
  };
  /** Every head polled: the archive node's lag shows. */
  const polled = (s: SvcHandle) => waitFor(() => s.proxy.projects.get('main')!.health.snapshot('archive', '*').blockHeadLag === AHEAD - BEHIND, 15_000);

  it('the served latest is the block the trace_* upstreams have, for eth_blockNumber too', async () => {
    svc = await startSvc(parseYaml(yaml('            enabledFor: ["latest"]\n            guaranteedMethods: ["trace_*"]', ups())) as object);
    await polled(svc);
    expect(await blockNumber(svc)).to.equal(BEHIND);
  });

  it('a pattern no upstream serves sets no floor: the plain majority pick', async () => {
    svc = await startSvc(parseYaml(yaml('            enabledFor: ["latest"]\n            guaranteedMethods: ["debug_*"]', ups('debug_*'))) as object);
    await polled(svc);
    // No node serves debug_*: no floor, the majority of [14, 14, 6].
    expect(await blockNumber(svc)).to.equal(AHEAD);
  });

  it('without guaranteedMethods the served latest is the plain majority pick (the block both nodes ahead have)', async () => {
    svc = await startSvc(parseYaml(yaml('            enabledFor: ["latest"]', ups())) as object);
    await polled(svc);
    expect(await blockNumber(svc)).to.equal(AHEAD);
  });
});

describe('e2e: eRPC servedTip.maxRegressionBlocks, against four anvil nodes of which two fall back 1990 blocks', function () {
  this.timeout(90_000);
  const LOW = 10;
  const HIGH = 2000;
  const IDS = ['a', 'b', 'c', 'd'];
  let cluster: AnvilCluster;
  let svc: SvcHandle | undefined;
  let snapshots: Record<string, string> = {};

  before(async () => {
    cluster = await startAnvilCluster({ count: 4, ids: IDS });
    for (const id of IDS) await cluster.mine(id, LOW);
  });
  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });

  /** Every node at HIGH, c and d with a snapshot at LOW to fall back to. */
  async function climb(): Promise<void> {
    snapshots = {};
    for (const id of ['c', 'd']) snapshots[id] = (await cluster.node(id).rpc('evm_snapshot')) as string;
    for (const id of IDS) {
      const h = await cluster.head(id);
      if (h < HIGH) await cluster.mine(id, HIGH - h);
    }
    expect(await cluster.heads()).to.deep.equal([HIGH, HIGH, HIGH, HIGH]);
  }
  async function fallBack(s: SvcHandle): Promise<void> {
    for (const id of ['c', 'd']) expect(await cluster.node(id).rpc('evm_revert', [snapshots[id]])).to.equal(true);
    expect(await cluster.heads()).to.deep.equal([HIGH, HIGH, LOW, LOW]);
    // Both fallen nodes polled: their lag behind the highest head shows.
    const health = s.proxy.projects.get('main')!.health;
    await waitFor(() => health.snapshot('c', '*').blockHeadLag === HIGH - LOW && health.snapshot('d', '*').blockHeadLag === HIGH - LOW, 15_000);
  }
  async function start(servedTip: string): Promise<SvcHandle> {
    await climb();
    const s = await startSvc(parseYaml(yaml(servedTip, IDS.map((id) => upstream(id, cluster.node(id).url)).join('\n'))) as object);
    await waitFor(async () => (await blockNumber(s)) === HIGH, 15_000);
    return s;
  }

  it('by default (1024 blocks) the last corroborated pick is still served after the majority pick falls 1990 blocks', async () => {
    svc = await start('            enabledFor: ["latest"]');
    await fallBack(svc);
    // The hold lasts up to a minute from the last corroborated pick: well past these reads.
    for (let i = 0; i < 3; i++) expect(await blockNumber(svc)).to.equal(HIGH);
  });

  it('maxRegressionBlocks: -1 turns the guard off: the majority pick (10) is served at once', async () => {
    svc = await start('            enabledFor: ["latest"]\n            maxRegressionBlocks: -1');
    await fallBack(svc);
    expect(await blockNumber(svc)).to.equal(LOW);
  });

  it('a fall within maxRegressionBlocks (5000) is served as computed', async () => {
    svc = await start('            enabledFor: ["latest"]\n            maxRegressionBlocks: 5000');
    await fallBack(svc);
    expect(await blockNumber(svc)).to.equal(LOW);
  });
});
