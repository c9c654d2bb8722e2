/**
 * Benchmark target: svc itself (core/host/create.ts), serving project `main`, network `evm:1`, on
 * 127.0.0.1. URL: `http://127.0.0.1:<port>/main/evm/1`.
 *
 * Options (`--name=value` or env `BENCH_<NAME>`):
 * - `port` (default 0)
 * - `upstream` comma-separated upstream URLs; they become upstreams `up0`, `up1`, … with
 *   `evm.chainId: 1` (required unless `config` is given)
 * - `preset` preset name or module path (default `default`)
 * - `log-level` pino level of svc's logger (default `error`; logs go to stdout, which the
 *   parent forwards to its stderr)
 * - `metrics` `1` to serve /metrics on a free port (default off: the metrics plugin still
 *   counts, only its listener is off)
 * - `config` a whole raw svc config as JSON; replaces the generated one (for scenarios that
 *   need plugin options, e.g. hedging). `cache` applies to it too when it has no `database`
 *   key; `multiplexing` and `upstream-options` do not.
 * - `multiplexing` `1` to keep multiplexing on (default off, so each call reaches the upstream
 *   like the forwarder's; the load sends one identical body)
 * - `cache` `0` (default) turns the response cache off (`database.evmJsonRpcCache` with no
 *   connectors and no policies), so each call reaches the upstream like the forwarder's; `1`
 *   keeps svc's zero-config memory cache; a JSON object is used as `database.evmJsonRpcCache`
 *   (e.g. a Redis tier). Only for presets that carry a plugin named `cache`.
 * - `server-options` a JSON object used as the generated `server` block
 * - `network-defaults` / `upstream-defaults` JSON objects for the generated `networkDefaults`
 *   (merged) and `upstreamDefaults` (e.g. the recommended failsafe config of docs/fault-tolerance.md)
 * - `upstream-options` a JSON object merged into every generated upstream (one level deep for
 *   `evm` and `jsonRpc`), e.g. `{"jsonRpc":{"supportsBatch":true,"batchMaxSize":10}}`
 * - `build` `dist` (default: the compiled package, as `svc start` runs it) or `source` (the
 *   TypeScript sources through tsx)
 * - `dist` the `dist/` directory of another build to run instead (a baseline, BENCH_BASELINE_DIST)
 */
import type { LevelWithSilent } from 'pino';
import { pathToFileURL } from 'node:url';
import { numberOption, option, serveTarget } from './common.ts';

// svc as it runs in production: the compiled build in dist/ (`npm run build`), unless
// `--build=source` asks for the TypeScript sources through tsx.
const fromDist = option('build', 'dist') !== 'source';
const otherDist = option('dist', '');
const base = otherDist ? pathToFileURL(otherDist.endsWith('/') ? otherDist : `${otherDist}/`) : new URL(fromDist ? '../../dist/' : '../../', import.meta.url);
const ext = fromDist ? 'js' : 'ts';
/** Where `createProxy` lives: core/host/create since the core's layers, core/proxy in older builds (a baseline). */
async function loadCreate(): Promise<typeof import('../../core/host/create.ts')> {
  for (const entry of ['core/host/create', 'core/proxy']) {
    try {
      return (await import(new URL(`${entry}.${ext}`, base).href)) as typeof import('../../core/host/create.ts');
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw e;
    }
  }
  throw new Error(`svc target: no createProxy under ${base.href}`);
}
const { createProxy } = await loadCreate();
const { createLogger } = (await import(new URL(`lib/logger.${ext}`, base).href)) as typeof import('../../lib/logger.ts');
const { loadPreset } = (await import(new URL(`presets/index.${ext}`, base).href)) as typeof import('../../presets/index.ts');

