/**
 * A bare JSON-RPC server for unit tests that need an upstream with one odd behaviour (a count of
 * its own, a delay, headers to record): node:http on 127.0.0.1, each request body parsed as JSON
 * and handed to `answer` with the request and a `reply` that writes one JSON answer (HTTP 200).
 * Not calling `reply` leaves the request hanging (a node that never answers).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running fake server. */
export interface FakeRpc {
  url: string;
  close(): Promise<void>;
}

/**
 * Starts a fake JSON-RPC server.
 * @param answer called once per request with the parsed body (a call or a batch array)
 */
export async function startFakeRpc(answer: (body: unknown, req: IncomingMessage, reply: (payload: unknown) => void) => void): Promise<FakeRpc> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      answer(body, req, (payload) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(payload)));
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
