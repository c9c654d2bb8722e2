/**
 * Upstream secrets never leave svc: "Before any upstream-originated text
 * reaches a client, a log line, a metric or a trace header, replace every secret part of that
 * upstream's config (URL user info, path segments and query values after the host,
 * jsonRpc.headers values, their base64 forms for Basic auth) with `#redacted`."
 *
 * A fake upstream (test/helpers/echo-upstream.ts) echoes its request URL, `Authorization` and
 * `x-api-key` headers back in every shape an upstream can answer: a JSON-RPC error message,
 * `error.data` (object and string), a pass-through revert, a non-integer code with an object
 * message, a non-JSON HTTP 500 body and a malformed HTTP 200 body. svc runs with a trace-level
 * pino logger writing into memory and its metrics listener on; no secret may show in any
 * response body or header, the log text, or `/metrics`, while `#redacted` proves the text was
 * redacted rather than dropped. A unit block covers `secretsOf` / `Redactor` directly.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import type { Proxy } from '../../core/host/proxy.ts';
import { createProxy } from '../../core/host/create.ts';
import { REDACTED, Redactor, secretsOf } from '../../lib/redact.ts';
import { metricsAddress } from '../../plugins/metrics/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startEchoUpstream, type EchoMode, type EchoUpstream, type EchoUpstreamOptions } from '../helpers/echo-upstream.ts';
import { httpRequest, waitFor, type SvcResponse } from '../helpers/svc.ts';

const CHAIN = 31337;
const USER = 'user';
const PASSWORD = 'P4ssw0rdXYZ';
const PATH_KEY = 'SECRETKEY456';
const QUERY_KEY = 'QUERYSECRET789';
const HEADER_KEY = 'HEADERSECRET321';
const BEARER = 'BEARERSECRET654';
const BASIC_B64 = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');
/** Every secret of the configs below, as it must never appear outside svc. */
const SECRETS = [PASSWORD, PATH_KEY, QUERY_KEY, HEADER_KEY, BEARER, BASIC_B64];

/** Echo shapes that answer with an error (every one must reach the client redacted). */
const ERROR_MODES: EchoMode[] = ['echo_rpcError', 'echo_data', 'echo_dataString', 'echo_revert', 'echo_badCode', 'echo_500', 'echo_garbage'];

/**
 * The echoed URL after redaction: the path key and the query value replaced (svc also takes the
 * whole query as written as one secret, so `?#redacted` is as good as `?apikey=#redacted`).
 */
const URL_REDACTED = /\/v2\/#redacted\?(apikey=)?#redacted/;
/** The percent-encoded echo of the URL after redaction. */
const URL_ENCODED_REDACTED = /%2Fv2%2F#redacted%3F(apikey%3D)?#redacted/;

/** The secrets found in a text (empty when it is clean). */
function leaked(text: string): string[] {
  return SECRETS.filter((s) => text.includes(s));
}

/** A response as one text: status, every header (name and value) and the body. */
function responseText(r: SvcResponse): string {
  return `${r.status}\n${Object.entries(r.headers)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n')}\n\n${r.text}`;
}

/** A started svc whose pino logger (level trace) writes into {@link SvcWithLog.logText}. */
interface SvcWithLog {
  url: string;
  metricsUrl: string;
  proxy: Proxy;
  /** Every log line so far, joined. */
  logText(): string;
  post(path: string, body: unknown): Promise<SvcResponse>;
  close(): Promise<void>;
}

/**
 * Builds and starts svc like test/helpers/svc.ts `startSvc` does (127.0.0.1, port 0, metrics
 * port 0, short probe backoff), but with a trace-level pino logger into memory.
 * @param config raw config (a `metrics` key in it replaces the loopback default set here)
 */
