/**
 * eRPC's `integrity.budget` and per-check switches through the real server, from an eRPC-shaped
 * YAML file (`checks.<id>.enabled: false` read into `skipChecks`, shown by `svc validate --print`): level
 * `authoritative` over two upstreams on one anvil node, budget `maxPerSecond: 1`. The first
 * answer's vote is paid for (one fetch from the other upstream); answers of a burst beyond the
 * budget are served unvoted and counted as `budget_skipped`, never refused.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';

const CHAIN = 31337;

const ERPC_YAML = `
logLevel: error
database:
  evmJsonRpcCache:
    connectors: []
    policies: []
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
        integrity:
          level: authoritative
          budget:
            maxPerSecond: 1
            maxConcurrent: 2
          checks:
            blockByHashIdentity: { enabled: false }
            blockByNumberIdentity: { enabled: false }
            bloomMatch: { enabled: true }
    upstreams:
      - { id: a, type: evm, endpoint: __ANVIL__, evm: { chainId: ${CHAIN} } }
      - { id: b, type: evm, endpoint: __ANVIL__, evm: { chainId: ${CHAIN} } }
`;

/** Sum of `svc_integrity_flagged_total` samples with an outcome. */
async function flagged(svc: SvcHandle, outcome: string): Promise<number> {
  const text = await (await fetch(svc.metricsUrl!)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('svc_integrity_flagged_total{') && l.includes(`outcome="${outcome}"`))
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe("e2e: eRPC's integrity.budget", function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN });
    await anvil.rpc('anvil_mine', ['0x8']);
    svc = await startSvc(parseYaml(ERPC_YAML.replaceAll('__ANVIL__', anvil.url)) as object);
    await waitFor(() => [...svc.proxy.projects.get('main')!.upstreams.values()].every((u) => u.state === 'ready'));
  });

  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  it('loads with the budget in the network integrity block, and the checks turned off as skipChecks', () => {
    const integrity = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!.config.settings.integrity as Record<string, unknown>;
    expect(integrity.budget).to.deep.equal({ maxPerSecond: 1, maxConcurrent: 2 });
    expect(integrity.skipChecks).to.deep.equal(['block.request']);
    expect(integrity).to.not.have.property('checks');
  });

  it('svc validate --print shows the checks rewrite; the printed config validates again', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-erpc-integrity-'));
    try {
      const run = (args: string[]) => runSvcCli(args, dir);
      writeFileSync(join(dir, 'erpc.yaml'), ERPC_YAML.replaceAll('__ANVIL__', anvil.url));
      const r = await run(['validate', '--config', 'erpc.yaml', '--print']);
      expect(r.code, r.err).to.equal(0);
      expect(r.out).to.include('projects[0].networks[0].integrity.skipChecks');
      writeFileSync(join(dir, 'printed.yaml'), r.out);
      const again = await run(['validate', '--config', 'printed.yaml', '--print']);
      expect(again.code, again.err).to.equal(0);
      expect(again.out).to.include("# no rewrite: the config is in svc's shape");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a burst beyond maxPerSecond is served in full; the answers past the budget are counted as budget_skipped', async () => {
    const before = await flagged(svc, 'budget_skipped');
    const blocks = [1, 2, 3, 4, 5, 6];
    const answers = await Promise.all(blocks.map((n) => svc.post(`/main/evm/${CHAIN}`, rpcBody('eth_getBlockByNumber', [`0x${n.toString(16)}`, false], n))));
    for (const [i, r] of answers.entries()) {
      expect(r.status).to.equal(200);
      expect(r.headers['x-svc-integrity']).to.equal('authoritative');
      expect(r.json.result.number, r.text).to.equal(`0x${(blocks[i] as number).toString(16)}`);
    }
    // One token a second: of the upstream answers to six calls sent at once (a hedge may add
    // some), only the first few are voted on; each other one is counted once.
    expect((await flagged(svc, 'budget_skipped')) - before).to.be.at.least(2);
    expect(await flagged(svc, 'would_reject')).to.equal(0);
  });
});
