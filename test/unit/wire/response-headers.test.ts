/**
 * Response headers on proxy calls (spec §4.5, §8 "Batch trace segments"): the exact header
 * values the headers plugin writes from the calls' execution records, for the cases the plugin's
 * own unit test leaves open (cache counters, single-call cache outcome, duration of unrouted
 * calls, the error names, undialled attempts, attempts still in flight, the configured mode).
 */
import { expect } from 'chai';
import { SyncHook } from 'tapable';
import { newExecutionRecord, type AttemptRecord, type ExecutionRecord } from '../../../core/pipeline/context.ts';
import {
  ErrEndpointExecutionException,
  ErrEndpointRequestTimeout,
  ErrEndpointServerSideException,
  ErrInvalidRequest,
  ErrUpstreamsExhausted,
} from '../../../core/wire/errors.ts';
import type { HeaderSink, ResponseMeta } from '../../../core/pipeline/hooks.ts';
import type { PluginHost } from '../../../core/plugin-api.ts';
import { diagnosticHeaders, headersPlugin, RECORD_SLOTS, traceSegment } from '../../../plugins/headers/index.ts';

function withSlots(r: ExecutionRecord, values: Partial<Record<keyof typeof RECORD_SLOTS, unknown>>): ExecutionRecord {
  for (const [k, v] of Object.entries(values)) (RECORD_SLOTS[k as keyof typeof RECORD_SLOTS] as { set(h: ExecutionRecord, v: unknown): void }).set(r, v);
  return r;
}

function attempt(upstreamId: string, outcome: AttemptRecord['outcome'], extra: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    upstreamId,
    vendor: 'unknown',
    method: 'eth_call',
    projectId: 'main',
    networkId: 'evm:1',
    reason: 'primary',
    outcome,
    startedAt: 0,
    durationMs: 1,
    won: false,
    dialled: true,
    finality: 'unknown',
    internal: false,
    ...extra,
  };
}

function routed(extra: Partial<ExecutionRecord> = {}): ExecutionRecord {
  const r = newExecutionRecord('eth_call');
  r.routed = true;
  r.upstreamAttempts = 1;
  r.networkAttempts = 1;
  r.durationMs = 10;
  return Object.assign(r, extra);
}

