/**
 * `upstreams[].jsonRpc.enableGzip` (eRPC: gzip the request bodies sent upstream; answers in gzip are decompressed): svc in front of a
 * real node:http upstream that takes only gzip bodies and answers in gzip, itself in front of anvil. The config is eRPC-shaped YAML
 * (`upstreamDefaults.jsonRpc.enableGzip`, outbound batching on one upstream). A gzip answer is bounded by `maxResponseSize` once
 * decompressed: a zip bomb (a few KiB inflating to 64 MiB) fails that attempt with the too-large error, the budget of response bytes
 * comes back whole, and the next call is served. A gzip body that does not inflate fails cleanly; without `enableGzip` svc sends neither
 * `Content-Encoding` nor `Accept-Encoding`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { RESPONSE_BYTES } from '../../lib/body.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';
import { defaultPreset } from '../../presets/default.ts';

/** The 64 MiB of zeros of the bomb, compressed once (a gzip member; members concatenate into one gzip body). */
const BOMB_ZEROS = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x30), { level: 9 });

/** What the gzip upstream saw of each request. */
interface Seen {
  headers: IncomingHttpHeaders;
  method: string;
  /** Whether it came in a JSON-RPC batch. */
  batch: boolean;
}

/**
 * An upstream that requires gzip request bodies (HTTP 415 otherwise) and answers gzip to a client that asks for it. `eth_getCode` is
 * answered with a zip bomb, `eth_getStorageAt` with a broken gzip body; everything else is anvil's answer.
 */
