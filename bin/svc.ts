/**
 * The `svc` command:
 *   svc start [--config FILE] [--port N] [--preset NAME] [ENDPOINT...]
 *   svc validate --config FILE [--preset NAME] [--print]
 *   svc validate --from-erpc FILE [--preset NAME]
 *   svc config schema [--preset NAME] [--config FILE]
 *   svc pipeline [--config FILE] [--preset NAME] [--network ID]
 * Without --config, `start` reads ./svc.yaml when present. Each ENDPOINT becomes an upstream
 * of project `main` (chain id probed). NAME is a built-in preset (`default`, `minimal`), an
 * installed package (`@acme/svc-preset`, resolved from the working directory) or a module path;
 * `preset:` in a config file resolves from the config file's folder, then the working directory.
 */
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { cloneConfig, ConfigError, readConfigFile } from '../config/load.ts';
import { editorConfigSchema } from '../config/editor-schema.ts';
import { normalizedForPrint, renderNormalized } from '../config/from-erpc.ts';
import type { SchemaFragment } from '../config/schema.ts';
import type { ProjectInput, SvcConfigInput } from '../config/types.ts';
import { svcWorker } from '../lib/cluster.ts';
import { createLogger } from '../lib/logger.ts';
import { RELOAD_OTHERS, runPrimary } from './cluster.ts';
import { healthcheck } from './healthcheck.ts';
import { installStopSignals } from './signals.ts';
import { validateConfig } from '../core/host/validate.ts';
import { createProxy } from '../core/host/create.ts';
import { renderPipeline } from '../core/pipeline/pipeline.ts';
import { redactText } from '../lib/redact.ts';
import { VERSION } from '../core/wire/version.ts';
import { resolvePreset, type ResolvedPreset } from '../presets/index.ts';
import { presetLogLine } from '../presets/describe.ts';

const USAGE = `svc ${VERSION} — fault-tolerant EVM JSON-RPC proxy

Usage:
  svc start [--config FILE] [--port N] [--metrics-port N] [--preset NAME] [ENDPOINT...]
  svc validate --config FILE [--preset NAME] [--print]
  svc validate --from-erpc FILE [--preset NAME]
  svc reload --pid PID                send SIGHUP: the svc with that pid re-reads its config
  svc reload --url URL [--token T]    call svc_reloadConfig on URL's /admin (T, else
                                      $SVC_ADMIN_TOKEN: the admin secret) and print what changed
  svc config schema [--preset NAME]   JSON Schema of svc.yaml for editors
  svc healthcheck [--config FILE] [--port N]
                                      exit 0 when the local svc's /healthcheck answers 2xx
                                      (the port: --port, else the config's server.httpPort)
  svc pipeline [--config FILE] [--preset NAME] [--network ID] [ENDPOINT...]
                                      print each network's request pipeline: every stage
                                      and the plugin taps it runs, in order
  svc --version

Without --config, start reads ./svc.yaml when it exists. Each ENDPOINT (http/https URL)
becomes an upstream of project "main"; its chain id is probed with eth_chainId.
--preset NAME (else the config's preset:, else default): a built-in preset (default,
minimal), an installed package (@acme/svc-preset, @acme/svc-plugins/preset) or a module
path (./preset.js); validate needs it to check the config keys its plugins own.
validate --print prints the config in svc's shape (YAML) after the load-time rewrites of
eRPC's forms, one comment line per rewrite; --from-erpc FILE takes an eRPC erpc.yaml as it
is (X-ERPC-* header names and erpc_ prefixes renamed too), validates it and prints it so.`;

/**
 * Adds CLI endpoints to project `main` (created when absent). With no projects in the
 * config, `/evm/<chainId>` keeps working through the default aliasing rule.
 */
export function withEndpoints(raw: SvcConfigInput, endpoints: readonly string[]): SvcConfigInput {
  if (endpoints.length === 0) return raw;
  const cfg: SvcConfigInput = cloneConfig(raw);
  const hadProjects = (cfg.projects ?? []).length > 0;
  cfg.projects ??= [];
  let main = cfg.projects.find((p) => p.id === 'main');
  if (!main) {
    main = { id: 'main' } as ProjectInput;
    cfg.projects.push(main);
  }
  main.upstreams = [...(main.upstreams ?? []), ...endpoints.map((endpoint) => ({ endpoint }))];
  if (!hadProjects) {
    cfg.server ??= {};
    cfg.server.aliasing ??= { rules: [{ matchDomain: '*', serveProject: 'main' }] };
  }
  return cfg;
}

