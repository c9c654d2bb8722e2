/**
 * Starts a real svc server (Koa listener + metrics listener) for end-to-end tests, bound to
 * 127.0.0.1 on kernel-picked ports, with a silent logger and a short probe backoff.
 */
import { request } from 'undici';
import type { Plugin, Proxy } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { createLogger, type Logger } from '../../lib/logger.ts';
import { metricsAddress } from '../../plugins/metrics/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { minimalPreset } from '../../presets/minimal.ts';

/**
 * The default preset minus the named plugins, in the same apply order: a test whose subject is
 * not chain state (or local methods) states its environment explicitly with this, e.g.
 * `presetWithout('evm-state')` in front of scripted fake upstreams whose `eth_blockNumber`
 * answers name them.
 * @param names plugin names to leave out (each must be in the default preset)
 * @throws Error for a name the default preset does not hold (a typo would silently keep it)
 */
export function presetWithout(...names: string[]): Plugin[] {
  const all = defaultPreset();
  for (const n of names) {
    if (!all.some((p) => p.name === n)) throw new Error(`presetWithout: no plugin "${n}" in the default preset (${all.map((p) => p.name).join(', ')})`);
  }
  return all.filter((p) => !names.includes(p.name));
}

/** Options of {@link startSvc}. */
export interface StartSvcOptions {
  /** Preset whose plugins are applied (default `default`); ignored when `plugins` is given. */
  preset?: 'default' | 'minimal';
  /** Explicit plugin list (wins over `preset`). */
  plugins?: Plugin[];
  /** The proxy's logger (default: silent), e.g. a pino logger writing into an array the test reads. */
  logger?: Logger;
}

/** An HTTP answer read whole. */
export interface SvcResponse {
  status: number;
  /** Response headers, lower-cased names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  /** Raw body text. */
  text: string;
  /** Body parsed as JSON, `undefined` when it is not JSON. */
  json: any;
}

/** A running svc. */
export interface SvcHandle {
  /** `http://127.0.0.1:<port>` (no trailing slash). */
  url: string;
  proxy: Proxy;
  /** `http://127.0.0.1:<port>/metrics` when the metrics plugin listens. */
  metricsUrl?: string;
  /**
   * POSTs to a path of the server. A string body is sent byte-for-byte, anything else as JSON.
   * `content-type: application/json` is sent unless overridden; a `host` header is honoured.
   */
  post(path: string, body: unknown | string, headers?: Record<string, string>): Promise<SvcResponse>;
  /** Sends any method (GET, OPTIONS...) to a path. */
  send(method: string, path: string, body?: string, headers?: Record<string, string>): Promise<SvcResponse>;
  /** Closes the proxy (listeners, pools). Idempotent. */
  close(): Promise<void>;
}

function flattenHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/**
 * One HTTP request with undici (which, unlike fetch, lets a test set the Host header).
 * @param url absolute URL
 */
export async function httpRequest(method: string, url: string, body?: string, headers: Record<string, string> = {}): Promise<SvcResponse> {
  const res = await request(url, {
    method: method as 'POST',
    headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
    body,
  });
  const text = await res.body.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: flattenHeaders(res.headers), text, json };
}

/**
 * Builds, starts and returns an svc from a raw config object.
 * @param config raw config (as a YAML file would hold it)
 * @param opts preset or explicit plugins
 */
export async function startSvc(config: object, opts: StartSvcOptions = {}): Promise<SvcHandle> {
  const plugins = opts.plugins ?? (opts.preset === 'minimal' ? minimalPreset() : defaultPreset());
  const proxy = createProxy({
    config,
    plugins,
    logger: opts.logger ?? createLogger('silent'),
    port: 0,
    host: '127.0.0.1',
    metricsPort: 0,
    probeBackoffMs: 50,
  });
  let addr;
  try {
    addr = await proxy.start();
  } catch (e) {
    await proxy.close().catch(() => undefined);
    throw e;
  }
  const url = `http://127.0.0.1:${addr.port}`;
  const m = metricsAddress(proxy);
  const metricsUrl = m ? `http://127.0.0.1:${m.port}/metrics` : undefined;
  const send = (method: string, path: string, body?: string, headers?: Record<string, string>) => httpRequest(method, `${url}${path}`, body, headers);
  return {
    url,
    proxy,
    metricsUrl,
    send,
    post: (path, body, headers) => send('POST', path, typeof body === 'string' ? body : JSON.stringify(body), headers),
    close: () => proxy.close(),
  };
}

/**
 * Polls a condition every 20 ms until it holds.
 * @param cond sync or async predicate
 * @param timeoutMs give up after this long (default 5000)
 * @throws Error when the condition did not hold in time
 */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Config keys that turn the response cache off (no policies), for tests about upstream traffic:
 * with the zero-config cache on, a repeated call would be answered from memory.
 */
export const NO_CACHE = Object.freeze({ database: { evmJsonRpcCache: { connectors: [], policies: [] } } });
