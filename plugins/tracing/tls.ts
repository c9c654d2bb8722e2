/**
 * eRPC's `tracing.tls` block: TLS of the OTLP exporter (both transports). With `enabled`, the
 * exporter speaks TLS to the collector (eRPC's `host:port` endpoint becomes `https://`),
 * verifying it against `caFile` (else the system CAs), presenting `certFile`/`keyFile` for
 * mutual TLS, or skipping verification with `insecureSkipVerify`. The files are read once, when
 * the config is loaded, so `svc validate` names an unreadable one.
 */
import { readFileSync, statSync } from 'node:fs';
import { Strict, Type } from 'svc-proxy/plugin';
import type { ConfigProblem } from 'svc-proxy/plugin/errors';

/** Largest PEM file read, bytes (a certificate chain is a few KiB). */
export const MAX_PEM_BYTES = 1024 * 1024;

/** Schema of `tracing.tls`. */
export const tlsSchema = Strict(
  {
    enabled: Type.Optional(Type.Boolean({ default: false, description: 'export over TLS (a host:port endpoint becomes https://)' })),
    certFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM client certificate for mutual TLS (with keyFile)' })),
    keyFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM private key of certFile' })),
    caFile: Type.Optional(Type.String({ minLength: 1, description: "PEM CA the collector's certificate must chain to (default: the system CAs)" })),
    insecureSkipVerify: Type.Optional(
      Type.Boolean({ default: false, description: "do not verify the collector's certificate (development only); a client certificate is still sent" }),
    ),
  },
  { description: "TLS of the OTLP exporter (eRPC's tracing.tls)" },
);

/** The TLS material of the exporter, files read. */
export interface TracingTls {
  /** PEM CA certificates to trust instead of the system ones. */
  ca?: string;
  /** PEM client certificate (mutual TLS). */
  cert?: string;
  /** PEM key of {@link cert}. */
  key?: string;
  /** Skip verifying the collector's certificate. */
  insecureSkipVerify: boolean;
}

function readPem(path: string, key: string, problems: ConfigProblem[]): string | undefined {
  try {
    if (statSync(path).size > MAX_PEM_BYTES) {
      problems.push({ path: `tracing.tls.${key}`, message: `${path} is larger than ${MAX_PEM_BYTES} bytes` });
      return undefined;
    }
    return readFileSync(path, 'utf8');
  } catch (e) {
    problems.push({ path: `tracing.tls.${key}`, message: `cannot read ${path}: ${(e as Error).message}` });
    return undefined;
  }
}

/**
 * Reads `tracing.tls` when it is enabled.
 * @param raw the `tls` block (validated by {@link tlsSchema}), or undefined
 * @param problems where an unreadable file, or a certificate without its key (or the reverse), is reported under its key
 * @returns the material, or undefined when TLS is not enabled
 */
export function readTracingTls(raw: unknown, problems: ConfigProblem[]): TracingTls | undefined {
  const t = (raw ?? {}) as { enabled?: boolean; certFile?: string; keyFile?: string; caFile?: string; insecureSkipVerify?: boolean };
  if (!t.enabled) return undefined;
  // eRPC skips mutual TLS silently when one half is missing; a half-written pair is a mistake worth naming.
  if ((t.certFile === undefined) !== (t.keyFile === undefined))
    problems.push({
      path: t.certFile === undefined ? 'tracing.tls.certFile' : 'tracing.tls.keyFile',
      message: 'certFile and keyFile go together (mutual TLS)',
    });
  const out: TracingTls = { insecureSkipVerify: t.insecureSkipVerify ?? false };
  if (t.caFile !== undefined) out.ca = readPem(t.caFile, 'caFile', problems);
  if (t.certFile !== undefined && t.keyFile !== undefined) {
    out.cert = readPem(t.certFile, 'certFile', problems);
    out.key = readPem(t.keyFile, 'keyFile', problems);
  }
  return out;
}
