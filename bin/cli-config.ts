/**
 * The config steps every `svc` command shares: reading the config file (with the CLI's endpoints
 * added to project `main`), finding the preset to run, and printing load problems redacted.
 */
import { dirname, resolve } from 'node:path';
import { cloneConfig, ConfigError, readConfigFile } from '../config/load.ts';
import type { ProjectInput, SvcConfigInput } from '../config/types.ts';
import { redactText } from '../lib/redact.ts';
import { resolvePreset, type ResolvedPreset } from '../presets/index.ts';

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

/**
 * The raw config of a file, `{}` without one.
 * @param fresh import a module config anew (config reload)
 */
export async function loadRaw(file: string | undefined, fresh = false): Promise<SvcConfigInput> {
  if (!file) return {};
  const raw = await readConfigFile(file, { fresh });
  return (raw ?? {}) as SvcConfigInput;
}

/** Prints start-up problems, redacted: a config parse error may quote a line holding a secret. */
export function printProblems(e: unknown): void {
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
export function findPreset(cliName: string | undefined, raw: SvcConfigInput, configFile: string | undefined): Promise<ResolvedPreset> {
  if (cliName) return resolvePreset(cliName, { from: process.cwd() });
  if (raw.preset) return resolvePreset(raw.preset, { from: configFile ? [dirname(resolve(configFile)), process.cwd()] : process.cwd() });
  return resolvePreset('default');
}
