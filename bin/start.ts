/**
 * `svc start`: builds the proxy from the config and preset, then serves it in this process or
 * as the primary of `server.workers` processes, and reloads the config on SIGHUP or an admin
 * `svc_reloadConfig` once it serves.
 */
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { ConfigError } from '../config/load.ts';
import type { SvcConfigInput } from '../config/types.ts';
import { svcWorker } from '../lib/cluster.ts';
import { createLogger } from '../lib/logger.ts';
import { redactText } from '../lib/redact.ts';
import { validateConfig } from '../core/host/validate.ts';
import { createProxy } from '../core/host/create.ts';
import { VERSION } from '../core/wire/version.ts';
import type { ResolvedPreset } from '../presets/index.ts';
import { presetLogLine } from '../presets/describe.ts';
import { RELOAD_OTHERS, runPrimary } from './cluster.ts';
import { installStopSignals } from './signals.ts';
import { findPreset, loadRaw, printProblems, withEndpoints } from './cli-config.ts';

/**
 * `svc start [--config FILE] [--port N] [--metrics-port N] [--preset NAME] [ENDPOINT...]`:
 * serves until stopped.
 * @param file the `--config` file (else ./svc.yaml when present)
 * @param port `--port`, over the config's `server.httpPort`
 * @param metricsPort `--metrics-port`, over the config's `metrics.port`
 * @param presetName `--preset`
 * @param endpoints upstream URLs added to project `main`
 * @returns 1 when the config or the start fails, else -1 (serving)
 */
export async function start(
  file: string | undefined,
  port: number | undefined,
  metricsPort: number | undefined,
  presetName: string | undefined,
  endpoints: string[],
): Promise<number> {
  // From the first moment: Node's default for SIGHUP is to exit, and svc reloads only once it serves.
  process.on('SIGHUP', () => (onSighup ? onSighup() : process.stderr.write('SIGHUP while svc is starting: ignored (reload once it serves)\n')));
  const configFile = file ?? (existsSync('svc.yaml') ? 'svc.yaml' : undefined);
  let raw: SvcConfigInput;
  let resolved: ResolvedPreset;
  try {
    raw = withEndpoints(await loadRaw(configFile), endpoints);
    resolved = await findPreset(presetName, raw, configFile);
  } catch (e) {
    printProblems(e);
    return 1;
  }
  const logger = createLogger((raw.logLevel as 'info' | undefined) ?? 'info');
  let proxy;
  try {
    proxy = createProxy({ config: raw, plugins: resolved.preset(), logger, port, metricsPort });
  } catch (e) {
    printProblems(e);
    return 1;
  }
  const worker = svcWorker();
  if (!worker) {
    // One line: which preset (and from where), every plugin with its version and the config keys it owns.
    const line = presetLogLine(resolved, proxy.plugins);
    logger.info(line.fields, line.message);
    if (!configFile && endpoints.length === 0)
      logger.warn('no config file and no endpoints: project "main" is zero-config (public endpoints by chain, docs/interface.md §2.10) in the default preset');
  }
  const server = proxy.config.server;
  if (server.workers > 1 && cluster.isPrimary) {
    // The config is valid (the proxy was built from it): the workers build their own and serve.
    await proxy.close().catch(() => undefined);
    // The primary passes SIGHUP on to its workers (runPrimary).
    onSighup = () => undefined;
    const m = proxy.config.metrics;
    runPrimary({
      workers: server.workers,
      ...(m.enabled ? { metrics: { host: m.host, port: metricsPort ?? m.port } } : {}),
      drainTimeoutMs: server.waitBeforeShutdownMs + server.waitAfterShutdownMs + 10_000,
      logger,
    }).then(
      (code) => process.exit(code),
      (e: unknown) => {
        logger.error({ err: (e as Error).message }, 'svc primary failed');
        process.exit(1);
      },
    );
    return -1;
  }
  let addr;
  try {
    addr = await proxy.start();
  } catch (e) {
    // A port in use or a plugin failing at start-up: say so and exit, never a stack dump.
    logger.error({ err: (e as Error).message }, 'svc could not start');
    await proxy.close().catch(() => undefined);
    return 1;
  }
  enableReload(proxy, configFile, endpoints, resolved, logger);
  logger.info(
    {
      listen: `${proxy.config.server.tls ? 'https' : 'http'}://${addr.address}:${addr.port}`,
      config: configFile ?? null,
      version: VERSION,
      commit: proxy.commit,
      ...(worker ? { worker: worker.index, workers: worker.count, pid: process.pid } : {}),
    },
    'svc listening',
  );
  // Graceful drain on the first SIGTERM/SIGINT (spec §3.2), at once for Ctrl-C at an idle terminal; a second signal exits at once.
  installStopSignals(proxy, logger, !!worker);
  return -1;
}

/** What SIGHUP does once svc serves (set by {@link enableReload}; before that it is ignored). */
let onSighup: (() => void) | undefined;

/**
 * Config reload of a started svc (SIGHUP, admin `svc_reloadConfig`): the file is read again,
 * with the CLI's endpoints, and validated whole on fresh plugins of the same preset, as
 * `svc validate` does; a refused config is logged with the messages `svc validate` prints.
 * A worker reloaded through `/admin` asks the primary to reload the other workers.
 */
function enableReload(
  proxy: ReturnType<typeof createProxy>,
  configFile: string | undefined,
  endpoints: string[],
  preset: ResolvedPreset,
  logger: ReturnType<typeof createLogger>,
): void {
  if (!configFile) {
    onSighup = () => logger.warn('SIGHUP: svc was started without a config file: nothing to reload');
    return;
  }
  const worker = svcWorker();
  proxy.setConfigSource(async (trigger) => {
    const raw = withEndpoints(await loadRaw(configFile, true), endpoints);
    const next = await validateConfig({ config: raw, plugins: preset.preset() });
    if (worker && trigger === 'request' && process.send) process.send({ [RELOAD_OTHERS]: true });
    return next;
  });
  onSighup = () => {
    proxy.reloadConfig('signal').catch((e: unknown) => {
      const problems = e instanceof ConfigError ? e.problems.map((p) => `${p.path || '(root)'}: ${redactText(p.message)}`) : [redactText((e as Error).message)];
      const warnings = e instanceof ConfigError ? e.warnings.map((w) => redactText(w)) : [];
      logger.error({ problems, ...(warnings.length ? { warnings } : {}) }, 'config reload refused: the running config keeps serving');
    });
  };
}
