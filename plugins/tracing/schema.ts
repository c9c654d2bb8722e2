/**
 * Config of the tracing plugin: the top-level `tracing` block, as eRPC users
 * write it. Off by default; when off, no OpenTelemetry package is even loaded.
 */
import { type ResolvedConfig, Strict, type TProperties, Type } from 'svc-proxy/plugin';
import { ConfigError } from 'svc-proxy/plugin/errors';

/** Default OTLP/HTTP traces endpoint: a collector on the same host (the OpenTelemetry default). */
export const DEFAULT_TRACING_ENDPOINT = 'http://localhost:4318/v1/traces';

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
            Type.String({ pattern: '^https?://', default: DEFAULT_TRACING_ENDPOINT, description: 'OTLP/HTTP traces URL (`.../v1/traces`)' }),
          ),
          headers: Type.Optional(
            Type.Record(Type.String(), Type.String(), { description: 'HTTP headers sent with every export (e.g. a vendor API key); never logged' }),
          ),
          sampleRate: Type.Optional(
            Type.Number({
              minimum: 0,
              maximum: 1,
              default: 1,
              description: 'share of requests traced, 0..1 (by trace id); `X-SVC-Force-Trace` / `force-trace` bypasses it',
            }),
          ),
          serviceName: Type.Optional(Type.String({ minLength: 1, default: 'svc', description: 'the `service.name` resource attribute' })),
        },
        { description: 'OpenTelemetry tracing (OTLP/HTTP)' },
      ),
    ),
  },
};

/** The resolved `tracing` block. */
export interface TracingConfig {
  enabled: boolean;
  endpoint: string;
  headers: Record<string, string>;
  /** 0..1. */
  sampleRate: number;
  serviceName: string;
}

/**
 * The tracing settings of a resolved config.
 * @throws ConfigError when enabled with a sample rate outside 0..1 (the schema already bounds it)
 */
export function tracingConfigOf(config: ResolvedConfig): TracingConfig {
  const raw = (config.settings.tracing ?? {}) as Partial<TracingConfig>;
  const sampleRate = raw.sampleRate ?? 1;
  if (!(sampleRate >= 0 && sampleRate <= 1)) throw new ConfigError([{ path: 'tracing.sampleRate', message: 'must be between 0 and 1' }]);
  return {
    enabled: raw.enabled ?? false,
    endpoint: raw.endpoint ?? DEFAULT_TRACING_ENDPOINT,
    headers: raw.headers ?? {},
    sampleRate,
    serviceName: raw.serviceName ?? 'svc',
  };
}
