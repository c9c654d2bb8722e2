/**
 * Conformance of the prose sentences of spec §3 and §4 (docs/interface.md, ids `§3.1 ¶n`, `§4 ¶n`,
 * `§4.x ¶n`): cordon rules (scopes, what still reaches a cordoned upstream, custom selection
 * functions), JSON-RPC bodies, directive query parameters, the unknown chain of zero-config, the
 * healthcheck's query parameters, secret, strategies, block time and status, the admin body and
 * method-name case, and the response-header rules (always-on headers, trace values and their
 * precedence, batch aggregation, cost headers). One svc in front of real anvil nodes and scripted
 * upstreams holds a project per situation; a second svc guards its healthcheck with a secret, a
 * third leaves cost headers off.
 */
import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import { defaultPreset } from '../../presets/default.ts';
import { evaluateSelection } from '../../plugins/selection/index.ts';
import { repositoryVendorPlugin } from '../../plugins/vendor-repository/index.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { builtinResult, startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { listenOnLoopback } from '../helpers/ports.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { ADMIN, ADMIN_H, rpc } from './fixture-core.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

/** The secret of the healthcheck svc. */
const HC_SECRET = 'healthcheck-secret-0123456789abcdef';

/** The error's wire name (`ErrUpstreamsExhausted`...). */
const errorName = (r: SvcResponse): string | undefined => r.json?.error?.data?.code;

/** One step of a scripted upstream's answer to a call. */
type Step = { kind: 'ok' } | { kind: 'rateLimited' } | { kind: 'revert' } | { kind: 'delay'; ms: number; then?: Step };

/**
 * Upstreams answering from one shared plan: per method, a queue of steps taken in arrival order by
 * whichever upstream of the group gets the call (so a test's script does not depend on the order
 * selection puts them in); an empty queue answers like a node.
 */
interface ScriptedGroup {
  urls: string[];
  /** Per method: the steps still to take. */
  plan: Map<string, Step[]>;
  /** Per upstream (index of `urls`): the methods it received, in order. */
  seen: string[][];
  close(): Promise<void>;
}

async function startScriptedGroup(size: number, chainId: number): Promise<ScriptedGroup> {
  const plan = new Map<string, Step[]>();
  const seen: string[][] = [];
  const servers: Server[] = [];
  const urls: string[] = [];
  for (let i = 0; i < size; i++) {
    const mine: string[] = [];
    seen.push(mine);
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown; method: string; params: unknown };
        mine.push(call.method);
        const answer = (body: unknown, status = 200) => {
          if (res.destroyed) return;
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        const take = (step: Step): void => {
          if (step.kind === 'rateLimited') {
            answer({ jsonrpc: '2.0', id: call.id, error: { code: -32005, message: 'too many requests' } }, 429);
            return;
          }
          if (step.kind === 'revert') {
            answer({ jsonrpc: '2.0', id: call.id, error: { code: 3, message: 'execution reverted', data: '0x' } });
            return;
          }
          if (step.kind === 'delay') {
            setTimeout(() => take(step.then ?? { kind: 'ok' }), step.ms);
            return;
          }
          answer({ jsonrpc: '2.0', id: call.id, result: builtinResult(call.method, call.params, chainId) });
        };
        take(plan.get(call.method)?.shift() ?? { kind: 'ok' });
      });
    });
    urls.push(`http://127.0.0.1:${await listenOnLoopback(server, `scripted-${i}`)}`);
    servers.push(server);
  }
  return {
    urls,
    plan,
    seen,
    close: async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise<void>((r) => s.close(() => r()));
      }
    },
  };
}

/**
 * Two upstreams whose `eth_chainId` answers are held while the gate is armed, until both have one
 * pending (then both are answered) or 3 s passed (then each is answered alone): whether calls made
 * to both arrived in parallel, without timing anything.
 */
interface ChainIdGate {
  urls: string[];
  /** Holds the next eth_chainId of each upstream. */
  arm(): void;
  /** Set when both held calls were pending at once. */
  bothPending: boolean;
  /** eth_chainId calls received while armed, per upstream. */
  armedCalls: number[];
  close(): Promise<void>;
}

