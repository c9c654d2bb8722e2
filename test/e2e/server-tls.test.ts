/**
 * `server.tls` (eRPC's shape: enabled, certFile, keyFile, caFile): svc serves HTTPS and WSS on its port with a certificate made
 * here by openssl (self-signed, SAN IP:127.0.0.1), in front of anvil; clients trust it through undici's `connect.ca` and ws's `ca`.
 * With `caFile` a client certificate is required (mutual TLS, as eRPC documents). Bad or missing files stop the start with the key
 * named; `enabled` without the files fails validation; `svc validate --print` drops eRPC's `insecureSkipVerify` with a line and its
 * output validates again.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { parse as parseYaml } from 'yaml';
import { loadConfigObject } from '../../config/load.ts';
import { minimalPreset } from '../../presets/minimal.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { runSvcCli } from '../helpers/svc-cli.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';

const CHAIN_ID = { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] };

/** A self-signed certificate and its key (PEM files in `dir`), valid for 127.0.0.1. */
function selfSigned(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2'].concat([
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ]),
    { stdio: 'ignore' },
  );
  return { cert, key };
}

/** An eRPC-shaped config with TLS on the port. */
const erpcYaml = (anvilUrl: string, tls: string) => `
logLevel: warn
server:
  httpHostV4: 127.0.0.1
  tls:
${tls}
metrics: { enabled: false }
projects:
  - id: main
    networks:
      - architecture: evm
        evm: { chainId: 31337 }
    upstreams:
      - id: anvil
        type: evm
        endpoint: ${anvilUrl}
        evm: { chainId: 31337 }
`;

async function postJson(url: string, dispatcher: Agent, body: unknown): Promise<{ status: number; json: any }> {
  const r = await request(url, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.statusCode, json: await r.body.json() };
}

/** Opens a WebSocket, sends one message and resolves with the first answer. */
function wsAsk(url: string, opts: WebSocket.ClientOptions, body: unknown): Promise<any> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, opts);
    ws.once('error', reject);
    ws.once('open', () => ws.send(JSON.stringify(body)));
    ws.once('message', (d) => {
      resolve(JSON.parse(d.toString()));
      ws.close();
    });
  });
}

