/**
 * The WebSocket upgrade (spec §4.1 paths, §5 auth): an upgrade request is routed like an HTTP
 * POST (`/<project>/evm/<chainId>`, `/<project>/<alias>`, `/<project>`, aliasing rules on the
 * Host), refused with 503 unless svc is serving, with 403 when a browser page's `Origin` is not
 * one the project's CORS allows (spec §2.5: what `fetch` may not read, a socket may not either;
 * no `Origin`, as non-browser clients send, or the svc host's own origin passes), and authenticated with the project's strategies
 * (credentials in headers or the query) before anything is upgraded. A refusal is a plain HTTP
 * response with a JSON-RPC error body written on the raw socket, so the socket never opens.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { HttpRequestInfo, Identity, PluginHost, RouteTarget } from 'svc-proxy/plugin';
import { asSvcError, ErrProjectNotFound, ErrServiceShuttingDown, SvcError, toJsonRpcError } from 'svc-proxy/plugin/errors';
import { CORS_SERVICE } from 'svc-proxy/plugins/cors';
import type { AsyncSeriesHook } from 'tapable';
import type { WsUpgrade } from './api.ts';

/** A browser page's `Origin` the project's CORS does not allow (spec §2.5). HTTP 403, -32600. */
export class ErrOriginNotAllowed extends SvcError {
  static override readonly defaultCode = -32600;
  static override readonly httpStatus = 403;
}

/** A routed, authenticated upgrade request, ready to be upgraded. */
export interface AcceptedUpgrade {
  /** Project and network the path names. */
  target: RouteTarget;
  /** Headers, query, client address (with the routed network set). */
  info: HttpRequestInfo;
  /** The authenticated caller, when the project has strategies. */
  identity?: Identity;
}

/** Reason phrases of the statuses an upgrade may be refused with. */
const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  413: 'Payload Too Large',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/**
 * Decides an upgrade request: routes it, checks the lifecycle, runs the `authenticate` hook.
 * @param host the plugin host
 * @param req the upgrade request
 * @param othersListen whether another `upgrade` listener is on the server (then a path that names
 *   no project is left to it)
 * @param upgrade the service's `upgrade` hook, run last (the accepted upgrade is its `session`)
 * @returns the accepted upgrade; `'not-ours'` for a path that names no project while another
 *   listener may serve it
 * @throws SvcError the refusal (its `httpStatus` is the response status)
 */
export async function admitUpgrade(
  host: PluginHost,
  req: IncomingMessage,
  othersListen: boolean,
  upgrade: AsyncSeriesHook<[WsUpgrade]>,
): Promise<AcceptedUpgrade | 'not-ours'> {
  const info = host.requestInfoOf(req);
  let target: RouteTarget;
  try {
    target = await host.resolveRoute(info.path, info.host);
  } catch (e) {
    if (othersListen && e instanceof ErrProjectNotFound) return 'not-ours';
    throw e;
  }
  if (host.lifecycle !== 'serving') throw new ErrServiceShuttingDown('svc is shutting down: connect to another replica');
  const origin = req.headers.origin;
  if (origin !== undefined && !originAllowed(host, target.project.id, origin, req.headers.host)) {
    throw new ErrOriginNotAllowed("origin not allowed: add it to the project's cors.allowedOrigins");
  }
  info.networkId = target.network?.id;
  const hooks = host.hooks;
  const identity = hooks.authenticate.isUsed() ? await hooks.authenticate.promise(info, target.project) : undefined;
  const accepted: AcceptedUpgrade = { target, info, identity };
  if (upgrade.isUsed()) {
    const u: WsUpgrade = { project: target.project, network: target.network, http: info, identity, session: accepted };
    await upgrade.promise(u);
    accepted.identity = u.identity;
  }
  return accepted;
}

/**
 * Whether an upgrade's `Origin` may open a socket: the svc host's own origin (same-origin), or
 * one the project's CORS allows (the cors plugin's `allowsOrigin`; without that plugin, none).
 * @param origin the `Origin` header as sent
 * @param hostHeader the `Host` header
 */
function originAllowed(host: PluginHost, projectId: string, origin: string, hostHeader: string | undefined): boolean {
  if (hostHeader !== undefined && sameHost(origin, hostHeader)) return true;
  return host.services.get(CORS_SERVICE)?.allowsOrigin(projectId, origin) ?? false;
}

/** Whether `origin` (`scheme://host[:port]`) names the host of the `Host` header. */
function sameHost(origin: string, hostHeader: string): boolean {
  const sep = origin.indexOf('://');
  return sep > 0 && origin.slice(sep + 3).toLowerCase() === hostHeader.toLowerCase();
}

/**
 * Writes a refusal on the raw socket as an HTTP response (status from the error, a JSON-RPC error
 * body with id null) and ends the socket once it is written.
 * @param socket the upgrade request's socket
 * @param e what refused the upgrade
 * @param version svc's version (the `X-SVC-Version` header every response carries)
 * @param includeDetails `server.includeErrorDetails`
 */
export function refuseUpgrade(socket: Duplex, e: unknown, version: string, includeDetails: boolean): void {
  const err: SvcError = asSvcError(e);
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const wire = toJsonRpcError(err, undefined, includeDetails);
  // A refusal with an answer of its own (a payment challenge) is written as it is, with its headers.
  const body =
    err.answer?.body ??
    `{"jsonrpc":"2.0","id":null,"error":${wire.raw ?? JSON.stringify(wire.data === undefined ? { code: wire.code, message: wire.message } : { code: wire.code, message: wire.message, data: wire.data })}}`;
  const extra = err.answer
    ? Object.entries(err.answer.headers)
        .map(([n, v]) => `${n}: ${v}\r\n`)
        .join('')
    : '';
  const status = err.httpStatus >= 400 ? err.httpStatus : 400;
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n` +
      'Connection: close\r\n' +
      'Content-Type: application/json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-SVC-Version: ${version}\r\n` +
      extra +
      '\r\n' +
      body,
  );
}
