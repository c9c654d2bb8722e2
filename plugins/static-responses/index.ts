/**
 * static-responses plugin: calls answered from config, per network (eRPC's
 * `networks[].staticResponses`), for chains that deviate from what EVM clients assume (a genesis
 * block that is not 0, a method the chain's nodes lack, a fee method that must answer a fixed
 * value). Taps `call` at `CallStage.STATIC_RESPONSES`: inside the tracing span and the client
 * rate-limit budgets, outside svc's own local answers (`eth_chainId`), multiplexing, the cache and
 * every upstream.
 *
 * - An entry matches a call when its `method` is the call's (exactly) and its `params` equal the
 *   call's (schema.ts: numbers by value, object keys in any order, no hex normalisation; omitted,
 *   null and `[]` all mean "no params"). The first matching entry, in config order, answers.
 * - A `result` is answered as configured, with the caller's own id (written by the core); an
 *   `error` reaches the client as exactly the configured `{code, message, data}` (svc adds no
 *   details), HTTP 200, named `ErrStaticResponse` in svc's headers, logs and metrics.
 * - Nothing else runs for the call: no multiplexing, no cache read or write, no upstream
 *   (no `X-SVC-Upstream`, `X-SVC-Upstream-Attempts: 0`).
 * - Internal calls (svc's own probes and polls) are never answered statically: they measure the
 *   upstreams.
 * - Each answer counts in `svc_network_static_response_served_total{project,network,category}`.
 * - A network without entries gets the inner handler back: the plugin costs nothing there. With
 *   entries, a call whose method has none costs one `Map` lookup.
 */
import { Counter } from 'prom-client';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  RpcResult,
  settingsOf,
} from 'svc-proxy/plugin';
import { SvcError, type UpstreamErrorRaw } from 'svc-proxy/plugin/errors';
import { paramsMatch, STATIC_RESPONSES_NETWORK_KEYS, staticResponsesSchema, type StaticError, type StaticResponseConfig } from './schema.ts';

export {
  checkStaticResponses,
  isEmptyParams,
  jsonEqual,
  MAX_PARAMS_DEPTH,
  MAX_STATIC_METHOD_LENGTH,
  MAX_STATIC_RESPONSES,
  paramsMatch,
  STATIC_RESPONSES_NETWORK_KEYS,
  staticResponsesSchema,
  type StaticError,
  type StaticResponseConfig,
} from './schema.ts';

/**
 * A configured error answer (`staticResponses[].response.error`). The client sees exactly the
 * configured `{code, message, data}`: the error passes through like a node's error confirmed by a
 * second upstream (a fact about the request: not retryable, charged to no upstream), and svc
 * appends no cause chain to it. HTTP status 200, as for a node's JSON-RPC error.
 */
export class ErrStaticResponse extends SvcError {
  /**
   * @param error the configured error object
   * @param raw its exact JSON text pieces (built once per entry by {@link compileStaticResponses})
   */
  constructor(error: StaticError, raw: UpstreamErrorRaw) {
    super(error.message, { code: error.code, upstreamData: error.data, upstreamError: raw });
    this.confirmed = true;
  }
}

/** One compiled entry: its config and its answer, serialised once. */
export interface CompiledStaticResponse {
  /** The entry as configured. */
  readonly config: StaticResponseConfig;
  /** Position of the entry in the network's list (0-based), for logs and tests. */
  readonly index: number;
  /** The result's JSON text, for a `result` entry. */
  readonly resultJson?: string;
  /** The error's exact JSON pieces, for an `error` entry. */
  readonly errorRaw?: UpstreamErrorRaw;
}

/** A network's entries by method, each list in config order. */
export type StaticResponseTable = ReadonlyMap<string, readonly CompiledStaticResponse[]>;