async function startChainIdGate(chainId: number): Promise<ChainIdGate> {
  const held: Array<(() => void) | undefined> = [undefined, undefined];
  let armed = false;
  const servers: Server[] = [];
  const gate: ChainIdGate = {
    urls: [],
    bothPending: false,
    armedCalls: [0, 0],
    arm() {
      armed = true;
      gate.bothPending = false;
      gate.armedCalls = [0, 0];
    },
    close: async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise<void>((r) => s.close(() => r()));
      }
    },
  };
  for (const i of [0, 1]) {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown; method: string; params: unknown };
        const respond = () => {
          if (res.destroyed) return;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: builtinResult(call.method, call.params, chainId) }));
        };
        if (call.method !== 'eth_chainId' || !armed) return respond();
        gate.armedCalls[i] = (gate.armedCalls[i] ?? 0) + 1;
        held[i] = respond;
        if (held[0] && held[1]) {
          gate.bothPending = true;
          armed = false;
          const both = [held[0], held[1]];
          held[0] = held[1] = undefined;
          for (const r of both) r();
          return;
        }
        setTimeout(() => {
          if (held[i] !== respond) return;
          held[i] = undefined;
          respond();
        }, 3000).unref();
      });
    });
    gate.urls.push(`http://127.0.0.1:${await listenOnLoopback(server, `gate-${i}`)}`);
    servers.push(server);
  }
  return gate;
}

/** One trace segment of X-SVC-Upstreams, parsed. */
interface Segment {
  upstream: string;
  reason: string;
  outcome: string;
  won: boolean;
}
const SEGMENT = /^([^=;]+)=(primary|hedge|retry|consensus_slot|sweep):(success|timeout|exec_revert|rate_limited):(\d+)(:won)?$/;
/** The last X-SVC-Upstreams {@link segments} read (assertion messages). */
let lastTrace = '';
function segments(r: SvcResponse): Segment[] {
  const h = r.headers['x-svc-upstreams'];
  lastTrace = `X-SVC-Upstreams: ${h}`;
  expect(h, 'X-SVC-Upstreams').to.be.a('string');
  return (h as string).split(';').map((s) => {
    const m = SEGMENT.exec(s);
    expect(m, `segment ${s}`).to.not.equal(null);
    return { upstream: m![1] as string, reason: m![2] as string, outcome: m![3] as string, won: m![5] !== undefined };
  });
}
const brief = (segs: Segment[]) => segs.map((s) => `${s.reason}:${s.outcome}${s.won ? ':won' : ''}`);

