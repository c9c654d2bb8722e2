/**
 * Client headers forwarded to an upstream by allowlist (forward-headers plugin, eRPC's
 * `forwardHeaders`): only the listed headers reach only the upstreams that list them; the
 * upstream's configured headers win; credentials, svc's own and hop-by-hop headers can never be
 * listed; long values are dropped; state polls carry none; a call carrying forwarded headers is
 * never put in an outbound batch with other callers' calls. svc runs for real in front of fake
 * upstreams that record what they receive.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { expect } from 'chai';
import { ConfigError } from '../../../config/load.ts';
import { refusedHeader } from '../../../plugins/forward-headers/index.ts';
import { startFakeRpc } from '../../helpers/fake-rpc.ts';
import { startSvc, type SvcHandle } from '../../helpers/svc.ts';

interface Seen {
  method: string | string[];
  headers: IncomingHttpHeaders;
}

interface Recorder {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

/** A fake node: answers every call (a batch element-wise) with `0x1`, `eth_chainId` 31337; records each request's methods and headers. */
async function startRecorder(): Promise<Recorder> {
  const r: Recorder = { url: '', seen: [], close: async () => undefined };
  const rpc = await startFakeRpc((raw, req, reply) => {
    const body = raw as { id: unknown; method: string } | { id: unknown; method: string }[];
    const one = (c: { id: unknown; method: string }) => ({ jsonrpc: '2.0', id: c.id, result: c.method === 'eth_chainId' ? '0x7a69' : '0x1' });
    r.seen.push({ method: Array.isArray(body) ? body.map((c) => c.method) : body.method, headers: req.headers });
    reply(Array.isArray(body) ? body.map(one) : one(body));
  });
  r.url = rpc.url;
  r.close = rpc.close;
  return r;
}

