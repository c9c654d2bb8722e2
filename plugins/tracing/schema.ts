/**
 * Config of the tracing plugin: the top-level `tracing` block, as eRPC users
 * write it. Off by default; when off, no OpenTelemetry package is even loaded.
 */
import { type ResolvedConfig, Strict, type TProperties, Type } from 'svc-proxy/plugin';
import { ConfigError, type ConfigProblem } from 'svc-proxy/plugin/errors';
import { readTracingTls, tlsSchema, type TracingTls } from './tls.ts';

/** Default OTLP/HTTP traces endpoint: a collector on the same host (the OpenTelemetry default). */
export const DEFAULT_TRACING_ENDPOINT = 'http://localhost:4318/v1/traces';

/** The OTLP traces path eRPC's (Go) HTTP exporter appends to a `host:port` endpoint. */
export const OTLP_HTTP_TRACES_PATH = '/v1/traces';

/** The OTLP transport: `http` (OTLP/HTTP, protobuf) or `grpc` (OTLP/gRPC, the TraceService Export call). */
export type TracingProtocol = 'http' | 'grpc';

/** A collector address without a scheme (eRPC's form): `host:port`, `[v6]:port`. */
const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^\s/:[\]]+):\d{1,5}$/;

/** Longest `forceTraceMatchers` pattern, characters (they are compiled once, at load). */
export const MAX_FORCE_TRACE_PATTERN = 256;

/** Schema fragment: the top-level `tracing` key. */
export const tracingSchema: { root: TProperties } = {
  root: {
    tracing: Type.Optional(
      Strict(
        {
          enabled: Type.Optional(
            Type.Boolean({
              default: false,
              description: 'export spans (HTTP request, call, upstream request); when false the OpenTelemetry SDK is not loaded',
            }),
          ),
          endpoint: Type.Optional(
            Type.String({
              pattern: '^(https?://\\S+|(\\[[0-9a-fA-F:.]+\\]|[^\\s/:\\[\\]]+):\\d{1,5})$',
              description:
                "the collector: a URL (`http://host:4318/v1/traces` for OTLP/HTTP, `http://host:4317` or `https://host:4317` for gRPC), or eRPC's `host:port` (plain text; OTLP/HTTP then posts to `/v1/traces`). Default `http://localhost:4318/v1/traces`",
            }),
          ),
          protocol: Type.Optional(
            Type.Union([Type.Literal('http'), Type.Literal('grpc')], {
              description:
                "OTLP transport: `http` (OTLP/HTTP) or `grpc` (OTLP/gRPC). Unset: `grpc` for a `host:port` endpoint (eRPC's default), `http` for a URL or no endpoint",
            }),
          ),
          headers: Type.Optional(
            Type.Record(Type.String(), Type.String(), {
              description: 'headers sent with every export (HTTP headers, or gRPC metadata), e.g. a vendor API key; never logged',
            }),
          ),
          sampleRate: Type.Optional(
            Type.Number({
              minimum: 0,
              maximum: 1,
              default: 1,
              description: 'share of requests traced, 0..1 (by trace id); `X-SVC-Force-Trace` / `force-trace` and `forceTraceMatchers` bypass it',
            }),
          ),
          serviceName: Type.Optional(Type.String({ minLength: 1, default: 'svc', description: 'the `service.name` resource attribute' })),
          resourceAttributes: Type.Optional(
            Type.Record(Type.String({ minLength: 1 }), Type.String(), {
              description: 'extra resource attributes of every span (`${VAR}` expanded at load); an empty value is left out, as in eRPC',
            }),
          ),
          detailed: Type.Optional(
            Type.Boolean({
              default: false,
              description:
                "eRPC's detail tier: a `svc.forward` span around the work below the cache, and the request's params (JSON, first 1024 characters) on call and upstream spans. More spans and high-cardinality attributes",
            }),
          ),
          tls: Type.Optional(tlsSchema),
          forceTraceMatchers: Type.Optional(
            Type.Array(
              Strict(
                {
                  network: Type.Optional(
                    Type.String({ maxLength: MAX_FORCE_TRACE_PATTERN, description: 'network pattern (`evm:1`, `evm:1|evm:42161`, `evm:*`); `|` is OR' }),
                  ),
                  method: Type.Optional(
                    Type.String({ maxLength: MAX_FORCE_TRACE_PATTERN, description: 'method pattern (`eth_call`, `debug_*|trace_*`); `|` is OR' }),
                  ),
                },
                { description: 'both set: both must match; one set: that one; none set: never matches' },
              ),
              { maxItems: 64, description: 'calls matching any entry are traced whatever `sampleRate` (as `force-trace` does)' },
            ),
          ),
        },
        { description: 'OpenTelemetry tracing (OTLP over HTTP or gRPC)' },
      ),
    ),
  },
};

