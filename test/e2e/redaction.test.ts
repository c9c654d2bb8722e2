/**
 * No secret leaks: a `svc start` process at `logLevel: trace` whose config
 * holds every kind of secret svc knows (auth secrets, a JWT key, an admin secret, a Redis
 * password, a provider API key, upstream auth headers, an exporter token, a key in an upstream
 * URL path that fails), with credentials sent in headers and query, accepted and rejected. Then
 * `svc_config`, `svc_project`, the logs, `/metrics`, every response header and every error body
 * are searched for every secret, and none is found. Header values are redacted whatever the
 * header's name (`X-Api-Key`), credential-looking keys at any depth of a provider's settings, URL
 * user info and query keys; the CLI's start-up errors (a YAML parse error quoting secret lines,
 * a non-http ENDPOINT with a password) print none either.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { SignJWT } from 'jose';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { freePort } from '../helpers/ports.ts';
import { httpRequest, type SvcResponse } from '../helpers/svc.ts';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { PACKAGE_ROOT } from '../../core/wire/version.ts';

/** Runs the CLI to its exit: its exit code and everything it printed. */
function runCli(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(PACKAGE_ROOT, 'bin', 'svc.js'), ...args], { timeout: 15_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, output: `${stdout}${stderr}` });
    });
  });
}

const S = {
  projectSecret: 'projSecretValue7f3a9c1e5b',
  adminSecret: 'adminSecretValue2d8e4f6a0c',
  jwtKey: 'jwtSharedKeyValue9b1c3d5e7f0a2b4c',
  redisPassword: 'redisPassValue4e6f8a0b2c',
  providerKey: 'providerApiKeyValue1a3b5c7d',
  upstreamHeader: 'upstreamBearerValue8c0d2e4f',
  exporterToken: 'exporterTokenValue5d7e9f1a',
  urlKey: 'urlPathKeyValue3f5a7b9c1d',
  wrongSecret: 'presentedWrongValue6a8b0c2d',
  apiKey: 'k_presentedApiKeyValue0e2f4a6b8c',
  xApiKeyHeader: 'xApiKeyHeaderValue4b6c8d0e',
  queryKey: 'queryKeyValue7e9f1a3b5c',
  userinfoPassword: 'userinfoPassValue2c4d6e8f',
  providerHeader: 'providerHeaderValue9a1b3c5d',
  nestedSecret: 'nestedClientSecretValue6f8a0b',
  sessionToken: 'nestedSessionTokenValue1d3e5f',
  mnemonic: 'abandon ability able about above absent',
  postgresPassword: 'postgresPassValue8b0c2d4e',
};