describe('wire: response headers (spec §4.5)', () => {
  describe('cache counters and X-SVC-Cache', () => {
    it('X-SVC-Cache-Attempts / -Retries / -Hedges are written only when > 0 and summed over a batch', () => {
      const a = withSlots(routed(), { cacheAttempts: 2, cacheRetries: 1, cacheHedges: 2 });
      const b = withSlots(routed(), { cacheAttempts: 3, cacheRetries: 4, cacheHedges: 1 });
      const h = diagnosticHeaders([a, b], 'summary', true);
      expect(h['X-SVC-Cache-Attempts']).to.equal('5');
      expect(h['X-SVC-Cache-Retries']).to.equal('5');
      expect(h['X-SVC-Cache-Hedges']).to.equal('3');
      // X-SVC-Attempts: total physical operations (upstream + cache).
      expect(h['X-SVC-Attempts']).to.equal('7');
      const none = diagnosticHeaders([withSlots(routed(), { upstreamRetries: 1 })], 'summary', false);
      for (const name of ['X-SVC-Cache-Attempts', 'X-SVC-Cache-Retries', 'X-SVC-Cache-Hedges', 'X-SVC-Cache']) expect(none, name).to.not.have.property(name);
    });

    it('single call: X-SVC-Cache is HIT or MISS, and absent without cache metadata', () => {
      expect(diagnosticHeaders([withSlots(routed(), { cache: 'HIT' })], 'all', false)['X-SVC-Cache']).to.equal('HIT');
      expect(diagnosticHeaders([withSlots(routed(), { cache: 'MISS' })], 'all', false)['X-SVC-Cache']).to.equal('MISS');
      expect(diagnosticHeaders([routed()], 'all', false)).to.not.have.property('X-SVC-Cache');
    });

    it('batch: PARTIAL:<n> counts the hits when some calls had no cache metadata', () => {
      const hit = withSlots(routed(), { cache: 'HIT' });
      expect(diagnosticHeaders([hit, routed()], 'all', true)['X-SVC-Cache']).to.equal('PARTIAL:1');
      expect(diagnosticHeaders([hit], 'all', true)['X-SVC-Cache']).to.equal('HIT');
    });
  });

  describe('consensus counters', () => {
    it('X-SVC-Consensus-Slots / -Disputes / -Low-Participants are summed over a batch, absent at 0', () => {
      const a = withSlots(routed(), { consensusSlots: 3, consensusDisputes: 1, consensusLowParticipants: 2 });
      const b = withSlots(routed(), { consensusSlots: 2, consensusDisputes: 2, consensusLowParticipants: 1 });
      expect(diagnosticHeaders([a, b], 'all', true)).to.include({
        'X-SVC-Consensus-Slots': '5',
        'X-SVC-Consensus-Disputes': '3',
        'X-SVC-Consensus-Low-Participants': '3',
      });
      const h = diagnosticHeaders([routed()], 'all', false);
      for (const name of ['X-SVC-Consensus-Slots', 'X-SVC-Consensus-Disputes', 'X-SVC-Consensus-Low-Participants']) expect(h, name).to.not.have.property(name);
    });
  });

  describe('always-present counters', () => {
    it('the upstream and network counters are written as 0 on a response with no call (an early error)', () => {
      expect(diagnosticHeaders([], 'summary', false)).to.deep.equal({
        'X-SVC-Attempts': '0',
        'X-SVC-Upstream-Attempts': '0',
        'X-SVC-Upstream-Retries': '0',
        'X-SVC-Upstream-Hedges': '0',
        'X-SVC-Network-Attempts': '0',
        'X-SVC-Network-Retries': '0',
        'X-SVC-Network-Hedges': '0',
      });
    });

    it('upstream and network retries and hedges are summed over a batch', () => {
      const a = withSlots(routed(), { upstreamRetries: 1, upstreamHedges: 2, networkRetries: 3, networkHedges: 4 });
      const b = withSlots(routed(), { upstreamRetries: 4, upstreamHedges: 3, networkRetries: 2, networkHedges: 1 });
      expect(diagnosticHeaders([a, b], 'summary', true)).to.include({
        'X-SVC-Upstream-Retries': '5',
        'X-SVC-Upstream-Hedges': '5',
        'X-SVC-Network-Retries': '5',
        'X-SVC-Network-Hedges': '5',
      });
    });
  });

  describe('X-SVC-Upstream and X-SVC-Duration', () => {
    it('X-SVC-Upstream: the winning upstream of a single response, absent when unknown', () => {
      expect(diagnosticHeaders([routed({ upstream: 'up-1' })], 'summary', false)['X-SVC-Upstream']).to.equal('up-1');
      expect(diagnosticHeaders([routed()], 'summary', false)).to.not.have.property('X-SVC-Upstream');
      expect(diagnosticHeaders([routed({ upstream: 'up-1' })], 'summary', true)).to.not.have.property('X-SVC-Upstream');
    });

    it('X-SVC-Duration: whole milliseconds, 0 included; absent when no call was routed', () => {
      expect(diagnosticHeaders([routed({ durationMs: 0 })], 'summary', false)['X-SVC-Duration']).to.equal('0');
      expect(diagnosticHeaders([routed({ durationMs: 12.5 })], 'summary', false)['X-SVC-Duration']).to.equal('13');
      expect(diagnosticHeaders([routed({ durationMs: 12.4 })], 'summary', false)['X-SVC-Duration']).to.equal('12');
      const early = newExecutionRecord('eth_call');
      early.durationMs = 30;
      expect(diagnosticHeaders([early], 'summary', false)).to.not.have.property('X-SVC-Duration');
    });

    it('batch: the slowest routed sub-call; an unrouted one does not count', () => {
      const slowButUnrouted = newExecutionRecord('eth_call');
      slowButUnrouted.durationMs = 500;
      expect(diagnosticHeaders([routed({ durationMs: 7 }), slowButUnrouted, routed({ durationMs: 3 })], 'summary', true)['X-SVC-Duration']).to.equal('7');
    });
  });

  describe('X-SVC-Error', () => {
    it("names svc's errors of the response, distinct, sorted, comma-joined", () => {
      const a = routed({ error: new ErrInvalidRequest('bad') });
      const b = routed({ error: new ErrEndpointRequestTimeout('slow') });
      const c = routed({ error: new ErrInvalidRequest('bad again') });
      expect(diagnosticHeaders([a, b, c, routed()], 'summary', true)['X-SVC-Error']).to.equal('ErrEndpointRequestTimeout,ErrInvalidRequest');
      expect(diagnosticHeaders([routed()], 'summary', false)).to.not.have.property('X-SVC-Error');
    });

    it('an exhausted error with one cause is named by that cause (the error the client was shown)', () => {
      const one = new ErrUpstreamsExhausted([new ErrEndpointRequestTimeout('t')]);
      expect(diagnosticHeaders([routed({ error: one })], 'summary', false)['X-SVC-Error']).to.equal('ErrEndpointRequestTimeout');
    });

    it('an exhausted error whose dominant cause passes through is named by that cause; otherwise it keeps its own name', () => {
      const revert = new ErrUpstreamsExhausted([
        new ErrEndpointExecutionException('execution reverted'),
        new ErrEndpointExecutionException('execution reverted'),
        new ErrEndpointRequestTimeout('t'),
      ]);
      expect(diagnosticHeaders([routed({ error: revert })], 'summary', false)['X-SVC-Error']).to.equal('ErrEndpointExecutionException');
      const failures = new ErrUpstreamsExhausted([new ErrEndpointServerSideException('502'), new ErrEndpointRequestTimeout('t')]);
      expect(diagnosticHeaders([routed({ error: failures })], 'summary', false)['X-SVC-Error']).to.equal('ErrUpstreamsExhausted');
    });
  });

  describe('X-SVC-Upstreams trace', () => {
    it('an undialled skip stays out of the trace, an upstream rate-limit skip is in it', () => {
      const r = routed({
        attempts: [
          attempt('open', 'error', { dialled: false }),
          attempt('budget', 'rate_limited', { dialled: false, durationMs: 0 }),
          attempt('ok', 'success', { durationMs: 4, won: true }),
        ],
      });
      expect(diagnosticHeaders([r], 'all', false)['X-SVC-Upstreams']).to.equal('budget=primary:rate_limited:0;ok=primary:success:4:won');
    });

    it('no trace header when no attempt was dialled, and none in mode summary', () => {
      expect(diagnosticHeaders([routed({ attempts: [attempt('open', 'error', { dialled: false })] })], 'all', false)).to.not.have.property('X-SVC-Upstreams');
      expect(diagnosticHeaders([routed({ attempts: [attempt('ok', 'success')] })], 'summary', false)).to.not.have.property('X-SVC-Upstreams');
    });

    it('exactly 50 segments: no X-SVC-Upstreams-Truncated', () => {
      const records = Array.from({ length: 50 }, (_, i) => routed({ attempts: [attempt(`u${i}`, 'success')] }));
      const h = diagnosticHeaders(records, 'all', true);
      expect((h['X-SVC-Upstreams'] as string).split(';')).to.have.length(50);
      expect(h).to.not.have.property('X-SVC-Upstreams-Truncated');
    });

    it('an attempt still in flight shows its time so far (outcome timeout)', () => {
      const seg = traceSegment(attempt('slow', 'pending', { startedAt: performance.now() - 1000, durationMs: 0 }));
      const m = /^slow=primary:timeout:(\d+)$/.exec(seg);
      expect(m, seg).to.not.equal(null);
      expect(Number(m![1])).to.be.within(1000, 60_000);
    });

    it('each reason is written as given', () => {
      for (const reason of ['primary', 'hedge', 'retry', 'consensus_slot', 'sweep'] as const) {
        expect(traceSegment(attempt('u', 'exec_revert', { reason, durationMs: 2 }))).to.equal(`u=${reason}:exec_revert:2`);
      }
    });
  });

  describe('the plugin', () => {
    function host(): { proxy: PluginHost; configured: SyncHook<[unknown]>; responseHeaders: SyncHook<[HeaderSink, readonly ExecutionRecord[], ResponseMeta]> } {
      const configured = new SyncHook<[unknown]>(['config']);
      const responseHeaders = new SyncHook<[HeaderSink, readonly ExecutionRecord[], ResponseMeta]>(['sink', 'records', 'meta']);
      return { proxy: { hooks: { configured, responseHeaders } } as unknown as PluginHost, configured, responseHeaders };
    }
    function written(h: ReturnType<typeof host>, meta: Partial<ResponseMeta>): Record<string, string> {
      const out: Record<string, string> = {};
      const r = routed({ upstream: 'a', attempts: [attempt('a', 'success', { won: true, durationMs: 3 })] });
      h.responseHeaders.call({ set: (k, v) => (out[k] = v) }, [r], { batch: false, ...meta } as ResponseMeta);
      return out;
    }

    it('is named headers and writes the trace in the default mode (all)', () => {
      const h = host();
      const p = headersPlugin();
      expect(p.name).to.equal('headers');
      p.apply(h.proxy);
      expect(written(h, {})).to.include({ 'X-SVC-Upstream': 'a', 'X-SVC-Upstreams': 'a=primary:success:3:won', 'X-SVC-Duration': '10' });
    });

    it('follows server.executionHeaders: summary drops the trace, off writes nothing', () => {
      const h = host();
      headersPlugin().apply(h.proxy);
      h.configured.call({ server: { executionHeaders: 'summary' } });
      const s = written(h, {});
      expect(s).to.include({ 'X-SVC-Upstream': 'a' });
      expect(s).to.not.have.property('X-SVC-Upstreams');
      h.configured.call({ server: { executionHeaders: 'off' } });
      expect(written(h, {})).to.deep.equal({});
    });

    it('a batch response gets no X-SVC-Upstream', () => {
      const h = host();
      headersPlugin().apply(h.proxy);
      expect(written(h, { batch: true })).to.not.have.property('X-SVC-Upstream');
    });
  });
});