async function startSvcWithLog(config: object): Promise<SvcWithLog> {
  // Metrics on loopback only (the default host is 0.0.0.0).
  config = { metrics: { host: '127.0.0.1' }, ...config };
  const lines: string[] = [];
  const logger = pino({ level: 'trace' }, { write: (s: string) => void lines.push(s) });
  const proxy = createProxy({ config, plugins: defaultPreset(), logger, port: 0, host: '127.0.0.1', metricsPort: 0, probeBackoffMs: 50 });
  let port: number;
  try {
    port = (await proxy.start()).port;
  } catch (e) {
    await proxy.close().catch(() => undefined);
    throw e;
  }
  const m = metricsAddress(proxy);
  if (!m) throw new Error('metrics listener is not running');
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    metricsUrl: `http://127.0.0.1:${m.port}/metrics`,
    proxy,
    logText: () => lines.join(''),
    post: (path, body) => httpRequest('POST', `${url}${path}`, typeof body === 'string' ? body : JSON.stringify(body)),
    close: () => proxy.close(),
  };
}

/** The raw config: projects `bearer` (header credentials), `basic` (URL user info), `both` (the two, swept). */
function secretsConfig(port: number): object {
  const bearerEndpoint = `http://127.0.0.1:${port}/v2/${PATH_KEY}?apikey=${QUERY_KEY}`;
  const basicEndpoint = `http://${USER}:${PASSWORD}@127.0.0.1:${port}/v2/${PATH_KEY}?apikey=${QUERY_KEY}`;
  const bearer = {
    endpoint: bearerEndpoint,
    evm: { chainId: CHAIN, statePollerInterval: '200ms' },
    jsonRpc: { headers: { 'x-api-key': HEADER_KEY, authorization: `Bearer ${BEARER}` } },
  };
  const basic = { endpoint: basicEndpoint, evm: { chainId: CHAIN, statePollerInterval: '200ms' }, jsonRpc: { headers: { 'x-api-key': HEADER_KEY } } };
  // No failsafe policies: one attempt per upstream, no breaker opening in the middle of a test.
  const project = (id: string, upstreams: object[]) => ({
    id,
    upstreamDefaults: { failsafe: [] },
    networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
    upstreams,
  });
  return {
    logLevel: 'trace',
    server: { maxTimeout: '5s' },
    projects: [
      project('bearer', [{ id: 'bearer-up', ...bearer }]),
      project('basic', [{ id: 'basic-up', ...basic }]),
      project('both', [
        { id: 'both-bearer', ...bearer },
        { id: 'both-basic', ...basic },
      ]),
    ],
  };
}

const rpc = (method: string, id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params: [] });

