/**
 * eRPC's selection keys in eRPC-shaped YAML, against real anvil nodes: `upstreams[].routing.scoreMultipliers`
 * changes which upstream the selection prefers (one node made slow by a delaying proxy, the other
 * lagging in blocks), and every file validates and re-validates through `svc validate --print`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { parse as parseYaml } from 'yaml';
import { evaluateSelection, selectionState } from '../../plugins/selection/index.ts';
import { startAnvilCluster, type AnvilCluster } from '../helpers/anvil-cluster.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startSvc, type SvcHandle, waitFor } from '../helpers/svc.ts';
import { runSvcCli, type CliRun } from '../helpers/svc-cli.ts';

const CHAIN = 31337;
const NET = `evm:${CHAIN}`;
const PATH = `/main/evm/${CHAIN}`;
/** Delay the proxy adds before forwarding each call to the slow node, ms (p70 ≈ 0.2 s → score ≈ 3 with respLatency 15). */
const SLOW_MS = 200;
/** Blocks the lagging node stays behind (score 8 with blockHeadLag 1). */
const LAG = 8;

/** A node:http proxy that forwards every call to `target` after `delayMs` (a slow node). */
async function startDelayingProxy(target: string, delayMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      setTimeout(() => {
        fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) })
          .then(async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text()))
          .catch(() => res.writeHead(502).end());
      }, delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** eRPC's shape: two upstreams, a poll each second (its deadline stays above the slow node's delay), the selection ticking rarely (the test evaluates). */
const MULTIPLIERS_YAML = (routing: string) => `
logLevel: warn
metrics: { enabled: false }
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
        selectionPolicy:
          evalInterval: 1h
    upstreams:
      - id: slow
        endpoint: __SLOW__
        evm: { chainId: ${CHAIN}, statePollerInterval: 1s }
      - id: lagging
        endpoint: __LAGGING__
        evm: { chainId: ${CHAIN}, statePollerInterval: 1s }
${routing}`;

/** eRPC's documented per-upstream routing block: this node's head lag barely counts, totalRequests (ignored by eRPC) given too. */
const LAGGING_ROUTING = `        routing:
          scoreMultipliers:
            - network: "evm:*"
              finality: [unknown]
              blockHeadLag: 0.1
              totalRequests: 1
`;

describe('e2e: eRPC routing.scoreMultipliers from YAML, against anvil', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let delayed: { url: string; close(): Promise<void> };
  let svc: SvcHandle | undefined;

  before(async () => {
    cluster = await startAnvilCluster({ count: 2, ids: ['slow', 'lagging'] });
    await cluster.mine('slow', LAG + 2);
    await cluster.mine('lagging', 2);
    delayed = await startDelayingProxy(cluster.node('slow').url, SLOW_MS);
  });
  after(async () => {
    await svc?.close();
    await delayed?.close();
    await cluster?.stop();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });

  const fill = (yaml: string) => yaml.replaceAll('__SLOW__', delayed.url).replaceAll('__LAGGING__', cluster.node('lagging').url);

  /** Starts svc from the YAML, gives each upstream latency samples (pinned calls) and its head lag, evaluates once. */
  async function preferred(yaml: string): Promise<string[]> {
    svc = await startSvc(parseYaml(fill(yaml)) as object);
    const s = svc;
    const health = s.proxy.projects.get('main')!.health;
    await waitFor(() => health.snapshot('lagging', '*').blockHeadLag >= LAG, 10_000);
    for (const id of ['slow', 'lagging']) {
      for (let i = 0; i < 4; i++) {
        const r = await s.post(PATH, { jsonrpc: '2.0', id: i, method: 'eth_gasPrice', params: [] }, { 'x-svc-use-upstream': id });
        expect(r.json.result, r.text).to.match(/^0x/);
      }
    }
    expect(health.snapshot('slow', '*').p70).to.be.greaterThan((SLOW_MS - 20) / 1000);
    expect(await evaluateSelection(s.proxy, 'main', NET)).to.equal(true);
    const order = selectionState(s.proxy, 'main', NET)!.order;
    const served = await s.post(PATH, { jsonrpc: '2.0', id: 9, method: 'eth_gasPrice', params: [] });
    expect(served.headers['x-svc-upstream']).to.equal(order[0]);
    return order;
  }

  it('without multipliers the slow node (≈3) beats the node 8 blocks behind (8)', async () => {
    expect(await preferred(MULTIPLIERS_YAML(''))).to.deep.equal(['slow', 'lagging']);
  });

  it("with the lagging node's blockHeadLag weight at 0.1 (eRPC's routing block), the lagging node is preferred", async () => {
    const yaml = MULTIPLIERS_YAML('').replace(/( {6}- id: lagging\n(?: {8}.*\n)+)/, (m) => `${m}${LAGGING_ROUTING}`);
    expect(yaml).to.include('blockHeadLag: 0.1');
    expect(await preferred(yaml)).to.deep.equal(['lagging', 'slow']);
  });

  it('overall: 0.1 on the slow node demotes it below the lagging one', async () => {
    const yaml = MULTIPLIERS_YAML('').replace(
      /( {6}- id: slow\n(?: {8}.*\n)+?)( {6}- id: lagging)/,
      (_m, a: string, b: string) => `${a}        routing:\n          scoreMultipliers:\n            - overall: 0.1\n${b}`,
    );
    expect(await preferred(yaml)).to.deep.equal(['lagging', 'slow']);
  });
});