describe('e2e: server.tls (HTTPS and WSS on the proxy port)', function () {
  this.timeout(30_000);
  let anvil: AnvilHandle;
  let dir: string;
  let server: { cert: string; key: string };
  let client: { cert: string; key: string };
  const agents: Agent[] = [];
  const agent = (connect: ConstructorParameters<typeof Agent>[0] extends infer O ? (O extends { connect?: infer C } ? C : never) : never) => {
    const a = new Agent({ connect });
    agents.push(a);
    return a;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-tls-'));
    server = selfSigned(dir, 'server');
    client = selfSigned(dir, 'client');
    anvil = await startAnvil({ chainId: 31337 });
  });
  after(async () => {
    await Promise.all(agents.map((a) => a.close()));
    await anvil?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const tlsBlock = (extra = '') => `    enabled: true\n    certFile: ${server.cert}\n    keyFile: ${server.key}\n${extra}`;

  describe('with a certificate', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await startSvc(parseYaml(erpcYaml(anvil.url, tlsBlock('    insecureSkipVerify: false\n'))) as object);
    });
    after(() => svc?.close());

    const httpsUrl = () => svc.url.replace('http://', 'https://');

    it('serves a call over HTTPS to a client that trusts the certificate', async () => {
      const r = await postJson(`${httpsUrl()}/main/evm/31337`, agent({ ca: readFileSync(server.cert) }), CHAIN_ID);
      expect(r.status).to.equal(200);
      expect(r.json.result).to.equal('0x7a69');
    });

    it('a client that does not trust the certificate fails its handshake (nothing served in clear either)', async () => {
      let err: unknown;
      try {
        await postJson(`${httpsUrl()}/main/evm/31337`, agent({}), CHAIN_ID);
      } catch (e) {
        err = e;
      }
      expect(String((err as { code?: string })?.code ?? err)).to.match(/SELF_SIGNED|CERT|UNABLE/i);
      let plain: unknown;
      try {
        await svc.post('/main/evm/31337', CHAIN_ID);
      } catch (e) {
        plain = e;
      }
      expect(plain, 'plain HTTP on the TLS port').to.be.instanceOf(Error);
    });

    it('`svc healthcheck` probes it over HTTPS when the config enables server.tls (the container HEALTHCHECK)', async () => {
      await ensureBuilt();
      writeFileSync(join(dir, 'probe.yaml'), erpcYaml(anvil.url, tlsBlock()));
      const port = new URL(svc.url).port;
      const r = await runSvcCli(['healthcheck', '--config', 'probe.yaml', '--port', port], dir);
      expect(r.code, r.err).to.equal(0);
      expect(r.out).to.match(/^200 /);
    });

    it('serves the WebSocket endpoint over WSS', async () => {
      const answer = await wsAsk(`${httpsUrl().replace('https://', 'wss://')}/main/evm/31337`, { ca: readFileSync(server.cert) }, CHAIN_ID);
      expect(answer.result).to.equal('0x7a69');
    });
  });

  describe('with caFile (mutual TLS)', () => {
    let svc: SvcHandle;
    before(async () => {
      svc = await startSvc(parseYaml(erpcYaml(anvil.url, tlsBlock(`    caFile: ${client.cert}\n`))) as object);
    });
    after(() => svc?.close());

    it('serves a client presenting a certificate signed by caFile, refuses one without', async () => {
      const url = `${svc.url.replace('http://', 'https://')}/main/evm/31337`;
      const ca = readFileSync(server.cert);
      const ok = await postJson(url, agent({ ca, cert: readFileSync(client.cert), key: readFileSync(client.key) }), CHAIN_ID);
      expect(ok.json.result).to.equal('0x7a69');
      let refused: unknown;
      try {
        await postJson(url, agent({ ca }), CHAIN_ID);
      } catch (e) {
        refused = e;
      }
      expect(refused, 'a client without a certificate').to.be.instanceOf(Error);
      // Its own certificate is not a client certificate signed by caFile.
      let stranger: unknown;
      try {
        await postJson(url, agent({ ca, cert: readFileSync(server.cert), key: readFileSync(server.key) }), CHAIN_ID);
      } catch (e) {
        stranger = e;
      }
      expect(stranger, 'a client certificate caFile did not sign').to.be.instanceOf(Error);
    });
  });

  describe('bad configuration', () => {
    it('a missing certFile stops the start with the key and path named', async () => {
      const yaml = erpcYaml(anvil.url, `    enabled: true\n    certFile: ${join(dir, 'nope.crt')}\n    keyFile: ${server.key}\n`);
      let err: unknown;
      try {
        const svc = await startSvc(parseYaml(yaml) as object);
        await svc.close();
      } catch (e) {
        err = e;
      }
      expect((err as Error)?.message).to.match(/server\.tls\.certFile: cannot read .*nope\.crt/);
    });

    it('a preset without the tls plugin refuses to start rather than serve in clear', async () => {
      const yaml = erpcYaml(anvil.url, `    enabled: true\n    certFile: ${server.cert}\n    keyFile: ${server.key}\n`);
      const plugins = minimalPreset().filter((p) => p.name !== 'tls');
      const err = await startSvc(parseYaml(yaml) as object, { plugins }).then(
        async (svc) => {
          await svc.close();
          return undefined;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).to.include('server.tls is enabled but no plugin of this preset serves TLS (the tls plugin does)');
    });

    it('a file that is not PEM, and a key that does not match the certificate, stop the start naming server.tls', async () => {
      const junk = join(dir, 'junk.pem');
      writeFileSync(junk, 'not a certificate\n');
      const tries = [
        [`    enabled: true\n    certFile: ${junk}\n    keyFile: ${server.key}\n`, /server\.tls\.certFile: .*junk\.pem holds no PEM block/],
        [`    enabled: true\n    certFile: ${server.cert}\n    keyFile: ${client.key}\n`, /server\.tls: cannot load the certificate, key or CAs .*client\.key/],
      ] as const;
      for (const [block, message] of tries) {
        let err: unknown;
        try {
          const svc = await startSvc(parseYaml(erpcYaml(anvil.url, block)) as object);
          await svc.close();
        } catch (e) {
          err = e;
        }
        expect((err as Error)?.message).to.match(message);
      }
    });

    it('enabled without certFile/keyFile fails validation naming the keys', async () => {
      let err: unknown;
      try {
        await loadConfigObject(parseYaml(erpcYaml(anvil.url, '    enabled: true\n')) as object);
      } catch (e) {
        err = e;
      }
      const paths = ((err as { problems?: Array<{ path: string }> }).problems ?? []).map((p) => p.path);
      expect(paths).to.include.members(['server.tls.certFile', 'server.tls.keyFile']);
    });
  });

  describe('svc validate --print', () => {
    before(() => ensureBuilt());
    const run = (args: string[]) => runSvcCli(args, dir);

    it("drops eRPC's insecureSkipVerify with a line saying why, and its output validates again", async () => {
      writeFileSync(join(dir, 'tls.yaml'), erpcYaml('http://127.0.0.1:8545', tlsBlock('    insecureSkipVerify: true\n')));
      const r = await run(['validate', '--config', 'tls.yaml', '--print']);
      expect(r.code, r.err).to.equal(0);
      expect(r.out).to.match(/# {3}server\.tls\.insecureSkipVerify: true -> \(removed: .*no effect/);
      const printed = parseYaml(r.out) as { server: { tls: Record<string, unknown> } };
      expect(printed.server.tls).to.deep.equal({ enabled: true, certFile: server.cert, keyFile: server.key });
      writeFileSync(join(dir, 'printed.yaml'), r.out);
      const again = await run(['validate', '--config', 'printed.yaml', '--print']);
      expect(again.code, again.err).to.equal(0);
      expect(again.out).to.include("# no rewrite: the config is in svc's shape");
    });
  });
});
