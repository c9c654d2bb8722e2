import { expect } from 'chai';
import { newExecutionRecord, type AttemptRecord, type ExecutionRecord } from '../../../core/pipeline/context.ts';
import { NETWORK_HEDGES, NETWORK_RETRIES, UPSTREAM_HEDGES, UPSTREAM_RETRIES } from 'svc-proxy/plugins/failsafe';
import { diagnosticHeaders, MAX_TRACE_SEGMENTS, RECORD_SLOTS, traceSegment } from '../../../plugins/headers/index.ts';

/** A record whose failsafe/cache/consensus slots are set, as the owning plugins would. */
function withSlots(r: ExecutionRecord, values: Partial<Record<keyof typeof RECORD_SLOTS, unknown>>): ExecutionRecord {
  for (const [k, v] of Object.entries(values)) (RECORD_SLOTS[k as keyof typeof RECORD_SLOTS] as { set(h: ExecutionRecord, v: unknown): void }).set(r, v);
  return r;
}

function attempt(upstreamId: string, reason: AttemptRecord['reason'], outcome: AttemptRecord['outcome'], durationMs: number, won = false): AttemptRecord {
  return {
    upstreamId,
    vendor: 'unknown',
    method: 'eth_call',
    projectId: 'main',
    networkId: 'evm:1',
    reason,
    outcome,
    startedAt: 0,
    durationMs,
    won,
    dialled: true,
    finality: 'unknown',
    internal: false,
  };
}

function record(attempts: AttemptRecord[], extra: Partial<ExecutionRecord> = {}): ExecutionRecord {
  const r = newExecutionRecord('eth_call');
  r.attempts = attempts;
  r.upstreamAttempts = attempts.length;
  r.networkAttempts = 1;
  r.routed = true;
  r.durationMs = 12.4;
  r.upstream = attempts.find((a) => a.won)?.upstreamId;
  return Object.assign(r, extra);
}

