/**
 * The OpenTelemetry side of the tracing plugin, loaded with dynamic imports only when
 * `tracing.enabled` (a svc without tracing never loads the SDK). Builds one tracer provider: a
 * sampler that records every span marked forced (`force-trace`, `forceTraceMatchers`) whatever its
 * parent and otherwise samples parent-based by the ratio (eRPC's force-trace sampler wraps its
 * base sampler the same way), and an OTLP exporter, over HTTP or gRPC (`tracing.protocol`),
 * behind a batch processor (or a given exporter, for tests).
 */
import type { Attributes, Context, Link, Span, SpanKind, Tracer } from '@opentelemetry/api';
import type { Sampler, SamplingResult, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { TracingConfig } from './schema.ts';

/** Span attribute a request span carries when `force-trace` asked for it (read by the sampler). */
export const FORCE_TRACE_ATTRIBUTE = 'svc.force_trace';

/** What the plugin needs from OpenTelemetry once loaded. */
export interface TracingSdk {
  tracer: Tracer;
  /** A context whose active span is `parent` (the parent of a new span). */
  withParent(parent: Span): Context;
  /** Marks a span failed with an error name and message. */
  fail(span: Span, name: string, message: string): void;
  /** Flushes and stops the exporter (bounded by the exporter's own timeout). */
  shutdown(): Promise<void>;
}

/**
 * Loads the SDK and builds the provider.
 * @param config the resolved `tracing` block (transport, endpoint URL, headers, sampling, resource attributes)
 * @param version svc's version (`service.version`)
 * @param exporter a span exporter to use instead of OTLP (spans then leave at once, one by one)
 */
export async function loadTracingSdk(config: TracingConfig, version: string, exporter?: SpanExporter): Promise<TracingSdk> {
  const api = await import('@opentelemetry/api');
  const base = await import('@opentelemetry/sdk-trace-base');
  const { resourceFromAttributes } = await import('@opentelemetry/resources');
  const parentBased = new base.ParentBasedSampler({ root: new base.TraceIdRatioBasedSampler(config.sampleRate) });
  /** Forced spans first, then the parent-based ratio (spec §2.8: force-trace bypasses sampling). */
  const sampler: Sampler = {
    shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attrs: Attributes, links: Link[]): SamplingResult {
      if (attrs[FORCE_TRACE_ATTRIBUTE] === true) return { decision: base.SamplingDecision.RECORD_AND_SAMPLED };
      return parentBased.shouldSample(ctx, traceId, name, kind, attrs, links);
    },
    toString: () => `ForceTraceOr(${parentBased.toString()})`,
  };
  let processor;
  if (exporter) processor = new base.SimpleSpanProcessor(exporter);
  else if (config.protocol === 'grpc') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-grpc');
    const grpc = await import('@grpc/grpc-js');
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(config.headers)) metadata.set(k.toLowerCase(), v);
    // Without `tls`, the exporter reads the scheme: http:// plain text, https:// TLS with the system CAs.
    const t = config.tls;
    const credentials = t
      ? grpc.credentials.createSsl(
          t.ca ? Buffer.from(t.ca) : null,
          t.key ? Buffer.from(t.key) : null,
          t.cert ? Buffer.from(t.cert) : null,
          t.insecureSkipVerify ? { rejectUnauthorized: false, checkServerIdentity: () => undefined } : {},
        )
      : undefined;
    processor = new base.BatchSpanProcessor(new OTLPTraceExporter({ url: config.endpoint, metadata, ...(credentials ? { credentials } : {}) }));
  } else {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    const t = config.tls;
    const agent = t ? { httpAgentOptions: { ca: t.ca, cert: t.cert, key: t.key, rejectUnauthorized: !t.insecureSkipVerify } } : {};
    processor = new base.BatchSpanProcessor(new OTLPTraceExporter({ url: config.endpoint, headers: config.headers, ...agent }));
  }
  const provider = new base.BasicTracerProvider({
    resource: resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName, 'service.version': version }),
    sampler,
    spanProcessors: [processor],
  });
  return {
    tracer: provider.getTracer('svc', version),
    withParent: (parent) => api.trace.setSpan(api.ROOT_CONTEXT, parent),
    fail: (span, name, message) => span.setStatus({ code: api.SpanStatusCode.ERROR, message: `${name}: ${message}` }),
    shutdown: () => provider.shutdown(),
  };
}