/** The exact JSON pieces of a configured error object (`whole` is what the client receives). */
function errorRawOf(e: StaticError): UpstreamErrorRaw {
  const obj = e.data === undefined ? { code: e.code, message: e.message } : { code: e.code, message: e.message, data: e.data };
  const raw: UpstreamErrorRaw = { whole: JSON.stringify(obj), code: String(e.code), message: JSON.stringify(e.message), exact: true };
  if (e.data !== undefined) raw.data = JSON.stringify(e.data);
  return raw;
}

/**
 * Compiles a network's `staticResponses` into a table by method (the hot path's one lookup).
 * @param entries the resolved list (validated by the schema: each has exactly one of `result` and `error`)
 * @returns the table, or undefined when there is no entry (the plugin then leaves the network alone)
 */
export function compileStaticResponses(entries: readonly StaticResponseConfig[] | undefined): StaticResponseTable | undefined {
  if (!entries || entries.length === 0) return undefined;
  const table = new Map<string, CompiledStaticResponse[]>();
  entries.forEach((config, index) => {
    const { response } = config;
    const compiled: CompiledStaticResponse =
      response.error !== undefined
        ? { config, index, errorRaw: errorRawOf(response.error) }
        : { config, index, resultJson: JSON.stringify(response.result ?? null) };
    let list = table.get(config.method);
    if (!list) table.set(config.method, (list = []));
    list.push(compiled);
  });
  return table;
}

/**
 * The entry answering a call, if any: the first of the method's entries whose params match.
 * @param table the network's compiled entries
 * @param method the call's method
 * @param params the call's params as sent
 */
export function findStaticResponse(table: StaticResponseTable, method: string, params: unknown): CompiledStaticResponse | undefined {
  const list = table.get(method);
  if (list === undefined) return undefined;
  for (const e of list) if (paramsMatch(e.config.params, params)) return e;
  return undefined;
}

/**
 * The answer of a matched entry, built fresh for each call (a plugin further out may read or
 * annotate it): a result, or the configured error to throw.
 * @param entry the matched entry
 */
export function answerOf(entry: CompiledStaticResponse): RpcResult | ErrStaticResponse {
  if (entry.errorRaw !== undefined) return new ErrStaticResponse(entry.config.response.error as StaticError, entry.errorRaw);
  return RpcResult.lazy(entry.resultJson ?? 'null');
}

/**
 * Creates the static-responses plugin (name `static-responses`).
 * @returns a plugin owning `networks[].staticResponses` (and `networkDefaults.staticResponses`),
 *   tapping `call` at `CallStage.STATIC_RESPONSES` and registering
 *   `svc_network_static_response_served_total`
 */
export function staticResponsesPlugin(): Plugin {
  return definePlugin({
    name: 'static-responses',
    schema: staticResponsesSchema,
    apply(host: PluginHost) {
      const served = new Counter({
        name: 'svc_network_static_response_served_total',
        help: 'Calls answered from networks[].staticResponses, without multiplexing, cache or upstream',
        labelNames: ['project', 'network', 'category'],
        registers: [host.metrics],
      });

      host.hooks.call.tap({ name: 'static-responses', stage: CallStage.STATIC_RESPONSES }, (inner: CallHandler, network: Network): CallHandler => {
        const entries = settingsOf(network.config, STATIC_RESPONSES_NETWORK_KEYS).staticResponses as readonly StaticResponseConfig[] | undefined;
        const table = compileStaticResponses(entries);
        if (table === undefined) return inner;
        return (ctx: CallContext) => {
          if (ctx.internal) return inner(ctx);
          const method = ctx.request.method;
          if (!table.has(method)) return inner(ctx);
          const hit = findStaticResponse(table, method, ctx.request.params);
          if (hit === undefined) return inner(ctx);
          served.inc({ project: ctx.project.id, network: network.id, category: host.methodLabel.value(method) });
          const answer = answerOf(hit);
          return answer instanceof RpcResult ? Promise.resolve(answer) : Promise.reject(answer);
        };
      });
    },
  });
}