describe('e2e: no secret leaks', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let dir: string;
  let svc: SvcProcess;
  const seen: string[] = [];
  const keep = (r: SvcResponse) => {
    seen.push(JSON.stringify(r.headers), r.text);
    return r;
  };

  before(async () => {
    await ensureBuilt();
    anvil = await startAnvil();
    dir = mkdtempSync(join(tmpdir(), 'svc-redact-'));
    const closed = await freePort();
    svc = await spawnSvc(dir, 'svc', {
      logLevel: 'trace',
      database: {
        evmJsonRpcCache: {
          connectors: [{ id: 'r', driver: 'redis', redis: { uri: `redis://:${S.redisPassword}@127.0.0.1:${closed}/0` } }],
          policies: [{ connector: 'r', finality: 'finalized' }],
        },
      },
      tracing: { enabled: false, headers: { authorization: `Bearer ${S.exporterToken}` } },
      admin: { auth: { strategies: [{ type: 'secret', secret: { value: S.adminSecret } }] } },
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: anvil.chainId } }],
          upstreams: [
            {
              id: 'failing',
              endpoint: `http://svc:${S.userinfoPassword}@127.0.0.1:${closed}/v2/${S.urlKey}?apikey=${S.queryKey}`,
              evm: { chainId: anvil.chainId },
            },
            // A header whose name is no credential word: its value is still a header value.
            {
              id: 'anvil',
              endpoint: anvil.url,
              evm: { chainId: anvil.chainId },
              jsonRpc: { headers: { authorization: `Bearer ${S.upstreamHeader}`, 'X-Api-Key': S.xApiKeyHeader } },
            },
          ],
          providers: [
            {
              id: 'hyper',
              vendor: 'hyper',
              settings: { apiKey: S.providerKey, nested: { clientSecret: S.nestedSecret, deeper: [{ sessionToken: S.sessionToken }], mnemonic: S.mnemonic } },
              overrides: { 'evm:*': { jsonRpc: { headers: { 'X-Provider-Auth': S.providerHeader } } } },
              onlyNetworks: ['evm:999999'],
            },
          ],
          auth: {
            strategies: [
              { type: 'secret', secret: { value: S.projectSecret, id: 'main-secret' } },
              { type: 'jwt', jwt: { allowedAlgorithms: ['HS256'], verificationKeys: { shared: S.jwtKey } } },
              { type: 'database', connector: { id: 'keys', driver: 'memory' } },
              // Never reached (the memory connector accepts or refuses first): only its config shows.
              {
                type: 'database',
                connector: { id: 'pg', driver: 'postgresql', postgresql: { connectionUri: `postgres://svc:${S.postgresPassword}@127.0.0.1:${closed}/svc` } },
              },
            ],
          },
        },
      ],
    });
  });
  after(async () => {
    await svc?.stop();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('finds no secret in svc_config, svc_project, logs, /metrics, response headers or error bodies', async () => {
    const path = `${svc.url}/main/evm/${anvil.chainId}`;
    const body = (id: number, method = 'eth_getBalance') =>
      JSON.stringify({ jsonrpc: '2.0', id, method, params: ['0x0000000000000000000000000000000000000001', 'latest'] });
    const json = { 'content-type': 'application/json' };
    const token = await new SignJWT({ sub: 'u' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(S.jwtKey));
    // Accepted, by header and query; the failing upstream is tried and fails on the way.
    for (let i = 0; i < 4; i++) keep(await httpRequest('POST', path, body(i), { ...json, 'x-svc-secret-token': S.projectSecret }));
    keep(await httpRequest('POST', `${path}?secret=${S.projectSecret}`, body(10), json));
    keep(await httpRequest('POST', path, body(11), { ...json, authorization: `Bearer ${token}` }));
    // Rejected: wrong secret by header, query, Bearer and Basic; an unknown API key; a batch.
    keep(await httpRequest('POST', path, body(20), { ...json, 'x-svc-secret-token': S.wrongSecret }));
    keep(await httpRequest('POST', `${path}?secret=${S.wrongSecret}`, body(21), json));
    keep(await httpRequest('POST', path, body(22), { ...json, authorization: `Bearer ${S.apiKey}` }));
    keep(await httpRequest('POST', path, body(23), { ...json, authorization: `Basic ${Buffer.from(`u:${S.wrongSecret}`).toString('base64')}` }));
    keep(await httpRequest('POST', path, `[${body(24)},${body(25)}]`, { ...json, 'x-svc-secret-token': S.wrongSecret }));
    // Admin: rejected, then the two config views.
    const admin = (method: string, params: unknown, secret = S.adminSecret) =>
      httpRequest('POST', `${svc.url}/admin`, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }), { ...json, 'x-svc-secret-token': secret });
    const rejected = keep(await admin('svc_config', [], S.wrongSecret));
    expect(rejected.status).to.equal(401);
    const config = keep(await admin('svc_config', []));
    const project = keep(await admin('svc_project', ['main']));
    expect(config.status).to.equal(200);
    expect(project.status).to.equal(200);
    // Redacted, not dropped: the views still show where the secrets were.
    expect(config.text).to.match(/#redacted=[0-9a-f]{8}/);
    expect(config.json.result.projects[0].upstreams[0].endpoint).to.match(/^http:\/\/#redacted=[0-9a-f]{8}@127\.0\.0\.1:\d+\/#redacted=[0-9a-f]{8}$/);
    // The resolved upstream carries its headers twice (`headers` and `settings.jsonRpc.headers`); both are redacted, names kept.
    const anvilUpstream = config.json.result.projects[0].upstreams[1];
    expect(anvilUpstream.headers['X-Api-Key']).to.match(/^#redacted=[0-9a-f]{8}$/);
    expect(project.json.result.config.upstreams[1].headers['X-Api-Key']).to.match(/^#redacted=[0-9a-f]{8}$/);
    // The auth block is walked, not hidden whole: its strategy types still show.
    expect(project.json.result.config.settings.auth.strategies.map((s: { type: string }) => s.type)).to.deep.equal(['secret', 'jwt', 'database', 'database']);
    keep(await httpRequest('GET', svc.metricsUrl));
    const metrics = await (await fetch(svc.metricsUrl)).text();
    const haystack = [...seen, metrics, svc.logs()].join('\n');
    expect(svc.logs().length, 'trace logging produced output').to.be.above(1000);
    for (const [name, value] of Object.entries(S)) expect(haystack.includes(value), `${name} leaked`).to.equal(false);
  });

  it('start-up errors print no secret: a config file that does not parse, an ENDPOINT that is not http(s)', async () => {
    const file = join(dir, 'broken.yaml');
    // A YAML error quotes the lines around it, here the ones holding a header value and a password.
    writeFileSync(
      file,
      `projects:\n  - id: main\n    upstreams:\n      - endpoint: "http://127.0.0.1:1/v2/${S.urlKey}"\n        jsonRpc: { headers: { X-Api-Key: ${S.xApiKeyHeader} }\n        password: ${S.redisPassword}\n  bad: [\n`,
    );
    const parse = await runCli(['validate', '--config', file]);
    expect(parse.code).to.equal(1);
    expect(parse.output).to.match(/cannot load/);
    const endpoint = await runCli(['start', `ftp://svc:${S.userinfoPassword}@127.0.0.1/${S.urlKey}`]);
    expect(endpoint.code).to.equal(2);
    expect(endpoint.output).to.match(/ENDPOINT must be an http\(s\) URL: ftp:\/\/#redacted=[0-9a-f]{8}/);
    for (const [name, value] of Object.entries(S)) expect(`${parse.output}\n${endpoint.output}`.includes(value), `${name} leaked`).to.equal(false);
  });
});
