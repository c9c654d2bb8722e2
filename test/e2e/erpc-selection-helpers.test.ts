/**
 * eRPC's cross-tick selection helpers in eRPC-shaped YAML, against anvil: eRPC's documented
 * example policy (`sortByScore(PREFER_FASTEST).stickyPrimary(...).readmitExcluded(...)`) validates
 * through `svc validate` and serves, and `probeExcluded` copies answered client reads (never a
 * write) to the upstream the policy excluded, counted at a recording forwarder in front of it and
 * in `svc_selection_probes_total`, feeding that upstream's health window.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { parse as parseYaml } from 'yaml';
import { evaluateSelection, selectionDecisions, selectionState } from '../../plugins/selection/index.ts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { startSvc, type SvcHandle, waitFor } from '../helpers/svc.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';
import { ADDR1, ADDR2, PK0, rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const NET = `evm:${CHAIN}`;
const PATH = `/main/evm/${CHAIN}`;

/** eRPC's shape with two upstreams and a policy; no cache, so every read reaches an upstream. */
const YAML = (policy: string, evalScope = 'network') => `
logLevel: warn
database:
  evmJsonRpcCache: { connectors: [], policies: [] }
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
        selectionPolicy:
          evalScope: ${evalScope}
          evalInterval: 1h
          evalTimeout: 5s
          evalFunc: |
${policy
  .trim()
  .split('\n')
  .map((l) => `            ${l.trim()}`)
  .join('\n')}
    upstreams:
      - id: first
        endpoint: __FIRST__
        evm: { chainId: ${CHAIN} }
      - id: second
        endpoint: __SECOND__
        evm: { chainId: ${CHAIN} }
`;

/** eRPC's documented example policy (specs/selection-policy, its configuration section), as an arrow function. */
const ERPC_EXAMPLE = `(upstreams, ctx) =>
  upstreams
    .excludeIf(all(samplesAbove(10), errorRateAbove(0.7)))
    .excludeIf(blockNumberLagAbove(50))
    .sortByScore(PREFER_FASTEST)
    .stickyPrimary({ hysteresis: 0.30, minSwitchInterval: '30s' })
    .readmitExcluded({ reAdmitAfter: '90s', maxConcurrent: 2, position: 'tail' })`;

/** Excludes `second` and asks for every answered read to be copied to it. */
const PROBING = `(upstreams, ctx) =>
  upstreams
    .excludeId('second')
    .sortByScore(PREFER_FASTEST)
    .probeExcluded({ sampleRate: 1, minSamples: 0, maxConcurrent: 4, timeout: '5s' })`;

/** Only eth_getBalance's own evaluation excludes `second`; every evaluation asks for probes. */
const PROBING_ONE_METHOD = `(upstreams, ctx) =>
  (methodMatches('eth_getBalance') ? upstreams.excludeId('second') : upstreams)
    .probeExcluded({ sampleRate: 1, minSamples: 0, maxConcurrent: 4, timeout: '5s' })`;

