/**
 * tracing plugin: OpenTelemetry spans for each HTTP request, each call and each
 * physical upstream request, exported over OTLP/HTTP or OTLP/gRPC (`tracing.protocol`). Written
 * against the public plugin API.
 *
 * - `call` at `CallStage.TRACING` (outermost): the call span, child of its HTTP request's span
 *   (created by the request's first call, keyed by the request's `HttpRequestInfo`); attributes
 *   `rpc.method`, `svc.project`, `svc.network`, and at the end `svc.outcome`, `svc.upstream`,
 *   `svc.cache`.
 * - `upstream` at `UpstreamStage.TRACING` (inside retry and timeout): one span per request sent,
 *   child of the call span; `svc.upstream`, `svc.attempt_reason`, `svc.outcome`.
 * - `responseHeaders`: ends the request span once every call of the response settled.
 * - Sampling: parent-based by `tracing.sampleRate`, except that a span marked forced is always
 *   recorded: a call with `force-trace` (`X-SVC-Force-Trace` / `force-trace`, truthy `true`, `1`,
 *   `yes`) or matching `tracing.forceTraceMatchers`, and the request span it starts.
 * - `tracing.detailed` (eRPC's detail tier): a `svc.forward` span (`call` just inside the cache,
 *   parent of the upstream spans) and the params as `svc.params` on call and upstream spans;
 *   without it that tap is not in the chain.
 *
 * With `tracing.enabled: false` (the default) it taps nothing on the request path and never loads
 * an OpenTelemetry package. Internal calls (state polls, healthcheck probes) are not traced.
 */
import type { Span } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import {
  type CallHandler,
  CallStage,
  type ExecutionRecord,
  type HttpRequestInfo,
  definePlugin,
  type Plugin,
  type PluginHost,
  type RpcResult,
  serviceKey,
  stageBetween,
  type UpstreamCall,
  type UpstreamSender,
  UpstreamStage,
} from 'svc-proxy/plugin';
import { declareDirectives, Directive } from 'svc-proxy/plugins/directives';
import { asSvcError } from 'svc-proxy/plugin/errors';
import { CACHE_OUTCOME } from 'svc-proxy/plugins/cache';
import { FORCE_TRACE_ATTRIBUTE, loadTracingSdk, type TracingSdk } from './sdk.ts';
import { compileForceTrace, PARAMS_ATTRIBUTE, paramsAttribute } from './detail.ts';
import { tracingConfigOf, tracingSchema, type TracingConfig } from './schema.ts';

export { DEFAULT_TRACING_ENDPOINT, type ForceTraceMatcher, type TracingConfig, type TracingProtocol } from './schema.ts';
export { compileForceTrace, MAX_PARAMS_ATTRIBUTE, PARAMS_ATTRIBUTE, paramsAttribute } from './detail.ts';
export { FORCE_TRACE_ATTRIBUTE } from './sdk.ts';

/** What the tracing plugin tells other plugins and tests. */
export interface TracingService {
  /** Whether the OpenTelemetry SDK was loaded (only when `tracing.enabled`). */
  readonly loaded: boolean;
}

/** Key of {@link TracingService}. */
export const TRACING_SERVICE = serviceKey<TracingService>('tracing');

/** Options of {@link tracingPlugin}. */
export interface TracingPluginOptions {
  /** Export to this exporter (one span at a time) instead of OTLP/HTTP, e.g. an in-memory one in tests. */
  exporter?: SpanExporter;
}

/**
 * Directive `force-trace` (`X-SVC-Force-Trace` / `?force-trace`): the call is traced whatever the
 * sampling; `true`, `1` or `yes`; never filtered by `allowClientDirectives` (spec §2.8 rule b) and
 * not a `directiveDefaults` key.
 */
export const FORCE_TRACE = new Directive<boolean>({
  field: 'forceTrace',
  query: 'force-trace',
  header: 'X-SVC-Force-Trace',
  type: 'flag',
  filtered: false,
  fallback: false,
  defaultsSchema: false,
});

/**
 * Creates the tracing plugin (name `tracing`).
 * @returns a plugin owning the top-level `tracing` key
 */
