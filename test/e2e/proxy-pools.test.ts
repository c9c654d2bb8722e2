/**
 * `proxyPools` and `upstreams[].jsonRpc.proxyPool` (eRPC: named pools of outbound proxies, each request through the next one in turn)
 * through two real HTTP proxies started here (node:http servers: CONNECT tunnels counted per proxy, plain forwarding counted too), in
 * front of anvil. An `http://` upstream is forwarded through the proxy (the request line carries the absolute URL), as Go's transport
 * does for eRPC; an `https://` upstream (a TLS server in front of anvil, its certificate made here by openssl and trusted by the svc
 * process through NODE_EXTRA_CA_CERTS) is reached through CONNECT tunnels; a `socks5://` pool (a SOCKS5 server started here) carries
 * them too. Credentials in a proxy URL become Proxy-Authorization. A pool
 * id no pool has, and a scheme eRPC refuses, fail validation naming the key; `svc validate --print` re-validates the eRPC file.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect as netConnect, createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { loadConfigObject } from '../../config/load.ts';
import { minimalPreset } from '../../presets/minimal.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

/** A forward proxy: CONNECT tunnels and absolute-URL requests, each counted, with the Proxy-Authorization headers seen. */
interface TestProxy {
  url: string;
  server: Server;
  /** CONNECT targets, one per tunnel opened. */
  tunnels: string[];
  /** Absolute URLs forwarded. */
  forwarded: string[];
  /** Proxy-Authorization values seen (CONNECT and forwarded). */
  auth: string[];
}

