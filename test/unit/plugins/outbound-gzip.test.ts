/**
 * Gzip answers of upstreams with `jsonRpc.enableGzip` (the outbound plugin's dispatcher, read by core's answer reader): decompressed
 * within `maxResponseSize` and the response-bytes budget chunk by chunk, so a zip bomb stops at the limit; a body that does not inflate and an encoding svc did not ask
 * for fail as malformed answers; an answer without an encoding is read as is. Every outcome leaves the budget as it found it once the
 * caller released what it kept.
 */
import { gzipSync } from 'node:zlib';
import type { Dispatcher } from 'undici';
import { expect } from 'chai';
import { RESPONSE_BYTES } from '../../../lib/body.ts';
import { fetchAnswer } from '../../../core/registry/answer-sink.ts';
import { GzipDispatcher } from '../../../plugins/outbound/gzip.ts';
import { answerServer, type Answers } from '../../helpers/answer-server.ts';
import { ErrResponseBytesInFlightExceeded, ErrUpstreamMalformedResponse } from '../../../core/wire/errors.ts';

const JSON_TEXT = `{"jsonrpc":"2.0","id":1,"result":"0x${'ab'.repeat(2000)}"}`;
/** 8 MiB of one byte: about 8 KiB gzipped. */
const BOMB = gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x30));
const SLOW = gzipSync(Buffer.alloc(256 * 1024 * 1024, 0x30));

const ANSWERS: Answers = {
  gzip: (res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync(JSON_TEXT)),
  'x-gzip-declared': (res) => {
    const z = gzipSync(JSON_TEXT);
    res.writeHead(200, { 'content-encoding': 'X-Gzip', 'content-length': String(z.length) }).end(z);
  },
  plain: (res) => res.writeHead(200).end(JSON_TEXT),
  bomb: (res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(BOMB),
  corrupt: (res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(Buffer.concat([gzipSync(JSON_TEXT).subarray(0, 20), Buffer.from('garbage')])),
  br: (res) => res.writeHead(200, { 'content-encoding': 'br' }).end('whatever'),
  /** 2,000 empty gzip members: 40 KB on the wire that inflate to nothing. */
  empties: (res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(Buffer.concat(Array.from({ length: 2000 }, () => gzipSync('')))),
  /** 256 MiB of one byte, about 256 KiB gzipped: inflating it takes far longer than receiving it. */
  slow: (res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(SLOW),
  echo: (res) => res.writeHead(200).end(JSON_TEXT),
};

describe('gzip answers (jsonRpc.enableGzip): decompressed within maxResponseSize and the response-bytes budget', () => {
  const pool = answerServer(ANSWERS);

  const get = (path: string, limit = 1024 * 1024) =>
    fetchAnswer(new GzipDispatcher(pool(), 'up1', false), { path: `/${path}`, method: 'POST', body: '{}' }, new AbortController().signal, limit, 'up1');
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e,
    );

  it('a gzip answer (streamed or declared, any case of the name) is decompressed; the budget holds its decompressed length', async () => {
    const before = RESPONSE_BYTES.inFlight;
    for (const path of ['gzip', 'x-gzip-declared']) {
      const a = await get(path);
      expect(a.bytes.toString(), path).to.equal(JSON_TEXT);
      expect(RESPONSE_BYTES.inFlight - before, path).to.equal(JSON_TEXT.length);
      RESPONSE_BYTES.release(a.bytes.length);
    }
    const plain = await get('plain');
    expect(plain.bytes.toString()).to.equal(JSON_TEXT);
    RESPONSE_BYTES.release(plain.bytes.length);
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('a zip bomb fails at maxResponseSize once decompressed, as a larger answer does, and keeps nothing in the budget', async () => {
    const before = RESPONSE_BYTES.inFlight;
    const err = await failure(get('bomb', 64 * 1024));
    expect(err).to.be.instanceOf(ErrUpstreamMalformedResponse);
    expect((err as Error).message).to.include('maxResponseSize (65536 bytes; over 65536 bytes)');
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('decompressed bytes count in server.maxResponseBytesInFlight', async () => {
    const before = RESPONSE_BYTES.inFlight;
    RESPONSE_BYTES.limit = before + 100 * 1024;
    const err = await failure(get('bomb', 64 * 1024 * 1024));
    expect(err).to.be.instanceOf(ErrResponseBytesInFlightExceeded);
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('a body that does not inflate, and an encoding svc did not ask for, fail as malformed answers and give their bytes back', async () => {
    const before = RESPONSE_BYTES.inFlight;
    const corrupt = await failure(get('corrupt'));
    expect(corrupt).to.be.instanceOf(ErrUpstreamMalformedResponse);
    expect((corrupt as Error).message).to.include('gzip body that does not decompress');
    const br = await failure(get('br'));
    expect(br).to.be.instanceOf(ErrUpstreamMalformedResponse);
    expect((br as Error).message).to.include('Content-Encoding "br", which svc did not ask for');
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('compressed bytes count against maxResponseSize too: a body that inflates to nothing stops at the limit', async () => {
    const before = RESPONSE_BYTES.inFlight;
    const err = await failure(get('empties', 1024));
    expect(err).to.be.instanceOf(ErrUpstreamMalformedResponse);
    expect((err as Error).message).to.include('maxResponseSize (1024 bytes; over 1024 bytes compressed)');
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('an abort while the answer is still inflating (undici already has the whole body) ends the call at once and gives the budget back', async () => {
    const before = RESPONSE_BYTES.inFlight;
    const ac = new AbortController();
    const reason = new Error('the call was aborted');
    const p = failure(
      fetchAnswer(new GzipDispatcher(pool(), 'up1', false), { path: '/slow', method: 'POST', body: '{}' }, ac.signal, 512 * 1024 * 1024, 'up1'),
    );
    // Abort once inflated bytes reach the reader.
    while (RESPONSE_BYTES.inFlight === before) await new Promise((r) => setImmediate(r));
    ac.abort(reason);
    expect(await p).to.equal(reason);
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('an abort while the request body is being gzipped: the request is never sent', async () => {
    let seen = 0;
    const counting = {
      dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
        seen++;
        return pool().dispatch(opts, handler);
      },
    };
    const ac = new AbortController();
    const reason = new Error('gone before sending');
    const body = Buffer.alloc(8 * 1024 * 1024, 0x31);
    const p = failure(fetchAnswer(new GzipDispatcher(counting, 'up1', false), { path: '/echo', method: 'POST', body }, ac.signal, 1024 * 1024, 'up1'));
    ac.abort(reason);
    expect(await p).to.equal(reason);
    expect(seen, 'requests dispatched').to.equal(0);
  });
});
