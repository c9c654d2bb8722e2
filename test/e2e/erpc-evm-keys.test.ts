/**
 * eRPC's network `evm` keys through the real server against two real anvil nodes, from an
 * eRPC-shaped YAML file: `safeBlockSource` sends calls naming `safe` to the selected upstream
 * (over the client's `use-upstream`) and skips the cache; `idempotentTransactionBroadcast: false`
 * returns anvil's "nonce too low" for a mined duplicate as the error it is, where the default finds
 * the transaction by hash and answers the hash;
 * `emptyResultConfidence` and `fallbackStatePollerDebounce` load (the latter removed with its
 * rewrite line). `svc validate --print` shows the rewrite and its output validates again.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { keccak256, parseGwei, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { parse as parseYaml } from 'yaml';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { rpcBody } from './fixtures.ts';
import { runSvcCli, type CliRun } from '../helpers/svc-cli.ts';

const CHAIN = 31337;
/** anvil dev account #4 (funded). */
const PK = '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a';
const TO = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

/** eRPC's shape: network defaults, a per-network evm block, tagged upstreams, a memory cache for realtime calls. */
const ERPC_YAML = `
logLevel: error
database:
  evmJsonRpcCache:
    connectors:
      - id: mem
        driver: memory
    policies:
      - { network: "*", method: "*", finality: realtime, connector: mem, ttl: 1m }
projects:
  - id: main
    networkDefaults:
      evm:
        fallbackStatePollerDebounce: 500ms
        emptyResultConfidence: finalizedBlock
    networks:
      - architecture: evm
        evm:
          chainId: ${CHAIN}
          safeBlockSource: "tier:trusted"
          idempotentTransactionBroadcast: false
    upstreams:
      - id: trusted
        endpoint: __TRUSTED__
        tags: ["tier:trusted"]
        evm: { chainId: ${CHAIN}, statePollerInterval: 200ms }
      - id: other
        endpoint: __OTHER__
        evm: { chainId: ${CHAIN}, statePollerInterval: 200ms }
  - id: plain
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
    upstreams:
      - id: other
        endpoint: __OTHER__
        evm: { chainId: ${CHAIN} }
`;

function signTransfer(nonce: number): Promise<Hex> {
  return privateKeyToAccount(PK).signTransaction({
    chainId: CHAIN,
    type: 'eip1559',
    to: TO,
    value: 1n,
    nonce,
    gas: 21000n,
    maxFeePerGas: parseGwei('20'),
    maxPriorityFeePerGas: parseGwei('1'),
  });
}

