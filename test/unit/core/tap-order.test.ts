/**
 * Ordering taps (docs/plugins.md "Ordering taps"): stage numbers order taps of one hook; a plugin
 * takes its own position between two named stages with `stageBetween`; two plugins at the same
 * stage are ordered by tapable's `before` (a tap name), whatever the preset order. On a wrapper
 * hook (`call`, `attempt`, `upstream`) the tap registered first is innermost, so `before: X` puts
 * a wrapper inside X; on a run-in-order hook (`select`, `directives`, `validate`...) it runs first.
 */
import { expect } from 'chai';
import { createLogger } from '../../../lib/logger.ts';
import type { Plugin } from '../../../core/host/proxy.ts';
import { createProxy } from '../../../core/host/create.ts';
import { CallStage, RpcResult, SelectStage, stageBetween, type CallContext, type Network, type Upstream } from '../../../core/plugin-api.ts';
import { defaultPreset } from '../../../presets/default.ts';
import { startFaultServer, type FaultServer } from '../../helpers/fault-server.ts';
import { startSvc, type SvcHandle } from '../../helpers/svc.ts';

const build = (plugins: Plugin[]) => createProxy({ config: {}, plugins, logger: createLogger('silent') });

/** A call wrapper that records its name on the way in, for `acme_order` calls only. */
function tracer(name: string, stage: number, before?: string): Plugin {
  return {
    name,
    apply(h) {
      h.hooks.call.tap({ name, stage, before }, (inner) => (ctx) => {
        if (ctx.request.method !== 'acme_order') return inner(ctx);
        ctx.state.set(TRACE, [...((ctx.state.get(TRACE) as string[] | undefined) ?? []), name]);
        return inner(ctx);
      });
    },
  };
}
const TRACE = Symbol('tap-order.trace');

/** The innermost handler of the traced chain: answers the trace. */
function answerer(): Plugin {
  return {
    name: 'acme-answer',
    apply(h) {
      h.hooks.call.tap(
        { name: 'acme-answer', stage: CallStage.STATEFUL_GUARD - 1 },
        (inner) => (ctx) => (ctx.request.method === 'acme_order' ? Promise.resolve(new RpcResult(ctx.state.get(TRACE) ?? [])) : inner(ctx)),
      );
    },
  };
}

describe('ordering taps', () => {
  describe('stageBetween', () => {
    it('returns a number strictly between two stages, in either order, and nests', () => {
      const s = stageBetween(CallStage.CACHE, CallStage.MULTIPLEX);
      expect(s).to.be.greaterThan(CallStage.CACHE).and.lessThan(CallStage.MULTIPLEX);
      expect(stageBetween(CallStage.MULTIPLEX, CallStage.CACHE)).to.equal(s);
      const inner = stageBetween(CallStage.CACHE, s);
      expect(inner).to.be.greaterThan(CallStage.CACHE).and.lessThan(s);
    });

    it('refuses equal or non-finite stages', () => {
      expect(() => stageBetween(CallStage.CACHE, CallStage.CACHE)).to.throw(RangeError, /no stage lies strictly between/);
      expect(() => stageBetween(Number.NaN, 1)).to.throw(RangeError, /finite/);
      expect(() => stageBetween(1, Number.MAX_VALUE * 2)).to.throw(RangeError, /finite/);
    });
  });

  describe('two plugins at the same stage', () => {
    const between = stageBetween(SelectStage.METHODS, SelectStage.USE_UPSTREAM);
    /** A select tap appending its name to the candidate list it is handed (run in order). */
    const marker = (name: string, before?: string): Plugin => ({
      name,
      apply: (h) => h.hooks.select.tap({ name, stage: between, before }, (ups: Upstream[]) => [...ups, { id: name } as Upstream]),
    });
    const selectOrder = (plugins: Plugin[]) =>
      build(plugins)
        .hooks.select.call([], {} as CallContext)
        .map((u) => u.id);

    it('run in the declared order (`before`) whatever the preset order, between the named stages', () => {
      const methods: Plugin = {
        name: 'at-methods',
        apply: (h) => h.hooks.select.tap({ name: 'at-methods', stage: SelectStage.METHODS }, (u: Upstream[]) => [...u, { id: 'at-methods' } as Upstream]),
      };
      const useUpstream: Plugin = {
        name: 'at-use-upstream',
        apply: (h) =>
          h.hooks.select.tap({ name: 'at-use-upstream', stage: SelectStage.USE_UPSTREAM }, (u: Upstream[]) => [...u, { id: 'at-use-upstream' } as Upstream]),
      };
      const want = ['at-methods', 'acme-first', 'acme-second', 'at-use-upstream'];
      expect(selectOrder([useUpstream, marker('acme-first', 'acme-second'), marker('acme-second'), methods])).to.deep.equal(want);
      expect(selectOrder([methods, marker('acme-second'), marker('acme-first', 'acme-second'), useUpstream])).to.deep.equal(want);
    });

    it('without `before` they run in preset order (what `before` is for)', () => {
      expect(selectOrder([marker('acme-a'), marker('acme-b')])).to.deep.equal(['acme-a', 'acme-b']);
      expect(selectOrder([marker('acme-b'), marker('acme-a')])).to.deep.equal(['acme-b', 'acme-a']);
    });

    it('on a wrapper hook `before: X` composes first, so the wrapper sits inside X whatever the preset order', async () => {
      const stage = stageBetween(CallStage.CACHE, CallStage.MULTIPLEX);
      const run = async (plugins: Plugin[]) => {
        const handler = build([...plugins, answerer()]).hooks.call.call(() => Promise.reject(new Error('not traced')), {} as Network);
        const ctx = { request: { method: 'acme_order' }, state: new Map<symbol, unknown>() } as unknown as CallContext;
        return (await handler(ctx)).result;
      };
      const want = ['acme-outer', 'acme-inner'];
      expect(await run([tracer('acme-inner', stage, 'acme-outer'), tracer('acme-outer', stage)])).to.deep.equal(want);
      expect(await run([tracer('acme-outer', stage), tracer('acme-inner', stage, 'acme-outer')])).to.deep.equal(want);
    });
  });

  describe('on a real server, among the default preset', function () {
    this.timeout(15_000);
    let up: FaultServer;
    const handles: SvcHandle[] = [];
    before(async () => {
      up = await startFaultServer();
    });
    after(async () => {
      for (const h of handles) await h.close();
      await up?.close();
    });

    it('two plugins between CallStage.CACHE and CallStage.MULTIPLEX keep their declared order in both preset orders', async () => {
      const stage = stageBetween(CallStage.CACHE, CallStage.MULTIPLEX);
      const config = {
        logLevel: 'error',
        projects: [
          { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 31337 } }], upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: 31337 } }] },
        ],
      };
      for (const ours of [
        [tracer('acme-inner', stage, 'acme-outer'), tracer('acme-outer', stage)],
        [tracer('acme-outer', stage), tracer('acme-inner', stage, 'acme-outer')],
      ]) {
        const svc = await startSvc(config, { plugins: [...ours, ...defaultPreset(), answerer()] });
        handles.push(svc);
        const r = await svc.post('/main/evm/31337', { jsonrpc: '2.0', id: 1, method: 'acme_order', params: [] });
        expect(r.json.result, ours.map((p) => p.name).join(' then ')).to.deep.equal(['acme-outer', 'acme-inner']);
      }
    });
  });
});
