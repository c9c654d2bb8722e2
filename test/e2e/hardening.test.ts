/**
 * Hostile requests and unlucky operators against the real server:
 * - a batch of 25 calls nested 6,000 deep is refused element by element (-32600 naming
 *   `server.maxJsonDepth`), reaches no upstream, and leaves the breakers (the docs' example config) closed;
 * - an exception in svc's own code (a plugin's upstream wrapper or validate tap) is -32603,
 *   HTTP 500, id null, and counts toward no breaker, error rate or upstream error metric;
 * - an upstream refusing a request for its size (HTTP 413, or hanging up mid-send) is
 *   `ErrUpstreamRequestTooLarge`, not an upstream fault, and the next upstream is tried;
 * - an answer over `upstreams[].maxResponseSize` fails that attempt naming the limit, declared or
 *   streamed, and the next upstream answers;
 * - crafted method names against many-wildcard `ignoreMethods` answer at once; label values from
 *   clients are cut to 64 characters in `/metrics`.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { httpRequest, presetWithout, startSvc, type SvcHandle } from '../helpers/svc.ts';
import { upstreamBreakers } from '../../plugins/failsafe/index.ts';
import type { Plugin } from '../../core/host/proxy.ts';
import { UpstreamStage } from '../../core/pipeline/stages.ts';
import { rpcBody } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
/** The upstream breaker of the example config in docs/fault-tolerance.md (upstreamDefaults.failsafe). */
const README_BREAKER = [{ timeout: { duration: '5s' }, circuitBreaker: { failureThresholdCount: 20, failureThresholdCapacity: 80, halfOpenAfter: '1m' } }];

const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

/** A plugin whose own code throws: in the upstream chain for method `test_boom`, and in `validate` (after a real dial) for ids starting `boom`. */
function throwingPlugin(): Plugin {
  return {
    name: 'test-throwing',
    apply(proxy) {
      proxy.hooks.upstream.tap({ name: 'test-throwing', stage: UpstreamStage.TIMEOUT }, (inner) => (call) => {
        if (call.method === 'test_boom') throw new RangeError('Maximum call stack size exceeded (test)');
        return inner(call);
      });
      proxy.hooks.validate.tap({ name: 'test-throwing', stage: 0 }, (ctx) => {
        if (ctx.request.idRaw.startsWith('"boom')) throw new TypeError('plugin bug (test)');
        return undefined;
      });
    },
  };
}

