/**
 * Static responses per network (`networks[].staticResponses`, eRPC's key) end to end: svc loaded
 * from a YAML file, in front of a real anvil. A configured result or error is answered with the
 * caller's own id (string and number), in single calls, batches and through viem and ethers, with
 * no upstream attempt, no cache and one count in `svc_network_static_response_served_total`; a
 * call whose params differ reaches anvil. Then the CLI: `svc validate` accepts the YAML file, and
 * an eRPC-shaped file with `staticResponses` validates as it is (`--from-erpc` prints it).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { JsonRpcProvider } from 'ethers';
import { createPublicClient, http } from 'viem';
import { parse as parseYaml } from 'yaml';
import { readConfigFile } from '../../config/load.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { httpRequest, startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const METRIC = 'svc_network_static_response_served_total';

/** The svc config as an operator writes it; `__ANVIL__` is the node's URL. */
const YAML = `
logLevel: error
projects:
  - id: main
    networkDefaults:
      staticResponses:
        - method: eth_maxPriorityFeePerGas
          response: { result: "0x1" }
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
        staticResponses:
          # a chain whose nodes lack the fee method: a fixed answer
          - method: eth_maxPriorityFeePerGas
            response:
              result: "0x0"
          # a genesis block the nodes cannot serve
          - method: eth_getBlockByNumber
            params: ["0x0", false]
            response:
              result: { number: "0x0", hash: "0x${'ab'.repeat(32)}" }
          - method: x_numbers
            params: [1, { b: 2, a: "0x1" }]
            response: { result: matched }
          - method: eth_getProof
            response:
              error:
                code: -32601
                message: "the method eth_getProof does not exist/is not available"
          - method: x_revert
            params: []
            response:
              error: { code: 3, message: "execution reverted: nope", data: "0x08c379a0" }
    upstreams:
      - id: anvil
        endpoint: __ANVIL__
        evm: { chainId: ${CHAIN} }
`;

/** An eRPC file as eRPC's docs write one (legacy names and shapes), with static responses. */
const ERPC_YAML = `
logLevel: WARN
server:
  listenV4: true
  httpHostV4: 127.0.0.1
  httpPortV4: 4000
projects:
  - id: main
    networks:
      - architecture: evm
        evm:
          chainId: 324
        multiplexing: { enabled: true }
        staticResponses:
          - method: eth_getBlockByNumber
            params: ["0x0", false]
            response:
              result: { number: "0x0", hash: "0x01" }
          - method: eth_maxPriorityFeePerGas
            response:
              error: { code: -32601, message: "method not found" }
    upstreams:
      - id: node
        type: evm
        endpoint: http://127.0.0.1:8545
        evm:
          chainId: 324
`;