describe('e2e: upstream secrets are redacted everywhere', function () {
  this.timeout(20_000);

  let echo: EchoUpstream;
  let svc: SvcWithLog;
  /** Every response the tests got, for the final sweep. */
  const responses: SvcResponse[] = [];

  const call = async (project: string, body: unknown): Promise<SvcResponse> => {
    const r = await svc.post(`/${project}/evm/${CHAIN}`, body);
    responses.push(r);
    return r;
  };

  before(async () => {
    echo = await startEchoUpstream();
    svc = await startSvcWithLog(secretsConfig(echo.port));
    // Both kinds of upstream have been probed and polled at least once (the polls fail: echoes).
    await waitFor(() => ['bearer-up', 'basic-up'].every((id) => svc.logText().includes(`state poll of ${id} failed`)));
  });

  after(async () => {
    await svc?.close();
    await echo?.close();
  });

  it('the echo upstream really receives every secret (so the assertions below are not vacuous)', async () => {
    await call('bearer', rpc('echo_rpcError'));
    await call('basic', rpc('echo_rpcError'));
    const byAuth = (prefix: string) => echo.requests.filter((r) => String(r.headers.authorization ?? '').startsWith(prefix));
    const bearerReq = byAuth('Bearer ').at(-1);
    const basicReq = byAuth('Basic ').at(-1);
    expect(bearerReq, 'a request with the Bearer header').to.not.equal(undefined);
    expect(basicReq, 'a request with Basic auth from the URL user info').to.not.equal(undefined);
    expect(bearerReq!.headers.authorization).to.equal(`Bearer ${BEARER}`);
    expect(basicReq!.headers.authorization).to.equal(`Basic ${BASIC_B64}`);
    for (const r of [bearerReq!, basicReq!]) {
      expect(r.url).to.equal(`/v2/${PATH_KEY}?apikey=${QUERY_KEY}`);
      expect(r.headers['x-api-key']).to.equal(HEADER_KEY);
    }
  });

  for (const project of ['bearer', 'basic']) {
    describe(`project ${project}: single calls`, () => {
      for (const mode of ERROR_MODES) {
        it(`${mode}: an error reaches the client, with no secret in its body or headers`, async () => {
          const r = await call(project, rpc(mode, `${mode}-1`));
          expect(r.json, r.text).to.be.an('object');
          expect(r.json.id).to.equal(`${mode}-1`);
          expect(r.json.error, r.text).to.be.an('object');
          expect(leaked(responseText(r)), responseText(r)).to.deep.equal([]);
          expect(r.headers['x-svc-upstreams'], 'trace header').to.match(new RegExp(`^${project}-up=`));
        });
      }

      it('echo_rpcError: the message that echoed the URL and headers says #redacted in their place', async () => {
        const r = await call(project, rpc('echo_rpcError'));
        const msg: string = r.json.error.message;
        expect(msg).to.match(new RegExp(`url=${URL_REDACTED.source} `));
        expect(msg).to.include(`x-api-key=${REDACTED}`);
        if (project === 'bearer') expect(msg).to.include(`authorization=${REDACTED}`);
        else {
          expect(msg).to.include(`authorization=Basic ${REDACTED}`);
          expect(msg).to.include(`basic=${REDACTED}:${REDACTED}`);
        }
        // The percent-encoded echo of the URL is redacted too.
        expect(msg).to.match(new RegExp(`encoded=${URL_ENCODED_REDACTED.source} `));
      });

      it('echo_data: error.data keeps its shape (nested object) with the secrets replaced', async () => {
        const r = await call(project, rpc('echo_data'));
        const data = r.json.error.data;
        expect(data, r.text).to.be.an('object');
        expect(data.url).to.match(new RegExp(`^${URL_REDACTED.source}$`));
        expect(data.urlEncoded).to.match(new RegExp(`^${URL_ENCODED_REDACTED.source}$`));
        expect(data.apiKey).to.equal(REDACTED);
        expect(data.nested.list[0]).to.be.a('string').and.include(REDACTED);
        expect(data.nested.list[1].deeper).to.be.a('string').and.include(REDACTED);
      });

      it('echo_dataString: a string error.data is redacted', async () => {
        const r = await call(project, rpc('echo_dataString'));
        expect(r.json.error.data).to.be.a('string').and.match(URL_REDACTED);
      });

      it("echo_revert: the pass-through revert keeps the upstream's code 3, with message and data redacted", async () => {
        const r = await call(project, rpc('echo_revert'));
        expect(r.json.error.code).to.equal(3);
        expect(r.json.error.message)
          .to.match(/^execution reverted: /)
          .and.match(URL_REDACTED);
        expect(r.json.error.data).to.be.a('string').and.include(`x-api-key=${REDACTED}`);
      });

      it('echo_500 and echo_garbage: the non-JSON bodies are quoted redacted, not dropped', async () => {
        for (const mode of ['echo_500', 'echo_garbage']) {
          const r = await call(project, rpc(mode));
          expect(r.json.error.message, mode).to.match(URL_REDACTED);
        }
      });

      it('a batch of every error shape: each element is an error, none carries a secret', async () => {
        const body = ERROR_MODES.map((m, i) => rpc(m, i + 1));
        const r = await call(project, body);
        expect(r.json, r.text).to.be.an('array').with.length(ERROR_MODES.length);
        for (const el of r.json as { id: number; error?: unknown }[]) expect(el.error, JSON.stringify(el)).to.be.an('object');
        expect(leaked(responseText(r)), responseText(r)).to.deep.equal([]);
        expect(r.text).to.include(REDACTED);
      });
    });
  }

  // Mocha runs a suite's own tests before its child suites: these see every call made above.
  describe('afterwards: sweep over both upstreams, the log, /metrics, every response', () => {
    it('project both: an error swept over both upstreams (single and batch) carries no secret', async () => {
      for (const mode of ERROR_MODES) {
        const r = await call('both', rpc(mode));
        expect(r.json.error, r.text).to.be.an('object');
        // A revert is a fact about the request: not retried on the second upstream.
        if (mode !== 'echo_revert') expect(r.headers['x-svc-upstreams'], mode).to.match(/^both-bearer=primary:[a-z_]+:\d+;both-basic=sweep:/);
        expect(leaked(responseText(r)), `${mode}: ${responseText(r)}`).to.deep.equal([]);
      }
      const r = await call(
        'both',
        ERROR_MODES.map((m, i) => rpc(m, i)),
      );
      expect(r.json).to.be.an('array').with.length(ERROR_MODES.length);
      expect(leaked(responseText(r)), responseText(r)).to.deep.equal([]);
    });

    it('the log (pino at trace) carries no secret, and its poll-failure lines say #redacted', async () => {
      const text = svc.logText();
      expect(text.length).to.be.greaterThan(0);
      expect(text).to.include('upstream basic-up verified on evm:31337');
      expect(text).to.match(/state poll of (bearer|basic)-up failed/);
      expect(text).to.match(URL_REDACTED);
      expect(leaked(text)).to.deep.equal([]);
    });

    it('/metrics carries no secret', async () => {
      const r = await httpRequest('GET', svc.metricsUrl);
      expect(r.status).to.equal(200);
      expect(r.text).to.include('svc_');
      expect(leaked(responseText(r))).to.deep.equal([]);
    });

    it('no response of this suite carried a secret in its body or any header', () => {
      expect(responses.length).to.be.greaterThan(30);
      for (const r of responses) expect(leaked(responseText(r)), responseText(r)).to.deep.equal([]);
    });
  });
});

