/**
 * End-to-end: errors that are facts about the request reach the client unchanged. Reverts, nonce, funds, gas and fee errors, invalid params, an unsupported method and
 * missing data come back with the upstream's own code, message and data byte for byte; svc's
 * normalised name goes into the trace, the metric labels, and `error.data` only where the
 * upstream sent none. svc's own errors (an unknown network, a getLogs range over the limit) keep
 * svc's codes. Missing data is still retried on another upstream.
 *
 * Two sources of exchanges:
 * - test/fixtures/upstream-errors.json: upstream error answers written for this suite, each
 *   naming where its code and message come from (the execution-apis spec and its geth-recorded
 *   tests, geth's error texts, issue threads quoting other nodes). A tiny node:http upstream
 *   replays each answer with the `id` member replaced by svc's id and every other byte kept.
 * - a live anvil: erroring requests are sent to anvil directly and through svc, and the two
 *   error objects are compared (nothing recorded from anvil is committed).
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseGwei, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { presetWithout, startSvc, waitFor, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { ADDR0, ADDR1, PK0, REVERT_INIT, deployDirect } from './fixtures.ts';

const CHAIN = 31337;
const PATH = `/main/evm/${CHAIN}`;

/** One recorded exchange of test/fixtures/upstream-errors.json. */
interface Fixture {
  name: string;
  /** Where the code and message come from. */
  source: string;
  /** The name svc should classify the answer as (trace, metric label, `error.data.code`). */
  normalised: string;
  request: { method: string; params: unknown[] };
  /** The upstream's answer, exactly as its bytes go on the wire. */
  response: string;
  /** Set for missing-data answers: the call must be retried on another upstream. */
  missingData?: boolean;
}

const FIXTURES: Fixture[] = JSON.parse(readFileSync(new URL('../fixtures/upstream-errors.json', import.meta.url), 'utf8')) as Fixture[];

/** The checks a fixture goes through (see the describe blocks below). */
type Check = 'exact' | 'details' | 'noRetry' | 'retry' | 'bothMissing';

/** Why an unclassified upstream error fails the checks (see KNOWN_ISSUES). */
const UNCLASSIFIED =
  'no rule of plugins/evm-errors/rules.ts knows this code or message, so it falls to ErrEndpointServerSideException: retryable (re-sent to every other upstream), ' +
  'not a pass-through class (svc rebuilds the object, writing the message with JSON.stringify and its own cause chain as data); ' +
  'with several upstreams the client gets svc\'s "all upstream attempts failed (n ErrEndpointServerSideException)" under the node\'s code';
const REBUILT =
  'toJsonRpcError (core/wire/errors.ts) rebuilds the object as {"code","message","data"} from its pieces, so the upstream\'s member order is lost';
/**
 * Fixtures svc does not pass through today, with what it does instead and which checks that
 * breaks (reported, not fixed here: this suite must not change svc). Those checks are pending
 * until svc is fixed; delete an entry to turn its checks back on.
 */
const KNOWN_ISSUES: Record<string, { checks: Check[]; issue: string }> = {};

// ---------------------------------------------------------------------------------------
// A small JSON text walker, independent of svc's own (lib/json-scan.ts), so the suite does not
// check svc with svc's code.

function skipWs(s: string, i: number): number {
  while (i < s.length && ' \t\r\n'.includes(s[i] as string)) i++;
  return i;
}

function skipString(s: string, i: number): number {
  for (i++; i < s.length; ) {
    const c = s[i];
    if (c === '\\') i += 2;
    else if (c === '"') return i + 1;
    else i++;
  }
  throw new Error(`unterminated string in ${s}`);
}