/** Sum of the samples of a metric whose labels include every given label (Prometheus text format). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.lastIndexOf('}'));
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe('e2e: static responses in front of anvil (svc loaded from YAML)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let dir: string;

  const raw = (body: string) => svc.post(PATH, body);
  const served = async (labels: Record<string, string> = {}) => sample((await httpRequest('GET', svc.metricsUrl!)).text, METRIC, labels);

  before(async () => {
    anvil = await startAnvil();
    dir = mkdtempSync(join(tmpdir(), 'svc-static-'));
    writeFileSync(join(dir, 'svc.yaml'), YAML.replace('__ANVIL__', anvil.url));
    svc = await startSvc((await readConfigFile(join(dir, 'svc.yaml'))) as object);
  });

  after(async () => {
    await svc?.close();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("a configured result answers with the caller's id (string and number), no upstream and no cache", async () => {
    const before = await served({ network: `evm:${CHAIN}`, category: 'eth_maxPriorityFeePerGas' });
    const a = await raw('{"jsonrpc":"2.0","id":"abc-1","method":"eth_maxPriorityFeePerGas","params":[]}');
    expect(a.status).to.equal(200);
    expect(a.text).to.equal('{"jsonrpc":"2.0","id":"abc-1","result":"0x0"}');
    expect(a.headers).to.not.have.property('x-svc-upstream');
    expect(a.headers['x-svc-upstream-attempts']).to.equal('0');
    expect(a.headers['x-svc-cache']).to.not.equal('HIT');
    // No params at all, a number id: the same entry (the network's list replaced networkDefaults').
    const b = await raw('{"jsonrpc":"2.0","id":7,"method":"eth_maxPriorityFeePerGas"}');
    expect(b.text).to.equal('{"jsonrpc":"2.0","id":7,"result":"0x0"}');
    expect(b.headers['x-svc-cache']).to.not.equal('HIT');
    expect(b.headers['x-svc-upstream-attempts']).to.equal('0');
    expect((await served({ network: `evm:${CHAIN}`, category: 'eth_maxPriorityFeePerGas' })) - before).to.equal(2);
    // anvil itself answers something else: the answer above came from config.
    expect(await anvil.rpc('eth_maxPriorityFeePerGas', [])).to.not.equal('0x0');
  });

  it('viem and ethers read the configured answers', async () => {
    const client = createPublicClient({ transport: http(`${svc.url}${PATH}`) });
    expect(await client.request({ method: 'eth_maxPriorityFeePerGas' })).to.equal('0x0');
    const provider = new JsonRpcProvider(`${svc.url}${PATH}`, CHAIN, { staticNetwork: true, cacheTimeout: -1 });
    try {
      expect(await provider.send('eth_maxPriorityFeePerGas', [])).to.equal('0x0');
      const genesis = (await provider.send('eth_getBlockByNumber', ['0x0', false])) as { hash: string };
      expect(genesis.hash).to.equal(`0x${'ab'.repeat(32)}`);
    } finally {
      provider.destroy();
    }
  });

  it('params match deeply: numbers by value, object keys in any order; other params reach anvil', async () => {
    const hit = await raw('{"jsonrpc":"2.0","id":1,"method":"x_numbers","params":[1.0,{"a":"0x1","b":2e0}]}');
    expect(hit.json).to.deep.equal({ jsonrpc: '2.0', id: 1, result: 'matched' });
    // A string "1" is not the number 1, and "0x01" is not "0x1": anvil gets these, and knows no x_numbers.
    for (const params of ['["1",{"a":"0x1","b":2}]', '[1,{"a":"0x01","b":2}]', '[1,{"a":"0x1","b":2,"c":3}]']) {
      const miss = await raw(`{"jsonrpc":"2.0","id":2,"method":"x_numbers","params":${params}}`);
      expect(miss.json.error, params).to.not.equal(undefined);
      expect(miss.json.result, params).to.equal(undefined);
      expect(Number(miss.headers['x-svc-upstream-attempts']), params).to.be.at.least(1);
    }
    // The genesis entry answers ["0x0", false]; ["0x0", true] is anvil's real block.
    const fake = await raw('{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x0",false]}');
    expect(fake.json.result).to.deep.equal({ number: '0x0', hash: `0x${'ab'.repeat(32)}` });
    const real = await raw('{"jsonrpc":"2.0","id":4,"method":"eth_getBlockByNumber","params":["0x0",true]}');
    expect(real.json.result.hash).to.equal(((await anvil.rpc('eth_getBlockByNumber', ['0x0', true])) as { hash: string }).hash);
    expect(real.headers['x-svc-upstream']).to.equal('anvil');
  });

  it('a configured error reaches the client exactly as written, HTTP 200, alone and in a batch', async () => {
    const before = await served({ category: 'eth_getProof' });
    const e = await raw('{"jsonrpc":"2.0","id":"p","method":"eth_getProof","params":null}');
    expect(e.status).to.equal(200);
    expect(e.text).to.equal('{"jsonrpc":"2.0","id":"p","error":{"code":-32601,"message":"the method eth_getProof does not exist/is not available"}}');
    expect(e.headers['x-svc-upstream-attempts']).to.equal('0');
    const batch = await raw(
      '[{"jsonrpc":"2.0","id":1,"method":"x_revert"},{"jsonrpc":"2.0","id":"two","method":"eth_maxPriorityFeePerGas","params":[]},{"jsonrpc":"2.0","id":3,"method":"eth_chainId","params":[]}]',
    );
    expect(batch.status).to.equal(200);
    expect(batch.json).to.deep.equal([
      { jsonrpc: '2.0', id: 1, error: { code: 3, message: 'execution reverted: nope', data: '0x08c379a0' } },
      { jsonrpc: '2.0', id: 'two', result: '0x0' },
      { jsonrpc: '2.0', id: 3, result: '0x7a69' },
    ]);
    expect((await served({ category: 'eth_getProof' })) - before).to.equal(1);
  });

  describe('svc validate through the CLI', function () {
    this.timeout(120_000);
    before(async () => ensureBuilt());

    function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
      const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
      return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out, err })));
    }

    it('accepts the YAML file with staticResponses, and refuses an entry with both result and error', async () => {
      const ok = await run(['validate', '--config', 'svc.yaml']);
      expect(ok.code, ok.err).to.equal(0);
      writeFileSync(
        join(dir, 'bad.yaml'),
        YAML.replace('__ANVIL__', anvil.url).replace('result: { number: "0x0"', 'error: { code: 1, message: m }\n              result: { number: "0x0"'),
      );
      const bad = await run(['validate', '--config', 'bad.yaml']);
      expect(bad.code).to.equal(1);
      expect(bad.err).to.include('projects[0].networks[0].staticResponses[1].response: set either result or error, not both');
    });

    it('an eRPC file with staticResponses validates as it is, and --from-erpc keeps the entries', async () => {
      writeFileSync(join(dir, 'erpc.yaml'), ERPC_YAML);
      const plain = await run(['validate', '--config', 'erpc.yaml']);
      expect(plain.code, plain.err).to.equal(0);
      const r = await run(['validate', '--from-erpc', 'erpc.yaml']);
      expect(r.code, r.err).to.equal(0);
      const printed = parseYaml(r.out) as { projects: Array<{ networks: Array<{ staticResponses: unknown[] }> }> };
      expect(printed.projects[0]?.networks[0]?.staticResponses).to.deep.equal([
        { method: 'eth_getBlockByNumber', params: ['0x0', false], response: { result: { number: '0x0', hash: '0x01' } } },
        { method: 'eth_maxPriorityFeePerGas', response: { error: { code: -32601, message: 'method not found' } } },
      ]);
    });
  });
});
