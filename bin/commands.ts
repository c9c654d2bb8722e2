/**
 * The `svc` commands that inspect a config or reach a running svc without serving: `validate`,
 * `pipeline`, `config schema` and `reload`. ./svc.ts parses the arguments and calls them; each
 * resolves to the process exit code.
 */
import { existsSync } from 'node:fs';
import { editorConfigSchema } from '../config/editor-schema.ts';
import { normalizedForPrint, renderNormalized } from '../config/from-erpc.ts';
import type { SchemaFragment } from '../config/schema.ts';
import { createLogger } from '../lib/logger.ts';
import { redactText } from '../lib/redact.ts';
import { createProxy } from '../core/host/create.ts';
import { renderPipeline } from '../core/pipeline/pipeline.ts';
import { findPreset, loadRaw, printProblems, withEndpoints } from './cli-config.ts';

/**
 * `svc validate --config FILE [--preset NAME]`: checks the config against the core schema plus
 * the fragments of the preset's plugins (and their `configured` checks); prints `ok` (exit 0)
 * or every problem with its path (exit 1).
 */
export async function validate(file: string | undefined, presetName: string | undefined, opts: { print: boolean; fromErpc: boolean }): Promise<number> {
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
export async function pipeline(file: string | undefined, presetName: string | undefined, networkId: string | undefined, endpoints: string[]): Promise<number> {
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
export async function configSchema(sub: string | undefined, file: string | undefined, presetName: string | undefined): Promise<number> {
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

/**
 * `svc reload`: SIGHUP to a pid, or `svc_reloadConfig` through a running svc's `/admin`
 * (printing what changed, exit 1 when the config was refused).
 */
export async function reload(pid: string | undefined, url: string | undefined, token: string | undefined): Promise<number> {
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
