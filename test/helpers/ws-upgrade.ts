/**
 * A refused WebSocket upgrade as a test sees it: svc answers the upgrade request with an HTTP
 * status and a JSON-RPC body before any socket opens (spec §4.1 over WebSocket).
 */
import type WebSocket from 'ws';

/** The error a refused upgrade rejects with: the HTTP status and the body svc sent. */
export type RefusedUpgrade = Error & { status: number | undefined; body: string };

/**
 * Rejects with a {@link RefusedUpgrade} when the server answers the upgrade with a plain HTTP
 * response instead of switching protocols.
 * @param ws the client socket, before it opens
 * @param reject the pending connect's reject
 */
export function rejectRefusedUpgrade(ws: WebSocket, reject: (e: RefusedUpgrade) => void): void {
  ws.once('unexpected-response', (_req, res) => {
    let body = '';
    res.on('data', (c: Buffer) => (body += c.toString()));
    res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, body })));
  });
}
