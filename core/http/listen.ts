/**
 * The listener of the proxy port: Node's HTTP server, or its HTTPS server with `server.tls`, from `server.*` around the request
 * listener, closed with a bounded grace for busy connections.
 */
import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import type { ResolvedConfig, ResolvedServerTls } from '../../config/types.ts';
import { httpServerOptions } from './http-io.ts';

/** Time busy connections get after `close()` before they are cut, ms. */
const CLOSE_GRACE_MS = 2000;

/**
 * Binds the proxy port (0: any free one) with the `server.*` timeouts, header limits and `maxConnections` around the request listener;
 * HTTPS when `server.tls` is set (WebSocket upgrades then arrive over TLS: WSS).
 * @throws (rejects with) the bind error, e.g. EADDRINUSE; a {@link TlsFileError} when a TLS file cannot be read or loaded
 */
export function listen(handler: RequestListener, server: ResolvedConfig['server'], host: string, port: number): Promise<Server> {
  let s: Server;
  try {
    s = server.tls ? createHttpsServer({ ...httpServerOptions(server), ...tlsOptions(server.tls) }, handler) : createServer(httpServerOptions(server), handler);
  } catch (e) {
    return Promise.reject(e);
  }
  // Node's own limits, not a timer per socket: 0 = unlimited.
  if (server.maxConnections > 0) s.maxConnections = server.maxConnections;
  return new Promise<Server>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, host, () => resolve(s));
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

/** Stops accepting, closes idle connections at once and busy ones after {@link CLOSE_GRACE_MS}. Never rejects. */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections?.();
    setTimeout(() => {
      server.closeAllConnections?.();
      resolve();
    }, CLOSE_GRACE_MS).unref();
  });
}
