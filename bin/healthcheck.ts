/**
 * `svc healthcheck`: the container's health probe (the Dockerfile's HEALTHCHECK). It asks the
 * running svc's `GET /healthcheck` on the port the config names, so an image whose config moves
 * `server.httpPort` stays healthy without editing the Dockerfile. The port is `--port`, else the
 * config file's `server.httpPort` (`${VAR}` expanded), else the schema default; without
 * `--config`, ./svc.yaml when it exists, as `svc start` reads it.
 */
import { existsSync } from 'node:fs';
import { expandEnv, readConfigFile } from '../config/load.ts';
import { CoreConfigSchema } from '../config/schema.ts';
import { redactText } from '../lib/redact.ts';

/** How long the probe waits for an answer, ms (below the Dockerfile's 3 s HEALTHCHECK timeout). */
const PROBE_TIMEOUT_MS = 2500;

/** The schema default of `server.httpPort` (4000). */
function defaultPort(): number {
  const server = (CoreConfigSchema as unknown as { properties: Record<string, { properties: Record<string, { default?: unknown }> }> }).properties.server;
  return Number(server?.properties.httpPort?.default ?? 4000);
}

/**
 * The port svc serves on, as the config says.
 * @param file the config file, or undefined for ./svc.yaml when present
 * @param port `--port`, which wins
 * @throws ConfigError when the file cannot be read or parsed
 */
export async function configuredPort(file: string | undefined, port: number | undefined): Promise<number> {
  if (port !== undefined) return port;
  const path = file ?? (existsSync('svc.yaml') ? 'svc.yaml' : undefined);
  if (!path) return defaultPort();
  const raw = expandEnv(await readConfigFile(path), []) as { server?: { httpPort?: unknown; httpPortV4?: unknown } } | undefined;
  const v = Number(raw?.server?.httpPort ?? raw?.server?.httpPortV4 ?? Number.NaN);
  return Number.isInteger(v) && v > 0 && v <= 65535 ? v : defaultPort();
}

/**
 * Probes `GET http://127.0.0.1:<port>/healthcheck` once.
 * @returns 0 when it answers 2xx, 1 otherwise (503 while draining or unhealthy, refused, timed out)
 */
export async function healthcheck(file: string | undefined, port: number | undefined): Promise<number> {
  let target: number;
  try {
    target = await configuredPort(file, port);
  } catch (e) {
    process.stderr.write(`svc healthcheck: ${redactText((e as Error).message)}\n`);
    return 1;
  }
  try {
    const res = await fetch(`http://127.0.0.1:${target}/healthcheck`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const text = await res.text();
    process.stdout.write(`${res.status} ${text.slice(0, 200)}\n`);
    return res.ok ? 0 : 1;
  } catch (e) {
    process.stderr.write(`svc healthcheck: port ${target}: ${redactText((e as Error).message)}\n`);
    return 1;
  }
}