describe('e2e: hardening against hostile input', function () {
  this.timeout(30_000);
  let a: AnvilHandle;
  let b: AnvilHandle;
  let svc: SvcHandle;

  before(async () => {
    [a, b] = await Promise.all([startAnvil({ chainId: CHAIN }), startAnvil({ chainId: CHAIN })]);
    svc = await startSvc(
      {
        logLevel: 'error',
        projects: [
          {
            id: 'main',
            upstreamDefaults: { failsafe: README_BREAKER },
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: CHAIN }, ignoreMethods: ['eth_*_legacy_*', '*a*b*c*d*e*f*g*h*'] },
              { id: 'b', endpoint: b.url, evm: { chainId: CHAIN }, ignoreMethods: ['eth_*_legacy_*', '*a*b*c*d*e*f*g*h*'] },
            ],
          },
        ],
      },
      { plugins: [...presetWithout('evm-state'), throwingPlugin()] },
    );
  });
  after(async () => {
    await svc?.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  const breakersClosed = () =>
    [...svc.proxy.projects.get('main')!.upstreams.values()].every((u) => upstreamBreakers(svc.proxy, u).every((br) => br.state === 'closed'));
  const errorRate = (id: string) => svc.proxy.projects.get('main')!.health.snapshot(id).errorRate;
  const metricsText = async () => (await httpRequest('GET', svc.metricsUrl!)).text;

  it('a 300 KB batch of 25 calls nested 6,000 deep: every element -32600 naming the limit, nothing forwarded, breakers closed', async () => {
    const el = (i: number) => `{"jsonrpc":"2.0","id":${i},"method":"eth_call","params":${deep(6000)}}`;
    const body = `[${Array.from({ length: 25 }, (_, i) => el(i)).join(',')}]`;
    expect(body.length).to.be.above(290_000);
    const res = await svc.post(PATH, body);
    expect(res.status).to.equal(200);
    expect(res.json).to.have.length(25);
    for (const [i, e] of (res.json as Array<{ id: number; error: { code: number; message: string } }>).entries()) {
      expect(e.id).to.equal(i);
      expect(e.error.code).to.equal(-32600);
      expect(e.error.message).to.include('server.maxJsonDepth (64)');
    }
    expect(res.headers['x-svc-upstream-attempts']).to.equal('0');
    expect(breakersClosed()).to.equal(true);
    const ok = await svc.post(PATH, rpcBody('eth_blockNumber', []));
    expect(ok.json.result).to.match(/^0x/);
  });

  it('a single deep request is HTTP 400 / -32600 and the process keeps serving', async () => {
    const res = await svc.post(PATH, `{"jsonrpc":"2.0","id":7,"method":"eth_call","params":${deep(100_000)}}`);
    expect(res.status).to.equal(400);
    expect(res.json.error.code).to.equal(-32600);
    expect((await svc.post(PATH, rpcBody('eth_chainId', []))).json.result).to.equal('0x7a69');
  });

  it("§7 error code -32603 with id null — svc's own exception is -32603 / HTTP 500 / id null and never counts against an upstream", async () => {
    const before = await metricsText();
    const single = await svc.post(PATH, rpcBody('test_boom', []));
    expect(single.status).to.equal(500);
    expect(single.json.id).to.equal(null);
    expect(single.json.error.code).to.equal(-32603);
    // 25 in a batch, after a real dial (validate throws) and before one (upstream wrapper throws).
    const batch = Array.from({ length: 25 }, (_, i) =>
      i % 2 ? { jsonrpc: '2.0', id: i, method: 'test_boom', params: [] } : { jsonrpc: '2.0', id: `boom-${i}`, method: 'eth_blockNumber', params: [] },
    );
    const res = await svc.post(PATH, batch);
    expect(res.status).to.equal(200);
    for (const e of res.json as Array<{ id: unknown; error: { code: number } }>) {
      expect(e.id).to.equal(null);
      expect(e.error.code).to.equal(-32603);
    }
    expect(breakersClosed()).to.equal(true);
    expect(errorRate('a')).to.equal(0);
    expect(errorRate('b')).to.equal(0);
    const after = await metricsText();
    expect(after).not.to.match(/svc_upstream_request_errors_total\{[^}]*error="ErrInternal"/);
    expect(after.match(/svc_upstream_request_errors_total\{/g)?.length ?? 0).to.equal(before.match(/svc_upstream_request_errors_total\{/g)?.length ?? 0);
    expect((await svc.post(PATH, rpcBody('eth_chainId', []))).json.result).to.equal('0x7a69');
  });

  it("a node's own error passes through; X-SVC-Error carries svc's name for it", async () => {
    const res = await svc.post(PATH, rpcBody('eth_noSuchMethod', []));
    const direct = (await (
      await fetch(a.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(rpcBody('eth_noSuchMethod', [])) })
    ).json()) as { error: { code: number; message: string } };
    expect(res.json.error.code).to.equal(direct.error.code);
    expect(res.json.error.message).to.equal(direct.error.message);
    expect(res.headers['x-svc-error']).to.equal('ErrEndpointUnsupported');
    expect((await svc.post(PATH, rpcBody('eth_blockNumber', []))).headers['x-svc-error']).to.equal(undefined);
  });

  it('a crafted 480 KB method against `eth_*_legacy_*` is refused at parse time at once (HTTP 400, -32600)', async () => {
    const start = performance.now();
    const res = await svc.post(PATH, rpcBody(`eth_${'_legacy'.repeat(80_000)}x`, []));
    expect(res.status).to.equal(400);
    expect(res.json.error.code).to.equal(-32600);
    expect(res.text.length).to.be.below(1000);
    expect(performance.now() - start).to.be.below(2000);
  });

  it('a 256-character method against the 8-wildcard pattern is matched at once; its metric label is cut to 64 characters', async () => {
    const method = `x${'a'.repeat(255)}`;
    const start = performance.now();
    const res = await svc.post(PATH, rpcBody(method, []));
    expect(performance.now() - start).to.be.below(2000);
    expect(res.json.error, res.text).to.exist;
    const metrics = await metricsText();
    const labels = [...metrics.matchAll(/category="([^"]*)"/g)].map((m) => m[1]!);
    expect(labels.length).to.be.above(0);
    for (const l of labels) expect(l.length).to.be.at.most(64);
    expect(labels).to.include(method.slice(0, 64));
  });
});

describe('e2e: upstream size limits', function () {
  this.timeout(20_000);
  let big: Server;
  let hangup: Server;
  let healthy: FaultServer;
  let refusing: FaultServer;
  let bigUrl: string;
  let hangupUrl: string;
  let svc: SvcHandle;
  const BIG = `"0x${'ab'.repeat(1024 * 1024)}"`; // a 2 MiB result

  const listen = async (s: Server) => {
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(s.address() as { port: number }).port}`;
  };

  before(async () => {
    // Answers 2 MiB: with content-length for eth_call, streamed in chunks (no length) otherwise.
    big = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { id, method } = JSON.parse(Buffer.concat(chunks).toString()) as { id: number; method: string };
        if (method === 'eth_chainId') return res.end(JSON.stringify({ jsonrpc: '2.0', id, result: '0x7a69' }));
        const text = `{"jsonrpc":"2.0","id":${id},"result":${BIG}}`;
        if (method === 'eth_call') {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
          res.end(text);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        for (let i = 0; i < text.length; i += 64 * 1024) res.write(text.slice(i, i + 64 * 1024));
        res.end();
      });
    });
    // Reads the headers of a large request, then hangs up without answering.
    hangup = createServer((req, res) => {
      if (Number(req.headers['content-length'] ?? 0) > 1024 * 1024) {
        req.socket.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { id } = JSON.parse(Buffer.concat(chunks).toString()) as { id: number };
        res.end(JSON.stringify({ jsonrpc: '2.0', id, result: '0x7a69' }));
      });
    });
    [bigUrl, hangupUrl] = await Promise.all([listen(big), listen(hangup)]);
    healthy = await startFaultServer({ handler: ({ method }) => (method === 'eth_chainId' ? undefined : '0x1') });
    refusing = await startFaultServer();
    refusing.setDefault({ kind: 'status', status: 413, body: 'Request Entity Too Large' });
  });
  after(async () => {
    await svc?.close();
    big?.closeAllConnections();
    hangup?.closeAllConnections();
    await Promise.all([new Promise((r) => big?.close(r)), new Promise((r) => hangup?.close(r)), healthy?.close(), refusing?.close()]);
  });

  const start = (upstreams: Array<Record<string, unknown>>) =>
    startSvc(
      { logLevel: 'error', projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }], upstreams }] },
      { plugins: presetWithout('evm-state') },
    );

  it('an answer over maxResponseSize fails that attempt naming the limit (declared and streamed); the next upstream answers', async () => {
    svc = await start([
      { id: 'big', endpoint: bigUrl, evm: { chainId: CHAIN }, maxResponseSize: '1MiB' },
      { id: 'healthy', endpoint: healthy.url, evm: { chainId: CHAIN } },
    ]);
    for (const method of ['eth_call', 'eth_getCode']) {
      const res = await svc.post(PATH, rpcBody(method, []));
      expect(res.json.result, res.text).to.equal('0x1');
      expect(res.headers['x-svc-upstreams']).to.match(/^big=primary:error:\d+;healthy=sweep:success:\d+:won$/);
    }
    await svc.close();
    svc = await start([{ id: 'big', endpoint: bigUrl, evm: { chainId: CHAIN }, maxResponseSize: '1MiB' }]);
    const alone = await svc.post(PATH, rpcBody('eth_getCode', []));
    expect(alone.json.error.data.code).to.equal('ErrUpstreamMalformedResponse');
    expect(alone.json.error.message).to.include('maxResponseSize (1048576 bytes');
    // The default (256 MiB) lets the same answer through.
    await svc.close();
    svc = await start([{ id: 'big', endpoint: bigUrl, evm: { chainId: CHAIN } }]);
    const ok = await svc.post(PATH, rpcBody('eth_getCode', []));
    expect(ok.json.result.length).to.equal(2 + 2 * 1024 * 1024);
    await svc.close();
  });

  it('HTTP 413 and a hang-up mid-send are request-size errors: not counted against the upstream, the next one is tried', async () => {
    svc = await start([
      { id: 'refusing', endpoint: refusing.url, evm: { chainId: CHAIN } },
      { id: 'hangup', endpoint: hangupUrl, evm: { chainId: CHAIN } },
      { id: 'healthy', endpoint: healthy.url, evm: { chainId: CHAIN } },
    ]);
    const data = `0x${'00'.repeat(1024 * 1024)}`;
    const res = await svc.post(PATH, rpcBody('eth_call', [{ to: '0x0000000000000000000000000000000000000001', data }, 'latest']));
    expect(res.json.result, res.text.slice(0, 300)).to.equal('0x1');
    expect(res.headers['x-svc-upstreams']).to.match(/^refusing=primary:error:\d+;hangup=sweep:error:\d+;healthy=sweep:success:\d+:won$/);
    const health = svc.proxy.projects.get('main')!.health;
    for (const id of ['refusing', 'hangup']) {
      const s = health.snapshot(id);
      expect(s.errorRate, id).to.equal(0);
      expect(s.requests, id).to.equal(0);
    }
    await svc.close();
    svc = await start([{ id: 'refusing', endpoint: refusing.url, evm: { chainId: CHAIN } }]);
    const alone = await svc.post(PATH, rpcBody('eth_getCode', ['0x0000000000000000000000000000000000000001', 'latest']));
    expect(alone.status).to.equal(413);
    expect(alone.json.error.data.code).to.equal('ErrUpstreamRequestTooLarge');
  });
});

describe('e2e: a client leaving mid-call is a cancellation, not svc failing', function () {
  this.timeout(15_000);
  it('the call is cancelled upstream and nothing is logged as an internal failure', async () => {
    const { createProxy } = await import('../../core/host/create.ts');
    const { defaultPreset } = await import('../../presets/default.ts');
    const { default: pino } = await import('pino');
    const { request } = await import('undici');
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
    const hang = await startFaultServer();
    hang.setDefault({ kind: 'hang' });
    const proxy = createProxy({
      config: {
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'h', endpoint: hang.url, evm: { chainId: CHAIN, statePollerInterval: 0 } }],
          },
        ],
      },
      plugins: defaultPreset(),
      logger,
      port: 0,
      host: '127.0.0.1',
      metricsPort: 0,
    });
    const addr = await proxy.start();
    try {
      const ac = new AbortController();
      const call = request(`http://127.0.0.1:${addr.port}${PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(rpcBody('eth_blockNumber', [])),
        signal: ac.signal,
      }).catch(() => 'aborted');
      await new Promise((r) => setTimeout(r, 150));
      ac.abort();
      expect(await call).to.equal('aborted');
      await new Promise((r) => setTimeout(r, 100));
      expect(lines.join('\n')).not.to.include('internal failure');
      expect(proxy.projects.get('main')!.health.snapshot('h').errorRate).to.equal(0);
    } finally {
      await proxy.close();
      await hang.close();
    }
  });
});