describe('conformance: prose of §3 and §4', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let group: ScriptedGroup;
  let poll: RecordingProxy;
  let shadow: RecordingProxy;
  let catalog: Server;
  /** Whether the slow catalog has sent its answer. */
  let catalogAnswered = false;
  let svc: SvcHandle;
  let plain: SvcHandle;
  /** The healthcheck svc: networks mode, defaultEval all:activeUpstreams, guarded by a secret. */
  let hc: SvcHandle;
  let clock: AnvilHandle;
  let rate: FaultServer;
  let gate: ChainIdGate;
  const admin = (method: string, params?: unknown) => svc.post('/admin', rpc(method, params), ADMIN_H);
  let n = 0x2000;
  /** A fresh address: an uncached, unmultiplexed call. */
  const fresh = () => `0x${(++n).toString(16).padStart(40, '0')}`;
  const chain = () => anvil.chainId;
  const path = (project: string, query = '') => `/${project}/evm/${chain()}${query}`;

  before(async () => {
    [anvil, group, catalog] = await Promise.all([
      startAnvil(),
      startScriptedGroup(3, 31337),
      Promise.resolve(
        createServer((_q, res) => {
          // Slow on purpose: the first request for a chain waits for this task to finish.
          setTimeout(() => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('{}');
            catalogAnswered = true;
          }, 300);
        }),
      ),
    ]);
    const catalogUrl = `http://127.0.0.1:${await listenOnLoopback(catalog, 'catalog')}/`;
    [poll, shadow] = await Promise.all([startRecordingProxy(anvil.url), startRecordingProxy(anvil.url)]);
    const CHAIN = anvil.chainId;
    const up = (id: string, extra: Record<string, unknown> = {}) => ({ id, endpoint: anvil.url, evm: { chainId: CHAIN }, ...extra });
    const net = (extra: Record<string, unknown> = {}) => ({ architecture: 'evm', evm: { chainId: CHAIN }, ...extra });
    const scripted = (i: number) => ({
      id: `s${i + 1}`,
      endpoint: group.urls[i],
      evm: { chainId: CHAIN, statePollerInterval: 0 },
      failsafe: [{ matchMethod: 'eth_getStorageAt', timeout: { duration: '800ms' } }, { matchMethod: '*' }],
    });
    type U = { id: string; removeCordoned(): U[] } & Iterable<U>;
    const projects = [
      { id: 'main', networks: [net({ alias: 'local', selectionPolicy: { evalInterval: '100ms' } })], upstreams: [up('a'), up('b')] },
      // §3.1 ¶2: a polled upstream and a shadow upstream, both cordoned by the test.
      {
        id: 'watch',
        networks: [net()],
        upstreams: [
          up('a'),
          { id: 'p', endpoint: poll.url, evm: { chainId: CHAIN, statePollerInterval: '50ms' } },
          { id: 's', endpoint: shadow.url, evm: { chainId: CHAIN }, shadow: {} },
        ],
      },
      // §3.1 ¶3: custom selection functions that keep config order, with and without removeCordoned().
      {
        id: 'honours',
        networks: [net({ selectionPolicy: { evalInterval: '1h', evalFunc: (ups: U) => ups.removeCordoned() } })],
        upstreams: [up('a'), up('b')],
      },
      { id: 'ignores', networks: [net({ selectionPolicy: { evalInterval: '1h', evalFunc: (ups: U) => [...ups] } })], upstreams: [up('a'), up('b')] },
      // §4.1 ¶2: zero-config, whose public catalog lists no chain.
      { id: 'zero' },
      // §4.5: a guarded project (an early 401), and the scripted upstreams for the trace.
      {
        id: 'guarded',
        networks: [net()],
        upstreams: [up('a')],
        auth: { strategies: [{ type: 'secret', secret: { value: 'project-secret-0123456789abcdef' } }] },
      },
      {
        id: 'trace',
        networks: [
          net({
            failsafe: [
              {
                matchMethod: 'eth_getCode',
                consensus: { maxParticipants: 2, agreementThreshold: 2 },
                retry: { maxAttempts: 2 },
                hedge: { delay: '20ms', maxCount: 1 },
              },
              { matchMethod: 'eth_getBalance', retry: { maxAttempts: 2 } },
              { matchMethod: 'eth_getTransactionCount', hedge: { delay: '50ms', maxCount: 1 } },
              { matchMethod: '*' },
            ],
          }),
        ],
        upstreams: [scripted(0), scripted(1), scripted(2)],
      },
      { id: 'one', networks: [net()], upstreams: [{ ...scripted(0), id: 'solo' }] },
    ];
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: true, port: 0 },
        server: { responseHeaders: { 'X-Prose': 'yes' }, costHeaders: true },
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
        projects,
      },
      { plugins: [...presetWithout('vendor-repository'), repositoryVendorPlugin({ env: { SVC_PUBLIC_REPOSITORY_URL: catalogUrl } })] },
    );
    [clock, rate, gate] = await Promise.all([startAnvil(), startFaultServer({ chainId: CHAIN }), startChainIdGate(CHAIN)]);
    // Every call but eth_chainId fails (its chain-id probe passes, so it initialises).
    rate.setDefault({ kind: 'status', status: 500 });
    const quiet = (id: string, url: string) => ({ id, endpoint: url, evm: { chainId: CHAIN, statePollerInterval: 0 } });
    hc = await startSvc({
      ...NO_CACHE,
      logLevel: 'error',
      metrics: { enabled: false },
      healthCheck: { mode: 'networks', defaultEval: 'all:activeUpstreams', auth: { strategies: [{ type: 'secret', secret: { value: HC_SECRET } }] } },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
      projects: [
        { id: 'hmain', networks: [net()], upstreams: [up('a'), up('b')] },
        { id: 'hrate', networks: [net()], upstreams: [quiet('r', rate.url)] },
        { id: 'hchain', networks: [net()], upstreams: [quiet('g1', gate.urls[0] as string), quiet('g2', gate.urls[1] as string)] },
        { id: 'htime', networks: [net()], upstreams: [{ id: 't', endpoint: clock.url, evm: { chainId: CHAIN, statePollerInterval: '50ms' } }] },
      ],
    });
    const hcGet = (p: string) => hc.send('GET', p, undefined, { 'x-svc-secret-token': HC_SECRET });
    await waitFor(
      async () =>
        (await Promise.all(['hmain', 'hrate', 'hchain', 'htime'].map((p) => hcGet(`/${p}/evm/${CHAIN}/healthcheck?eval=any:initializedUpstreams`)))).every(
          (r) => r.status === 200,
        ),
      10_000,
    );
    // hmain fails its default evaluation (all:activeUpstreams) while b is cordoned.
    expect((await hc.post('/admin', rpc('svc_cordonUpstream', [{ projectId: 'hmain', upstream: 'b' }]), ADMIN_H)).json.result.cordoned).to.equal(true);
    plain = await startSvc(
      { ...NO_CACHE, logLevel: 'error', metrics: { enabled: false }, projects: [{ id: 'main', networks: [net()], upstreams: [up('a')] }] },
      { plugins: defaultPreset() },
    );
  });
  after(async () => {
    await Promise.all([svc?.close(), plain?.close(), hc?.close()]);
    catalog?.close();
    await Promise.all([anvil?.stop(), clock?.stop(), group?.close(), poll?.close(), shadow?.close(), rate?.close(), gate?.close()]);
  });

  describe('§3.1 cordon rules', () => {
    const cordon = (project: string, upstream: string, method?: string) =>
      admin('svc_cordonUpstream', [{ projectId: project, upstream, ...(method ? { method } : {}) }]);
    const uncordon = (project: string, upstream: string, method?: string) =>
      admin('svc_uncordonUpstream', [{ projectId: project, upstream, ...(method ? { method } : {}) }]);
    /** Whether upstream a may serve the call: pinned to it (the score order of a and b is not the subject). */
    const aServes = async (method: string, params: unknown[]) =>
      (await svc.post(path('main', '?use-upstream=a'), rpc(method, params))).headers['x-svc-upstream'] === 'a';
    const BAL = (): [string, unknown[]] => ['eth_getBalance', [fresh(), 'latest']];
    const CODE = (): [string, unknown[]] => ['eth_getCode', [fresh(), 'latest']];
    const HEAD: [string, unknown[]] = ['eth_blockNumber', []];

    it('§3.1 ¶1 — a * cordon excludes the upstream for every method and overrides method-scoped cordons; method-scoped cordons coexist and exclude it for their method only', async () => {
      try {
        await cordon('main', 'a', 'eth_getBalance');
        await cordon('main', 'a', 'eth_getCode');
        // Two method scopes at once, each for its own method only.
        expect(await aServes(...BAL())).to.equal(false);
        expect(await aServes(...CODE())).to.equal(false);
        expect(await aServes(...HEAD)).to.equal(true);
        expect((await svc.post(path('main'), rpc(...BAL()))).headers['x-svc-upstream']).to.equal('b');
        // * excludes every method.
        await cordon('main', 'a');
        expect(await aServes(...HEAD)).to.equal(false);
        expect((await svc.post(path('main'), rpc(...HEAD))).headers['x-svc-upstream']).to.equal('b');
        // Lifting a method scope under * does not bring the upstream back for that method.
        await uncordon('main', 'a', 'eth_getBalance');
        expect(await aServes(...BAL())).to.equal(false);
        // Without * (back in the ordered list at the next 100 ms evaluation), the remaining method scope still holds, the lifted one does not.
        await uncordon('main', 'a');
        await waitFor(() => aServes(...HEAD), 3000);
        expect(await aServes(...BAL())).to.equal(true);
        expect(await aServes(...CODE())).to.equal(false);
      } finally {
        await uncordon('main', 'a');
        await uncordon('main', 'a', 'eth_getBalance');
        await uncordon('main', 'a', 'eth_getCode');
      }
    });

    it('§3.1 ¶2 — cordoned upstreams still receive state-poller traffic and mirrored shadow traffic', async () => {
      try {
        expect((await cordon('watch', 'p')).json.result.cordoned).to.equal(true);
        expect((await cordon('watch', 's')).json.result.cordoned).to.equal(true);
        const polled = poll.calls.length;
        // The state poller (every 50 ms) keeps polling the cordoned upstream.
        await waitFor(() => poll.calls.length >= polled + 2, 3000);
        const mirrored = shadow.callsOf('eth_getBalance').length;
        for (let i = 0; i < 3; i++) {
          const r = await svc.post(path('watch'), rpc(...BAL()));
          expect(r.json.result).to.match(/^0x/);
          expect(r.headers['x-svc-upstream']).to.equal('a');
        }
        // Each answered call is copied to the cordoned shadow, off the request path.
        await waitFor(() => shadow.callsOf('eth_getBalance').length === mirrored + 3, 3000);
        expect(poll.callsOf('eth_getBalance')).to.have.length(0);
      } finally {
        await uncordon('watch', 'p');
        await uncordon('watch', 's');
      }
    });

    it('§3.1 ¶3 — a custom selection function honours cordons only when it calls removeCordoned()', async () => {
      const served = async (project: string) => (await svc.post(path(project), rpc(...BAL()))).headers['x-svc-upstream'];
      const network = `evm:${chain()}`;
      try {
        // Both functions keep config order: a first.
        expect(await served('honours')).to.equal('a');
        expect(await served('ignores')).to.equal('a');
        await cordon('honours', 'a');
        await cordon('ignores', 'a');
        // The next evaluation (forced here instead of waiting for the 1 h tick).
        expect(await evaluateSelection(svc.proxy, 'honours', network)).to.equal(true);
        expect(await evaluateSelection(svc.proxy, 'ignores', network)).to.equal(true);
        expect(await served('honours')).to.equal('b');
        expect(await served('ignores')).to.equal('a');
      } finally {
        await uncordon('honours', 'a');
        await uncordon('ignores', 'a');
        await evaluateSelection(svc.proxy, 'honours', network);
      }
    });
  });

  describe('§4 endpoints', () => {
    const isJsonRpc = (body: unknown, what: string) => {
      expect(body, what).to.be.an('object');
      const o = body as Record<string, unknown>;
      expect(o.jsonrpc, what).to.equal('2.0');
      expect(o, what).to.have.property('id');
      expect(('result' in o ? 1 : 0) + ('error' in o ? 1 : 0), `${what}: result or error`).to.equal(1);
    };

    it('§4 ¶1 — JSON bodies are JSON-RPC 2.0: proxy answers (results, errors, batch elements, early refusals) and admin answers', async () => {
      isJsonRpc((await svc.post(path('main'), rpc('eth_chainId', [], 1))).json, 'result');
      isJsonRpc((await svc.post(path('main'), rpc('eth_getBlockByNumber', ['not-a-block', false], 2))).json, 'error');
      const batch = await svc.post(path('main'), [rpc('eth_chainId', [], 3), rpc('eth_nope', [], 4)]);
      expect(batch.json).to.have.length(2);
      for (const e of batch.json) isJsonRpc(e, 'batch element');
      isJsonRpc((await svc.post('/main/evm/999999', rpc('eth_chainId', [], 5))).json, 'unknown network');
      isJsonRpc((await svc.post(path('main'), '{"jsonrpc":"2.0",')).json, 'unparsable body');
      isJsonRpc((await svc.post(path('guarded'), rpc('eth_chainId', [], 6))).json, 'refused credentials');
      isJsonRpc((await admin('svc_taxonomy')).json, 'admin result');
      isJsonRpc((await admin('svc_nope')).json, 'admin error');
      isJsonRpc((await svc.post('/admin', rpc('svc_taxonomy'), { 'x-svc-secret-token': 'wrong-secret-0123456789abcdef' })).json, 'admin refused');
    });

    it('§4.1 ¶1 — directive query parameters (§2.8) may be appended to the proxy paths', async () => {
      for (const [p, to] of [
        [path('main', '?use-upstream=b'), 'b'],
        [path('main', '?use-upstream=a'), 'a'],
        ['/main/local?use-upstream=b', 'b'],
        [path('main', '?skip-cache-read=true&use-upstream=a'), 'a'],
      ] as const) {
        const r = await svc.post(p, rpc('eth_getBalance', [fresh(), 'latest']));
        expect(r.json.result, p).to.match(/^0x/);
        expect(r.headers['x-svc-upstream'], p).to.equal(to);
      }
    });

    it('§4.1 ¶2 — an unknown chain id: HTTP 404 with a JSON-RPC error body (ErrNetworkNotSupported) once every provider task finished without an upstream', async () => {
      const r = await svc.post('/zero/evm/424242', rpc('eth_chainId', [], 'z1'));
      // The repository task had to finish (its catalog answers after 300 ms) before the refusal.
      expect(catalogAnswered).to.equal(true);
      expect(r.status).to.equal(404);
      expect(r.json.jsonrpc).to.equal('2.0');
      expect(r.json.id).to.equal('z1');
      expect(r.json.error.data.code).to.equal('ErrNetworkNotSupported');
    });
  });

  describe('§4.3 healthcheck', () => {
    const hpath = (project: string, query = '') => `/${project}/evm/${chain()}/healthcheck${query}`;
    const withSecret = (p: string) => hc.send('GET', p, undefined, { 'x-svc-secret-token': HC_SECRET });

    it('§4.3 ¶1 — query parameters: eval=<strategy> overrides defaultEval; secret=<SECRET> passes the secret strategy that guards it', async () => {
      expect((await hc.send('GET', hpath('hmain'))).status).to.equal(401);
      expect((await hc.send('GET', hpath('hmain', '?secret=wrong-0123456789abcdef'))).status).to.equal(401);
      // defaultEval all:activeUpstreams: b is cordoned.
      const byDefault = await hc.send('GET', hpath('hmain', `?secret=${HC_SECRET}`));
      expect(byDefault.status).to.equal(503);
      expect(byDefault.json.message).to.match(/upstreams active/);
      const overridden = await hc.send('GET', hpath('hmain', `?secret=${HC_SECRET}&eval=any:initializedUpstreams`));
      expect(overridden.status).to.equal(200);
      expect(overridden.json.message).to.match(/initialized/);
    });

    it('§4.3 ¶2 — header alternative: X-SVC-Secret-Token: <SECRET>', async () => {
      expect((await hc.send('GET', hpath('hmain', '?eval=any:initializedUpstreams'), undefined, { 'x-svc-secret-token': HC_SECRET })).status).to.equal(200);
      expect(
        (await hc.send('GET', hpath('hmain', '?eval=any:initializedUpstreams'), undefined, { 'x-svc-secret-token': 'wrong-0123456789abcdef' })).status,
      ).to.equal(401);
      expect((await hc.send('GET', '/healthcheck?eval=any:initializedUpstreams', undefined, { 'x-svc-secret-token': HC_SECRET })).status).to.equal(200);
    });

    it('§4.3 ¶3 — any strategy but the eight named ones answers HTTP 503 with message unknown evaluation strategy: <name>', async () => {
      for (const name of ['nope', 'ANY:initializedUpstreams', 'any:errorRateBelow80', 'all:initializedUpstreams', 'any:upstreams > 1']) {
        const r = await withSecret(hpath('hmain', `?eval=${encodeURIComponent(name)}`));
        expect(r.status, name).to.equal(503);
        expect(r.json.message, name).to.equal(`unknown evaluation strategy: ${name}`);
      }
      for (const name of [
        'any:initializedUpstreams',
        'any:errorRateBelow90',
        'all:errorRateBelow90',
        'any:errorRateBelow100',
        'all:errorRateBelow100',
        'any:evm:eth_chainId',
        'all:evm:eth_chainId',
        'all:activeUpstreams',
      ]) {
        const r = await withSecret(hpath('hmain', `?eval=${name}`));
        expect(String(r.json.message), name).to.not.match(/unknown evaluation strategy/);
      }
    });

    it('§4.3 ¶4 — error-rate strategies read in-memory scores: they follow the calls served and send no call of their own', async () => {
      const probe = async (name: string) => (await withSecret(hpath('hrate', `?eval=${name}`))).status;
      // Failing client calls score the upstream (every call but eth_chainId fails).
      for (let i = 0; i < 2; i++) expect((await hc.post(path('hrate'), rpc('eth_getBalance', [fresh(), 'latest']))).json.error).to.exist;
      const calls = rate.calls.length;
      for (const name of ['any:errorRateBelow90', 'all:errorRateBelow90', 'any:errorRateBelow100', 'all:errorRateBelow100'])
        expect(await probe(name), name).to.equal(503);
      expect(rate.calls.length, 'no upstream call while evaluating').to.equal(calls);
      const project = (await hc.post('/admin', rpc('svc_project', ['hrate']), ADMIN_H)).json.result;
      expect(JSON.stringify(project)).to.match(/"errorRate":1\b/);
    });

    it('§4.3 ¶5 — the eth_chainId strategies send real eth_chainId calls to each upstream, in parallel', async () => {
      gate.arm();
      const r = await withSecret(hpath('hchain', '?eval=all:evm:eth_chainId'));
      expect(r.status).to.equal(200);
      expect(gate.armedCalls).to.deep.equal([1, 1]);
      // Both calls were pending at once: neither waited for the other's answer.
      expect(gate.bothPending).to.equal(true);
    });

    it('§4.3 ¶6 — blockTimeMs: null while observations accumulate, then the estimated block time in milliseconds', async () => {
      const network = hc.proxy.projects.get('htime')?.networks.get(`evm:${chain()}`);
      expect(network).to.not.equal(undefined);
      const blockTime = async () =>
        (await withSecret(hpath('htime', '?eval=any:initializedUpstreams'))).json.details.htime.networks[`evm:${chain()}`].blockTimeMs as number | null;
      // An idle node: the head never moved.
      expect(await blockTime()).to.equal(null);
      // Blocks at least 150 ms apart, each mined once svc saw the previous one.
      const PAUSE_MS = 150;
      for (let i = 0; i < 6 && (await blockTime()) === null; i++) {
        const head = Number(await clock.rpc('eth_blockNumber', []));
        await clock.rpc('anvil_mine', ['0x1']);
        await waitFor(() => networkChainState(hc.proxy, network!).highestLatest >= head + 1, 3000);
        await new Promise((r) => setTimeout(r, PAUSE_MS));
      }
      const ms = await blockTime();
      expect(ms).to.be.a('number');
      expect(ms as number).to.be.at.least(PAUSE_MS);
    });

    it('§4.3 ¶7 — top-level status is OK when healthy', async () => {
      const r = await withSecret(hpath('hmain', '?eval=any:initializedUpstreams'));
      expect(r.status).to.equal(200);
      expect(r.json.status).to.equal('OK');
      const all = await hc.send('GET', '/healthcheck?eval=any:initializedUpstreams', undefined, { 'x-svc-secret-token': HC_SECRET });
      expect(all.status).to.equal(200);
      expect(all.json.status).to.equal('OK');
      const simple = await plain.send('GET', '/healthcheck');
      expect(simple.status).to.equal(200);
      expect(simple.json.status).to.equal('OK');
    });
  });

  describe('§4.4 admin body', () => {
    it('§4.4 ¶1 — body {jsonrpc: 2.0, id, method, params}: answered with the same id', async () => {
      for (const id of [7, 'req-a', 0]) {
        const r = await svc.post('/admin', { jsonrpc: '2.0', id, method: 'svc_listCordoned', params: [{ projectId: 'main' }] }, ADMIN_H);
        expect(r.json).to.deep.equal({ jsonrpc: '2.0', id, result: { projectId: 'main', cordoned: [] } });
      }
      const t = await svc.post('/admin', { jsonrpc: '2.0', id: 'tax', method: 'svc_taxonomy', params: [] }, ADMIN_H);
      expect(t.json.id).to.equal('tax');
      expect(t.json.result.projects.map((p: { id: string }) => p.id)).to.include('main');
    });

    it('§4.4 ¶2 — method names are case-sensitive', async () => {
      for (const m of ['SVC_TAXONOMY', 'svc_Taxonomy', 'Svc_taxonomy', 'svc_listcordoned', 'svc_cordonupstream']) {
        const r = await admin(m, m.toLowerCase().includes('cordon') ? [{ projectId: 'main' }] : undefined);
        expect(r.json.error?.message, m).to.equal(`EndpointUnsupported: admin method ${m} is not supported`);
      }
      expect((await admin('svc_taxonomy')).json.result.projects).to.be.an('array');
      expect((await admin('svc_listCordoned', [{ projectId: 'main' }])).json.result.projectId).to.equal('main');
    });
  });

  describe('§4.5 response headers', () => {
    it('§4.5 ¶1 — always Content-Type: application/json and the server.responseHeaders', async () => {
      const answers: Array<[string, SvcResponse]> = [
        ['result', await svc.post(path('main'), rpc('eth_chainId', []))],
        ['error', await svc.post(path('main'), rpc('eth_getBlockByNumber', ['not-a-block', false]))],
        ['batch', await svc.post(path('main'), [rpc('eth_chainId', [], 1), rpc('eth_blockNumber', [], 2)])],
        ['empty batch', await svc.post(path('main'), [])],
        ['unknown network', await svc.post('/main/evm/999999', rpc('eth_chainId', []))],
        ['unparsable', await svc.post(path('main'), '{"jsonrpc":')],
        ['refused', await svc.post(path('guarded'), rpc('eth_chainId', []))],
      ];
      for (const [what, r] of answers) {
        expect(r.headers['content-type'], what).to.equal('application/json');
        expect(r.headers['x-prose'], what).to.equal('yes');
      }
      expect(answers.map(([, r]) => r.status)).to.deep.equal([200, 200, 200, 200, 404, 400, 401]);
    });

    it('§4.5 ¶2 — trace reasons primary, retry, sweep, hedge, consensus_slot (precedence consensus_slot > hedge > sweep > retry > primary); outcomes success, timeout, exec_revert, rate_limited; :won only on what made the answer', async () => {
      const trace = async (method: string, params: unknown[], steps: Step[]) => {
        group.plan.set(method, steps);
        const r = await svc.post(path('trace'), rpc(method, params));
        group.plan.delete(method);
        return r;
      };
      // primary, success, :won.
      expect(brief(segments(await trace('eth_getBalance', [fresh(), 'latest'], []))), lastTrace).to.deep.equal(['primary:success:won']);
      // Sweep over retry: a retry round's first attempt is a retry, its next upstream a sweep.
      const RL: Step = { kind: 'rateLimited' };
      const swept = await trace('eth_getBalance', [fresh(), 'latest'], [RL, RL, RL, RL]);
      expect(swept.json.result).to.equal('0x0');
      expect(brief(segments(swept)), lastTrace).to.deep.equal([
        'primary:rate_limited',
        'sweep:rate_limited',
        'sweep:rate_limited',
        'retry:rate_limited',
        'sweep:success:won',
      ]);
      // Hedge over sweep: the hedge leg moving to the next upstream stays a hedge; the primary lost the race.
      const hedged = segments(await trace('eth_getTransactionCount', [fresh(), 'latest'], [{ kind: 'delay', ms: 5000 }, RL]));
      expect(brief(hedged).slice(1), lastTrace).to.deep.equal(['hedge:rate_limited', 'hedge:success:won']);
      expect(hedged[0], lastTrace).to.include({ reason: 'primary', won: false });
      // consensus_slot over retry (and hedge): a slot's retry is still a consensus slot; both agreeing slots made the answer.
      const slots = segments(await trace('eth_getCode', [fresh(), 'latest'], [RL, { kind: 'delay', ms: 100 }]));
      expect(
        slots.map((s) => s.reason),
        lastTrace,
      ).to.deep.equal(['consensus_slot', 'consensus_slot', 'consensus_slot']);
      expect(
        slots.filter((s) => s.outcome === 'rate_limited'),
        lastTrace,
      ).to.have.length(1);
      expect(
        slots.filter((s) => s.outcome === 'rate_limited' && s.won),
        lastTrace,
      ).to.have.length(0);
      expect(
        slots.filter((s) => s.outcome === 'success' && s.won),
        lastTrace,
      ).to.have.length(2);
      // exec_revert: the node's revert is the answer; no other upstream asked.
      const reverted = await trace('eth_call', [{ to: fresh(), data: '0x' }, 'latest'], [{ kind: 'revert' }]);
      expect(reverted.json.error.message).to.equal('execution reverted');
      expect(
        brief(segments(reverted)).map((s) => s.replace(/:won$/, '')),
        lastTrace,
      ).to.deep.equal(['primary:exec_revert']);
      // timeout: the attempt ran out of its 800 ms; the sweep's next upstream answered.
      const timedOut = await trace('eth_getStorageAt', [fresh(), '0x0', 'latest'], [{ kind: 'delay', ms: 5000 }]);
      expect(brief(segments(timedOut)), lastTrace).to.deep.equal(['primary:timeout', 'sweep:success:won']);
    });

    it('§4.5 ¶3 — a batch gets one aggregated set: counters summed, no X-SVC-Upstream, traces concatenated in sub-call order', async () => {
      // Sub-call 1 times out on its first upstream and is swept (2 attempts, done last); sub-call 2 answers at once (1 attempt).
      group.plan.set('eth_getStorageAt', [{ kind: 'delay', ms: 5000 }]);
      const r = await svc.post(path('trace'), [rpc('eth_getStorageAt', [fresh(), '0x0', 'latest'], 1), rpc('eth_getBalance', [fresh(), 'latest'], 2)]);
      group.plan.delete('eth_getStorageAt');
      expect(r.json.map((e: { id: number }) => e.id)).to.deep.equal([1, 2]);
      expect(r.headers['x-svc-upstream-attempts']).to.equal('3');
      expect(r.headers['x-svc-network-attempts']).to.equal('2');
      expect(r.headers['x-svc-attempts']).to.equal('3');
      expect(r.headers['x-svc-upstream']).to.equal(undefined);
      expect(brief(segments(r)), lastTrace).to.deep.equal(['primary:timeout', 'sweep:success:won', 'primary:success:won']);
      // The same calls alone: the batch's counters are their sums.
      const one = await svc.post(path('trace'), rpc('eth_getBalance', [fresh(), 'latest']));
      expect(one.headers['x-svc-upstream-attempts']).to.equal('1');
      expect(one.headers['x-svc-upstream']).to.match(/^s[123]$/);
    });

    it('§4.5 ¶4 — cost headers only with server.costHeaders true, on single and batch answers, absent on early errors that routed no call', async () => {
      const single = await svc.post(path('main'), rpc('eth_getBalance', [fresh(), 'latest']));
      expect(single.headers['x-svc-calls']).to.equal('1');
      expect(single.headers['x-svc-billable']).to.equal('1');
      expect(single.headers['x-svc-methods']).to.equal('eth_getBalance');
      const batch = await svc.post(path('main'), [rpc('eth_getBalance', [fresh(), 'latest'], 1), rpc('eth_blockNumber', [], 2)]);
      expect(batch.headers['x-svc-calls']).to.equal('2');
      expect(batch.headers['x-svc-methods']).to.equal('eth_blockNumber,eth_getBalance');
      for (const [what, r] of [
        ['unknown network', await svc.post('/main/evm/999999', rpc('eth_chainId', []))],
        ['unknown network, batch', await svc.post('/main/evm/999999', [rpc('eth_chainId', [], 1)])],
        ['unparsable', await svc.post(path('main'), '{"jsonrpc":')],
        ['refused', await svc.post(path('guarded'), rpc('eth_chainId', []))],
      ] as const) {
        for (const h of ['x-svc-calls', 'x-svc-billable', 'x-svc-methods', 'x-svc-credits', 'x-svc-credits-total', 'x-svc-credits-version'])
          expect(r.headers[h], `${what}: ${h}`).to.equal(undefined);
      }
      // costHeaders unset: none, single or batch.
      for (const r of [
        await plain.post(path('main'), rpc('eth_getBalance', [fresh(), 'latest'])),
        await plain.post(path('main'), [rpc('eth_blockNumber', [], 1)]),
      ]) {
        expect(r.json).to.not.equal(undefined);
        for (const h of ['x-svc-calls', 'x-svc-billable', 'x-svc-methods', 'x-svc-credits']) expect(r.headers[h], h).to.equal(undefined);
      }
    });
  });
});