describe('forward-headers: client headers passed on to an upstream by allowlist', function () {
  this.timeout(20_000);
  const ups: Record<string, Recorder> = {};
  let svc: SvcHandle;
  const rpc = (method: string, id = 1) => ({ jsonrpc: '2.0', id, method, params: [`0x${id.toString(16).padStart(40, '0')}`, 'latest'] });
  const callsTo = (id: string, method: string) => ups[id]!.seen.filter((s) => s.method === method);

  before(async () => {
    for (const id of ['listing', 'plain', 'erpc', 'batching']) ups[id] = await startRecorder();
    const net = [{ architecture: 'evm', evm: { chainId: 31337 } }];
    svc = await startSvc({
      logLevel: 'error',
      projects: [
        {
          id: 'main',
          networks: net,
          upstreams: [
            {
              id: 'listing',
              endpoint: ups.listing!.url,
              evm: { chainId: 31337 },
              forwardHeaders: ['X-Tenant', 'x-qn-height', 'X-Fixed'],
              jsonRpc: { headers: { 'X-Fixed': 'configured' } },
            },
          ],
        },
        { id: 'two', networks: net, upstreams: [{ id: 'plain', endpoint: ups.plain!.url, evm: { chainId: 31337 } }] },
        // eRPC's shape: the project's list, for every upstream of the project.
        { id: 'erpc', networks: net, forwardHeaders: ['x-tenant'], upstreams: [{ id: 'erpc', endpoint: ups.erpc!.url, evm: { chainId: 31337 } }] },
        {
          id: 'batch',
          networks: net,
          upstreams: [
            {
              id: 'batching',
              endpoint: ups.batching!.url,
              evm: { chainId: 31337 },
              forwardHeaders: ['x-tenant'],
              jsonRpc: { supportsBatch: true, batchMaxWait: '200ms', batchMaxSize: 10 },
            },
          ],
        },
      ],
    });
  });
  after(async () => {
    await svc?.close();
    for (const u of Object.values(ups)) await u.close();
  });

  it('only the listed headers reach the upstream that lists them, names case-insensitive; the configured header wins', async () => {
    const res = await svc.post('/main/evm/31337', rpc('eth_getBalance'), { 'X-Tenant': 'acme', 'X-QN-Height': '0x10', 'X-Other': 'no', 'X-Fixed': 'client' });
    expect(res.json.result).to.equal('0x1');
    const got = callsTo('listing', 'eth_getBalance')[0]!.headers;
    expect(got['x-tenant']).to.equal('acme');
    expect(got['x-qn-height']).to.equal('0x10');
    expect(got['x-other']).to.equal(undefined);
    expect(got['x-fixed']).to.equal('configured');
  });

  it('an upstream with no list gets none; state polls carry none; a value over 1 KiB is not forwarded', async () => {
    await svc.post('/two/evm/31337', rpc('eth_getBalance'), { 'X-Tenant': 'acme' });
    expect(callsTo('plain', 'eth_getBalance')[0]!.headers['x-tenant']).to.equal(undefined);
    await svc.post('/main/evm/31337', rpc('eth_getCode'), { 'X-Tenant': 'a'.repeat(1025) });
    expect(callsTo('listing', 'eth_getCode')[0]!.headers['x-tenant']).to.equal(undefined);
    const polls = ups.listing!.seen.filter((s) => s.method !== 'eth_getBalance' && s.method !== 'eth_getCode');
    expect(polls.every((s) => s.headers['x-tenant'] === undefined)).to.equal(true);
  });

  it("eRPC's project-level forwardHeaders applies to the project's upstreams", async () => {
    await svc.post('/erpc/evm/31337', rpc('eth_getBalance'), { 'X-Tenant': 'acme' });
    expect(callsTo('erpc', 'eth_getBalance')[0]!.headers['x-tenant']).to.equal('acme');
  });

  it('a call carrying forwarded headers is sent alone; calls without any are still batched', async () => {
    const path = '/batch/evm/31337';
    // One client batch each, so both calls reach the outbound queue together on any machine.
    await svc.post(path, [rpc('eth_getBalance', 1), rpc('eth_getBalance', 2)], { 'X-Tenant': 'acme' });
    const single = callsTo('batching', 'eth_getBalance');
    expect(single.map((s) => s.headers['x-tenant'])).to.deep.equal(['acme', 'acme']);
    await svc.post(path, [rpc('eth_getCode', 3), rpc('eth_getCode', 4)]);
    const batched = ups.batching!.seen.filter((s) => Array.isArray(s.method) && s.method.includes('eth_getCode'));
    expect(batched).to.have.length(1);
    // State polls may share the batch; both client calls are in it.
    expect((batched[0]!.method as string[]).filter((m) => m === 'eth_getCode')).to.have.length(2);
  });

  it('calls with different forwarded values never share an answer: every call reaches the upstream with its own header', async () => {
    const path = '/main/evm/31337';
    const body = rpc('eth_getBalance', 77);
    const before = callsTo('listing', 'eth_getBalance').length;
    await Promise.all([svc.post(path, body, { 'X-Tenant': 'acme' }), svc.post(path, body, { 'X-Tenant': 'beta' })]);
    await svc.post(path, body, { 'X-Tenant': 'gamma' });
    const sent = callsTo('listing', 'eth_getBalance').slice(before);
    expect(sent.map((c) => c.headers['x-tenant']).sort()).to.deep.equal(['acme', 'beta', 'gamma']);
  });

  it('credentials, svc’s own headers and hop-by-hop headers can never be listed: the config does not load', async () => {
    for (const name of [
      'Authorization',
      'cookie',
      'X-SVC-Secret-Token',
      'x-svc-use-upstream',
      'Connection',
      'Host',
      'x-payment',
      'Proxy-Authorization',
      'sec-websocket-key',
    ]) {
      expect(refusedHeader(name), name).to.be.a('string');
      const err = await startSvc({
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: 31337 } }],
            upstreams: [{ id: 'u', endpoint: ups.plain!.url, forwardHeaders: [name] }],
          },
        ],
      }).then(
        async (s) => {
          await s.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err, name).to.be.instanceOf(ConfigError);
      expect((err as Error).message).to.include('never forwarded');
    }
    expect(refusedHeader('x-tenant')).to.equal(undefined);
  });
});
