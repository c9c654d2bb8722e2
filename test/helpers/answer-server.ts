/**
 * The test upstream of the answer-sink tests: a node:http server answering `/<case>` as `answers` says, an undici pool to it, and the
 * response-bytes budget's limit put back after each test (a test may lower it). Call inside a `describe`.
 */
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { RESPONSE_BYTES } from '../../lib/body.ts';

/** How the test upstream answers `/<case>`. */
export type Answers = Record<string, (res: ServerResponse) => void>;

/** @returns the pool to the test upstream (set once the suite's `before` ran) */
export function answerServer(answers: Answers): () => Pool {
  let server: Server;
  let pool: Pool;
  const budgetLimit = RESPONSE_BYTES.limit;
  before(async () => {
    server = createServer((req, res) => answers[(req.url ?? '/').slice(1)]?.(res));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    RESPONSE_BYTES.limit = budgetLimit;
    await pool.destroy();
    server.closeAllConnections();
    server.close();
  });
  afterEach(() => {
    RESPONSE_BYTES.limit = budgetLimit;
  });
  return () => pool;
}