function valueEnd(s: string, i: number): number {
  const c = s[i];
  if (c === '"') return skipString(s, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    while (i < s.length) {
      const d = s[i];
      if (d === '"') {
        i = skipString(s, i);
        continue;
      }
      if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    throw new Error(`unterminated value in ${s}`);
  }
  while (i < s.length && !',}] \t\r\n'.includes(s[i] as string)) i++;
  return i;
}

/** Start and end of the value of a top-level member of a JSON object text. */
function memberSpan(s: string, key: string): [number, number] | undefined {
  let i = skipWs(s, 0);
  if (s[i] !== '{') return undefined;
  i++;
  for (;;) {
    i = skipWs(s, i);
    if (s[i] !== '"') return undefined;
    const keyEnd = skipString(s, i);
    const k = JSON.parse(s.slice(i, keyEnd)) as string;
    i = skipWs(s, keyEnd);
    if (s[i] !== ':') throw new Error(`no colon after key ${k} in ${s}`);
    i = skipWs(s, i + 1);
    const end = valueEnd(s, i);
    if (k === key) return [i, end];
    i = skipWs(s, end);
    if (s[i] === ',') i++;
  }
}

/** The raw text of a top-level member (e.g. the whole `error` object as written). */
function memberText(s: string, key: string): string | undefined {
  const span = memberSpan(s, key);
  return span && s.slice(span[0], span[1]);
}

/** `text` with its top-level `id` value replaced by `idRaw`, every other byte kept. */
function withId(text: string, idRaw: string): string {
  const span = memberSpan(text, 'id');
  if (!span) throw new Error(`no id member in ${text}`);
  return text.slice(0, span[0]) + idRaw + text.slice(span[1]);
}

// ---------------------------------------------------------------------------------------
// Fake upstreams

/** What a fake upstream answers for one request: raw response text (its id is replaced), or undefined. */
type Answerer = (method: string, params: unknown) => string | undefined;

interface FakeUpstream {
  url: string;
  /** Every request received (batch elements one by one). */
  calls: { method: string; params: unknown }[];
  close(): Promise<void>;
}

const CHAIN_ID_ANSWER = '{"jsonrpc":"2.0","id":0,"result":"0x7a69"}';

/**
 * A node:http JSON-RPC upstream: `eth_chainId` is 0x7a69; anything else is what `answer` says,
 * with the id member replaced by the incoming id; a request it has no answer for gets an error
 * naming it (which no fixture expects, so a test sees it).
 */
async function startFake(answer: Answerer): Promise<FakeUpstream> {
  const calls: FakeUpstream['calls'] = [];
  const one = (req: { id?: unknown; method?: string; params?: unknown }): string => {
    const method = String(req.method);
    calls.push({ method, params: req.params });
    const text =
      method === 'eth_chainId'
        ? CHAIN_ID_ANSWER
        : (answer(method, req.params) ??
          `{"jsonrpc":"2.0","id":0,"error":{"code":-32099,"message":${JSON.stringify(`fake upstream: nothing recorded for ${method} ${JSON.stringify(req.params)}`)}}}`);
    return withId(text, JSON.stringify(req.id ?? null));
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      const text = Array.isArray(body) ? `[${body.map((b) => one(b as { method?: string })).join(',')}]` : one(body as { method?: string });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(text);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Answers the fixture in play when the request is the fixture's request (method and params). */
function replayer(current: () => Fixture | undefined): Answerer {
  return (method, params) => {
    const f = current();
    if (f && method === f.request.method && JSON.stringify(params) === JSON.stringify(f.request.params)) return f.response;
    // svc's idempotent broadcast asks whether a "nonce too low" transaction is already known.
    if (method === 'eth_getTransactionByHash') return '{"jsonrpc":"2.0","id":0,"result":null}';
    return undefined;
  };
}

/** An upstream that has the data: answers every call with a result. */
const GOOD_RESULT = '0x000000000000000000000000000000000000000000000000000000000000002a';
const good: Answerer = () => `{"jsonrpc":"2.0","id":0,"result":"${GOOD_RESULT}"}`;

// ---------------------------------------------------------------------------------------
// svc

/** A one-project, one-network config over the given upstreams. */
function svcConfig(upstreams: { id: string; url: string }[], server: Record<string, unknown> = {}): object {
  return {
    logLevel: 'error',
    server,
    projects: [
      {
        id: 'main',
        // The policy re-evaluates every hour: config order stays the order during the suite.
        networks: [{ architecture: 'evm', evm: { chainId: CHAIN, getLogsMaxAllowedRange: 1000 }, selectionPolicy: { evalInterval: '1h' } }],
        upstreams: upstreams.map((u) => ({ id: u.id, endpoint: u.url, evm: { chainId: CHAIN } })),
      },
    ],
  };
}

async function start(upstreams: { id: string; url: string }[], server: Record<string, unknown> = {}): Promise<SvcHandle> {
  const svc = await startSvc(svcConfig(upstreams, server), { plugins: presetWithout('evm-state') });
  const net = svc.proxy.projects.get('main')!.networks.get(`evm:${CHAIN}`)!;
  await waitFor(() => net.upstreams.length === upstreams.length && net.upstreams.every((u) => u.state === 'ready'));
  return svc;
}

/** Sends a fixture's request through svc with the given client id (raw JSON text). */
function send(svc: SvcHandle, f: { request: { method: string; params: unknown[] } }, idRaw: string): Promise<SvcResponse> {
  return svc.post(PATH, `{"jsonrpc":"2.0","id":${idRaw},"method":${JSON.stringify(f.request.method)},"params":${JSON.stringify(f.request.params)}}`);
}

/** The client ids used, one per fixture: numbers and strings alike. */
const clientId = (i: number) => (i % 2 === 0 ? String(1000 + i) : JSON.stringify(`client-${i}`));

/** Sum of `svc_upstream_request_errors_total` samples for an upstream and error name. */
async function errorCount(svc: SvcHandle, upstream: string, error: string): Promise<number> {
  const text = await svc.proxy.metrics.metrics();
  let n = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('svc_upstream_request_errors_total{') && line.includes(`upstream="${upstream}"`) && line.includes(`error="${error}"`)) {
      n += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return n;
}

/** Methods whose `error.data` clients read as revert bytes: svc never adds its details there. */
const REVERT_DATA_METHODS = new Set(['eth_call', 'eth_estimateGas']);

/** Skips a check svc is known to fail for this fixture (see KNOWN_ISSUES). */
function skipKnown(ctx: Mocha.Context, f: Fixture, check: Check): void {
  const known = KNOWN_ISSUES[f.name];
  if (known?.checks.includes(check)) {
    ctx.test!.title += ` [pending, known svc issue: ${known.issue}]`;
    ctx.skip();
  }
}

/**
 * Checks `X-SVC-Upstreams`: the failed attempt at `upstream` first and alone; after a "nonce too
 * low" from eth_sendRawTransaction, svc's own lookup of the transaction by hash (idempotent
 * broadcast, which sweeps the upstreams for a non-null answer) may follow.
 */
function expectTrace(res: SvcResponse, upstream: string, method: string): void {
  const header = res.headers['x-svc-upstreams'] ?? '';
  const segs = header.split(';');
  expect(segs[0], `X-SVC-Upstreams: ${header}`).to.match(new RegExp(`^${upstream}=primary:(error|exec_revert):\\d+$`));
  const rest = segs.slice(1);
  if (method === 'eth_sendRawTransaction')
    for (const s of rest) expect(s, `X-SVC-Upstreams: ${header}`).to.match(/^[a-z-]+=(primary|sweep):(success|error):\d+(:won)?$/);
  else expect(rest, `X-SVC-Upstreams: ${header}`).to.deep.equal([]);
  expect(res.headers['x-svc-upstream-attempts']).to.equal(String(segs.length));
}

// ---------------------------------------------------------------------------------------

describe('e2e: upstream errors that are facts reach the client byte for byte', function () {
  this.timeout(30_000);

  it('the fixture file is well formed: every response is a JSON-RPC error answer whose id comes before its error', () => {
    expect(FIXTURES.length).to.be.greaterThan(30);
    const names = new Set<string>();
    for (const f of FIXTURES) {
      expect(names.has(f.name), `duplicate fixture name ${f.name}`).to.equal(false);
      names.add(f.name);
      expect(f.source, f.name).to.be.a('string').and.not.equal('');
      expect(f.normalised, f.name).to.match(/^Err[A-Za-z]+$/);
      const parsed = JSON.parse(f.response) as { jsonrpc: string; error: { code: number; message: string } };
      expect(parsed.jsonrpc, f.name).to.equal('2.0');
      expect(parsed.error.code, f.name).to.be.a('number');
      expect(parsed.error.message, f.name).to.be.a('string');
      expect(memberSpan(f.response, 'id')![0], f.name).to.be.lessThan(memberSpan(f.response, 'error')![0]);
      expect(JSON.parse(withId(f.response, '"x"')).id, f.name).to.equal('x');
    }
    // Every known-issue entry names a fixture (a renamed fixture must not silently lose its entry).
    for (const name of Object.keys(KNOWN_ISSUES)) expect(names.has(name), `KNOWN_ISSUES names no fixture: ${name}`).to.equal(true);
    // The escaped-characters case is in the file as Go writes it.
    expect(FIXTURES.some((f) => f.response.includes('\\u003c') && f.response.includes('\\u0026') && f.response.includes('\\u003e'))).to.equal(true);
  });

  describe('one upstream replaying each answer, server.includeErrorDetails false', () => {
    let fake: FakeUpstream;
    let svc: SvcHandle;
    let current: Fixture | undefined;

    before(async () => {
      fake = await startFake(replayer(() => current));
      svc = await start([{ id: 'replay', url: fake.url }], { includeErrorDetails: false });
    });
    after(async () => {
      await svc?.close();
      await fake?.close();
    });

    FIXTURES.forEach((f, i) => {
      it(`${f.name}: the error object is the upstream's, byte for byte`, async function () {
        skipKnown(this, f, 'exact');
        current = f;
        const before = fake.calls.length;
        const res = await send(svc, f, clientId(i));
        const forwarded = fake.calls.slice(before).filter((c) => c.method === f.request.method);
        expect(forwarded.length, 'the request reached the upstream').to.be.greaterThan(0);
        expect(forwarded[0]!.params, 'params forwarded unchanged').to.deep.equal(f.request.params);
        expect(res.status, res.text).to.equal(200);
        expect(memberText(res.text, 'id')).to.equal(clientId(i));
        expect(memberText(res.text, 'error'), res.text).to.equal(memberText(f.response, 'error'));
        expect(memberText(res.text, 'result')).to.equal(undefined);
      });
    });
  });

  describe('one upstream replaying each answer, default server settings (includeErrorDetails true)', () => {
    let fake: FakeUpstream;
    let svc: SvcHandle;
    let current: Fixture | undefined;

    before(async () => {
      fake = await startFake(replayer(() => current));
      svc = await start([{ id: 'replay', url: fake.url }]);
    });
    after(async () => {
      await svc?.close();
      await fake?.close();
    });

    FIXTURES.forEach((f, i) => {
      const upstreamError = memberText(f.response, 'error')!;
      const hasData = memberText(upstreamError, 'data') !== undefined;
      const title =
        hasData || REVERT_DATA_METHODS.has(f.request.method)
          ? `${f.name}: the error object is the upstream's, byte for byte; ${f.normalised} in the trace and the metric label`
          : `${f.name}: code and message are the upstream's byte for byte, error.data.code is ${f.normalised} (the upstream sent no data)`;
      it(title, async function () {
        skipKnown(this, f, 'details');
        current = f;
        const errorsBefore = await errorCount(svc, 'replay', f.normalised);
        const res = await send(svc, f, clientId(i));
        expect(res.status, res.text).to.equal(200);
        expect(memberText(res.text, 'id')).to.equal(clientId(i));
        const got = memberText(res.text, 'error')!;
        if (hasData || REVERT_DATA_METHODS.has(f.request.method)) {
          expect(got, res.text).to.equal(upstreamError);
        } else {
          expect(memberText(got, 'code'), res.text).to.equal(memberText(upstreamError, 'code'));
          expect(memberText(got, 'message'), res.text).to.equal(memberText(upstreamError, 'message'));
          expect(res.json.error.data?.code, res.text).to.equal(f.normalised);
        }
        // The attempt is in the trace; the error counter counts only what is the upstream's fault
        // (an unclassified server error), never a fact about the request (docs/http-interface.md "Errors").
        expectTrace(res, 'replay', f.request.method);
        const charged = f.normalised === 'ErrEndpointServerSideException' ? 1 : 0;
        expect(await errorCount(svc, 'replay', f.normalised), `svc_upstream_request_errors_total{error="${f.normalised}"}`).to.equal(errorsBefore + charged);
      });
    });
  });

  describe('a fact is answered by the first upstream and never retried on another', () => {
    /** Classes svc does not retry elsewhere (docs/http-interface.md "Errors" rule table: reverts, nonce, funds/fees, invalid params). */
    const FINAL = new Set(['ErrEndpointExecutionException', 'ErrEndpointNonceException', 'ErrEndpointClientSideException']);
    const facts = FIXTURES.filter((f) => FINAL.has(f.normalised));
    let current: Fixture | undefined;
    let first: FakeUpstream;
    let second: FakeUpstream;
    let svc: SvcHandle;

    before(async () => {
      first = await startFake(replayer(() => current));
      second = await startFake(replayer(() => current));
      svc = await start(
        [
          { id: 'first', url: first.url },
          { id: 'second', url: second.url },
        ],
        { includeErrorDetails: false },
      );
    });
    after(async () => {
      await svc?.close();
      await first?.close();
      await second?.close();
    });

    facts.forEach((f, i) => {
      it(`${f.name}: one attempt, the first upstream's error byte for byte`, async function () {
        skipKnown(this, f, 'noRetry');
        current = f;
        const before = second.calls.filter((c) => c.method === f.request.method).length;
        const res = await send(svc, f, clientId(i));
        expect(second.calls.filter((c) => c.method === f.request.method).length, 'calls to the second upstream').to.equal(before);
        expect(res.status, res.text).to.equal(200);
        expect(memberText(res.text, 'error'), res.text).to.equal(memberText(f.response, 'error'));
        expectTrace(res, 'first', f.request.method);
      });
    });
  });

  describe('missing data is still retried on another upstream (the name drives retries)', () => {
    const missing = FIXTURES.filter((f) => f.missingData);
    let current: Fixture | undefined;
    let replayA: FakeUpstream;
    let replayB: FakeUpstream;
    let goodUp: FakeUpstream;
    let retrying: SvcHandle;
    let bothMissing: SvcHandle;
    let bothMissingDetails: SvcHandle;

    before(async () => {
      replayA = await startFake(replayer(() => current));
      replayB = await startFake(replayer(() => current));
      goodUp = await startFake(good);
      retrying = await start([
        { id: 'lacking', url: replayA.url },
        { id: 'having', url: goodUp.url },
      ]);
      bothMissing = await start(
        [
          { id: 'lacking', url: replayA.url },
          { id: 'lacking-too', url: replayB.url },
        ],
        { includeErrorDetails: false },
      );
      bothMissingDetails = await start([
        { id: 'lacking', url: replayA.url },
        { id: 'lacking-too', url: replayB.url },
      ]);
    });
    after(async () => {
      await retrying?.close();
      await bothMissing?.close();
      await bothMissingDetails?.close();
      await replayA?.close();
      await replayB?.close();
      await goodUp?.close();
    });

    it('the fixture file holds missing-data answers', () => {
      expect(missing.length).to.be.greaterThanOrEqual(3);
      for (const f of missing) expect(f.normalised).to.equal('ErrEndpointMissingData');
    });

    missing.forEach((f, i) => {
      it(`${f.name}: the first upstream lacks the data, the second answers it`, async function () {
        skipKnown(this, f, 'retry');
        current = f;
        const res = await send(retrying, f, clientId(i));
        expect(res.status, res.text).to.equal(200);
        expect(res.json, res.text).to.deep.equal({ jsonrpc: '2.0', id: JSON.parse(clientId(i)), result: GOOD_RESULT });
        expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:error:\d+;having=sweep:success:\d+:won$/);
        expect(res.headers['x-svc-upstream']).to.equal('having');
      });

      it(`${f.name}: when both lack it, the client gets the node's own error byte for byte`, async function () {
        skipKnown(this, f, 'bothMissing');
        current = f;
        const res = await send(bothMissing, f, clientId(i));
        expect(res.status, res.text).to.equal(200);
        expect(memberText(res.text, 'id')).to.equal(clientId(i));
        expect(memberText(res.text, 'error'), res.text).to.equal(memberText(f.response, 'error'));
        expect(res.headers['x-svc-upstreams']).to.match(/^lacking=primary:error:\d+;lacking-too=sweep:error:\d+$/);
      });

      it(`${f.name}: when both lack it (default settings), code and message are the node's and data names each attempt`, async function () {
        skipKnown(this, f, 'bothMissing');
        current = f;
        const res = await send(bothMissingDetails, f, clientId(i));
        const upstreamError = memberText(f.response, 'error')!;
        const got = memberText(res.text, 'error')!;
        expect(res.status, res.text).to.equal(200);
        expect(memberText(got, 'code'), res.text).to.equal(memberText(upstreamError, 'code'));
        expect(memberText(got, 'message'), res.text).to.equal(memberText(upstreamError, 'message'));
        if (memberText(upstreamError, 'data') === undefined && !REVERT_DATA_METHODS.has(f.request.method)) {
          const causes = (res.json.error.data?.cause ?? []) as { code: string }[];
          expect(
            causes.map((c) => c.code),
            res.text,
          ).to.deep.equal(['ErrEndpointMissingData', 'ErrEndpointMissingData']);
        }
      });
    });
  });

  describe("svc's own errors keep svc's codes", () => {
    let fake: FakeUpstream;
    let svc: SvcHandle;

    before(async () => {
      fake = await startFake(() => undefined);
      svc = await start([{ id: 'replay', url: fake.url }]);
    });
    after(async () => {
      await svc?.close();
      await fake?.close();
    });

    it('an unknown network: ErrNetworkNotSupported, -32602, HTTP 404', async () => {
      const res = await svc.post('/main/evm/1', { jsonrpc: '2.0', id: 5, method: 'eth_blockNumber', params: [] });
      expect(res.status).to.equal(404);
      expect(res.json.error.code).to.equal(-32602);
      expect(res.json.error.message).to.equal('network evm:1 is not supported by project main; served: /main/evm/31337');
      expect(res.json.error.data.code).to.equal('ErrNetworkNotSupported');
    });

    it("a getLogs range over getLogsMaxAllowedRange: -32012 with svc's message, never forwarded", async () => {
      const before = fake.calls.length;
      const res = await svc.post(PATH, { jsonrpc: '2.0', id: 6, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x1000' }] });
      expect(res.status).to.equal(200);
      expect(res.json.id).to.equal(6);
      expect(res.json.error.code).to.equal(-32012);
      expect(res.json.error.message).to.equal('getLogs request exceeded max allowed range: 4097 blocks (0x0..0x1000) is over getLogsMaxAllowedRange 1000');
      expect(res.json.error.data.code).to.equal('ErrGetLogsExceededMaxAllowedRange');
      expect(fake.calls.slice(before).filter((c) => c.method === 'eth_getLogs')).to.have.length(0);
      expect(res.headers['x-svc-upstream-attempts']).to.equal('0');
    });
  });

  describe('live anvil: each erroring request through svc answers what anvil answers', function () {
    this.timeout(60_000);

    let anvil: AnvilHandle;
    let exact: SvcHandle;
    let withDetails: SvcHandle;
    let revertAddr: string;

    /** Posts a raw body to anvil directly and returns the answer text. */
    async function direct(body: string): Promise<string> {
      const res = await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return res.text();
    }

    before(async () => {
      anvil = await startAnvil({ chainId: CHAIN });
      revertAddr = await deployDirect(anvil, REVERT_INIT);
      exact = await start([{ id: 'anvil', url: anvil.url }], { includeErrorDetails: false });
      withDetails = await start([{ id: 'anvil', url: anvil.url }]);
    });
    after(async () => {
      await exact?.close();
      await withDetails?.close();
      await anvil?.stop();
    });

    const eip1559 = (o: { nonce: number; gas?: bigint; maxFeePerGas?: bigint; maxPriorityFeePerGas?: bigint; chainId?: number; value?: bigint }) => ({
      chainId: o.chainId ?? CHAIN,
      type: 'eip1559' as const,
      to: ADDR1 as Hex,
      value: o.value ?? 1n,
      nonce: o.nonce,
      gas: o.gas ?? 21_000n,
      maxFeePerGas: o.maxFeePerGas ?? parseGwei('20'),
      maxPriorityFeePerGas: o.maxPriorityFeePerGas ?? parseGwei('1'),
    });

    /** The live cases: a name and a builder of [method, params] (built once anvil runs). */
    const CASES: Array<[string, () => Promise<[string, unknown[]]>]> = [
      ['eth_call to a reverting contract (code 3, revert bytes)', async () => ['eth_call', [{ from: ADDR0, to: revertAddr, data: '0x' }, 'latest']]],
      ['eth_estimateGas of a reverting call', async () => ['eth_estimateGas', [{ from: ADDR0, to: revertAddr, data: '0x' }]]],
      [
        'eth_sendRawTransaction with a used nonce (nonce too low)',
        async () => ['eth_sendRawTransaction', [await privateKeyToAccount(PK0 as Hex).signTransaction(eip1559({ nonce: 0 }))]],
      ],
      [
        'eth_sendRawTransaction with max fee below the base fee',
        async () => [
          'eth_sendRawTransaction',
          [await privateKeyToAccount(PK0 as Hex).signTransaction(eip1559({ nonce: 1, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n }))],
        ],
      ],
      [
        'eth_sendRawTransaction with gas below intrinsic gas',
        async () => ['eth_sendRawTransaction', [await privateKeyToAccount(PK0 as Hex).signTransaction(eip1559({ nonce: 1, gas: 20_000n }))]],
      ],
      [
        'eth_sendRawTransaction from an unfunded account',
        async () => ['eth_sendRawTransaction', [await privateKeyToAccount(generatePrivateKey()).signTransaction(eip1559({ nonce: 0 }))]],
      ],
      [
        'eth_sendRawTransaction signed for another chain',
        async () => ['eth_sendRawTransaction', [await privateKeyToAccount(PK0 as Hex).signTransaction(eip1559({ nonce: 1, chainId: 1 }))]],
      ],
      ['eth_sendRawTransaction with undecodable bytes', async () => ['eth_sendRawTransaction', ['0x1234']]],
      [
        'eth_call with value from an unfunded account',
        async () => ['eth_call', [{ from: '0x00000000000000000000000000000000000000c0', to: ADDR1, value: '0xffffffffffffffffffff' }, 'latest']],
      ],
      ['eth_getBalance with a malformed address (invalid params)', async () => ['eth_getBalance', ['0x12', 'latest']]],
      ['eth_getBalance at a block past the head', async () => ['eth_getBalance', [ADDR0, '0x100000']]],
      ['an unknown method', async () => ['eth_foo', []]],
    ];

    CASES.forEach(([name, build], i) => {
      it(`${name}: error object identical to anvil's direct answer`, async () => {
        const [method, params] = await build();
        const body = `{"jsonrpc":"2.0","id":${clientId(i)},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`;
        const through = await exact.post(PATH, body);
        const straight = await direct(body);
        const anvilError = memberText(straight, 'error');
        expect(anvilError, `anvil answered an error: ${straight}`).to.not.equal(undefined);
        expect(through.status, through.text).to.equal(200);
        expect(memberText(through.text, 'id')).to.equal(clientId(i));
        expect(memberText(through.text, 'error'), through.text).to.equal(anvilError);
        expectTrace(through, 'anvil', method);

        // Default settings: the same unless anvil sent no data, where svc's name fills error.data.
        const shown = await withDetails.post(PATH, body);
        const got = memberText(shown.text, 'error')!;
        expect(shown.status, shown.text).to.equal(200);
        if (memberText(anvilError!, 'data') !== undefined || REVERT_DATA_METHODS.has(method)) {
          expect(got, shown.text).to.equal(anvilError);
        } else {
          expect(memberText(got, 'code'), shown.text).to.equal(memberText(anvilError!, 'code'));
          expect(memberText(got, 'message'), shown.text).to.equal(memberText(anvilError!, 'message'));
          expect(shown.json.error.data.code, shown.text).to.match(/^ErrEndpoint[A-Za-z]+$/);
        }
      });
    });
  });
});