/** One `forceTraceMatchers` entry. */
export interface ForceTraceMatcher {
  network?: string;
  method?: string;
}

/** The resolved `tracing` block. */
export interface TracingConfig {
  enabled: boolean;
  /** Where spans go: a URL (`http(s)://`), scheme added and OTLP/HTTP path completed for eRPC's `host:port` form. */
  endpoint: string;
  /** The transport (inferred when unset: see the schema). */
  protocol: TracingProtocol;
  headers: Record<string, string>;
  /** 0..1. */
  sampleRate: number;
  serviceName: string;
  /** Resource attributes with empty values left out. */
  resourceAttributes: Record<string, string>;
  /** eRPC's detail tier. */
  detailed: boolean;
  forceTraceMatchers: ForceTraceMatcher[];
  /** TLS material of the exporter (`tls.enabled`), PEM files already read; undefined: TLS only for an https:// endpoint, system CAs. */
  tls?: TracingTls;
}

/**
 * The tracing settings of a resolved config: the transport inferred when unset, eRPC's
 * `host:port` endpoints turned into URLs (plain text, as eRPC's exporters without `tls`).
 * @throws ConfigError naming the key: a sample rate outside 0..1; an endpoint that is neither a URL nor `host:port`, or an http:// URL with `tls.enabled`; a `tls` file that cannot be read, or a certificate without its key
 */
export function tracingConfigOf(config: ResolvedConfig): TracingConfig {
  const raw = (config.settings.tracing ?? {}) as Partial<TracingConfig> & { protocol?: TracingProtocol };
  const problems: ConfigProblem[] = [];
  const sampleRate = raw.sampleRate ?? 1;
  if (!(sampleRate >= 0 && sampleRate <= 1)) problems.push({ path: 'tracing.sampleRate', message: 'must be between 0 and 1' });
  const given = raw.endpoint;
  const bare = given !== undefined && HOST_PORT.test(given);
  if (given !== undefined && !bare && !/^https?:\/\/\S+$/.test(given))
    problems.push({ path: 'tracing.endpoint', message: `must be a URL (http:// or https://) or host:port, got ${JSON.stringify(given.slice(0, 100))}` });
  const protocol: TracingProtocol = raw.protocol ?? (bare ? 'grpc' : 'http');
  const tls = raw.enabled ? readTracingTls((raw as { tls?: unknown }).tls, problems) : undefined;
  // eRPC sends to host:port in plain text unless `tls.enabled`.
  const scheme = tls ? 'https' : 'http';
  let endpoint = given ?? (protocol === 'grpc' ? `${scheme}://localhost:4317` : tls ? 'https://localhost:4318/v1/traces' : DEFAULT_TRACING_ENDPOINT);
  if (bare) endpoint = protocol === 'grpc' ? `${scheme}://${given}` : `${scheme}://${given}${OTLP_HTTP_TRACES_PATH}`;
  if (tls && endpoint.startsWith('http://'))
    problems.push({ path: 'tracing.endpoint', message: 'is an http:// URL while tls.enabled is true: write https:// or host:port' });
  if (problems.length) throw new ConfigError(problems);
  const resourceAttributes: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw.resourceAttributes ?? {})) if (v !== '') resourceAttributes[k] = v;
  return {
    enabled: raw.enabled ?? false,
    endpoint,
    protocol,
    headers: raw.headers ?? {},
    sampleRate,
    serviceName: raw.serviceName ?? 'svc',
    resourceAttributes,
    detailed: raw.detailed ?? false,
    forceTraceMatchers: raw.forceTraceMatchers ?? [],
    ...(tls ? { tls } : {}),
  };
}
