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
import { parseArgs } from 'node:util';
import { redactText } from '../lib/redact.ts';
import { VERSION } from '../core/wire/version.ts';
import { healthcheck } from './healthcheck.ts';
import { configSchema, pipeline, reload, validate } from './commands.ts';
import { start } from './start.ts';

export { withEndpoints } from './cli-config.ts';

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
