/**
 * Failsafe defaults without any failsafe config, full default preset:
 * - a blackhole upstream (accepts TCP, never answers) or a trickling one (one byte per 500 ms)
 *   in front of a healthy one: the client is answered by the healthy one within 3 s (the default
 *   hedge on the method's p90, clamped to 500 ms..2 s, one extra leg);
 * - a blackhole alone: `ErrEndpointRequestTimeout` within the default per-attempt timeout
 *   (10 s for light methods), not `server.maxTimeout` (150 s);
 * - a user's own `failsafe` (even `[]`) replaces the defaults of its scope.
 * The blackhole-alone call is started in `before` and checked last, so its 10 s run in parallel
 * with the other cases.
 */
import { expect } from 'chai';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import { createServer, type Server } from 'node:http';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { DEFAULT_NETWORK_FAILSAFE, DEFAULT_UPSTREAM_FAILSAFE } from '../../plugins/failsafe/index.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

describe('e2e: failsafe defaults without failsafe config', function () {
  this.timeout(30_000);
  let blackhole: TcpServer;
  let trickle: Server;
  let healthy: FaultServer;
  let blackholeUrl: string;
  let trickleUrl: string;
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let alone: SvcHandle;
  let aloneCall: Promise<{ res: SvcResponse; ms: number }>;
  const handles: SvcHandle[] = [];

  const config = (upstreams: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
    logLevel: 'error',
    projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, ...extra }], upstreams }],
  });
  const up = (id: string, endpoint: string, extra: Record<string, unknown> = {}) => ({ id, endpoint, evm: { chainId: CHAIN }, ...extra });

  before(async () => {
    blackhole = createTcpServer((s) => {
      sockets.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', () => r()));
    blackholeUrl = `http://127.0.0.1:${(blackhole.address() as { port: number }).port}`;
    // Answers headers at once, then one byte of a never-finished body every 500 ms.
    trickle = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      const t = setInterval(() => res.write(' '), 500);
      timers.add(t);
      res.on('close', () => clearInterval(t));
    });
    await new Promise<void>((r) => trickle.listen(0, '127.0.0.1', () => r()));
    trickleUrl = `http://127.0.0.1:${(trickle.address() as { port: number }).port}`;
    healthy = await startFaultServer({ handler: ({ method }) => (method === 'eth_blockNumber' ? '0x42' : undefined) });
    alone = await startSvc(config([up('blackhole', blackholeUrl)]));
    const t0 = performance.now();
    aloneCall = alone.post(PATH, rpcBody('eth_blockNumber', [])).then((res) => ({ res, ms: performance.now() - t0 }));
  });

  after(async () => {
    for (const h of handles) await h.close();
    await alone?.close();
    for (const t of timers) clearInterval(t);
    for (const s of sockets) s.destroy();
    trickle?.closeAllConnections();
    await Promise.all([new Promise((r) => blackhole?.close(r)), new Promise((r) => trickle?.close(r)), healthy?.close()]);
  });

  for (const [name, url] of [
    ['a blackhole', () => blackholeUrl],
    ['a trickling upstream (one byte per 500 ms)', () => trickleUrl],
  ] as const) {
    it(`${name} first, a healthy one second: the client is answered by the healthy one within 3 s`, async () => {
      const svc = await startSvc(config([up('slow', url()), up('healthy', healthy.url)]));
      handles.push(svc);
      const t0 = performance.now();
      const res = await svc.post(PATH, rpcBody('eth_blockNumber', []));
      const ms = performance.now() - t0;
      expect(res.json.result, res.text).to.equal('0x42');
      expect(ms).to.be.below(3000);
      expect(res.headers['x-svc-upstream']).to.equal('healthy');
      // The losing leg did not answer in time: spec §4.5 word `timeout`.
      expect(res.headers['x-svc-upstreams']).to.match(/slow=primary:timeout:\d+;healthy=hedge:success:\d+:won/);
    });
  }

  it("a user's failsafe replaces the defaults of its scope: `failsafe: []` on the network means no hedge", async () => {
    const svc = await startSvc(
      config([up('slow', blackholeUrl, { failsafe: [{ timeout: { duration: '300ms' } }] }), up('healthy', healthy.url)], { failsafe: [] }),
    );
    handles.push(svc);
    const res = await svc.post(PATH, rpcBody('eth_blockNumber', []));
    expect(res.json.result).to.equal('0x42');
    // No hedge: the upstream's own 300 ms timeout moved the sweep on.
    expect(res.headers['x-svc-upstreams']).to.match(/^slow=primary:timeout:\d+;healthy=sweep:success:\d+:won$/);
    expect(res.headers['x-svc-network-hedges']).to.equal('0');
  });

  it('the defaults are the documented ones', () => {
    expect(DEFAULT_NETWORK_FAILSAFE).to.deep.equal([{ matchMethod: '*', hedge: { quantile: 0.9, minDelay: 500, maxDelay: 2000, maxCount: 1 } }]);
    expect(DEFAULT_UPSTREAM_FAILSAFE.map((e) => [e.matchMethod.split('|').length > 1 ? 'heavy' : e.matchMethod, e.timeout?.duration])).to.deep.equal([
      ['heavy', 30_000],
      ['*', 10_000],
    ]);
  });

  it('a blackhole alone: ErrEndpointRequestTimeout within the default 10 s attempt timeout', async () => {
    const { res, ms } = await aloneCall;
    expect(res.json.error?.data?.code, res.text).to.equal('ErrEndpointRequestTimeout');
    expect(ms).to.be.within(9_500, 12_000);
  });
});
