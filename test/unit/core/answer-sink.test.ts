/**
 * Reading an upstream answer straight from undici's dispatcher (core/registry/answer-sink.ts), spec §8: the answer within
 * `maxResponseSize` (declared or streamed), a truncated body, the process's response-bytes budget, and the call's signal. Every
 * outcome leaves the budget as it found it once the caller released what it kept.
 */
import { expect } from 'chai';
import { RESPONSE_BYTES } from '../../../lib/body.ts';
import { fetchAnswer } from '../../../core/registry/answer-sink.ts';
import { answerServer, type Answers } from '../../helpers/answer-server.ts';
import { ErrResponseBytesInFlightExceeded, ErrUpstreamMalformedResponse } from '../../../core/wire/errors.ts';

/** How the test upstream answers `/<case>`. */
const ANSWERS: Answers = {
  ok: (res) => res.writeHead(200, { 'content-length': '11' }).end('{"ok":true}'),
  chunked: (res) => {
    res.writeHead(200);
    res.write('{"a":');
    res.end('1}');
  },
  'declared-big': (res) => res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000)),
  'streamed-big': (res) => {
    res.writeHead(200);
    for (let i = 0; i < 10; i++) res.write('y'.repeat(500));
    res.end();
  },
  truncated: (res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('{"short":');
    setTimeout(() => res.socket?.destroy(), 10);
  },
  hang: () => {},
};

describe('upstream answers read from the dispatcher (spec §8: maxResponseSize, response bytes in flight)', () => {
  const pool = answerServer(ANSWERS);

  const get = (path: string, limit = 1000, signal = new AbortController().signal) =>
    fetchAnswer(pool(), { path: `/${path}`, method: 'GET' }, signal, limit, 'up1');

  it('an answer within the limit: its status and bytes, declared or chunked; the budget holds exactly its length until released', async () => {
    const before = RESPONSE_BYTES.inFlight;
    const a = await get('ok');
    expect(a.status).to.equal(200);
    expect(a.bytes.toString()).to.equal('{"ok":true}');
    expect(RESPONSE_BYTES.inFlight - before).to.equal(a.bytes.length);
    RESPONSE_BYTES.release(a.bytes.length);
    const c = await get('chunked');
    expect(c.bytes.toString()).to.equal('{"a":1}');
    expect(RESPONSE_BYTES.inFlight - before).to.equal(c.bytes.length);
    RESPONSE_BYTES.release(c.bytes.length);
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('an answer over maxResponseSize fails naming the limit, whether declared or streamed, and keeps nothing in the budget', async () => {
    const before = RESPONSE_BYTES.inFlight;
    for (const path of ['declared-big', 'streamed-big']) {
      const err = await get(path, 1000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, path).to.be.instanceOf(ErrUpstreamMalformedResponse);
      expect((err as Error).message, path).to.include('maxResponseSize (1000 bytes');
      expect(RESPONSE_BYTES.inFlight, path).to.equal(before);
    }
  });

  it('a body cut short of its declared length fails and gives its bytes back', async () => {
    const before = RESPONSE_BYTES.inFlight;
    const err = await get('truncated').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error);
    expect(RESPONSE_BYTES.inFlight).to.equal(before);
  });

  it('over server.maxResponseBytesInFlight the answer is refused with ErrResponseBytesInFlightExceeded', async () => {
    RESPONSE_BYTES.limit = RESPONSE_BYTES.inFlight + 5;
    const err = await get('ok').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(ErrResponseBytesInFlightExceeded);
  });

  it("the call's signal aborts the request with its reason, before or while it is in flight", async () => {
    const early = new AbortController();
    early.abort(new Error('gone before'));
    expect(await get('ok', 1000, early.signal).catch((e: Error) => e.message)).to.equal('gone before');
    const late = new AbortController();
    const pending = get('hang', 1000, late.signal).catch((e: Error) => e.message);
    setTimeout(() => late.abort(new Error('gone while waiting')), 20);
    expect(await pending).to.equal('gone while waiting');
  });
});