export function tracingPlugin(opts: TracingPluginOptions = {}): Plugin {
  return definePlugin({
    name: 'tracing',
    provides: [TRACING_SERVICE],
    schema: tracingSchema,
    apply(host: PluginHost) {
      declareDirectives(host, 'tracing', FORCE_TRACE);
      let config: TracingConfig | undefined;
      let forcedByConfig: ((network: string, method: string) => boolean) | undefined;
      let sdk: TracingSdk | undefined;
      let loading: Promise<void> | undefined;
      const requestSpans = new WeakMap<HttpRequestInfo, Span>();
      const callSpans = new WeakMap<ExecutionRecord, Span>();
      /** With `detailed`: the `svc.forward` span of a call, parent of its upstream spans. */
      const forwardSpans = new WeakMap<ExecutionRecord, Span>();
      host.services.provide(TRACING_SERVICE, {
        get loaded() {
          return sdk !== undefined;
        },
      });
      host.hooks.configured.tap('tracing', (c) => {
        config = tracingConfigOf(c);
        forcedByConfig = config.enabled ? compileForceTrace(config.forceTraceMatchers) : undefined;
      });
      // Loaded before the listener opens (the `project` hook runs at start-up).
      host.hooks.project.tapPromise('tracing', async () => {
        if (!config?.enabled) return;
        loading ??= loadTracingSdk(config, host.version, opts.exporter).then((s) => {
          sdk = s;
        });
        await loading;
      });
      host.hooks.shutdown.tapPromise('tracing', async () => {
        await sdk?.shutdown().catch((e: unknown) => host.logger.warn({ err: (e as Error).message }, 'tracing: flushing spans failed'));
      });

      /** The span of a call's HTTP request, started by the request's first call. */
      const requestSpan = (s: TracingSdk, http: HttpRequestInfo, force: boolean, project: string): Span => {
        let span = requestSpans.get(http);
        if (!span) {
          span = s.tracer.startSpan('svc.request', {
            attributes: { 'url.path': http.path.slice(0, 256), 'svc.project': project, ...(force ? { [FORCE_TRACE_ATTRIBUTE]: true } : {}) },
          });
          requestSpans.set(http, span);
        }
        return span;
      };

      host.hooks.call.tap({ name: 'tracing', stage: CallStage.TRACING }, (inner: CallHandler): CallHandler => {
        if (!config?.enabled) return inner;
        const detailed = config.detailed;
        return async (ctx) => {
          const s = sdk;
          if (!s || ctx.internal) return inner(ctx);
          const forced = FORCE_TRACE.get(ctx.directives) || (forcedByConfig?.(ctx.network.id, ctx.request.method) ?? false);
          const parent = requestSpan(s, ctx.http, forced, ctx.project.id);
          const span = s.tracer.startSpan(
            ctx.request.method,
            {
              attributes: {
                'rpc.system': 'jsonrpc',
                'rpc.method': ctx.request.method,
                'svc.project': ctx.project.id,
                'svc.network': ctx.network.id,
                ...(forced ? { [FORCE_TRACE_ATTRIBUTE]: true } : {}),
                ...(detailed ? { [PARAMS_ATTRIBUTE]: paramsAttribute(ctx.request.params) } : {}),
              },
            },
            s.withParent(parent),
          );
          callSpans.set(ctx.record, span);
          try {
            const r = await inner(ctx);
            span.setAttribute('svc.outcome', 'success');
            return r;
          } catch (e) {
            const err = asSvcError(e);
            span.setAttribute('svc.outcome', err.name);
            s.fail(span, err.name, err.message);
            throw e;
          } finally {
            if (ctx.record.upstream) span.setAttribute('svc.upstream', ctx.record.upstream);
            const cache = CACHE_OUTCOME.get(ctx.record);
            if (cache) span.setAttribute('svc.cache', cache);
            span.end();
          }
        };
      });

      // eRPC's detail tier: the work below the cache (interpolation, the failsafe, the upstream
      // sweep) as its own span. Not in the chain unless `detailed`.
      host.hooks.call.tap({ name: 'tracing:detail', stage: stageBetween(CallStage.FUTURE_BLOCK, CallStage.CACHE) }, (inner: CallHandler): CallHandler => {
        if (!config?.enabled || !config.detailed) return inner;
        return async (ctx) => {
          const s = sdk;
          const parent = s && !ctx.internal ? callSpans.get(ctx.record) : undefined;
          if (!s || !parent) return inner(ctx);
          const span = s.tracer.startSpan('svc.forward', { attributes: { 'svc.network': ctx.network.id } }, s.withParent(parent));
          forwardSpans.set(ctx.record, span);
          try {
            return await inner(ctx);
          } catch (e) {
            const err = asSvcError(e);
            s.fail(span, err.name, err.message);
            throw e;
          } finally {
            forwardSpans.delete(ctx.record);
            span.end();
          }
        };
      });

      host.hooks.upstream.tap({ name: 'tracing', stage: UpstreamStage.TRACING }, (inner: UpstreamSender, u): UpstreamSender => {
        if (!config?.enabled) return inner;
        const detailed = config.detailed;
        return (call: UpstreamCall): Promise<RpcResult> => {
          const s = sdk;
          const parent = s && !call.ctx.internal ? (forwardSpans.get(call.ctx.record) ?? callSpans.get(call.ctx.record)) : undefined;
          if (!s || !parent) return inner(call);
          const span = s.tracer.startSpan(
            `upstream ${call.method}`,
            {
              attributes: {
                'rpc.system': 'jsonrpc',
                'rpc.method': call.method,
                'svc.upstream': u.id,
                'svc.attempt_reason': call.attempt.reason,
                ...(detailed ? { [PARAMS_ATTRIBUTE]: paramsAttribute(call.params) } : {}),
              },
            },
            s.withParent(parent),
          );
          return inner(call).then(
            (r) => {
              span.setAttribute('svc.outcome', 'success');
              span.end();
              return r;
            },
            (e: unknown) => {
              const err = asSvcError(e);
              span.setAttribute('svc.outcome', err.name);
              s.fail(span, err.name, err.message);
              span.end();
              throw e;
            },
          );
        };
      });

      host.hooks.responseHeaders.tap('tracing', (_sink, records, meta) => {
        const span = requestSpans.get(meta.http);
        if (!span) return;
        requestSpans.delete(meta.http);
        span.setAttribute('svc.calls', records.length);
        span.setAttribute('svc.batch', meta.batch);
        span.end();
      });
    },
  });
}
