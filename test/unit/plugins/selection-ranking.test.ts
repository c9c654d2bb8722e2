/**
 * The order a policy hands out is the order svc shows (docs/fault-tolerance.md "Selection
 * policy", spec §6 `svc_selection_score`): the score gauge ascends along the policy's order,
 * a plugin's policy installed through `selectionHooks` of `svc-proxy/plugin` included, and agrees with
 * the order the state (read by the admin `svc_project` method) and the request path show.
 */
import { expect } from 'chai';
import { createLogger } from '../../../lib/logger.ts';
import type { Proxy } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import type { Network } from '../../../core/registry/project.ts';
import { forwardPlugin } from '../../../plugins/forward/index.ts';
import { healthPlugin } from '../../../plugins/health/index.ts';
import { selectPlugin } from '../../../plugins/select/index.ts';
import { evaluateSelection, rankedScores, selectionPlugin, selectionState } from '../../../plugins/selection/index.ts';
import type { Plugin } from 'svc-proxy/plugin';
import { SCORE_ORDER_STEP, SELECTION_API_SERVICE, selectionHooks, type EvalFunc } from 'svc-proxy/plugins/selection';

const DEAD = 'http://127.0.0.1:9';

/** Upstream ids from the lowest gauge value to the highest. */
function byScore(scores: Record<string, number>): string[] {
  return Object.entries(scores)
    .sort((x, y) => x[1] - y[1])
    .map(([id]) => id);
}

describe('selection: the shown order is the served order', () => {
  describe('rankedScores', () => {
    const snap = (...ids: string[]) => ids.map((id) => ({ id }));

    it('keeps the health scores when the order follows them', () => {
      expect(rankedScores({ order: ['a', 'b', 'c'], scores: { a: 0.1, b: 0.5, c: 4 } }, snap('a', 'b', 'c'))).to.deep.equal({ a: 0.1, b: 0.5, c: 4 });
    });

    it('raises a score so that it ascends along a reversed order, each one step above the one before', () => {
      const r = rankedScores({ order: ['c', 'b', 'a'], scores: { a: 0.1, b: 0.5, c: 0.9 } }, snap('a', 'b', 'c'));
      expect(r).to.deep.equal({ c: 0.9, b: 0.9 + SCORE_ORDER_STEP, a: 0.9 + 2 * SCORE_ORDER_STEP });
      expect(byScore(r)).to.deep.equal(['c', 'b', 'a']);
    });

    it('breaks ties in the order handed out, and ranks excluded upstreams after every selected one', () => {
      const r = rankedScores({ order: ['b', 'c'], scores: { a: 0, b: 0, c: 0 } }, snap('a', 'b', 'c'));
      expect(r).to.deep.equal({ b: 0, c: 0.001, a: 0.002 });
    });
  });

  describe('in a proxy', () => {
    let proxy: Proxy | undefined;
    afterEach(async () => {
      await proxy?.close();
      proxy = undefined;
    });

    async function start(extra: Plugin[] = []): Promise<{ proxy: Proxy; network: Network }> {
      proxy = createProxy({
        config: {
          logLevel: 'error',
          projects: [
            {
              id: 'main',
              networks: [{ architecture: 'evm', evm: { chainId: 1 }, selectionPolicy: { evalInterval: '1h' } }],
              upstreams: ['a', 'b', 'c'].map((id) => ({ id, endpoint: DEAD, evm: { chainId: 1 } })),
            },
          ],
        },
        plugins: [healthPlugin(), selectionPlugin(), ...extra, selectPlugin(), forwardPlugin()],
        logger: createLogger('silent'),
        port: 0,
        host: '127.0.0.1',
        metricsPort: 0,
      });
      await proxy.start();
      return { proxy, network: proxy.projects.get('main')!.networks.get('evm:1')! };
    }

    async function gauge(p: Proxy): Promise<Record<string, number>> {
      const values = (await p.metrics.getSingleMetric('svc_selection_score')!.get()).values;
      return Object.fromEntries(values.map((v) => [String(v.labels.upstream), v.value]));
    }

    function select(p: Proxy, network: Network): string[] {
      const { ctx, done } = p.internalContext(network, 'eth_call', [], 1000);
      try {
        return p.hooks.select.call(network.upstreams.slice(), ctx).map((u) => u.id);
      } finally {
        done();
      }
    }

    /** Upstream `id` looks slow to the health tracker (p70 of `seconds`). */
    function slow(p: Proxy, id: string, seconds: number): void {
      const health = p.projects.get('main')!.health;
      for (let i = 0; i < 5; i++) {
        health.record({
          upstreamId: id,
          vendor: 'unknown',
          method: 'eth_call',
          projectId: 'main',
          networkId: 'evm:1',
          reason: 'primary',
          outcome: 'success',
          startedAt: 0,
          durationMs: seconds * 1000,
          won: true,
          dialled: true,
          finality: 'unknown',
          internal: false,
        });
      }
    }

    it('a plugin that reverses the default order through selectionHooks: requests, state and svc_selection_score agree', async () => {
      // The plugin runs the policy it received (the default: by score) and reverses its answer.
      const reverse: Plugin = {
        name: 'reverse',
        dependsOn: ['selection'],
        apply: (host) =>
          selectionHooks(host).policy.tap(
            'reverse',
            (configured: EvalFunc): EvalFunc =>
              async (ups, ctx) =>
                [...(await configured(ups, ctx))].reverse(),
          ),
      };
      const { proxy: p, network } = await start([reverse]);
      slow(p, 'a', 0.01);
      slow(p, 'b', 0.2);
      slow(p, 'c', 0.4);
      await evaluateSelection(p, 'main', 'evm:1');
      // The default ranks a < b < c; reversed, c serves first although its health is the worst.
      const state = p.services.require(SELECTION_API_SERVICE).state('main', 'evm:1')!;
      expect(state.order).to.deep.equal(['c', 'b', 'a']);
      expect(select(p, network)).to.deep.equal(state.order);
      expect(byScore(state.healthScores)).to.deep.equal(['a', 'b', 'c']);
      const shown = await gauge(p);
      expect(byScore(shown)).to.deep.equal(['c', 'b', 'a']);
      expect(shown).to.deep.equal(state.scores);
      expect(shown.c).to.equal(state.healthScores.c);
    });

    it('the default policy keeps its health scores in the gauge (ties broken in config order)', async () => {
      const { proxy: p } = await start();
      slow(p, 'a', 0.3);
      await evaluateSelection(p, 'main', 'evm:1');
      expect(selectionState(p, 'main', 'evm:1')?.order).to.deep.equal(['b', 'c', 'a']);
      const shown = await gauge(p);
      expect(shown.a).to.be.closeTo(15 * 0.3, 0.2); // the latency sketch is accurate to 2 %
      expect(shown).to.deep.equal({ b: 0, c: SCORE_ORDER_STEP, a: shown.a });
    });
  });
});