describe('headers plugin (spec §4.5)', () => {
  it('formats a trace segment as <id>=<reason>:<outcome>:<ms>[:won]', () => {
    expect(traceSegment(attempt('a', 'primary', 'error', 2.6))).to.equal('a=primary:error:3');
    expect(traceSegment(attempt('b', 'sweep', 'success', 1, true))).to.equal('b=sweep:success:1:won');
  });

  it('single call: counters, winning upstream, duration and trace', () => {
    const h = diagnosticHeaders([record([attempt('dead', 'primary', 'error', 2), attempt('ok', 'sweep', 'success', 5, true)])], 'all', false);
    expect(h).to.include({
      'X-SVC-Attempts': '2',
      'X-SVC-Upstream-Attempts': '2',
      'X-SVC-Upstream-Retries': '0',
      'X-SVC-Upstream-Hedges': '0',
      'X-SVC-Network-Attempts': '1',
      'X-SVC-Network-Retries': '0',
      'X-SVC-Network-Hedges': '0',
      'X-SVC-Upstream': 'ok',
      'X-SVC-Duration': '12',
      'X-SVC-Upstreams': 'dead=primary:error:2;ok=sweep:success:5:won',
    });
    expect(h).to.not.have.property('X-SVC-Cache-Attempts');
    expect(h).to.not.have.property('X-SVC-Consensus-Slots');
  });

  it("the retry and hedge counters are the failsafe plugin's record slots (shared through svc-proxy/plugin), summed over a batch", () => {
    expect(Object.keys(newExecutionRecord('eth_call'))).to.not.include.members(['upstreamRetries', 'upstreamHedges', 'networkRetries', 'networkHedges']);
    expect([RECORD_SLOTS.upstreamRetries, RECORD_SLOTS.upstreamHedges, RECORD_SLOTS.networkRetries, RECORD_SLOTS.networkHedges]).to.deep.equal([
      UPSTREAM_RETRIES,
      UPSTREAM_HEDGES,
      NETWORK_RETRIES,
      NETWORK_HEDGES,
    ]);
    const a = withSlots(record([attempt('a', 'primary', 'success', 1, true)], { networkAttempts: 3 }), {
      upstreamRetries: 2,
      networkRetries: 2,
      networkHedges: 1,
    });
    const b = withSlots(record([attempt('b', 'primary', 'success', 1, true)]), { upstreamRetries: 1, upstreamHedges: 4 });
    expect(diagnosticHeaders([a, b], 'summary', true)).to.include({
      'X-SVC-Upstream-Retries': '3',
      'X-SVC-Upstream-Hedges': '4',
      'X-SVC-Network-Attempts': '4',
      'X-SVC-Network-Retries': '2',
      'X-SVC-Network-Hedges': '1',
    });
  });

  it('X-SVC-Attempts counts upstream plus cache operations; cache counters only when > 0', () => {
    const h = diagnosticHeaders([withSlots(record([attempt('a', 'primary', 'success', 1, true)]), { cacheAttempts: 2, cache: 'MISS' })], 'all', false);
    expect(h['X-SVC-Attempts']).to.equal('3');
    expect(h['X-SVC-Cache-Attempts']).to.equal('2');
    expect(h['X-SVC-Cache']).to.equal('MISS');
  });

  it('summary mode drops X-SVC-Upstreams; off mode writes nothing', () => {
    const r = [record([attempt('a', 'primary', 'success', 1, true)])];
    expect(diagnosticHeaders(r, 'summary', false)).to.not.have.property('X-SVC-Upstreams');
    expect(diagnosticHeaders(r, 'summary', false)).to.have.property('X-SVC-Upstream-Attempts');
    expect(diagnosticHeaders(r, 'off', false)).to.deep.equal({});
  });

  it('batch: counters summed, no X-SVC-Upstream, traces concatenated in call order, slowest duration', () => {
    const a = record([attempt('x', 'primary', 'success', 1, true)], { durationMs: 5 });
    const b = record([attempt('y', 'primary', 'error', 1), attempt('z', 'sweep', 'success', 2, true)], { durationMs: 40 });
    const h = diagnosticHeaders([a, b], 'all', true);
    expect(h['X-SVC-Upstream-Attempts']).to.equal('3');
    expect(h['X-SVC-Network-Attempts']).to.equal('2');
    expect(h).to.not.have.property('X-SVC-Upstream');
    expect(h['X-SVC-Upstreams']).to.equal('x=primary:success:1:won;y=primary:error:1;z=sweep:success:2:won');
    expect(h['X-SVC-Duration']).to.equal('40');
  });

  it('batch cache header: HIT, MISS or PARTIAL:<n>', () => {
    const hit = withSlots(record([]), { cache: 'HIT' });
    const miss = withSlots(record([]), { cache: 'MISS' });
    expect(diagnosticHeaders([hit, hit], 'all', true)['X-SVC-Cache']).to.equal('HIT');
    expect(diagnosticHeaders([miss, miss], 'all', true)['X-SVC-Cache']).to.equal('MISS');
    expect(diagnosticHeaders([hit, miss, hit], 'all', true)['X-SVC-Cache']).to.equal('PARTIAL:2');
  });

  it(`caps the trace at ${MAX_TRACE_SEGMENTS} segments and counts the rest in X-SVC-Upstreams-Truncated`, () => {
    const records = Array.from({ length: 60 }, (_, i) => record([attempt(`u${i}`, 'primary', 'success', 1, true)]));
    const h = diagnosticHeaders(records, 'all', true);
    expect((h['X-SVC-Upstreams'] as string).split(';')).to.have.length(MAX_TRACE_SEGMENTS);
    expect(h['X-SVC-Upstreams-Truncated']).to.equal('10');
  });

  it('consensus counters appear only when > 0', () => {
    const h = diagnosticHeaders([withSlots(record([]), { consensusSlots: 3, consensusDisputes: 1 })], 'all', false);
    expect(h['X-SVC-Consensus-Slots']).to.equal('3');
    expect(h['X-SVC-Consensus-Disputes']).to.equal('1');
    expect(h).to.not.have.property('X-SVC-Consensus-Low-Participants');
  });

  it("X-SVC-Upstream-Lag: a pinned call's lag (select plugin slot), a batch's largest, absent at 0 and in mode off", () => {
    const lagging = withSlots(record([attempt('lag', 'primary', 'success', 1, true)]), { upstreamLag: 7 });
    expect(diagnosticHeaders([lagging], 'all', false)['X-SVC-Upstream-Lag']).to.equal('7');
    expect(diagnosticHeaders([lagging], 'summary', false)['X-SVC-Upstream-Lag']).to.equal('7');
    expect(diagnosticHeaders([lagging], 'off', false)).to.not.have.property('X-SVC-Upstream-Lag');
    const other = withSlots(record([]), { upstreamLag: 3 });
    expect(diagnosticHeaders([other, lagging, record([])], 'all', true)['X-SVC-Upstream-Lag']).to.equal('7');
    expect(diagnosticHeaders([record([attempt('lead', 'primary', 'success', 1, true)])], 'all', false)).to.not.have.property('X-SVC-Upstream-Lag');
  });
});
