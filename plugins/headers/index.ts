/**
 * headers plugin (spec §4.5, §2.9 `server.executionHeaders`).
 * Taps: `responseHeaders` — writes the diagnostic counters, the winning upstream, the
 * duration, the per-attempt trace and svc's error names (`X-SVC-Error`) from the calls'
 * execution records. It only reads the
 * records; every other plugin writes them.
 */
import { type AttemptRecord, type ExecutionRecord, type HeaderSink, definePlugin, type Plugin, type PluginHost, type ResponseMeta } from 'svc-proxy/plugin';
import { ErrUpstreamsExhausted, isPassThrough, type SvcError, wireError } from 'svc-proxy/plugin/errors';
import { traceOutcome } from 'svc-proxy/plugin/contracts';
// The record slots other plugins write, from each writer's contract (svc-proxy/plugins/<name>).
import { CACHE_ATTEMPTS, CACHE_HEDGES, CACHE_OUTCOME, CACHE_RETRIES } from 'svc-proxy/plugins/cache';
import { CONSENSUS_DISPUTES, CONSENSUS_LOW_PARTICIPANTS, CONSENSUS_SLOTS } from 'svc-proxy/plugins/consensus';
import { NETWORK_HEDGES, NETWORK_RETRIES, UPSTREAM_HEDGES, UPSTREAM_RETRIES } from 'svc-proxy/plugins/failsafe';
import { UPSTREAM_LAG } from 'svc-proxy/plugins/select';

/**
 * The execution-record slots the §4.5 headers read, written by the plugins that own them (the
 * failsafe, cache, consensus and select plugins, through the same shared slots): counters summed
 * over a batch (the lag: its largest); the failsafe retry and hedge counters are always written
 * (0 when unset), the others only when above 0; `cache.outcome` gives `X-SVC-Cache` (no feature's counters in the core's record).
 */
export const RECORD_SLOTS = Object.freeze({
  upstreamRetries: UPSTREAM_RETRIES,
  upstreamHedges: UPSTREAM_HEDGES,
  networkRetries: NETWORK_RETRIES,
  networkHedges: NETWORK_HEDGES,
  cacheAttempts: CACHE_ATTEMPTS,
  cacheRetries: CACHE_RETRIES,
  cacheHedges: CACHE_HEDGES,
  cache: CACHE_OUTCOME,
  consensusSlots: CONSENSUS_SLOTS,
  consensusDisputes: CONSENSUS_DISPUTES,
  consensusLowParticipants: CONSENSUS_LOW_PARTICIPANTS,
  /** Blocks a pinned call's upstream was behind the network head (select plugin); the batch's largest is written. */
  upstreamLag: UPSTREAM_LAG,
});

/** Most trace segments in one `X-SVC-Upstreams` header (spec §8). */
export const MAX_TRACE_SEGMENTS = 50;

/** One trace segment: `<upstreamId>=<reason>:<outcome>:<durationMs>[:won]` (spec §4.5). */
export function traceSegment(a: AttemptRecord): string {
  // Spec §4.5 words (core/pipeline/sweep.ts traceOutcome); an attempt still in flight shows its time so far.
  const ms = a.outcome === 'pending' ? performance.now() - a.startedAt : a.durationMs;
  return `${a.upstreamId}=${a.reason}:${traceOutcome(a)}:${Math.round(ms)}${a.won ? ':won' : ''}`;
}

/** svc's name for the error a client was shown: the node's fact behind an exhausted error when that is what was written. */
function shownName(err: SvcError): string {
  const shown = wireError(err);
  const d = shown instanceof ErrUpstreamsExhausted ? shown.dominantCause : undefined;
  return d && isPassThrough(d) ? d.name : shown.name;
}

/**
 * Computes the diagnostic headers for a response (one aggregated set for a batch, spec §4.5).
 * @param records execution records of the response's calls, in request order
 * @param mode `server.executionHeaders`
 * @param batch whether the response is a batch
 * @returns header name to value
 */
export function diagnosticHeaders(records: readonly ExecutionRecord[], mode: 'all' | 'summary' | 'off', batch: boolean): Record<string, string> {
  const h: Record<string, string> = {};
  writeDiagnosticHeaders({ set: (name, value) => void (h[name] = value) }, records, mode, batch);
  return h;
}

/**
 * Writes the diagnostic headers of a response straight into its header sink (no intermediate record per response: the hot path).
 * @param sink the response's headers
 * @param records execution records of the response's calls, in request order
 * @param mode `server.executionHeaders`
 * @param batch whether the response is a batch
 */
