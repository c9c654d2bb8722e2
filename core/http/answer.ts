/**
 * The one way a proxy answer (call, batch, refusal, drain 503, healthcheck) reaches the client (spec §4.2, §9), past Koa's response
 * handling: status line and headers in one `writeHead`, encoded when the server's body coding applies, the body in one `end` or a stream.
 * Koa serves plugin routes only.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable, pipeline } from 'node:stream';
import vary from 'vary';
import type { BodyCoding, HeaderSink } from '../pipeline/hooks.ts';
import { answerBytes, type AnswerBody } from '../wire/jsonrpc.ts';

/**
 * The `responseHeaders` sink of a proxy answer: a flat `[name, value, …]` list written in one `writeHead`, not a `setHeader` each (Node
 * lowercases, validates and stores every one first). A second `set` of the same spelling replaces the first; an empty name is ignored.
 */
export class AnswerHeaders implements HeaderSink {
  readonly list: string[];

  /** @param statics the headers every response carries (spec §9), first in the list */
  constructor(statics: readonly string[]) {
    this.list = statics.slice();
  }

  set(name: string, value: string): void {
    if (!name) return;
    const l = this.list;
    for (let i = 0; i < l.length; i += 2) {
      if (l[i] === name) {
        l[i + 1] = value;
        return;
      }
    }
    l.push(name, value);
  }
}

/** One proxy answer: the status, the body (a string, pieces around raw result bytes, or a stream of pieces) and its headers. */
export interface ProxyAnswer {
  status: number;
  body: AnswerBody | Iterable<string | Buffer>;
  headers: AnswerHeaders;
}

/**
 * Writes an answer; headers a Koa middleware set before (CORS) are kept, `Vary` appended to. Never throws; a failing stream ends the connection.
 * @param answers the server's answer coding (`server.enableGzip`): encodes answers for clients that accept it; undefined: none
 */
export function writeAnswer(req: IncomingMessage, res: ServerResponse, a: ProxyAnswer, answers: BodyCoding['answers']): Promise<void> | undefined {
  if (res.headersSent || res.writableEnded) return undefined;
  const b = a.body;
  if (answers) {
    // Whether or not this client gets it encoded, a cache between must not serve this answer to another.
    // In the list when no middleware set a Vary (CORS): a header set on the response makes
    // `writeHead` take Node's slow path, one `setHeader` per header.
    if (res.hasHeader('Vary')) vary(res, 'Accept-Encoding');
    else a.headers.set('Vary', 'Accept-Encoding');
    if (answers.accepts(req.headers['accept-encoding']) && res.getHeader('Content-Encoding') === undefined) {
      const pieces = typeof b !== 'string' && Array.isArray(b);
      return answers.encode(typeof b === 'string' ? b : Readable.from(b), pieces ? answerBytes(b) : undefined).then((encoded) => {
        if (encoded !== undefined) a.headers.set('Content-Encoding', answers.name);
        send(res, a, encoded ?? b);
      });
    }
  }
  send(res, a, b);
  return undefined;
}

/** Status line, headers (with the length when known) and body. */
function send(res: ServerResponse, a: ProxyAnswer, body: ProxyAnswer['body'] | Buffer | Readable): void {
  if (res.headersSent || res.writableEnded) return;
  const bytes = typeof body === 'string' ? Buffer.byteLength(body) : Buffer.isBuffer(body) ? body.length : Array.isArray(body) ? answerBytes(body) : undefined;
  // A 204 carries no body and no length (RFC 9110 §8.6).
  if (bytes !== undefined && a.status !== 204) a.headers.list.push('Content-Length', String(bytes));
  res.writeHead(a.status, a.headers.list);
  if (a.status === 204) res.end();
  else if (typeof body === 'string' || Buffer.isBuffer(body)) res.end(body);
  else if (Array.isArray(body)) {
    // Pieces already in memory (raw result bytes between their framing): written as they are.
    for (const p of body) res.write(p);
    res.end();
  } else pipeline(body instanceof Readable ? body : Readable.from(body), res, () => undefined);
}