describe('e2e: upstream secrets in odd places', function () {
  this.timeout(20_000);

  /** Starts an echo upstream with `opts` and svc in front of it (project `basic` only). */
  async function withSvc(opts: EchoUpstreamOptions, fn: (svc: SvcWithLog, echo: EchoUpstream) => Promise<void>): Promise<void> {
    const echo = await startEchoUpstream(opts);
    const cfg = secretsConfig(echo.port) as { projects: { id: string }[] };
    cfg.projects = cfg.projects.filter((p) => p.id === 'basic');
    const svc = await startSvcWithLog(cfg);
    try {
      await fn(svc, echo);
    } finally {
      await svc.close();
      await echo.close();
    }
  }

  // BUG: plugins/evm-state/poller.ts builds `eth_getBlockByNumber(latest) answered <result>` (and the
  // same for `finalized` and `eth_syncing`) from the upstream's raw result and logs it unredacted.
  it('a state poll answered with a non-block result that echoes the secrets: logged redacted', async () => {
    await withSvc({ otherMethods: 'echo_result' }, async (svc) => {
      await waitFor(() => svc.logText().includes('state poll of basic-up failed'));
      const text = svc.logText();
      expect(text).to.include('eth_getBlockByNumber(latest) answered');
      expect(leaked(text), text.slice(0, 2000)).to.deep.equal([]);
    });
  });

  // BUG: core/host/proxy.ts `probe` throws `eth_chainId answered <result>` from the raw result and logs
  // it (warn "chain id probe failed") unredacted.
  it('a chain id probe answered with an echo instead of a chain id: logged redacted', async () => {
    await withSvc({ chainIdMode: 'echo_result' }, async (svc) => {
      await waitFor(() => svc.logText().includes('chain id probe failed'));
      const text = svc.logText();
      expect(leaked(text), text.slice(0, 2000)).to.deep.equal([]);
    });
  });

  // BUG: core/registry/transport.ts `excerpt` cuts the body at 200 characters before redacting, so
  // a secret across the cut is no longer matched and its first characters reach the client.
  it('a non-JSON body whose secret straddles the 200-character excerpt cut: no part of it reaches the client', async () => {
    await withSvc({}, async (svc) => {
      const r = await svc.post(`/basic/evm/${CHAIN}`, rpc('echo_garbageLong'));
      expect(r.json.error, r.text).to.be.an('object');
      // Not even the first five characters of the path key.
      expect(r.text).to.not.include(PATH_KEY.slice(0, 5));
    });
  });
  // BUG: core/registry/transport.ts sets `headers.authorization = Basic ...` after spreading
  // `jsonRpc.headers`: a lower-case `authorization` there is silently replaced by the URL's user
  // info, and a `Authorization` spelt otherwise is sent alongside it (two Authorization headers).
  it('URL user info plus a jsonRpc.headers Authorization: exactly one Authorization header is sent upstream', async () => {
    const echo = await startEchoUpstream();
    const endpoint = `http://${USER}:${PASSWORD}@127.0.0.1:${echo.port}/v2/${PATH_KEY}`;
    const up = (id: string, name: string) => ({
      id,
      endpoint,
      evm: { chainId: CHAIN, statePollerInterval: 0 },
      jsonRpc: { headers: { [name]: `Bearer ${BEARER}` } },
    });
    const svc = await startSvcWithLog({
      logLevel: 'trace',
      projects: [
        {
          id: 'lower',
          upstreamDefaults: { failsafe: [] },
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
          upstreams: [up('lower-up', 'authorization')],
        },
        {
          id: 'upper',
          upstreamDefaults: { failsafe: [] },
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN }, failsafe: [] }],
          upstreams: [up('upper-up', 'Authorization')],
        },
      ],
    });
    try {
      for (const project of ['lower', 'upper']) {
        await svc.post(`/${project}/evm/${CHAIN}`, rpc('echo_rpcError'));
        const req = echo.requests.at(-1)!;
        const auth = req.rawHeaders.filter((_, k) => k % 2 === 0 && req.rawHeaders[k]!.toLowerCase() === 'authorization').length;
        expect(auth, `${project}: ${JSON.stringify(req.rawHeaders)}`).to.equal(1);
        // The explicit header is the one configured for this upstream.
        expect(req.headers.authorization, project).to.equal(`Bearer ${BEARER}`);
      }
    } finally {
      await svc.close();
      await echo.close();
    }
  });

  // BUG: core/registry/transport.ts decodes the URL user info with a bare `decodeURIComponent`
  // (lib/redact.ts uses a safe decode): a password holding a literal `%` that is not an escape
  // (`50%off`) passes `svc validate` but makes `proxy.start()` throw `URIError: URI malformed`.
  it('a password with a literal `%` does not stop svc from starting', async () => {
    const echo = await startEchoUpstream();
    try {
      const svc = await startSvcWithLog({
        logLevel: 'trace',
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN } }],
            upstreams: [{ id: 'pct', endpoint: `http://${USER}:50%off@127.0.0.1:${echo.port}/`, evm: { chainId: CHAIN } }],
          },
        ],
      });
      await svc.close();
    } finally {
      await echo.close();
    }
  });
});