export function writeDiagnosticHeaders(sink: HeaderSink, records: readonly ExecutionRecord[], mode: 'all' | 'summary' | 'off', batch: boolean): void {
  if (mode === 'off') return;
  let upA = 0;
  let upR = 0;
  let upH = 0;
  let netA = 0;
  let netR = 0;
  let netH = 0;
  let cA = 0;
  let cR = 0;
  let cH = 0;
  let cs = 0;
  let cd = 0;
  let cl = 0;
  let lag = 0;
  let hits = 0;
  let cacheSeen = 0;
  let slowest = -1;
  let errors: Set<string> | undefined;
  for (const r of records) {
    if (r.error) (errors ??= new Set()).add(shownName(r.error));
    upA += r.upstreamAttempts;
    netA += r.networkAttempts;
    if (r.slots) {
      upR += RECORD_SLOTS.upstreamRetries.get(r);
      upH += RECORD_SLOTS.upstreamHedges.get(r);
      netR += RECORD_SLOTS.networkRetries.get(r);
      netH += RECORD_SLOTS.networkHedges.get(r);
      cA += RECORD_SLOTS.cacheAttempts.get(r);
      cR += RECORD_SLOTS.cacheRetries.get(r);
      cH += RECORD_SLOTS.cacheHedges.get(r);
      cs += RECORD_SLOTS.consensusSlots.get(r);
      cd += RECORD_SLOTS.consensusDisputes.get(r);
      cl += RECORD_SLOTS.consensusLowParticipants.get(r);
      const l = RECORD_SLOTS.upstreamLag.get(r);
      if (l > lag) lag = l;
      const cache = RECORD_SLOTS.cache.get(r);
      if (cache) {
        cacheSeen++;
        if (cache === 'HIT') hits++;
      }
    }
    if (r.routed && r.durationMs > slowest) slowest = r.durationMs;
  }
  sink.set('X-SVC-Attempts', String(upA + cA));
  sink.set('X-SVC-Upstream-Attempts', String(upA));
  sink.set('X-SVC-Upstream-Retries', String(upR));
  sink.set('X-SVC-Upstream-Hedges', String(upH));
  sink.set('X-SVC-Network-Attempts', String(netA));
  sink.set('X-SVC-Network-Retries', String(netR));
  sink.set('X-SVC-Network-Hedges', String(netH));
  if (cA > 0) sink.set('X-SVC-Cache-Attempts', String(cA));
  if (cR > 0) sink.set('X-SVC-Cache-Retries', String(cR));
  if (cH > 0) sink.set('X-SVC-Cache-Hedges', String(cH));
  if (cs > 0) sink.set('X-SVC-Consensus-Slots', String(cs));
  if (cd > 0) sink.set('X-SVC-Consensus-Disputes', String(cd));
  if (cl > 0) sink.set('X-SVC-Consensus-Low-Participants', String(cl));
  // A lag is not additive: a batch shows its worst.
  if (lag > 0) sink.set('X-SVC-Upstream-Lag', String(lag));
  if (cacheSeen > 0) {
    if (!batch) sink.set('X-SVC-Cache', hits > 0 ? 'HIT' : 'MISS');
    else sink.set('X-SVC-Cache', hits === 0 ? 'MISS' : hits === records.length ? 'HIT' : `PARTIAL:${hits}`);
  }
  if (!batch) {
    const winner = records[0]?.upstream;
    if (winner) sink.set('X-SVC-Upstream', winner);
  }
  if (slowest >= 0) sink.set('X-SVC-Duration', String(Math.round(slowest)));
  // svc's name for what went wrong, also when the client's error object is the node's own.
  if (errors) sink.set('X-SVC-Error', [...errors].sort().join(','));
  if (mode === 'all') {
    const segs: string[] = [];
    let dropped = 0;
    for (const r of records) {
      for (const a of r.attempts) {
        // Undialled skips stay out of the trace, except an upstream's own rate-limit budget.
        if (!a.dialled && a.outcome !== 'rate_limited') continue;
        if (segs.length < MAX_TRACE_SEGMENTS) segs.push(traceSegment(a));
        else dropped++;
      }
    }
    if (segs.length) sink.set('X-SVC-Upstreams', segs.length === 1 ? (segs[0] as string) : segs.join(';'));
    if (dropped > 0) sink.set('X-SVC-Upstreams-Truncated', String(dropped));
  }
}

/**
 * Creates the headers plugin.
 * @returns a plugin tapping `responseHeaders`
 */
export function headersPlugin(): Plugin {
  return definePlugin({
    name: 'headers',
    apply(host: PluginHost) {
      let mode: 'all' | 'summary' | 'off' = 'all';
      host.hooks.configured.tap('headers', (config) => {
        mode = config.server.executionHeaders;
      });
      host.hooks.responseHeaders.tap('headers', (sink: HeaderSink, records: readonly ExecutionRecord[], meta: ResponseMeta) => {
        // Counters go on every response, early errors included (0 there; spec §4.5 "always").
        writeDiagnosticHeaders(sink, records, mode, meta.batch);
      });
    },
  });
}