async function loadRaw(file: string | undefined, fresh = false): Promise<SvcConfigInput> {
  if (!file) return {};
  const raw = await readConfigFile(file, { fresh });
  return (raw ?? {}) as SvcConfigInput;
}

/** Prints start-up problems, redacted: a config parse error may quote a line holding a secret. */
function printProblems(e: unknown): void {
  if (e instanceof ConfigError) {
    for (const p of e.problems) process.stderr.write(`${p.path || '(root)'}: ${redactText(p.message)}\n`);
    // An unset ${VAR} read as "" is often what a problem above is about.
    for (const w of e.warnings) process.stderr.write(`warning: ${redactText(w)}\n`);
  } else {
    process.stderr.write(`${redactText((e as Error).message)}\n`);
  }
}

/**
 * The preset to run: `--preset` resolved from the working directory, else the config's
 * `preset:` resolved from the config file's folder then the working directory, else `default`.
 * @throws Error naming what was tried when the name resolves nowhere
 */
function findPreset(cliName: string | undefined, raw: SvcConfigInput, configFile: string | undefined): Promise<ResolvedPreset> {
  if (cliName) return resolvePreset(cliName, { from: process.cwd() });
  if (raw.preset) return resolvePreset(raw.preset, { from: configFile ? [dirname(resolve(configFile)), process.cwd()] : process.cwd() });
  return resolvePreset('default');
}

/**
 * `svc validate --config FILE [--preset NAME]`: checks the config against the core schema plus
 * the fragments of the preset's plugins (and their `configured` checks); prints `ok` (exit 0)
 * or every problem with its path (exit 1).
 */
async function validate(file: string | undefined, presetName: string | undefined, opts: { print: boolean; fromErpc: boolean }): Promise<number> {
  if (!file) {
    process.stderr.write('svc validate: --config FILE (or --from-erpc FILE) is required\n');
    return 2;
  }
  try {
    const raw = await loadRaw(file);
    const { preset } = await findPreset(presetName, raw, file);
    const plugins = preset();
    const fragments = plugins.flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
    // Printed from the file as written (no ${ENV} expansion: no secret from the environment is shown).
    const shown = opts.print ? normalizedForPrint(raw, fragments, opts.fromErpc) : undefined;
    const proxy = createProxy({ config: opts.fromErpc && shown ? shown.document : raw, plugins, logger: createLogger('silent') });
    for (const w of proxy.config.warnings) process.stderr.write(`warning: ${w}\n`);
    process.stdout.write(shown ? renderNormalized(shown.document, shown.rewrites, redactText) : 'ok\n');
    return 0;
  } catch (e) {
    printProblems(e);
    return 1;
  }
}

/**
 * `svc pipeline`: builds the proxy of a config and preset (not listening, no upstream dialled)
 * and prints each network's pipeline (core/pipeline/pipeline.ts `renderPipeline`): the stages of a call
 * in order, with the taps the preset's plugins run in each, as composed for that network.
 * Upstreams without a configured chain id join a network only after their probe, so they are
 * listed once `evm.chainId` is set. Exit 1 on a config error or when `--network` matches nothing.
 */
async function pipeline(file: string | undefined, presetName: string | undefined, networkId: string | undefined, endpoints: string[]): Promise<number> {
  try {
    const raw = withEndpoints(await loadRaw(file ?? (existsSync('svc.yaml') ? 'svc.yaml' : undefined)), endpoints);
    const { preset } = await findPreset(presetName, raw, file);
    const proxy = createProxy({ config: raw, plugins: preset(), logger: createLogger('silent') });
    proxy.buildRegistry();
    const text = renderPipeline(proxy, networkId);
    if (!text) {
      process.stderr.write(
        networkId
          ? `no network ${networkId} in this config\n`
          : 'no network in this config (declare one under projects[].networks, or give upstreams an evm.chainId)\n',
      );
      return 1;
    }
    process.stdout.write(text);
    return 0;
  } catch (e) {
    printProblems(e);
    return 1;
  }
}

/**
 * `svc config schema`: prints the JSON Schema of the whole config (core plus the fragments of
 * the preset's plugins: `--preset`, else the `--config` file's `preset`, else `default`), the
 * schema `svc validate` checks against, for `# yaml-language-server: $schema=...`.
 */
