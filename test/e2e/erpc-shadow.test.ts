/**
 * eRPC's `shadow.ignoreFields` through the real server, from an eRPC-shaped YAML file: a serving
 * anvil node and a shadow anvil node started at another genesis time, so their blocks differ in
 * the fields the time reaches (timestamp, hashes) and agree on the rest. A shadow whose
 * `ignoreFields` names those fields for eth_getBlockByNumber counts a match; the same shadow
 * without them counts a mismatch. `svc validate --print` takes the file with no rewrite.
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

/** Sum of `svc_shadow_comparison_total` samples of a project, method and outcome. */
async function comparisons(svc: SvcHandle, project: string, method: string, outcome: string): Promise<number> {
  const text = await (await fetch(svc.metricsUrl!)).text();
  return text
    .split('\n')
    .filter(
      (l) =>
        l.startsWith('svc_shadow_comparison_total{') &&
        l.includes(`project="${project}"`) &&
        l.includes(`method="${method}"`) &&
        l.includes(`outcome="${outcome}"`),
    )
    .reduce((s, l) => s + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** eRPC's shadow upstream shape, with ignoreFields in one project and none in the other. */
function erpcYaml(serving: string, shadow: string, ignored: string[]): string {
  const project = (id: string, ignoreFields: string) => `
  - id: ${id}
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
    upstreams:
      - id: serving
        type: evm
        endpoint: ${serving}
        evm: { chainId: ${CHAIN} }
      - id: candidate
        type: evm
        endpoint: ${shadow}
        evm: { chainId: ${CHAIN} }
        shadow:
          enabled: true
          sampleRate: 1.0${ignoreFields}`;
  const list = ignored.map((f) => JSON.stringify(f)).join(', ');
  return `logLevel: error
database:
  evmJsonRpcCache:
    connectors: []
    policies: []
projects:${project('tolerant', `\n          ignoreFields:\n            eth_getBlockByNumber: [${list}]\n            eth_getLogs: ["*.blockTimestamp"]`)}${project('strict', '')}
`;
}

describe("e2e: eRPC's shadow.ignoreFields", function () {
  this.timeout(30_000);
  let serving: AnvilHandle;
  let shadow: AnvilHandle;
  let svc: SvcHandle;
  let yaml: string;

  before(async () => {
    [serving, shadow] = await Promise.all([startAnvil({ chainId: CHAIN }), startAnvil({ chainId: CHAIN, args: ['--timestamp', '1600000000'] })]);
    await Promise.all([serving.rpc('anvil_mine', ['0x3']), shadow.rpc('anvil_mine', ['0x3'])]);
    const [a, b] = await Promise.all([serving.rpc('eth_getBlockByNumber', ['0x2', false]), shadow.rpc('eth_getBlockByNumber', ['0x2', false])]);
    const differing = Object.keys(a).filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
    expect(differing).to.include('timestamp');
    expect(differing.length).to.be.lessThan(Object.keys(a).length);
    yaml = erpcYaml(serving.url, shadow.url, differing);
    svc = await startSvc(parseYaml(yaml) as object);
    await waitFor(() => [...svc.proxy.projects.values()].every((p) => [...p.upstreams.values()].every((u) => u.state === 'ready')));
  });

  after(async () => {
    await svc?.close();
    await Promise.all([serving?.stop(), shadow?.stop()]);
  });

  it('with the differing fields ignored, the shadow answer counts as a match; the client gets the serving answer', async () => {
    const before = await comparisons(svc, 'tolerant', 'eth_getBlockByNumber', 'match');
    const r = await svc.post(`/tolerant/evm/${CHAIN}`, rpcBody('eth_getBlockByNumber', ['0x2', false]));
    expect(r.headers['x-svc-upstream']).to.equal('serving');
    expect(r.json.result.hash).to.equal((await serving.rpc('eth_getBlockByNumber', ['0x2', false])).hash);
    await waitFor(async () => (await comparisons(svc, 'tolerant', 'eth_getBlockByNumber', 'match')) >= before + 1);
    expect(await comparisons(svc, 'tolerant', 'eth_getBlockByNumber', 'mismatch')).to.equal(0);
  });

  it('without ignoreFields, the same answers count as a mismatch', async () => {
    const before = await comparisons(svc, 'strict', 'eth_getBlockByNumber', 'mismatch');
    const r = await svc.post(`/strict/evm/${CHAIN}`, rpcBody('eth_getBlockByNumber', ['0x2', false]));
    expect(r.headers['x-svc-upstream']).to.equal('serving');
    await waitFor(async () => (await comparisons(svc, 'strict', 'eth_getBlockByNumber', 'mismatch')) >= before + 1);
  });

  it('svc validate --print takes the file in its shape and the printed config validates again', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-erpc-shadow-'));
    try {
      const run = (args: string[]) => runSvcCli(args, dir);
      writeFileSync(join(dir, 'erpc.yaml'), yaml);
      const r = await run(['validate', '--config', 'erpc.yaml', '--print']);
      expect(r.code, r.err).to.equal(0);
      const printed = parseYaml(r.out) as { projects: Array<{ upstreams: Array<{ shadow?: { ignoreFields?: Record<string, string[]> } }> }> };
      expect(printed.projects[0]?.upstreams[1]?.shadow?.ignoreFields?.eth_getLogs).to.deep.equal(['*.blockTimestamp']);
      writeFileSync(join(dir, 'printed.yaml'), r.out);
      const again = await run(['validate', '--config', 'printed.yaml', '--print']);
      expect(again.code, again.err).to.equal(0);
      expect(again.out).to.include("# no rewrite: the config is in svc's shape");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