async function startGzipUpstream(anvilUrl: string): Promise<{ url: string; server: Server; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', async () => {
      if (req.headers['content-encoding'] !== 'gzip') {
        res.writeHead(415, { 'content-type': 'application/json' });
        return void res.end('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"gzip bodies only"}}');
      }
      const text = gunzipSync(Buffer.concat(parts)).toString();
      const body = JSON.parse(text) as { id: number; method: string } | Array<{ id: number; method: string }>;
      for (const one of Array.isArray(body) ? body : [body]) seen.push({ headers: req.headers, method: one.method, batch: Array.isArray(body) });
      const gz = { 'content-type': 'application/json', 'content-encoding': 'gzip' };
      if (!Array.isArray(body) && body.method === 'eth_getCode') {
        res.writeHead(200, gz);
        res.write(gzipSync(`{"jsonrpc":"2.0","id":${body.id},"result":"0x`));
        res.write(BOMB_ZEROS);
        return void res.end(gzipSync('"}'));
      }
      if (!Array.isArray(body) && body.method === 'eth_getStorageAt') {
        res.writeHead(200, gz);
        return void res.end(Buffer.concat([gzipSync(`{"jsonrpc":"2.0","id":${body.id},`).subarray(0, 12), Buffer.from('not gzip at all')]));
      }
      const answer = await fetch(anvilUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
      const bytes = Buffer.from(await answer.arrayBuffer());
      if (String(req.headers['accept-encoding'] ?? '').includes('gzip')) {
        res.writeHead(answer.status, gz);
        res.end(gzipSync(bytes));
      } else {
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(bytes);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

/** eRPC's shape: gzip for every upstream through upstreamDefaults.jsonRpc, one upstream batching as well. */
const erpcYaml = (gzipUrl: string) => `
logLevel: warn
server: { httpHostV4: 127.0.0.1 }
metrics: { enabled: false }
database:
  evmJsonRpcCache: { connectors: [], policies: [] }
projects:
  - id: main
    upstreamDefaults:
      jsonRpc:
        enableGzip: true
    networks:
      - architecture: evm
        evm: { chainId: 31337 }
        failsafe: []
    upstreams:
      - id: gz
        type: evm
        endpoint: ${gzipUrl}
        evm: { chainId: 31337 }
        maxResponseSize: 1MiB
      - id: gz-batch
        endpoint: ${gzipUrl}/batch
        evm: { chainId: 31337 }
        ignoreMethods: ["eth_getCode", "eth_getStorageAt"]
        jsonRpc:
          enableGzip: true
          supportsBatch: true
          batchMaxSize: 10
          batchMaxWait: 5ms
`;

const rpc = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });

describe('e2e: upstream jsonRpc.enableGzip (gzip requests and answers)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let up: Awaited<ReturnType<typeof startGzipUpstream>>;
  let svc: SvcHandle | undefined;

  before(async () => {
    anvil = await startAnvil({ chainId: 31337 });
    up = await startGzipUpstream(anvil.url);
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });
  after(async () => {
    await new Promise((r) => up?.server.close(r));
    await anvil?.stop();
  });

  it('an eRPC config with enableGzip serves calls through an upstream that takes only gzip, gzip both ways', async () => {
    svc = await startSvc(parseYaml(erpcYaml(up.url)) as object);
    up.seen.length = 0;
    const r = await svc.post('/main/evm/31337', rpc('eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']), {
      'x-svc-use-upstream': 'gz',
    });
    expect(r.status, r.text).to.equal(200);
    expect(r.json.result).to.equal('0x0');
    const seen = up.seen.find((s) => s.method === 'eth_getBalance');
    expect(seen?.headers['content-encoding']).to.equal('gzip');
    expect(seen?.headers['accept-encoding']).to.equal('gzip');
  });

  it('outbound batches are gzipped too, and their gzip answer is split per call', async () => {
    svc = await startSvc(parseYaml(erpcYaml(up.url)) as object);
    const headers = { 'x-svc-use-upstream': 'gz-batch' };
    const calls = [1, 2, 3].map((i) => svc!.post('/main/evm/31337', rpc('eth_getTransactionCount', [`0x${'0'.repeat(39)}${i}`, 'latest'], i), headers));
    up.seen.length = 0;
    for (const r of await Promise.all(calls)) expect(r.json.result, r.text).to.equal('0x0');
    const batched = up.seen.filter((s) => s.method === 'eth_getTransactionCount' && s.batch);
    expect(batched.length, 'calls that reached the upstream in a batch').to.be.greaterThan(1);
    for (const s of batched) expect(s.headers['content-encoding']).to.equal('gzip');
  });

  it('a zip bomb stops at maxResponseSize once decompressed (the too-large error), the budget comes back, the next call is served', async () => {
    svc = await startSvc(parseYaml(erpcYaml(up.url)) as object);
    const r = await svc.post('/main/evm/31337', rpc('eth_getCode', ['0x0000000000000000000000000000000000000001', 'latest']));
    expect(r.json.error, r.text).to.not.equal(undefined);
    expect(r.json.error.data.code).to.equal('ErrUpstreamMalformedResponse');
    expect(r.json.error.message).to.include('maxResponseSize (1048576 bytes; over 1048576 bytes)');
    expect(RESPONSE_BYTES.inFlight, 'bytes of the answer left in the budget').to.be.below(1024 * 1024);
    const next = await svc.post('/main/evm/31337', rpc('eth_blockNumber'), { 'x-svc-use-upstream': 'gz' });
    expect(next.json.result, next.text).to.match(/^0x/);
  });

  it('a gzip answer that does not decompress fails that attempt cleanly', async () => {
    svc = await startSvc(parseYaml(erpcYaml(up.url)) as object);
    const r = await svc.post('/main/evm/31337', rpc('eth_getStorageAt', ['0x0000000000000000000000000000000000000001', '0x0', 'latest']));
    expect(r.json.error.data.code, r.text).to.equal('ErrUpstreamMalformedResponse');
    expect(r.json.error.message).to.include('gzip body that does not decompress');
    expect(RESPONSE_BYTES.inFlight, 'bytes of the answer left in the budget').to.be.below(1024 * 1024);
  });

  it('without enableGzip svc sends plain bodies and asks for no encoding (the gzip-only upstream refuses them)', async () => {
    const plain = parseYaml(erpcYaml(up.url)) as { projects: Array<{ upstreamDefaults?: unknown; upstreams: Array<Record<string, unknown>> }> };
    delete plain.projects[0]!.upstreamDefaults;
    plain.projects[0]!.upstreams = plain.projects[0]!.upstreams.slice(0, 1);
    svc = await startSvc(plain);
    const r = await svc.post('/main/evm/31337', rpc('eth_blockNumber'));
    expect(r.json.error, r.text).to.not.equal(undefined);
    expect(r.json.error.message).to.include('gzip bodies only');
  });

  it('a preset without the outbound plugin refuses to start rather than send uncompressed what the config asks to gzip', async () => {
    const doc = parseYaml(erpcYaml(up.url)) as object;
    const err = await startSvc(doc, { plugins: defaultPreset().filter((p) => p.name !== 'outbound') }).then(
      async (s) => {
        await s.close();
        return undefined;
      },
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.match(/jsonRpc\.enableGzip is set but no plugin of this preset honours it \(the outbound plugin does\)/);
  });

  it('svc validate --print: the eRPC file needs no rewrite and validates as printed', async () => {
    await ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'svc-gzip-cli-'));
    try {
      writeFileSync(join(dir, 'gzip.yaml'), erpcYaml('http://127.0.0.1:8545'));
      const r = await runSvcCli(['validate', '--config', 'gzip.yaml', '--print'], dir);
      expect(r.code, r.err).to.equal(0);
      expect(r.out).to.include('#   projects[0].upstreams[0].type: evm -> (removed)');
      writeFileSync(join(dir, 'printed.yaml'), r.out);
      const again = await runSvcCli(['validate', '--config', 'printed.yaml', '--print'], dir);
      expect(again.code, again.err).to.equal(0);
      const printed = parseYaml(again.out) as { projects: Array<{ upstreamDefaults: { jsonRpc: { enableGzip: boolean } } }> };
      expect(printed.projects[0]?.upstreamDefaults.jsonRpc.enableGzip).to.equal(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