/** eRPC's evalFunc as JavaScript source: prefers the tagged node, and turns hostile (throws, or loops) while an upstream is cordoned. */
const EVAL_YAML = (hostile: string) => `
logLevel: warn
metrics: { enabled: false }
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: ${CHAIN} }
        selectionPolicy:
          evalInterval: 1h
          evalTimeout: 200ms
          evalFunc: |
            (upstreams, ctx) => {
              if (upstreams.some((u) => u.metrics.cordonedReason)) ${hostile}
              return upstreams
                .removeCordoned()
                .excludeIf(all(samplesAbove(10), errorRateAbove(0.7)))
                .whenEmpty(() => upstreams)
                .sortBy((u) => (u.hasTag('role:preferred') ? 0 : 1));
            }
    upstreams:
      - id: plain
        endpoint: __SLOW__
        evm: { chainId: ${CHAIN} }
      - id: preferred
        endpoint: __LAGGING__
        tags: ["role:preferred"]
        evm: { chainId: ${CHAIN} }
`;

describe('e2e: eRPC selectionPolicy.evalFunc as JavaScript in YAML, against anvil', function () {
  this.timeout(60_000);
  let cluster: AnvilCluster;
  let svc: SvcHandle | undefined;
  const lines: string[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    }),
  );

  before(async () => {
    cluster = await startAnvilCluster({ count: 2, ids: ['plain', 'preferred'] });
  });
  after(async () => {
    await svc?.close();
    await cluster?.stop();
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    lines.length = 0;
  });

  const fill = (yaml: string) => yaml.replaceAll('__SLOW__', cluster.node('plain').url).replaceAll('__LAGGING__', cluster.node('preferred').url);
  const call = (s: SvcHandle) => s.post(PATH, { jsonrpc: '2.0', id: 1, method: 'eth_gasPrice', params: [] });

  for (const [name, hostile, kind] of [
    ['throws', "throw new Error('no cordons here');", 'error'],
    ['loops past evalTimeout', 'for (;;) {}', 'timeout'],
  ] as const) {
    it(`the YAML policy orders the upstreams; when it ${name}, the failure is logged and the previous order kept`, async () => {
      svc = await startSvc(parseYaml(fill(EVAL_YAML(hostile))) as object, { logger });
      const s = svc;
      expect(selectionState(s.proxy, 'main', NET)).to.deep.include({ order: ['preferred', 'plain'], custom: true, honoursCordons: true });
      const r = await call(s);
      expect(r.json.result, r.text).to.match(/^0x/);
      expect(r.headers['x-svc-upstream']).to.equal('preferred');
      s.proxy.projects.get('main')!.health.cordon('plain', '*', 'operator');
      await evaluateSelection(s.proxy, 'main', NET);
      expect(selectionState(s.proxy, 'main', NET)!.order).to.deep.equal(['preferred', 'plain']);
      await waitFor(() => lines.some((l) => l.includes(`selection policy of ${NET} failed (${kind}): previous order kept`)));
      const again = await call(s);
      expect(again.headers['x-svc-upstream']).to.equal('preferred');
    });
  }
});

/** Every YAML of this file through the CLI: validates, prints svc's shape with its rewrite lines, and the print re-validates with nothing left to rewrite. */
describe('e2e: eRPC selection YAML through svc validate --print', function () {
  this.timeout(60_000);
  let dir: string;
  before(async () => {
    await ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'svc-erpc-selection-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function run(args: string[]): Promise<CliRun> {
    return runSvcCli(args, dir);
  }

  async function printsAndRevalidates(name: string, yaml: string): Promise<string> {
    writeFileSync(join(dir, `${name}.yaml`), yaml.replaceAll('__SLOW__', 'http://127.0.0.1:8545').replaceAll('__LAGGING__', 'http://127.0.0.1:8546'));
    const r = await run(['validate', '--config', `${name}.yaml`, '--print']);
    expect(r.code, r.err).to.equal(0);
    writeFileSync(join(dir, `${name}.printed.yaml`), r.out);
    const again = await run(['validate', '--config', `${name}.printed.yaml`, '--print']);
    expect(again.code, again.err).to.equal(0);
    expect(again.out).to.include("# no rewrite: the config is in svc's shape");
    return r.out;
  }

  it('evalFunc source: validates and prints as is; a policy calling a helper svc lacks fails naming the key', async () => {
    const out = await printsAndRevalidates('eval', EVAL_YAML("throw new Error('x');"));
    expect(out).to.include("u.hasTag('role:preferred')");
    writeFileSync(
      join(dir, 'spread.yaml'),
      EVAL_YAML('return [];')
        .replace('.whenEmpty(() => upstreams)', ".whenEmpty(() => upstreams).spreadAcrossTags('region:')")
        .replaceAll(/__\w+__/g, 'http://127.0.0.1:8545'),
    );
    const r = await run(['validate', '--config', 'spread.yaml']);
    expect(r.code).to.equal(1);
    expect(r.err).to.match(
      /projects\[0\]\.networks\[0\]\.selectionPolicy\.evalFunc: the policy failed a trial run over two healthy upstreams: .*spreadAcrossTags/,
    );
  });

  it('scoreMultipliers: totalRequests is dropped with a line saying why', async () => {
    const yaml = MULTIPLIERS_YAML('').replace(/( {6}- id: lagging\n(?: {8}.*\n)+)/, (m) => `${m}${LAGGING_ROUTING}`);
    const out = await printsAndRevalidates('multipliers', yaml);
    expect(out).to.match(/# {3}projects\[0\]\.upstreams\[1\]\.routing\.scoreMultipliers\[0\]\.totalRequests: 1 -> \(removed: eRPC ignores it too/);
  });
});