async function startProxy(): Promise<TestProxy> {
  const p: Omit<TestProxy, 'url'> & { url?: string } = { server: createServer(), tunnels: [], forwarded: [], auth: [] };
  const note = (h: string | string[] | undefined) => {
    if (typeof h === 'string') p.auth.push(h);
  };
  p.server.on('connect', (req, socket, head) => {
    note(req.headers['proxy-authorization']);
    p.tunnels.push(req.url ?? '');
    const [host, port] = (req.url ?? '').split(':');
    const target = netConnect(Number(port), host as string, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) target.write(head);
      target.pipe(socket);
      socket.pipe(target);
    });
    target.on('error', () => socket.destroy());
    socket.on('error', () => target.destroy());
  });
  p.server.on('request', (req, res) => {
    note(req.headers['proxy-authorization']);
    if (!req.url?.startsWith('http://')) {
      res.writeHead(400);
      return void res.end('absolute URLs only');
    }
    p.forwarded.push(req.url);
    const { 'proxy-authorization': _a, 'proxy-connection': _c, ...headers } = req.headers;
    const out = httpRequest(req.url, { method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((r) => p.server.listen(0, '127.0.0.1', r));
  p.url = `http://127.0.0.1:${(p.server.address() as AddressInfo).port}`;
  return p as TestProxy;
}

/** A SOCKS5 proxy without authentication (RFC 1928: CONNECT by IPv4 address or domain name), counting the connections it opens. */
async function startSocks5(): Promise<{ url: string; server: NetServer; connects: string[] }> {
  const connects: string[] = [];
  const server = createNetServer((socket) => {
    socket.on('error', () => socket.destroy());
    socket.once('data', (hello: Buffer) => {
      if (hello[0] !== 5) return void socket.destroy();
      socket.write(Buffer.from([5, 0])); // no authentication
      socket.once('data', (req: Buffer) => {
        let host: string;
        let at: number;
        if (req[3] === 1) {
          host = [...req.subarray(4, 8)].join('.');
          at = 8;
        } else if (req[3] === 3) {
          const n = req[4] as number;
          host = req.subarray(5, 5 + n).toString();
          at = 5 + n;
        } else return void socket.destroy();
        const port = req.readUInt16BE(at);
        connects.push(`${host}:${port}`);
        const target = netConnect(port, host, () => {
          socket.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          target.pipe(socket);
          socket.pipe(target);
        });
        target.on('error', () => socket.destroy());
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `socks5://127.0.0.1:${(server.address() as AddressInfo).port}`, server, connects };
}

/** A TLS server in front of anvil (self-signed for IP 127.0.0.1, the certificate in `certFile`). */
async function startTlsFront(anvilUrl: string, dir: string): Promise<{ url: string; server: HttpsServer; certFile: string }> {
  const certFile = join(dir, 'upstream.crt');
  const keyFile = join(dir, 'upstream.key');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=upstream'].concat([
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ]),
    { stdio: 'ignore' },
  );
  const server = createHttpsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', async () => {
      const answer = await fetch(anvilUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(parts) });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(Buffer.from(await answer.arrayBuffer()));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, server, certFile };
}

/** eRPC's shape: a top-level pool of two proxies (the first with credentials), one upstream through it. */
const erpcYaml = (proxies: readonly TestProxy[], endpoint: string) => `
logLevel: warn
server: { httpHostV4: 127.0.0.1 }
metrics: { enabled: false }
database:
  evmJsonRpcCache: { connectors: [], policies: [] }
proxyPools:
  - id: egress
    urls:
      - ${proxies[0]!.url.replace('http://', 'http://svc-user:pa55word@')}
      - ${proxies[1]!.url.replace('http://', 'HTTP://')}
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: 31337 }
    upstreams:
      - id: through-proxies
        type: evm
        endpoint: ${endpoint}
        evm: { chainId: 31337 }
        jsonRpc:
          proxyPool: egress
`;

const rpc = (method: string, id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params: [] });
const BASIC = `Basic ${Buffer.from('svc-user:pa55word').toString('base64')}`;

describe('e2e: proxyPools (outbound HTTP proxies, round robin)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let proxies: TestProxy[];
  let dir: string;
  const reset = () => {
    for (const p of proxies) {
      p.tunnels.length = 0;
      p.forwarded.length = 0;
      p.auth.length = 0;
    }
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-proxy-pools-'));
    [anvil, ...proxies] = await Promise.all([startAnvil({ chainId: 31337 }), startProxy(), startProxy()]);
  });
  after(async () => {
    await Promise.all((proxies ?? []).map((p) => new Promise((r) => p.server.close(r))));
    await anvil?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('an http:// upstream (forwarded by the proxies)', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await startSvc(parseYaml(erpcYaml(proxies, anvil.url)) as object);
    });
    after(() => svc?.close());

    it('every request goes through the pool, the proxies in turn, with the URL credentials as Proxy-Authorization', async () => {
      reset();
      for (let i = 0; i < 4; i++) {
        const r = await svc.post('/main/evm/31337', rpc('eth_blockNumber', i));
        expect(r.json.result, r.text).to.match(/^0x/);
      }
      const [a, b] = proxies as [TestProxy, TestProxy];
      expect(a.forwarded.length, 'first proxy').to.be.greaterThan(0);
      expect(b.forwarded.length, 'second proxy').to.be.greaterThan(0);
      for (const u of [...a.forwarded, ...b.forwarded]) expect(u).to.equal(`${anvil.url}/`);
      expect(a.auth).to.not.be.empty;
      for (const h of a.auth) expect(h).to.equal(BASIC);
      expect(b.auth).to.be.empty;
    });
  });

  describe('a socks5:// proxy', () => {
    it('carries the requests of an upstream whose pool is a SOCKS5 proxy', async () => {
      const socks = await startSocks5();
      const yaml = erpcYaml(proxies, anvil.url).replace(/urls:\n(\s+- .*\n)+/, `urls: ["${socks.url}"]\n`);
      const svc = await startSvc(parseYaml(yaml) as object);
      try {
        const r = await svc.post('/main/evm/31337', rpc('eth_blockNumber'));
        expect(r.json.result, r.text).to.match(/^0x/);
        expect(socks.connects.length).to.be.greaterThan(0);
        for (const c of socks.connects) expect(c).to.equal(new URL(anvil.url).host);
      } finally {
        await svc.close();
        await new Promise((r) => socks.server.close(r));
      }
    });
  });

  describe('an https:// upstream (CONNECT tunnels), in a svc process trusting the upstream through NODE_EXTRA_CA_CERTS', () => {
    let front: Awaited<ReturnType<typeof startTlsFront>>;
    let proc: SvcProcess;
    before(async () => {
      await ensureBuilt();
      front = await startTlsFront(anvil.url, dir);
      reset();
      proc = await spawnSvc(dir, 'tunnel', parseYaml(erpcYaml(proxies, front.url)) as object, { NODE_EXTRA_CA_CERTS: front.certFile });
    });
    after(async () => {
      await proc?.stop();
      await new Promise((r) => front?.server.close(r));
    });

    it('is served through tunnels opened on both proxies to the upstream, none forwarded in clear', async () => {
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${proc.url}/main/evm/31337`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: rpc('eth_chainId', i) });
        const body = (await res.json()) as { result?: string };
        expect(body.result, JSON.stringify(body)).to.equal('0x7a69');
        await fetch(`${proc.url}/main/evm/31337`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: rpc('eth_blockNumber', i) });
      }
      const target = new URL(front.url).host;
      const [a, b] = proxies as [TestProxy, TestProxy];
      expect(a.tunnels.length, 'tunnels through the first proxy').to.be.greaterThan(0);
      expect(b.tunnels.length, 'tunnels through the second proxy').to.be.greaterThan(0);
      for (const t of [...a.tunnels, ...b.tunnels]) expect(t).to.equal(target);
      expect([...a.forwarded, ...b.forwarded]).to.be.empty;
      for (const h of a.auth) expect(h).to.equal(BASIC);
    });
  });

  describe('validation', () => {
    const problems = (yaml: string) => {
      try {
        loadConfigObject(parseYaml(yaml) as object);
      } catch (e) {
        return ((e as { problems?: Array<{ path: string; message: string }> }).problems ?? []).map((p) => `${p.path}: ${p.message}`);
      }
      return [];
    };

    it('a proxyPool no pool has, a duplicate pool id and a socks4:// URL fail validation naming the key', () => {
      // The core's schema alone (no preset): the cache block is a plugin's key.
      const base = erpcYaml(proxies, anvil.url).replace(/database:\n.*\n/, '');
      expect(problems(base.replace('proxyPool: egress', 'proxyPool: nowhere')).join('\n')).to.match(
        /projects\[0\]\.upstreams\[0\]\.jsonRpc\.proxyPool: no proxy pool "nowhere" in proxyPools \(pools: egress\)/,
      );
      const twice = base.replace('proxyPools:\n', `proxyPools:\n  - id: egress\n    urls: [${proxies[0]!.url}]\n`);
      expect(problems(twice).join('\n')).to.match(/proxyPools\[1\]\.id: duplicate proxy pool id "egress"/);
      expect(problems(base.replace(/- HTTP:\/\/127\.0\.0\.1/, '- socks4://127.0.0.1')).join('\n')).to.match(/proxyPools\[0\]\.urls\[1\]/);
    });

    it('a preset without the outbound plugin refuses to start rather than send directly what the config routes through proxies', async () => {
      const plugins = minimalPreset().filter((p) => p.name !== 'outbound');
      // The minimal preset has no cache: its block goes.
      const yaml = erpcYaml(proxies, anvil.url).replace(/database:\n.*\n/, '');
      const err = await startSvc(parseYaml(yaml) as object, { plugins }).then(
        async (svc) => {
          await svc.close();
          return undefined;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).to.match(/jsonRpc\.proxyPool is set but no plugin of this preset honours it \(the outbound plugin does\)/);
    });

    it('svc validate --print takes the eRPC file as it is, and its output validates again', async () => {
      await ensureBuilt();
      writeFileSync(join(dir, 'pools.yaml'), erpcYaml(proxies, 'http://127.0.0.1:8545'));
      const r = await runSvcCli(['validate', '--config', 'pools.yaml', '--print'], dir);
      expect(r.code, r.err).to.equal(0);
      writeFileSync(join(dir, 'printed.yaml'), r.out);
      const again = await runSvcCli(['validate', '--config', 'printed.yaml', '--print'], dir);
      expect(again.code, again.err).to.equal(0);
      const printed = parseYaml(again.out) as { proxyPools: Array<{ id: string; urls: string[] }> };
      expect(printed.proxyPools[0]?.id).to.equal('egress');
      expect(printed.proxyPools[0]?.urls).to.have.length(2);
    });
  });
});
