/**
 * The tracing plugin on a real server: spans for the HTTP request, each call
 * and each upstream request, with their parent links and attributes (in-memory exporter);
 * sampling and force-trace; OTLP/HTTP export with the configured headers to a local collector;
 * and no SDK at all when tracing is off.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { expect } from 'chai';
import { TRACING_SERVICE, tracingPlugin, type TracingService } from '../../plugins/tracing/index.ts';
import { startFaultServer, type FaultServer } from '../helpers/fault-server.ts';
import { listenOnLoopback } from '../helpers/ports.ts';
import { NO_CACHE, presetWithout, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';

const PATH = '/main/evm/1';
const balance = (id: number) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [`0x${id.toString(16).padStart(40, '0')}`, '0x10'] });

function config(up: FaultServer, tracing: object) {
  return {
    ...NO_CACHE,
    metrics: { enabled: false },
    tracing,
    projects: [{ id: 'main', networks: [{ architecture: 'evm', evm: { chainId: 1 } }], upstreams: [{ id: 'a', endpoint: up.url, evm: { chainId: 1 } }] }],
  };
}

/** The spans of one trace, by name. */
function byName(spans: readonly ReadableSpan[], name: string): ReadableSpan[] {
  return spans.filter((s) => s.name === name);
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe('e2e: tracing', function () {
  this.timeout(20_000);
  let up: FaultServer;
  before(async () => {
    up = await startFaultServer({ chainId: 1 });
  });
  after(async () => {
    await up?.close();
  });

  it('off by default: the SDK is not loaded and calls are served', async () => {
    const svc = await startSvc(config(up, {}));
    try {
      expect(svc.proxy.services.require<TracingService>(TRACING_SERVICE).loaded).to.equal(false);
      const r = await svc.post(PATH, balance(1));
      expect(r.status).to.equal(200);
      expect(r.json).to.have.property('result');
    } finally {
      await svc.close();
    }
  });

  describe('with an in-memory exporter', () => {
    const exporter = new InMemorySpanExporter();
    let svc: SvcHandle;
    let sampled: SvcHandle;
    before(async () => {
      svc = await startSvc(config(up, { enabled: true }), { plugins: [...presetWithout('tracing'), tracingPlugin({ exporter })] });
      sampled = await startSvc(config(up, { enabled: true, sampleRate: 0 }), { plugins: [...presetWithout('tracing'), tracingPlugin({ exporter })] });
    });
    after(async () => {
      await svc?.close();
      await sampled?.close();
    });
    beforeEach(() => exporter.reset());

    it('one call: request span ⊃ call span ⊃ upstream span, with method, network, upstream and outcome', async () => {
      expect(svc.proxy.services.require<TracingService>(TRACING_SERVICE).loaded).to.equal(true);
      await svc.post(PATH, balance(2));
      await waitFor(() => byName(exporter.getFinishedSpans(), 'svc.request').length === 1);
      const spans = exporter.getFinishedSpans();
      const [req] = byName(spans, 'svc.request');
      const [call] = byName(spans, 'eth_getBalance');
      const [att] = byName(spans, 'upstream eth_getBalance');
      expect(call && att && req).to.not.equal(undefined);
      expect(parentOf(req!)).to.equal(undefined);
      expect(parentOf(call!)).to.equal(req!.spanContext().spanId);
      expect(parentOf(att!)).to.equal(call!.spanContext().spanId);
      expect(new Set(spans.map((s) => s.spanContext().traceId)).size).to.equal(1);
      expect(call!.attributes).to.include({
        'rpc.method': 'eth_getBalance',
        'svc.network': 'evm:1',
        'svc.project': 'main',
        'svc.outcome': 'success',
        'svc.upstream': 'a',
      });
      expect(att!.attributes).to.include({ 'svc.upstream': 'a', 'svc.attempt_reason': 'primary', 'svc.outcome': 'success' });
      expect(req!.attributes).to.include({ 'svc.calls': 1, 'svc.batch': false });
    });

    it('a batch is one request span with one call span per element; an upstream error marks its spans', async () => {
      up.script({ kind: 'rpcError', code: -32000, message: 'header not found' });
      await svc.post(PATH, [balance(3), balance(4)]);
      await waitFor(() => byName(exporter.getFinishedSpans(), 'svc.request').length === 1);
      const spans = exporter.getFinishedSpans();
      const [req] = byName(spans, 'svc.request');
      const calls = byName(spans, 'eth_getBalance');
      expect(calls).to.have.length(2);
      for (const c of calls) expect(parentOf(c)).to.equal(req!.spanContext().spanId);
      expect(req!.attributes).to.include({ 'svc.calls': 2, 'svc.batch': true });
      const failed = byName(spans, 'upstream eth_getBalance').filter((s) => s.attributes['svc.outcome'] !== 'success');
      expect(failed.length).to.be.at.least(1);
      expect(failed[0]!.status.code).to.equal(2); // SpanStatusCode.ERROR
    });

    it('§2.8 ¶5 — sampleRate 0 exports nothing; X-SVC-Force-Trace or ?force-trace=1 traces the request anyway', async () => {
      await sampled.post(PATH, balance(5));
      await new Promise((r) => setTimeout(r, 50));
      expect(exporter.getFinishedSpans()).to.have.length(0);
      await sampled.post(PATH, balance(6), { 'x-svc-force-trace': 'true' });
      await sampled.post(`${PATH}?force-trace=1`, balance(7));
      await waitFor(() => byName(exporter.getFinishedSpans(), 'svc.request').length === 2);
      expect(byName(exporter.getFinishedSpans(), 'eth_getBalance')).to.have.length(2);
      expect(byName(exporter.getFinishedSpans(), 'upstream eth_getBalance')).to.have.length(2);
    });
  });

  it('exports over OTLP/HTTP to tracing.endpoint with tracing.headers', async () => {
    const got: Array<{ url: string; headers: IncomingHttpHeaders; body: string }> = [];
    const collector = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        got.push({ url: req.url ?? '', headers: req.headers, body });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      });
    });
    const port = await listenOnLoopback(collector, 'collector');
    const svc = await startSvc(
      config(up, { enabled: true, endpoint: `http://127.0.0.1:${port}/v1/traces`, headers: { authorization: 'Bearer t0ken' }, serviceName: 'svc-e2e' }),
    );
    try {
      await svc.post(PATH, balance(8));
    } finally {
      // Shutdown flushes the batch processor.
      await svc.close();
      collector.close();
    }
    expect(got.length).to.be.at.least(1);
    expect(got[0]!.url).to.equal('/v1/traces');
    expect(got[0]!.headers.authorization).to.equal('Bearer t0ken');
    const all = got.map((g) => g.body).join('');
    expect(all).to.include('eth_getBalance');
    expect(all).to.include('svc-e2e');
  });
});
