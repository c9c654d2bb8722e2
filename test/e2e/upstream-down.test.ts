/**
 * A dead upstream looks dead, and stops costing calls at once: the first upstream in the order
 * is closed (connections refused); the first call after that pays one refused attempt and is
 * answered by the next upstream, and from the next call on the refused one is ordered last (the
 * default policy's demoteDown, re-evaluated when the upstream turns down, not at the next
 * evalInterval). `svc_upstream_up` is 0 for it, and the operator page's snapshot shows it
 * `down` with the error of its last attempt. When it answers again it is up and first again.
 */
import { expect } from 'chai';
import { defaultPreset } from '../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;
const ADMIN = 'upstream-down-admin-secret-0123456789';
const body = { jsonrpc: '2.0', id: 1, method: 'eth_gasPrice', params: [] };

describe('e2e: a dead upstream is seen as down and demoted at once', function () {
  this.timeout(20_000);
  let a: FaultServer;
  let b: FaultServer;
  let svc: SvcHandle;

  before(async () => {
    a = await startFaultServer();
    b = await startFaultServer();
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: true, port: 0 },
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] }, ui: { enabled: true } },
        projects: [
          {
            id: 'main',
            // An hour between evaluations: only the down/up edge can re-order within this test.
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, selectionPolicy: { evalInterval: '1h' } }],
            upstreams: [
              { id: 'a', endpoint: a.url, evm: { chainId: CHAIN, statePollerInterval: '1h' } },
              { id: 'b', endpoint: b.url, evm: { chainId: CHAIN, statePollerInterval: '1h' } },
            ],
          },
        ],
      },
      { plugins: defaultPreset() },
    );
  });
  after(async () => {
    await svc?.close();
    await b?.close();
    await a?.close().catch(() => undefined);
  });

  const upGauge = async (id: string) => {
    const text = await (await fetch(svc.metricsUrl!)).text();
    return new RegExp(`svc_upstream_up\\{project="main",network="evm:${CHAIN}",upstream="${id}"\\} (\\d)`).exec(text)?.[1];
  };
  /** `<upstream>=<outcome>` of each attempt of one call (X-SVC-Upstreams: `id=reason:outcome:ms[:won]`, `;`-separated). */
  const trace = async () =>
    String((await svc.post(PATH, body)).headers['x-svc-upstreams'] ?? '')
      .split(';')
      .filter(Boolean)
      .map((seg) => {
        const [id, rest] = seg.split('=') as [string, string];
        return `${id}=${rest.split(':')[1]}`;
      });

  it('refused: one failed attempt, then ordered last; svc_upstream_up 0 and the operator page shows it down with its error', async () => {
    // Whichever upstream the policy put first (by score) is the one killed.
    await waitFor(async () => (await trace()).length === 1, 5000);
    const [first] = (await trace())[0]!.split('=') as [string];
    const other = first === 'a' ? 'b' : 'a';
    const servers = { a, b } as Record<string, FaultServer>;
    const victim = servers[first]!;
    expect(await upGauge(first)).to.equal('1');
    const port = victim.port;
    await victim.close();
    expect(await trace(), 'the first call after the kill').to.deep.equal([`${first}=error`, `${other}=success`]);
    await waitFor(async () => (await trace())[0] === `${other}=success`, 2000);
    expect(await trace(), 'demoted: the dead upstream is not tried first any more').to.deep.equal([`${other}=success`]);
    expect(await upGauge(first)).to.equal('0');
    expect(await upGauge(other)).to.equal('1');

    const snap = await svc.send('GET', '/admin/ui/snapshot', undefined, { 'x-svc-secret-token': ADMIN, origin: svc.url, 'sec-fetch-site': 'same-origin' });
    const rows = snap.json.projects[0].networks[0].upstreams as Array<{ id: string; down: boolean; lastError: string | null; rank: number | null }>;
    expect(rows.find((u) => u.id === first)).to.include({ down: true, rank: 2 });
    expect(rows.find((u) => u.id === first)?.lastError).to.match(
      new RegExp(`^ErrEndpointServerSideException: transport error talking to upstream ${first}: ECONNREFUSED`),
    );
    expect(rows.find((u) => u.id === other)).to.include({ down: false, lastError: null, rank: 1 });

    // Back at its address: the next attempt that reaches it (the other failing over to it) says it is up again.
    const back = await startFaultServer({ port });
    if (first === 'a') a = back;
    else b = back;
    servers[other]!.script({ kind: 'status', status: 503 });
    await svc.post(PATH, body);
    await waitFor(async () => (await upGauge(first)) === '1', 2000);
    const after = await svc.send('GET', '/admin/ui/snapshot', undefined, { 'x-svc-secret-token': ADMIN, origin: svc.url, 'sec-fetch-site': 'same-origin' });
    expect((after.json.projects[0].networks[0].upstreams as Array<{ id: string; down: boolean }>).find((u) => u.id === first)).to.include({ down: false });
  });
});