/** Sum of the samples of a metric whose labels include every given `name="value"` pair. */
async function metric(url: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe("e2e: eRPC's cross-tick selection helpers from YAML, against anvil", function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let recorder: RecordingProxy;
  let svc: SvcHandle | undefined;
  let dir: string;

  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-erpc-helpers-'));
    cluster = await startAnvilCluster({ count: 2, ids: ['first', 'second'] });
    recorder = await startRecordingProxy(cluster.node('second').url);
  });
  after(async () => {
    await svc?.close();
    await recorder?.close();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });

  const fill = (yaml: string) => yaml.replaceAll('__FIRST__', cluster.node('first').url).replaceAll('__SECOND__', recorder.url);

  it("eRPC's example policy (sortByScore, stickyPrimary, readmitExcluded) validates with svc validate and serves, holding its primary", async () => {
    writeFileSync(join(dir, 'example.yaml'), fill(YAML(ERPC_EXAMPLE)));
    const v = await runSvcCli(['validate', '--config', 'example.yaml'], dir);
    expect(v.code, v.err).to.equal(0);

    svc = await startSvc(parseYaml(fill(YAML(ERPC_EXAMPLE))) as object);
    const s = svc;
    const first = selectionState(s.proxy, 'main', NET)!;
    expect(first).to.deep.include({ custom: true });
    expect(first.order).to.have.members(['first', 'second']);
    for (let i = 0; i < 3; i++) {
      const r = await s.post(PATH, rpcBody('eth_getBalance', [ADDR1, 'latest'], i));
      expect(r.json.result, r.text).to.match(/^0x/);
      expect(r.headers['x-svc-upstream']).to.equal(first.order[0]);
    }
    // Another evaluation keeps the primary: both are healthy, neither clears the 30% hysteresis within 30 s.
    expect(await evaluateSelection(s.proxy, 'main', NET)).to.equal(true);
    expect(selectionState(s.proxy, 'main', NET)!.order[0]).to.equal(first.order[0]);
    expect(selectionDecisions(s.proxy, 'main', NET).filter((d) => d.step === 'evalFunc')).to.deep.equal([]);
  });

  it('probeExcluded copies answered reads to the excluded upstream (never a write), feeding its health window', async () => {
    svc = await startSvc(parseYaml(fill(YAML(PROBING))) as object);
    const s = svc;
    expect(selectionState(s.proxy, 'main', NET)).to.deep.include({ order: ['first'] });
    const health = s.proxy.projects.get('main')!.health;
    const before = health.snapshot('second', '*').requests;
    const copies = () => recorder.callsOf('eth_getBalance').filter((c) => c.params[0] === ADDR2).length;
    const start = copies();

    for (let i = 0; i < 3; i++) {
      const r = await s.post(PATH, rpcBody('eth_getBalance', [ADDR2, 'latest'], i));
      expect(r.json.result, r.text).to.match(/^0x/);
      expect(r.headers['x-svc-upstream']).to.equal('first');
    }
    await waitFor(() => copies() - start === 3, 10_000);
    await waitFor(async () => (await metric(s.metricsUrl!, 'svc_selection_probes_total', { upstream: 'second', outcome: 'ok' })) >= 3, 10_000);
    expect(health.snapshot('second', '*').requests).to.be.greaterThanOrEqual(before + 3);

    const raw = await privateKeyToAccount(PK0 as Hex).signTransaction({
      chainId: CHAIN,
      type: 'eip1559',
      to: ADDR2,
      value: 1n,
      nonce: 0,
      gas: 21000n,
      maxFeePerGas: parseGwei('20'),
      maxPriorityFeePerGas: parseGwei('1'),
    });
    const w = await s.post(PATH, rpcBody('eth_sendRawTransaction', [raw]));
    expect(w.json.result, w.text).to.equal(keccak256(raw));
    // A later read is the barrier: its copy was scheduled after the write's would have been.
    await s.post(PATH, rpcBody('eth_getBalance', [ADDR2, 'latest'], 9));
    await waitFor(() => copies() - start === 4, 10_000);
    expect(recorder.callsOf('eth_sendRawTransaction')).to.deep.equal([]);
  });

  it("evalScope network-method: a call a method's scope served is copied to what that scope's evaluation left out; other methods' calls are not", async () => {
    svc = await startSvc(parseYaml(fill(YAML(PROBING_ONE_METHOD, 'network-method'))) as object);
    const s = svc;
    const copies = (method: string) => recorder.callsOf(method).filter((c) => c.params[0] === ADDR1).length;
    const served = async (method: string, id: number) => {
      const r = await s.post(PATH, rpcBody(method, [ADDR1, 'latest'], id));
      expect(r.json.result, r.text).to.match(/^0x/);
      return r.headers['x-svc-upstream'];
    };
    // The first call has no scope yet (no upstream answered eth_getBalance); the second opens it.
    expect(await served('eth_getBalance', 1)).to.equal('first');
    await served('eth_getBalance', 2);
    await waitFor(() => selectionState(s.proxy, 'main', NET)!.scopes.some((x) => x.method === 'eth_getBalance' && x.order.join() === 'first'));
    const balance = copies('eth_getBalance');
    const count = copies('eth_getTransactionCount');
    for (let i = 0; i < 2; i++) expect(await served('eth_getBalance', 10 + i)).to.equal('first');
    await waitFor(() => copies('eth_getBalance') - balance === 2, 10_000);
    // The network's own evaluation excluded nothing: its calls go to one upstream, copied nowhere.
    expect(await served('eth_getTransactionCount', 20)).to.equal('first');
    // A later scope read is the barrier: its copy was scheduled after the other call's would have been.
    await served('eth_getBalance', 21);
    await waitFor(() => copies('eth_getBalance') - balance === 3, 10_000);
    expect(copies('eth_getTransactionCount') - count).to.equal(0);
  });
});