describe('unit: secretsOf / Redactor (lib/redact.ts)', () => {
  it('takes user info, long path segments, every query value, header values and the Basic base64', () => {
    const s = secretsOf(`https://${USER}:${PASSWORD}@rpc.example/v2/${PATH_KEY}?apikey=${QUERY_KEY}&n=1234`, {
      'x-api-key': HEADER_KEY,
      authorization: `Bearer ${BEARER}`,
    });
    for (const x of [USER, PASSWORD, PATH_KEY, QUERY_KEY, '1234', HEADER_KEY, `Bearer ${BEARER}`, BEARER, BASIC_B64]) expect(s, x).to.include(x);
  });

  it('short path segments (`v2`, `rpc`, `eth`) are routing, not secrets', () => {
    const s = secretsOf(`https://rpc.example/v2/rpc/eth/${PATH_KEY}`);
    for (const x of ['v2', 'rpc', 'eth', 'rpc.example']) expect(s, x).to.not.include(x);
    const r = new Redactor(s);
    expect(r.text(`POST /v2/rpc/eth/${PATH_KEY} failed`)).to.equal(`POST /v2/rpc/eth/${REDACTED} failed`);
  });

  it('strings under three characters are never secrets (a one-letter password would rewrite everything)', () => {
    const s = secretsOf('https://a:bc@rpc.example/');
    expect(s).to.not.include('a');
    expect(s).to.not.include('bc');
    expect(s).to.include(Buffer.from('a:bc').toString('base64'));
  });

  it('percent-encoded, percent-decoded and JSON-escaped forms are redacted', () => {
    // A path key and a query value with characters that are escaped in URLs and in JSON.
    const endpoint = 'https://rpc.example/k3y%2Bw1th%2Fslash?token=t%C3%B8ken%22quote%26amp';
    const r = new Redactor(secretsOf(endpoint));
    expect(r.text('raw k3y%2Bw1th%2Fslash')).to.equal(`raw ${REDACTED}`);
    expect(r.text('decoded k3y+w1th/slash')).to.equal(`decoded ${REDACTED}`);
    expect(r.text('decoded tøken"quote&amp')).to.equal(`decoded ${REDACTED}`);
    expect(r.text(`encoded ${encodeURIComponent('tøken"quote&amp')}`)).to.equal(`encoded ${REDACTED}`);
    expect(r.text(`json {"m":${JSON.stringify('tøken"quote&amp')}}`)).to.equal(`json {"m":"${REDACTED}"}`);
    // Percent-encoded user info (as written in the URL) and its decoded form.
    const u = new Redactor(secretsOf('https://me:p%40ss%2Fw0rd@rpc.example/'));
    expect(u.text('p%40ss%2Fw0rd and p@ss/w0rd')).to.equal(`${REDACTED} and ${REDACTED}`);
  });

  it('a secret that contains another is replaced whole (longest first), and matching is literal', () => {
    const r = new Redactor(['abc', 'abcdef', 'a.c']);
    expect(r.text('abcdef abc axc a.c')).to.equal(`${REDACTED} ${REDACTED} axc ${REDACTED}`);
    expect(new Redactor([]).empty).to.equal(true);
    expect(new Redactor([]).text('anything')).to.equal('anything');
  });

  it('the Basic credential after a space in a header value is a secret on its own', () => {
    const r = new Redactor(secretsOf('https://rpc.example/', { Authorization: `Basic ${BASIC_B64}` }));
    expect(r.text(`got ${BASIC_B64}`)).to.equal(`got ${REDACTED}`);
  });

  // BUG: lib/redact.ts takes query values from `URLSearchParams`, which form-decodes `+` to a
  // space; the value as written (`Zm9v+YmFy=`) is only matched inside the whole query string.
  it('a query value with `+` (a base64 API key) is redacted as written, not only in its form-decoded form', () => {
    const r = new Redactor(secretsOf('https://rpc.example/?a=1&key=Zm9v+YmFy='));
    expect(r.text('invalid api key Zm9v+YmFy=')).to.equal(`invalid api key ${REDACTED}`);
  });
});