async function configSchema(sub: string | undefined, file: string | undefined, presetName: string | undefined): Promise<number> {
  if (sub !== 'schema') {
    process.stderr.write(`svc config: unknown subcommand "${sub ?? ''}" (try: svc config schema)\n`);
    return 2;
  }
  try {
    const raw = presetName ? {} : await loadRaw(file);
    const { preset } = await findPreset(presetName, raw, file);
    const fragments = preset().flatMap((p) => (p.schema ? [p.schema as SchemaFragment] : []));
    process.stdout.write(`${JSON.stringify(editorConfigSchema(fragments), null, 2)}\n`);
    return 0;
  } catch (e) {
    printProblems(e);
    return 1;
  }
}

async function start(
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

/**
 * `svc reload`: SIGHUP to a pid, or `svc_reloadConfig` through a running svc's `/admin`
 * (printing what changed, exit 1 when the config was refused).
 */
async function reload(pid: string | undefined, url: string | undefined, token: string | undefined): Promise<number> {
  if (pid !== undefined) {
    const n = Number(pid);
    if (!Number.isInteger(n) || n <= 0) {
      process.stderr.write(`--pid must be a process id, got ${pid}\n`);
      return 2;
    }
    try {
      process.kill(n, 'SIGHUP');
    } catch (e) {
      process.stderr.write(`could not signal ${n}: ${(e as Error).message}\n`);
      return 1;
    }
    process.stdout.write(`SIGHUP sent to ${n}: the result is in its log\n`);
    return 0;
  }
  if (!url) {
    process.stderr.write('svc reload: --pid PID or --url URL is required\n');
    return 2;
  }
  const secret = token ?? process.env.SVC_ADMIN_TOKEN;
  const target = new URL('/admin', url);
  let body: { result?: unknown; error?: { message?: string } };
  try {
    const res = await fetch(target, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(secret ? { 'X-SVC-Secret-Token': secret } : {}) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'svc_reloadConfig' }),
      signal: AbortSignal.timeout(60_000),
    });
    body = (await res.json()) as typeof body;
  } catch (e) {
    process.stderr.write(`svc reload: ${redactText((e as Error).message)}\n`);
    return 1;
  }
  if (body.error) {
    process.stderr.write(`${body.error.message ?? 'reload failed'}\n`);
    return 1;
  }
  process.stdout.write(`${JSON.stringify(body.result, null, 2)}\n`);
  return 0;
}

/** Parses a port flag: undefined when absent, null (after printing why) when invalid. */
function portOption(flag: string, v: string | undefined): number | undefined | null {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    process.stderr.write(`${flag} must be an integer 0-65535, got ${v}\n`);
    return null;
  }
  return n;
}

/** Runs the CLI with the given arguments; resolves to an exit code (-1 while serving). */
export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        config: { type: 'string', short: 'c' },
        port: { type: 'string', short: 'p' },
        'metrics-port': { type: 'string' },
        preset: { type: 'string' },
        print: { type: 'boolean' },
        'from-erpc': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
        pid: { type: 'string' },
        url: { type: 'string' },
        token: { type: 'string' },
        network: { type: 'string' },
      },
    });
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const [cmd, ...rest] = positionals;
  if (values.help || !cmd || cmd === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return cmd || values.help ? 0 : 2;
  }
  if (cmd === 'validate')
    return validate(values['from-erpc'] ?? values.config, values.preset, {
      print: values.print === true || values['from-erpc'] !== undefined,
      fromErpc: values['from-erpc'] !== undefined,
    });
  if (cmd === 'config') return configSchema(rest[0], values.config, values.preset);
  if (cmd === 'reload') return reload(values.pid, values.url, values.token);
  if (cmd === 'pipeline') return pipeline(values.config, values.preset, values.network, rest);
  if (cmd === 'healthcheck') {
    const port = portOption('--port', values.port);
    return port === null ? 2 : healthcheck(values.config, port);
  }
  if (cmd === 'start') {
    const port = portOption('--port', values.port);
    const metricsPort = portOption('--metrics-port', values['metrics-port']);
    if (port === null || metricsPort === null) return 2;
    const bad = rest.filter((e) => !/^https?:\/\//.test(e));
    if (bad.length) {
      process.stderr.write(`ENDPOINT must be an http(s) URL: ${bad.map(redactText).join(', ')}\n`);
      return 2;
    }
    return start(values.config, port, metricsPort, values.preset, rest);
  }
  process.stderr.write(`unknown command "${cmd}"\n\n${USAGE}\n`);
  return 2;
}

const code = await main(process.argv.slice(2));
// Exit once stdout and stderr are flushed: writes to a pipe are asynchronous, and exiting at once cuts a large output (a config schema)
// short for the program reading it.
if (code >= 0) process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
