/**
 * tls plugin (eRPC's `server.tls`): the proxy port serves HTTPS, and WSS on the WebSocket endpoint, from PEM files read once at start;
 * TLS 1.2 at least, and with `caFile` mutual TLS. Taps `httpServer`, asked once when svc listens; with `server.tls` unset, core's plain
 * HTTP server serves.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { definePlugin, type Plugin, type PluginHost, type ResolvedServerTls } from 'svc-proxy/plugin';

/** @returns the plugin serving the proxy port over TLS when `server.tls` is enabled */
export function tlsPlugin(): Plugin {
  return definePlugin({
    name: 'tls',
    apply(host: PluginHost) {
      host.hooks.httpServer.tap('tls', (server, options, listener) =>
        server.tls ? createServer({ ...options, ...tlsOptions(server.tls) }, listener) : undefined,
      );
    },
  });
}

/** A `server.tls` file that cannot be read, or whose PEM cannot be loaded; the message names the key and the file. */
export class TlsFileError extends Error {
  override readonly name = 'TlsFileError';
}

/** Longest TLS file read, bytes: a certificate chain or a CA bundle is kilobytes; a path to a large file is a mistake. */
const MAX_TLS_FILE_BYTES = 1024 * 1024;

function readPem(key: 'certFile' | 'keyFile' | 'caFile', path: string): Buffer {
  let b: Buffer;
  try {
    b = readFileSync(path);
  } catch (e) {
    throw new TlsFileError(`server.tls.${key}: cannot read ${path}: ${(e as Error).message}`);
  }
  if (b.length > MAX_TLS_FILE_BYTES) throw new TlsFileError(`server.tls.${key}: ${path} is ${b.length} bytes, over ${MAX_TLS_FILE_BYTES}: not a PEM file`);
  if (!b.includes('-----BEGIN ')) throw new TlsFileError(`server.tls.${key}: ${path} holds no PEM block (-----BEGIN ...)`);
  return b;
}

/**
 * The TLS options of the proxy port from the PEM files: TLS 1.2 at least (eRPC's minimum too), and with `caFile` mutual TLS: a client
 * without a certificate signed by one of its CAs fails the handshake. Loaded once here, so a bad file stops the start with its key named.
 * @throws TlsFileError naming the key and file
 */
export function tlsOptions(tls: ResolvedServerTls): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean } {
  const opts: SecureContextOptions = { cert: readPem('certFile', tls.certFile), key: readPem('keyFile', tls.keyFile), minVersion: 'TLSv1.2' };
  if (tls.caFile !== undefined) opts.ca = readPem('caFile', tls.caFile);
  try {
    createSecureContext(opts);
  } catch (e) {
    const files = `certFile ${tls.certFile}, keyFile ${tls.keyFile}${tls.caFile !== undefined ? `, caFile ${tls.caFile}` : ''}`;
    throw new TlsFileError(`server.tls: cannot load the certificate, key or CAs (${files}): ${(e as Error).message}`);
  }
  return { ...opts, requestCert: tls.caFile !== undefined, rejectUnauthorized: tls.caFile !== undefined };
}