describe("e2e: eRPC's network evm keys (safeBlockSource, idempotentTransactionBroadcast, emptyResultConfidence, fallbackStatePollerDebounce)", function () {
  this.timeout(30_000);
  let trusted: AnvilHandle;
  let other: AnvilHandle;
  let svc: SvcHandle;
  const main = `/main/evm/${CHAIN}`;

  before(async () => {
    // Different genesis timestamps: the two nodes' blocks differ, so an answer tells its node.
    [trusted, other] = await Promise.all([startAnvil({ chainId: CHAIN }), startAnvil({ chainId: CHAIN, args: ['--timestamp', '1600000000'] })]);
    await Promise.all([trusted.rpc('anvil_mine', ['0x50']), other.rpc('anvil_mine', ['0x50'])]);
    svc = await startSvc(parseYaml(ERPC_YAML.replaceAll('__TRUSTED__', trusted.url).replaceAll('__OTHER__', other.url)) as object);
    await waitFor(() => [...svc.proxy.projects.values()].every((p) => [...p.upstreams.values()].every((u) => u.state === 'ready')));
  });

  after(async () => {
    await svc?.close();
    await Promise.all([trusted?.stop(), other?.stop()]);
  });

  it('loads the eRPC file: the keys are honoured as written, fallbackStatePollerDebounce is removed', () => {
    const evm = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!.config.settings.evm;
    expect(evm).to.deep.include({ safeBlockSource: 'tier:trusted', idempotentTransactionBroadcast: false, emptyResultConfidence: 'finalizedBlock' });
    expect(evm).to.not.have.property('fallbackStatePollerDebounce');
  });

  it('safeBlockSource: a call naming safe is served by the source, even when the client pins another upstream', async () => {
    const expected = (await trusted.rpc('eth_getBlockByNumber', ['safe', false])).hash;
    expect((await other.rpc('eth_getBlockByNumber', ['safe', false])).hash).to.not.equal(expected);
    for (const headers of [{}, { 'X-SVC-Use-Upstream': 'other' }] as Record<string, string>[]) {
      const r = await svc.post(main, rpcBody('eth_getBlockByNumber', ['safe', false]), headers);
      expect(r.headers['x-svc-upstream'], JSON.stringify(headers)).to.equal('trusted');
      expect(r.json.result.hash).to.equal(expected);
    }
  });

  it('safeBlockSource: safe calls never read the cache; other calls keep the client pin and the cache', async () => {
    await svc.post(main, rpcBody('eth_getBlockByNumber', ['safe', false]));
    const again = await svc.post(main, rpcBody('eth_getBlockByNumber', ['safe', false]));
    expect(again.headers['x-svc-cache']).to.not.equal('HIT');
    expect(again.headers['x-svc-upstream']).to.equal('trusted');
    const pinned = await svc.post(main, rpcBody('eth_getBlockByNumber', ['latest', false]), { 'X-SVC-Use-Upstream': 'other' });
    expect(pinned.headers['x-svc-upstream']).to.equal('other');
    const call = rpcBody('eth_getBalance', [TO, 'latest']);
    await svc.post(main, call);
    expect((await svc.post(main, call)).headers['x-svc-cache']).to.equal('HIT');
  });

  it('idempotentTransactionBroadcast false: a duplicate send returns the node error; the default answers the hash', async () => {
    const nonce = Number.parseInt(await other.rpc('eth_getTransactionCount', [privateKeyToAccount(PK).address, 'pending']), 16);
    const raw = await signTransfer(nonce);
    const hash = keccak256(raw);
    // Sent to both nodes and waited for until mined on both (a loaded machine may answer a send before mining it), so
    // whichever upstream is asked knows the transaction.
    await Promise.all([trusted.rpc('eth_sendRawTransaction', [raw]), other.rpc('eth_sendRawTransaction', [raw])]);
    await waitFor(async () => (await Promise.all([trusted, other].map((n) => n.rpc('eth_getTransactionReceipt', [hash])))).every((r) => r !== null), 10_000);
    const off = await svc.post(main, rpcBody('eth_sendRawTransaction', [raw]));
    expect(off.json.result, off.text).to.equal(undefined);
    // The node's own "already known" family error, passed on as the node sent it.
    expect(off.json.error.message).to.match(/nonce too low|already (imported|known)/);
    const on = await svc.post(`/plain/evm/${CHAIN}`, rpcBody('eth_sendRawTransaction', [raw]));
    expect(on.json.result, on.text).to.equal(hash);
  });
});

describe('svc validate --print on the eRPC file with these keys', function () {
  this.timeout(60_000);
  let dir: string;
  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-erpc-evm-keys-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function run(args: string[]): Promise<CliRun> {
    return runSvcCli(args, dir);
  }

  it('prints the debounce rewrite with its reason; the printed config validates with nothing left to rewrite', async () => {
    writeFileSync(join(dir, 'erpc.yaml'), ERPC_YAML.replaceAll('__TRUSTED__', 'http://127.0.0.1:8545').replaceAll('__OTHER__', 'http://127.0.0.1:8546'));
    const r = await run(['validate', '--config', 'erpc.yaml', '--print']);
    expect(r.code, r.err).to.equal(0);
    expect(r.out).to.include(
      '#   projects[0].networkDefaults.evm.fallbackStatePollerDebounce: 500ms -> (removed: svc polls each upstream only on its statePollerInterval timer',
    );
    const printed = parseYaml(r.out) as { projects: Array<{ networks: Array<{ evm: Record<string, unknown> }> }> };
    expect(printed.projects[0]?.networks[0]?.evm).to.deep.include({ safeBlockSource: 'tier:trusted', idempotentTransactionBroadcast: false });
    writeFileSync(join(dir, 'printed.yaml'), r.out);
    const again = await run(['validate', '--config', 'printed.yaml', '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
  });
});