const port = numberOption('port', 0);
const upstreams = option('upstream', '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const rawConfig = option('config', '');
const logLevel = option('log-level', 'error') as LevelWithSilent;
const preset = await loadPreset(option('preset', 'default'));
const plugins = preset();
const has = (name: string) => plugins.some((p) => p.name === name);
const upstreamOptions = JSON.parse(option('upstream-options', '{}')) as Record<string, unknown>;
/** `network-defaults`: a JSON object merged into the generated `networkDefaults` (e.g. the failsafe of docs/fault-tolerance.md). */
const networkDefaults = JSON.parse(option('network-defaults', '{}')) as Record<string, unknown>;
/** `server-options`: a JSON object used as the generated `server` block (e.g. a raised `maxBatchSize`). */
const serverOptions = JSON.parse(option('server-options', '{}')) as Record<string, unknown>;
/** `upstream-defaults`: a JSON object used as the generated `upstreamDefaults`. */
const upstreamDefaults = JSON.parse(option('upstream-defaults', '{}')) as Record<string, unknown>;

/** `database` of the config for the `cache` option, or undefined to leave svc's default. */
function cacheDatabase(): unknown {
  const raw = option('cache', '0');
  if (!has('cache') || raw === '1') return undefined;
  if (raw === '0') return { evmJsonRpcCache: { connectors: [], policies: [] } };
  return { evmJsonRpcCache: JSON.parse(raw) as unknown };
}

/** One generated upstream entry with `upstream-options` merged in. */
function upstreamEntry(endpoint: string, i: number): Record<string, unknown> {
  const nested = (k: string, base: Record<string, unknown>) => ({ ...base, ...((upstreamOptions[k] as Record<string, unknown> | undefined) ?? {}) });
  return {
    id: `up${i}`,
    endpoint,
    ...upstreamOptions,
    evm: nested('evm', { chainId: 1 }),
    ...(upstreamOptions.jsonRpc ? { jsonRpc: nested('jsonRpc', {}) } : {}),
  };
}

function generatedConfig(): unknown {
  if (upstreams.length === 0) throw new Error('svc target: --upstream=<url>[,<url>…] or --config=<json> is required');
  const database = cacheDatabase();
  return {
    ...(database ? { database } : {}),
    logLevel: logLevel === 'silent' ? 'error' : logLevel,
    server: serverOptions,
    metrics: { enabled: option('metrics', '0') === '1', port: 0 },
    projects: [
      {
        id: 'main',
        // Like for like with the forwarder: every call goes upstream. The load repeats one body, which
        // multiplexing would otherwise collapse into a few upstream calls (`--multiplexing=1` keeps it on)
        // and the cache would answer (`database` above, `--cache=1` keeps it on).
        networkDefaults: { ...(has('multiplex') ? { multiplexing: option('multiplexing', '0') === '1' } : {}), ...networkDefaults },
        upstreamDefaults,
        networks: [{ architecture: 'evm', evm: { chainId: 1 } }],
        upstreams: upstreams.map(upstreamEntry),
      },
    ],
  };
}

/** The raw `--config`, with the `cache` switch applied when it has no `database` key. */
function givenConfig(): unknown {
  const c = JSON.parse(rawConfig) as Record<string, unknown>;
  const database = c.database === undefined ? cacheDatabase() : undefined;
  return database ? { ...c, database } : c;
}

await serveTarget('svc', async (counter) => {
  const proxy = createProxy({
    config: rawConfig ? givenConfig() : generatedConfig(),
    plugins,
    logger: createLogger(logLevel, false),
    port,
    host: '127.0.0.1',
    metricsPort: 0,
  });
  const addr = await proxy.start();
  // Count HTTP requests without touching svc: one 'request' event per HTTP request.
  proxy.server?.on('request', () => counter.count++);
  // What the memory tier accounts (svc_cache_memory_bytes, summed over tiers): the bench reads
  // peak RSS beside it, since a full tier is the cache working, not svc's overhead.
  const heldBytes = async () => {
    const m = await proxy.metrics.getSingleMetric('svc_cache_memory_bytes')?.get();
    return (m?.values ?? []).reduce((n, v) => n + v.value, 0);
  };
  return { port: addr.port, close: () => proxy.close(), heldBytes };
});
