/**
 * `svc healthcheck`: the container's health probe (the Dockerfile's HEALTHCHECK). It asks the
 * running svc's `GET /healthcheck` on the port the config names, so an image whose config moves
 * `server.httpPort` stays healthy without editing the Dockerfile. The port is `--port`, else the
 * config file's `server.httpPort` (`${VAR}` expanded), else the schema default; without
 * `--config`, ./svc.yaml when it exists, as `svc start` reads it.
 */
import { existsSync } from 'node:fs';
import { Agent, fetch as undiciFetch } from 'undici';
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
  return (await probeTarget(file, port)).port;
}

/**
 * The port svc serves on and whether it serves TLS there (`server.tls.enabled`), as the config says.
 * @throws ConfigError when the file cannot be read or parsed
 */
async function probeTarget(file: string | undefined, port: number | undefined): Promise<{ port: number; tls: boolean }> {
  const path = file ?? (existsSync('svc.yaml') ? 'svc.yaml' : undefined);
  if (!path) return { port: port ?? defaultPort(), tls: false };
  type Raw = { server?: { httpPort?: unknown; httpPortV4?: unknown; tls?: { enabled?: unknown } } } | undefined;
  let raw: Raw;
  try {
    raw = expandEnv(await readConfigFile(path), []) as Raw;
  } catch (e) {
    // `--port` needs no file: an unreadable one only leaves TLS unknown (plain HTTP, as before TLS existed).
    if (port !== undefined) return { port, tls: false };
    throw e;
  }
  const tls = raw?.server?.tls?.enabled === true || raw?.server?.tls?.enabled === 'true';
  if (port !== undefined) return { port, tls };
  const v = Number(raw?.server?.httpPort ?? raw?.server?.httpPortV4 ?? Number.NaN);
  return { port: Number.isInteger(v) && v > 0 && v <= 65535 ? v : defaultPort(), tls };
}

/**
 * Probes `GET http://127.0.0.1:<port>/healthcheck` once (`https://` with `server.tls`: svc probing itself on the loopback checks that
 * it serves, not who it is, so its certificate is not verified; with `caFile` (mutual TLS) the probe has no client certificate and
 * fails: probe such a svc with a client certificate of your own).
 * @returns 0 when it answers 2xx, 1 otherwise (503 while draining or unhealthy, refused, timed out)
 */
export async function healthcheck(file: string | undefined, port: number | undefined): Promise<number> {
  let target: number;
  let tls: boolean;
  try {
    ({ port: target, tls } = await probeTarget(file, port));
  } catch (e) {
    process.stderr.write(`svc healthcheck: ${redactText((e as Error).message)}\n`);
    return 1;
  }
  try {
    const signal = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    const res = tls
      ? await undiciFetch(`https://127.0.0.1:${target}/healthcheck`, { signal, dispatcher: new Agent({ connect: { rejectUnauthorized: false } }) })
      : await fetch(`http://127.0.0.1:${target}/healthcheck`, { signal });
    const text = await res.text();
    process.stdout.write(`${res.status} ${text.slice(0, 200)}\n`);
    return res.ok ? 0 : 1;
  } catch (e) {
    process.stderr.write(`svc healthcheck: port ${target}: ${redactText((e as Error).message)}\n`);
    return 1;
  }
}
