/**
 * The hyper vendor (spec §2.10) against a local TLS server with a test CA,
 * reached through an injected DNS lookup: known chains without a call, unknown chains by a live
 * eth_chainId probe, and "not served" (no retry) on a certificate, DNS or connection failure.
 * Asserted on the vendor's output; nothing dials the internet.
 */
import { createServer, type Server } from 'node:https';
import type { LookupFunction } from 'node:net';
import { expect } from 'chai';
import { createLogger } from '../../lib/logger.ts';
import type { PluginHost } from '../../core/plugin-api.ts';
import type { Vendor } from '../../plugins/providers/index.ts';
import { HYPER_ALLOW_METHODS, hyperVendorPlugin } from '../../plugins/vendor-hyper/index.ts';
import { makeTestPki, type TestPki } from '../helpers/tls.ts';

const DOMAIN = 'hyper.test';
const logger = createLogger('silent');

/** An HTTPS JSON-RPC server answering eth_chainId with the chain named by the Host's first label. */
async function rpcServer(tls: { key: string; cert: string }, status = 200): Promise<{ server: Server; port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer(tls, (req, res) => {
    hits++;
    req.resume();
    req.on('end', () => {
      const chain = Number((req.headers.host ?? '').split('.')[0]);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: `0x${(chain === 4242 ? 1 : chain).toString(16)}` }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, hits: () => hits };
}

/** Resolves every `*.hyper.test` name to 127.0.0.1, anything else not at all. */
const lookup: LookupFunction = (host, opts, cb) => {
  if (host.endsWith(`.${DOMAIN}`)) {
    // Node asks for every address (`all`) when it may race IPv4 and IPv6.
    if ((opts as { all?: boolean }).all)
      (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
    else (cb as (e: null, a: string, f: number) => void)(null, '127.0.0.1', 4);
  } else (cb as (e: NodeJS.ErrnoException) => void)(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }));
};

function vendorOf(pki: TestPki): Vendor {
  let vendor: Vendor | undefined;
  const fakeHost = {
    services: { get: () => ({ registerVendor: (v: Vendor) => (vendor = v) }) },
    hooks: { shutdown: { tapPromise: () => undefined } },
  } as unknown as PluginHost;
  hyperVendorPlugin({ lookup, ca: pki.ca, env: {} }).apply(fakeHost);
  return vendor as Vendor;
}

describe('e2e: hyper vendor (spec §2.10)', function () {
  this.timeout(20_000);
  let pki: TestPki;
  let good: Awaited<ReturnType<typeof rpcServer>>;
  let bad: Awaited<ReturnType<typeof rpcServer>>;
  let failing: Awaited<ReturnType<typeof rpcServer>>;
  before(async () => {
    pki = makeTestPki(DOMAIN);
    good = await rpcServer(pki.signed);
    bad = await rpcServer(pki.untrusted);
    failing = await rpcServer(pki.signed, 503);
  });
  after(() => {
    for (const s of [good, bad, failing]) s?.server.close();
  });
  const ask = (chainId: number, port: number, extra: Record<string, unknown> = {}) =>
    vendorOf(pki).upstreamsFor(chainId, { rootDomain: `${DOMAIN}:${port}`, ...extra }, { id: 'hyper', logger });

  it('§2.10 hyper (neutral name) — a known chain: https://<chainId>.<rootDomain>[/<apiKey>] with ignoreMethods * and the 14-method allow-list, no call', async () => {
    const list = await ask(1, good.port, { apiKey: 'k3y' });
    expect(list).to.have.length(1);
    expect(list[0]!.endpoint).to.equal(`https://1.${DOMAIN}:${good.port}/k3y`);
    expect(list[0]!.entry).to.deep.equal({ ignoreMethods: ['*'], allowMethods: [...HYPER_ALLOW_METHODS] });
    expect(HYPER_ALLOW_METHODS).to.have.length(14);
    expect(good.hits()).to.equal(0);
  });

  it('an unknown chain answering its own id over trusted TLS is served; a wrong id is not', async () => {
    expect((await ask(777, good.port))[0]?.endpoint).to.equal(`https://777.${DOMAIN}:${good.port}`);
    expect(await ask(4242, good.port)).to.deep.equal([]);
    expect(good.hits()).to.equal(2);
  });

  it('a certificate-verification failure, a DNS failure or a refused connection means "not served", without an error to retry', async () => {
    expect(await ask(778, bad.port)).to.deep.equal([]);
    expect(await vendorOf(pki).upstreamsFor(779, { rootDomain: 'elsewhere.example' }, { id: 'hyper', logger })).to.deep.equal([]);
    good.server.close();
    expect(await ask(780, good.port)).to.deep.equal([]);
  });

  it('an HTTP failure is a bootstrap failure: it throws, so the providers plugin retries with backoff', async () => {
    let err: unknown;
    await ask(781, failing.port).catch((e: unknown) => (err = e));
    expect(String(err)).to.include('HTTP 503');
  });
});
