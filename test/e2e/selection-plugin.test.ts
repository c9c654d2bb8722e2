/**
 * A plugin that reorders upstreams through the public selection route (docs/fault-tolerance.md
 * "Selection policy", docs/plugins.md "Selection plugins"): it taps `selectionHooks(host).policy`
 * from `svc-proxy/plugin` and reverses the order the default policy hands it. In front of two anvil
 * nodes, the upstream that answers (`X-SVC-Upstream`), the admin `svc_project` view (primary
 * upstream and order) and `svc_selection_score` (lowest first) must all name the same order,
 * before any traffic (equal health scores) and after it.
 */
import { expect } from 'chai';
import type { Plugin } from 'svc-proxy/plugin';
import { selectionHooks, type EvalFunc } from 'svc-proxy/plugins/selection';
import { evaluateSelection } from '../../plugins/selection/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, type SvcHandle } from '../helpers/svc.ts';

const ADMIN = 'admin-secret-selection-0123456789';

/** Reverses the order the policy it receives (the default: by health score) hands out. */
const reversePlugin = (): Plugin => ({
  name: 'reverse-order',
  version: '1.0.0',
  dependsOn: ['selection'],
  apply(host) {
    selectionHooks(host).policy.tap(
      'reverse-order',
      (configured: EvalFunc): EvalFunc =>
        async (upstreams, ctx) =>
          [...(await configured(upstreams, ctx))].reverse(),
    );
  },
});

describe('e2e: a plugin reorders upstreams through the selection route', function () {
  this.timeout(30_000);
  let first: AnvilHandle;
  let second: AnvilHandle;
  let svc: SvcHandle;

  before(async () => {
    [first, second] = await Promise.all([startAnvil(), startAnvil()]);
    svc = await startSvc(
      {
        ...NO_CACHE,
        logLevel: 'error',
        metrics: { enabled: true, port: 0 },
        admin: { auth: { strategies: [{ type: 'secret', secret: { value: ADMIN } }] } },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: first.chainId }, selectionPolicy: { evalInterval: '1h' } }],
            upstreams: [
              { id: 'first', endpoint: first.url, evm: { chainId: first.chainId } },
              { id: 'second', endpoint: second.url, evm: { chainId: second.chainId } },
            ],
          },
        ],
      },
      { plugins: [...defaultPreset(), reversePlugin()] },
    );
  });
  after(async () => {
    await svc?.close();
    await Promise.all([first?.stop(), second?.stop()]);
  });

  /** What the three views say is first: the answering upstream, the admin view, the lowest score. */
  async function views(): Promise<{ served: string[]; adminOrder: string[]; primary: string; scoreOrder: string[] }> {
    const served: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await svc.post(`/main/evm/${first.chainId}`, {
        jsonrpc: '2.0',
        id: i,
        method: 'eth_getBalance',
        params: ['0x00000000000000000000000000000000000000aa', 'latest'],
      });
      expect(r.status, r.text).to.equal(200);
      served.push(String(r.headers['x-svc-upstream']));
    }
    const admin = await svc.post('/admin', { jsonrpc: '2.0', id: 1, method: 'svc_project', params: ['main'] }, { 'x-svc-secret-token': ADMIN });
    expect(admin.status, admin.text).to.equal(200);
    const net = (admin.json.result.networks as Array<{ id: string; primaryUpstream: string; selection: { order: string[] } }>).find(
      (n) => n.id === `evm:${first.chainId}`,
    )!;
    const scores: Array<[string, number]> = [];
    for (const line of (await (await fetch(svc.metricsUrl!)).text()).split('\n')) {
      const m = /^svc_selection_score\{(.*)\} (\S+)$/.exec(line);
      if (m && m[1]!.includes('project="main"')) scores.push([/upstream="([^"]+)"/.exec(m[1]!)![1]!, Number(m[2])]);
    }
    expect(scores, 'one score per upstream').to.have.length(2);
    scores.sort((a, b) => a[1] - b[1]);
    expect(scores[0]![1], 'the lowest score is lower than the next, not tied').to.be.lessThan(scores[1]![1]);
    return { served, adminOrder: net.selection.order, primary: net.primaryUpstream, scoreOrder: scores.map(([id]) => id) };
  }

  it('before traffic (equal health): the reversed order serves, and the admin view and the score gauge show it', async () => {
    const v = await views();
    expect(v.served).to.deep.equal(['second', 'second', 'second']);
    expect(v.adminOrder).to.deep.equal(['second', 'first']);
    expect(v.primary).to.equal('second');
    expect(v.scoreOrder).to.deep.equal(['second', 'first']);
  });

  it('after traffic, at the next evaluation: the served upstream is still first in the admin view and lowest in the gauge', async () => {
    // The served upstream now has latency, the other none: by health alone it ranks last.
    await evaluateSelection(svc.proxy, 'main', `evm:${first.chainId}`);
    const v = await views();
    expect(v.adminOrder[0]).to.equal(v.served[0]);
    expect(v.primary).to.equal(v.served[0]);
    expect(v.scoreOrder).to.deep.equal(v.adminOrder);
    expect(new Set(v.served).size, 'one upstream served every call').to.equal(1);
  });
});
