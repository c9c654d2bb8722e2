/**
 * HTTP compression (`server.enableGzip`): answers over 1 KiB are gzipped for
 * clients that accept it; compressed request bodies are decoded with `server.maxBodySize` applied
 * after decompression (a zip bomb gets 413); an unknown encoding gets 415. Against anvil.
 */
import { brotliCompressSync, deflateSync, gunzipSync, gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { request } from 'undici';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';
import { minimalPreset } from '../../presets/minimal.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
}

async function post(svc: SvcHandle, body: Buffer | string, headers: Record<string, string> = {}): Promise<Raw> {
  const r = await request(`${svc.url}${PATH}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  return { status: r.statusCode, headers: r.headers, bytes: Buffer.from(await r.body.arrayBuffer()) };
}
const json = (r: Raw) => JSON.parse((r.headers['content-encoding'] === 'gzip' ? gunzipSync(r.bytes) : r.bytes).toString()) as any;

describe('e2e: HTTP compression (server.enableGzip)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let svc: SvcHandle;
  let off: SvcHandle;
  const config = (enableGzip?: boolean) => ({
    logLevel: 'error',
    server: { maxBodySize: '1MiB', ...(enableGzip === undefined ? {} : { enableGzip }) },
    projects: [
      { id: 'main', networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }], upstreams: [{ id: 'anvil', endpoint: anvil.url, evm: { chainId: CHAIN } }] },
    ],
  });
  const block = (id: number | string = 1) => JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_getBlockByNumber', params: ['0x0', false] });

  before(async () => {
    anvil = await startAnvil();
    svc = await startSvc(config());
    off = await startSvc(config(false));
  });
  after(async () => {
    await svc?.close();
    await off?.close();
    await anvil?.stop();
  });

  describe('answers', () => {
    it('an answer over 1 KiB is gzipped when the client accepts gzip; it decodes to the same answer', async () => {
      const plain = await post(svc, block());
      expect(plain.headers['content-encoding']).to.equal(undefined);
      expect(plain.bytes.length).to.be.above(1024);
      const zipped = await post(svc, block(), { 'accept-encoding': 'gzip, deflate, br' });
      expect(zipped.headers['content-encoding']).to.equal('gzip');
      expect(zipped.headers.vary).to.match(/Accept-Encoding/i);
      expect(zipped.bytes.length).to.be.below(plain.bytes.length);
      expect(json(zipped)).to.deep.equal(json(plain));
    });

    it('a small answer is not compressed; q=0 refuses gzip; a batch answer is gzipped as a stream', async () => {
      const small = await post(svc, '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}', { 'accept-encoding': 'gzip' });
      expect(small.headers['content-encoding']).to.equal(undefined);
      expect(small.headers.vary).to.match(/Accept-Encoding/i);
      const refused = await post(svc, block(), { 'accept-encoding': 'gzip;q=0, identity' });
      expect(refused.headers['content-encoding']).to.equal(undefined);
      const batch = `[${block(1)},${block(2)},${block(3)}]`;
      const zipped = await post(svc, batch, { 'accept-encoding': 'gzip' });
      expect(zipped.headers['content-encoding']).to.equal('gzip');
      expect((json(zipped) as Array<{ id: number }>).map((a) => a.id)).to.deep.equal([1, 2, 3]);
    });

    it('server.enableGzip: false never compresses', async () => {
      const r = await post(off, block(), { 'accept-encoding': 'gzip' });
      expect(r.headers['content-encoding']).to.equal(undefined);
      expect(json(r).result.number).to.equal('0x0');
    });
  });

  describe('request bodies', () => {
    it('gzip, deflate and br bodies are decoded', async () => {
      const body = Buffer.from(block(7));
      for (const [enc, bytes] of [
        ['gzip', gzipSync(body)],
        ['deflate', deflateSync(body)],
        ['br', brotliCompressSync(body)],
      ] as const) {
        const r = await post(svc, bytes, { 'content-encoding': enc });
        expect(r.status, enc).to.equal(200);
        expect(json(r).id, enc).to.equal(7);
      }
    });

    it('a zip bomb (100 MiB of zeros in about 100 KiB) stops at server.maxBodySize: 413 ErrRequestTooLarge', async () => {
      const bomb = gzipSync(Buffer.alloc(100 * 1024 * 1024));
      expect(bomb.length).to.be.below(1024 * 1024);
      const r = await post(svc, bomb, { 'content-encoding': 'gzip' });
      expect(r.status).to.equal(413);
      expect(json(r).error.data.code).to.equal('ErrRequestTooLarge');
    });

    it('an unknown Content-Encoding gets 415 ErrUnsupportedContentEncoding; a corrupt gzip body gets 400', async () => {
      const r = await post(svc, block(), { 'content-encoding': 'compress' });
      expect(r.status).to.equal(415);
      expect(json(r).error).to.deep.include({ code: -32600 });
      expect(json(r).error.data.code).to.equal('ErrUnsupportedContentEncoding');
      const bad = await post(svc, Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' });
      expect(bad.status).to.equal(400);
      expect(json(bad).error.data.code).to.equal('ErrInvalidRequest');
    });

    it('without the compression plugin, a compressed body gets 415 naming what to send and answers are never gzipped', async () => {
      const bare = await startSvc(config(), { plugins: minimalPreset().filter((p) => p.name !== 'compression') });
      try {
        const r = await post(bare, gzipSync(block()), { 'content-encoding': 'gzip', 'accept-encoding': 'gzip' });
        expect(r.status).to.equal(415);
        expect(json(r).error.data.code).to.equal('ErrUnsupportedContentEncoding');
        expect(json(r).error.message).to.include('send an uncompressed body');
        const big = await post(bare, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['0x0', true] }), {
          'accept-encoding': 'gzip',
        });
        expect(big.status).to.equal(200);
        expect(big.headers['content-encoding']).to.equal(undefined);
        expect(big.headers.vary).to.equal(undefined);
        expect(json(big).result.number).to.equal('0x0');
      } finally {
        await bare.close();
      }
    });
  });
});
