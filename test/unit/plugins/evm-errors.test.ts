/**
 * The EVM fault rules (plugins/evm-errors/rules.ts), one block per rule of NORMALISATION_RULES,
 * in the table's order. Every input names where its text came from:
 *  - "anvil 1.7.1": captured from a real anvil (the `live anvil` block below re-captures them
 *    and fails if anvil's wording drifts from the recorded strings);
 *  - "geth": go-ethereum's own error strings;
 *  - provider texts: public reports quoted with their address;
 *  - "eRPC error normalizer notes": the typical wording eRPC's normaliser matches on.
 */
import { expect } from 'chai';
import {
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointNonceException,
  ErrEndpointRequestTooLarge,
  ErrEndpointServerSideException,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  type SvcError,
} from '../../../core/wire/errors.ts';
import { toJsonRpcError } from '../../../core/wire/errors-wire.ts';
import { classifyEvmFault, ERROR_STRING_SELECTOR, NORMALISATION_RULES } from '../../../plugins/evm-errors/rules.ts';
import { nameUpstreamFault, type UpstreamFault } from '../../../core/wire/fault.ts';
import { startAnvil, type AnvilHandle } from '../../helpers/anvil.ts';

type ErrClass = abstract new (...args: never[]) => SvcError;

/** An upstream error body as anvil/geth/a provider wrote it. */
interface Sample {
  status?: number;
  code?: number;
  message: string;
  data?: unknown;
  method?: string;
}

function norm(s: Sample): SvcError {
  const f: UpstreamFault = { status: s.status ?? 200, message: s.message, method: s.method ?? 'eth_call' };
  if (s.code !== undefined) f.code = s.code;
  if (s.data !== undefined) f.data = s.data;
  return normaliseUpstreamError(f);
}

/** A fault named as the transport names it with the evm-errors plugin applied. */
function normaliseUpstreamError(f: UpstreamFault): SvcError {
  return nameUpstreamFault(f, 'u1', classifyEvmFault);
}

function expectNorm(s: Sample, cls: ErrClass, code?: number): SvcError {
  const e = norm(s);
  expect(e, `${JSON.stringify(s.message)} -> ${e.name}`).to.be.instanceOf(cls);
  if (code !== undefined) expect(e.code, `code of ${e.name} for ${JSON.stringify(s.message)}`).to.equal(code);
  return e;
}

// ---------------------------------------------------------------------------------------
// Texts captured from anvil 1.7.1 (see the `live anvil` block, which re-captures them).

const REVERT_NOPE_DATA =
  '0x08c379a0000000000000000000000000000000000000000000000000000000000000002000000000000000000000000000000000000000000000000000000000000000046e6f706500000000000000000000000000000000000000000000000000000000';

const ANVIL = {
  /** eth_call to a contract whose code is `revert Error("nope")`. */
  revertString: { code: 3, message: 'execution reverted: nope', data: REVERT_NOPE_DATA },
  /** eth_call to a contract reverting with the 4-byte custom error 0xdeadbeef. */
  revertCustom: { code: 3, message: 'execution reverted: custom error 0xdeadbeef', data: '0xdeadbeef' },
  /** eth_call to a contract doing `revert(0, 0)`. */
  revertEmpty: { code: 3, message: 'execution reverted', data: '0x' },
  /** `eth_foo` (unknown method). */
  methodNotFound: { code: -32601, message: 'Method not found' },
  /** eth_getBalance(["0xnotanaddress", "latest"]). */
  invalidAddress: { code: -32602, message: 'invalid string length' },
  /** eth_getBlockByNumber(["latest"]) (one param missing). */
  invalidArity: { code: -32602, message: 'invalid length 1, expected tuple variant EthRequest::EthGetBlockByNumber with 2 elements' },
  /** eth_getBalance at block 0x100000 on a fresh chain. */
  blockOutOfRange: { code: -32602, message: 'BlockOutOfRangeError: block height is 0 but requested was 1048576' },
  /** eth_sendTransaction with nonce 0 after one mined transaction. */
  nonceTooLow: { code: -32003, message: 'nonce too low' },
  /** eth_sendTransaction of 10^30 wei from a dev account. */
  insufficientFunds: { code: -32003, message: 'Insufficient funds for gas * price + value' },
  /** The same signed raw transaction sent twice while mining is paused (anvil's "already known"). */
  alreadyImported: { code: -32003, message: 'transaction already imported' },
} as const;

describe('evm-errors: the EVM fault rules', () => {
  it('rule table is in the issue order, after the eth_simulateV1 code rules', () => {
    expect(NORMALISATION_RULES.map((r) => r.name)).to.deep.equal([
      'simulate: nonce',
      'simulate: execution',
      'simulate: invalid input',
      'range too large',
      'billing',
      'capacity exceeded',
      'missing data',
      'execution reverted',
      'nonce',
      'insufficient funds / fee too low',
      'unsupported method',
      'invalid params',
      'unauthorized',
    ]);
  });

  it('the Error(string) selector', () => {
    expect(ERROR_STRING_SELECTOR).to.equal('0x08c379a0');
    expect(REVERT_NOPE_DATA.startsWith(ERROR_STRING_SELECTOR)).to.equal(true);
  });

  it('keeps upstream status, code and data on the normalised error', () => {
    const data = { from: '0xBDE5F8', limit: 10000, to: '0x102DBCC' };
    const e = norm({
      status: 200,
      code: -32005,
      message: 'query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].',
      data,
      method: 'eth_getLogs',
    });
    expect(e.upstreamStatus).to.equal(200);
    expect(e.upstreamData).to.equal(data);
    expect(e.details).to.deep.include({ upstreamCode: -32005, upstreamStatus: 200 });
    expect(e.message).to.equal('query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].');
  });

  describe('(1) range too large -> ErrEndpointRequestTooLarge (-32012)', () => {
    it('"query returned more than 10000 results" + "Try with this block range", code -32005 (Infura, https://github.com/ethers-io/ethers.js/issues/4703)', () => {
      // A -32005 code with a range message is a range problem, not a rate limit.
      const e = expectNorm(
        {
          code: -32005,
          message: 'query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].',
          data: { from: '0xBDE5F8', limit: 10000, to: '0x102DBCC' },
          method: 'eth_getLogs',
        },
        ErrEndpointRequestTooLarge,
        -32012,
      );
      expect(e.retryable).to.equal(true);
    });

    it('"query returned more than 10000 results" alone, code -32005 (geth-style cap, aurora-is-near/aurora-relayer#327)', () => {
      expectNorm({ code: -32005, message: 'query returned more than 10000 results', method: 'eth_getLogs' }, ErrEndpointRequestTooLarge, -32012);
    });

    it('"range too large" + "Try with this block range", code -32602 (Tenderly gateway text quoted in public client code)', () => {
      // -32602 would be rule 8 (invalid params); rule 1 comes first.
      expectNorm(
        {
          code: -32602,
          message:
            'invalid params: Block range too large for public access: maximum 1000 blocks. Try with this block range [0x308be15, 0x308c1fd], or use an access key for larger ranges.',
          method: 'eth_getLogs',
        },
        ErrEndpointRequestTooLarge,
        -32012,
      );
    });

    it('"max block range", code -32602 (GenLayer testnet node text quoted in public client config: "query exceeds max block range 10000")', () => {
      expectNorm({ code: -32602, message: 'query exceeds max block range 10000', method: 'eth_getLogs' }, ErrEndpointRequestTooLarge, -32012);
    });

    it('"range too large" in a -32000 message (source: eRPC error normalizer notes)', () => {
      expectNorm({ code: -32000, message: 'block range too large', method: 'eth_getLogs' }, ErrEndpointRequestTooLarge, -32012);
    });

    it('code -32012 alone (source: eRPC error normalizer notes, JsonRpcErrorEvmLargeRange)', () => {
      expectNorm({ code: -32012, message: 'request rejected', method: 'eth_getLogs' }, ErrEndpointRequestTooLarge, -32012);
    });

    it('Alchemy "this block range should work", code -32602 (https://github.com/ethers-io/ethers.js/issues/4703)', () => {
      expectNorm(
        {
          code: -32602,
          message:
            'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0x0, 0xd043b8]',
          method: 'eth_getLogs',
        },
        ErrEndpointRequestTooLarge,
        -32012,
      );
    });

    it('QuickNode HTTP 413, code -32614 "eth_getLogs is limited to a 10,000 range" (https://github.com/eternalsafe/wallet/issues/57)', () => {
      expectNorm({ status: 413, code: -32614, message: 'eth_getLogs is limited to a 10,000 range', method: 'eth_getLogs' }, ErrEndpointRequestTooLarge, -32012);
    });

    it('Infura -32602 "range 1000000 exceeds limit of 10000" (https://github.com/INFURA/infura/issues/237)', () => {
      expectNorm({ code: -32602, message: 'range 1000000 exceeds limit of 10000', method: 'eth_getLogs' }, ErrEndpointRequestTooLarge, -32012);
    });
  });

  describe('(2) HTTP 402 / billing -> ErrEndpointBillingIssue', () => {
    it('HTTP 402 (source: eRPC error normalizer notes)', () => {
      const e = expectNorm({ status: 402, message: 'Payment Required' }, ErrEndpointBillingIssue, -32005);
      expect(e.retryable).to.equal(true);
    });

    it('Alchemy "Monthly capacity limit exceeded ... /settings/billing" (https://alchemy-web.vercel.app/support/what-does-the-webhooks-capacity-limit-error-mean) is billing, not capacity', () => {
      expectNorm(
        {
          message:
            'Monthly capacity limit exceeded. Visit https://dashboard.alchemy.com/settings/billing to upgrade your scaling policy for continued service.',
        },
        ErrEndpointBillingIssue,
        -32005,
      );
    });

    it('"reached the free tier" (source: eRPC error normalizer notes)', () => {
      expectNorm({ code: -32000, message: 'You have reached the free tier limit for this endpoint' }, ErrEndpointBillingIssue);
    });
  });

  describe('(3) HTTP 429 / -32005 / "too many requests" / "rate limit" -> ErrEndpointCapacityExceeded (-32005, HTTP 429)', () => {
    it('bare HTTP 429 (source: eRPC error normalizer notes)', () => {
      const e = expectNorm({ status: 429, message: '' }, ErrEndpointCapacityExceeded, -32005);
      expect(e.httpStatus).to.equal(429);
      expect(e.retryable).to.equal(true);
    });

    it('Alchemy HTTP 429, code 429 "Your app has exceeded its compute units per second capacity" (https://alchemy.com/docs/reference/throughput)', () => {
      const message =
        'Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message. If not, check out https://docs.alchemy.com/reference/throughput';
      expectNorm({ status: 429, code: 429, message }, ErrEndpointCapacityExceeded, -32005);
      // The WebSocket form of the same answer arrives without HTTP 429.
      expectNorm({ status: 200, code: 429, message }, ErrEndpointCapacityExceeded, -32005);
    });

    it('Infura -32005 "project ID request rate exceeded" (https://github.com/web3/web3.js/issues/7284)', () => {
      expectNorm({ status: 429, code: -32005, message: 'project ID request rate exceeded' }, ErrEndpointCapacityExceeded, -32005);
      expectNorm({ status: 200, code: -32005, message: 'project ID request rate exceeded' }, ErrEndpointCapacityExceeded, -32005);
    });

    it('Infura HTTP 429 -32005 "legacy access request rate exceeded" with data (https://github.com/herdius/herdius-core/pull/58)', () => {
      const data = { reason: 'project ID not provided', see: 'https://infura.io/dashboard' };
      const e = expectNorm({ status: 429, code: -32005, message: 'legacy access request rate exceeded', data }, ErrEndpointCapacityExceeded, -32005);
      expect(e.upstreamData).to.equal(data);
    });

    it('QuickNode HTTP 429, -32007 "15/second request limit reached" (https://github.com/foundry-rs/foundry/issues/4894)', () => {
      expectNorm(
        { status: 429, code: -32007, message: '15/second request limit reached - reduce calls per second or upgrade your account at quicknode.com' },
        ErrEndpointCapacityExceeded,
        -32005,
      );
    });

    it('QuickNode -32007 "request limit reached" in an HTTP 200 JSON-RPC body (https://github.com/foundry-rs/foundry/issues/4894)', () => {
      expectNorm(
        { status: 200, code: -32007, message: '15/second request limit reached - reduce calls per second or upgrade your account at quicknode.com' },
        ErrEndpointCapacityExceeded,
        -32005,
      );
    });

    it('"too many requests" message (source: eRPC error normalizer notes)', () => {
      expectNorm({ code: -32000, message: 'Too many requests, please slow down' }, ErrEndpointCapacityExceeded, -32005);
    });

    it('"rate limit" message (source: eRPC error normalizer notes)', () => {
      expectNorm({ code: -32000, message: 'You have been rate limited, retry in 1s' }, ErrEndpointCapacityExceeded, -32005);
    });
  });

  describe('(4) missing data -> ErrEndpointMissingData (-32014)', () => {
    it('"missing trie node" (geth trie.MissingNodeError on a pruned node)', () => {
      const e = expectNorm(
        { code: -32000, message: 'missing trie node 5e8f4e42e8fc1e7fa0e9d1a8b2e5f3c0d7a7b4c1e2f3a4b5c6d7e8f9a0b1c2d3 (path ) <nil>', method: 'eth_getBalance' },
        ErrEndpointMissingData,
        -32014,
      );
      expect(e.retryable).to.equal(true);
    });

    it('"header not found" (geth internal/ethapi for a block the node does not have)', () => {
      expectNorm({ code: -32000, message: 'header not found', method: 'eth_getBalance' }, ErrEndpointMissingData, -32014);
    });

    it('code -32014 (source: eRPC error normalizer notes, JsonRpcErrorMissingData)', () => {
      expectNorm({ code: -32014, message: 'missing data', method: 'eth_getBlockByNumber' }, ErrEndpointMissingData, -32014);
    });
  });

  describe('(5) revert -> ErrEndpointExecutionException, upstream code 3 and data kept', () => {
    it('code 3 "execution reverted: nope" with Error(string) data (anvil 1.7.1, eth_call)', () => {
      const e = expectNorm({ ...ANVIL.revertString, method: 'eth_call' }, ErrEndpointExecutionException, 3);
      expect(e.upstreamData).to.equal(REVERT_NOPE_DATA);
      expect(e.message).to.equal('execution reverted: nope');
      expect(e.retryable).to.equal(false);
      expect(toJsonRpcError(e, 'eth_call', true)).to.deep.equal({ code: 3, message: 'execution reverted: nope', data: REVERT_NOPE_DATA });
    });

    it('code 3 custom error (anvil 1.7.1, eth_call)', () => {
      const e = expectNorm({ ...ANVIL.revertCustom, method: 'eth_call' }, ErrEndpointExecutionException, 3);
      expect(toJsonRpcError(e, 'eth_call', true)).to.deep.equal({ code: 3, message: 'execution reverted: custom error 0xdeadbeef', data: '0xdeadbeef' });
    });

    it('code 3 bare "execution reverted" with data 0x (anvil 1.7.1, eth_estimateGas)', () => {
      const e = expectNorm({ ...ANVIL.revertEmpty, method: 'eth_estimateGas' }, ErrEndpointExecutionException, 3);
      expect(toJsonRpcError(e, 'eth_estimateGas', true)).to.deep.equal({ code: 3, message: 'execution reverted', data: '0x' });
    });

    it('"execution reverted" with geth\'s -32000 keeps -32000 (geth before code 3 was introduced)', () => {
      expectNorm({ code: -32000, message: 'execution reverted' }, ErrEndpointExecutionException, -32000);
    });
  });

  describe('(6) nonce / insufficient funds', () => {
    it('"nonce too low" -> ErrEndpointNonceException -32003 (anvil 1.7.1, eth_sendTransaction)', () => {
      const e = expectNorm({ ...ANVIL.nonceTooLow, method: 'eth_sendTransaction' }, ErrEndpointNonceException, -32003);
      expect(e.retryable).to.equal(false);
    });

    it('"already known" -> ErrEndpointNonceException -32003 (geth txpool.ErrAlreadyKnown)', () => {
      expectNorm({ code: -32000, message: 'already known', method: 'eth_sendRawTransaction' }, ErrEndpointNonceException, -32003);
    });

    it('"transaction already imported" (anvil 1.7.1 wording of already-known) -> ErrEndpointNonceException -32003', () => {
      expectNorm({ ...ANVIL.alreadyImported, method: 'eth_sendRawTransaction' }, ErrEndpointNonceException, -32003);
    });

    it('"Insufficient funds for gas * price + value" -> ErrEndpointExecutionException -32003 (anvil 1.7.1, eth_sendTransaction)', () => {
      const e = expectNorm({ ...ANVIL.insufficientFunds, method: 'eth_sendTransaction' }, ErrEndpointExecutionException, -32003);
      expect(e.retryable).to.equal(false);
    });

    it('"insufficient funds for gas * price + value: address ... have 0 want ..." -> ErrEndpointExecutionException -32003 (geth core.ErrInsufficientFunds)', () => {
      expectNorm(
        {
          code: -32000,
          message: 'insufficient funds for gas * price + value: address 0x0000000000000000000000000000000000000001 have 0 want 1000000000000000000',
          method: 'eth_sendRawTransaction',
        },
        ErrEndpointExecutionException,
        -32003,
      );
    });
  });

  describe('(7) unsupported method -> ErrEndpointUnsupported (-32601)', () => {
    it('-32601 "Method not found" (anvil 1.7.1, eth_foo)', () => {
      const e = expectNorm({ ...ANVIL.methodNotFound, method: 'eth_foo' }, ErrEndpointUnsupported, -32601);
      expect(e.retryable).to.equal(true);
    });

    it('HTTP 405 (source: eRPC error normalizer notes)', () => {
      expectNorm({ status: 405, message: 'Method Not Allowed' }, ErrEndpointUnsupported, -32601);
    });

    it('"the method eth_foo does not exist/is not available" with -32601 (geth rpc methodNotFoundError)', () => {
      expectNorm({ code: -32601, message: 'the method eth_foo does not exist/is not available', method: 'eth_foo' }, ErrEndpointUnsupported, -32601);
    });

    it('the geth message alone, without a code, is enough (geth rpc methodNotFoundError text)', () => {
      expectNorm({ message: 'the method eth_foo does not exist/is not available', method: 'eth_foo' }, ErrEndpointUnsupported, -32601);
    });
  });

  describe('(8) invalid params -> ErrEndpointClientSideException (-32602)', () => {
    it('-32602 "invalid string length" (anvil 1.7.1, eth_getBalance with a bad address)', () => {
      const e = expectNorm({ ...ANVIL.invalidAddress, method: 'eth_getBalance' }, ErrEndpointClientSideException, -32602);
      expect(e.retryable).to.equal(false);
    });

    it('-32602 wrong arity (anvil 1.7.1, eth_getBlockByNumber with one param)', () => {
      expectNorm({ ...ANVIL.invalidArity, method: 'eth_getBlockByNumber' }, ErrEndpointClientSideException, -32602);
    });

    it('-32602 BlockOutOfRangeError (anvil 1.7.1, eth_getBalance at a future block)', () => {
      expectNorm({ ...ANVIL.blockOutOfRange, method: 'eth_getBalance' }, ErrEndpointClientSideException, -32602);
    });
  });

  describe('(9) 401 / 403 / "invalid api key" -> ErrEndpointUnauthorized (-32016)', () => {
    it('HTTP 401 text body "invalid project id" (Infura without a valid project id)', () => {
      const e = expectNorm({ status: 401, message: 'invalid project id' }, ErrEndpointUnauthorized, -32016);
      expect(e.retryable).to.equal(true);
    });

    it('HTTP 403 (source: eRPC error normalizer notes)', () => {
      expectNorm({ status: 403, message: 'Forbidden' }, ErrEndpointUnauthorized, -32016);
    });

    it('"invalid api key" in an HTTP 200 body (source: eRPC error normalizer notes)', () => {
      expectNorm({ code: -32000, message: 'Invalid API key' }, ErrEndpointUnauthorized, -32016);
    });

    it('Alchemy HTTP 401 with a JSON body {code: -32600, "Must be authenticated!"} (Alchemy answer to a revoked key, quoted in public test fixtures)', () => {
      // The HTTP 401 must win over the -32600 code that rule (8) would otherwise catch.
      expectNorm({ status: 401, code: -32600, message: 'Must be authenticated!' }, ErrEndpointUnauthorized, -32016);
    });

    it('Alchemy HTTP 401 with a bare-text body "Must be authenticated!"', () => {
      expectNorm({ status: 401, message: 'Must be authenticated!' }, ErrEndpointUnauthorized, -32016);
    });
  });

  describe('(10) anything else -> ErrEndpointServerSideException, vendor code passed through', () => {
    it('-32000 "execution aborted (timeout = 5s)" keeps -32000 (geth eth_call timeout)', () => {
      const e = expectNorm({ code: -32000, message: 'execution aborted (timeout = 5s)' }, ErrEndpointServerSideException, -32000);
      expect(e.retryable).to.equal(true);
    });

    it('vendor code -32099 passes through (source: eRPC error normalizer notes)', () => {
      expectNorm({ code: -32099, message: 'upstream node is syncing' }, ErrEndpointServerSideException, -32099);
    });

    it('HTTP 502 with an HTML body and no code -> -32603', () => {
      expectNorm({ status: 502, message: '<html><body><h1>502 Bad Gateway</h1></body></html>' }, ErrEndpointServerSideException, -32603);
    });

    it('HTTP 503 with an empty body -> a message naming the status', () => {
      const e = expectNorm({ status: 503, message: '' }, ErrEndpointServerSideException, -32603);
      expect(e.message).to.contain('503');
    });
  });

  describe('live anvil (re-captures the recorded texts)', function () {
    let anvil: AnvilHandle;
    const REVERT_STRING = '0x00000000000000000000000000000000000000aa';
    const REVERT_CUSTOM = '0x00000000000000000000000000000000000000bb';
    const REVERT_EMPTY = '0x00000000000000000000000000000000000000cc';
    let from: string;

    /** Raw JSON-RPC error object anvil answers (undefined when it answered a result). */
    async function rawError(method: string, params: unknown[]): Promise<{ status: number; code: number; message: string; data?: unknown } | undefined> {
      const res = await fetch(anvil.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      const body = (await res.json()) as { error?: { code: number; message: string; data?: unknown } };
      return body.error && { status: res.status, ...body.error };
    }

    before(async function () {
      anvil = await startAnvil();
      from = ((await anvil.rpc('eth_accounts')) as string[])[0]!;
      // PUSH1 0x64 PUSH1 0x0c PUSH1 0 CODECOPY PUSH1 0x64 PUSH1 0 REVERT, then Error("nope") ABI bytes.
      await anvil.rpc('anvil_setCode', [REVERT_STRING, `0x6064600c60003960646000fd${REVERT_NOPE_DATA.slice(2)}`]);
      // PUSH4 0xdeadbeef PUSH1 0xe0 SHL PUSH1 0 MSTORE PUSH1 4 PUSH1 0 REVERT
      await anvil.rpc('anvil_setCode', [REVERT_CUSTOM, '0x63deadbeef60e01b60005260046000fd']);
      // PUSH1 0 PUSH1 0 REVERT
      await anvil.rpc('anvil_setCode', [REVERT_EMPTY, '0x60006000fd']);
    });

    after(async () => {
      await anvil?.stop();
    });

    const check = (got: Awaited<ReturnType<typeof rawError>>, want: Sample, cls: ErrClass, code: number, method: string) => {
      expect(got, 'anvil answered an error').to.not.equal(undefined);
      expect(got!.status).to.equal(200);
      expect({ code: got!.code, message: got!.message }).to.deep.equal({ code: want.code, message: want.message });
      if (want.data !== undefined) expect(got!.data).to.equal(want.data);
      expectNorm({ ...got!, method }, cls, code);
    };

    it('eth_call revert with Error(string)', async () => {
      check(await rawError('eth_call', [{ to: REVERT_STRING, data: '0x' }, 'latest']), ANVIL.revertString, ErrEndpointExecutionException, 3, 'eth_call');
    });

    it('eth_call revert with a custom error', async () => {
      check(await rawError('eth_call', [{ to: REVERT_CUSTOM, data: '0x' }, 'latest']), ANVIL.revertCustom, ErrEndpointExecutionException, 3, 'eth_call');
    });

    it('eth_estimateGas bare revert', async () => {
      check(
        await rawError('eth_estimateGas', [{ from, to: REVERT_EMPTY, data: '0x' }]),
        ANVIL.revertEmpty,
        ErrEndpointExecutionException,
        3,
        'eth_estimateGas',
      );
    });

    it('unknown method', async () => {
      check(await rawError('eth_foo', []), ANVIL.methodNotFound, ErrEndpointUnsupported, -32601, 'eth_foo');
    });

    it('invalid params', async () => {
      check(await rawError('eth_getBalance', ['0xnotanaddress', 'latest']), ANVIL.invalidAddress, ErrEndpointClientSideException, -32602, 'eth_getBalance');
      check(await rawError('eth_getBlockByNumber', ['latest']), ANVIL.invalidArity, ErrEndpointClientSideException, -32602, 'eth_getBlockByNumber');
    });

    it('block out of range (fresh chain, before any transaction)', async () => {
      check(await rawError('eth_getBalance', [from, '0x100000']), ANVIL.blockOutOfRange, ErrEndpointClientSideException, -32602, 'eth_getBalance');
    });

    it('nonce too low', async () => {
      await anvil.rpc('eth_sendTransaction', [{ from, to: REVERT_EMPTY.replace(/cc$/, 'dd'), value: '0x1' }]);
      check(
        await rawError('eth_sendTransaction', [{ from, to: REVERT_EMPTY.replace(/cc$/, 'dd'), value: '0x1', nonce: '0x0' }]),
        ANVIL.nonceTooLow,
        ErrEndpointNonceException,
        -32003,
        'eth_sendTransaction',
      );
    });

    it('insufficient funds (raw text; classification pinned in rule 6)', async () => {
      const got = await rawError('eth_sendTransaction', [{ from, to: REVERT_EMPTY.replace(/cc$/, 'dd'), value: `0x${(10n ** 30n).toString(16)}` }]);
      expect({ code: got?.code, message: got?.message }).to.deep.equal(ANVIL.insufficientFunds);
      expect(norm({ ...got!, method: 'eth_sendTransaction' })).to.be.instanceOf(ErrEndpointExecutionException);
    });

    it('already known (raw text; classification pinned in rule 6)', async () => {
      await anvil.rpc('evm_setAutomine', [false]);
      try {
        const nonce = (await anvil.rpc('eth_getTransactionCount', [from, 'pending'])) as string;
        const raw = (await anvil.rpc('eth_signTransaction', [
          { from, to: REVERT_EMPTY.replace(/cc$/, 'dd'), value: '0x1', gas: '0x5208', gasPrice: '0x77359400', nonce, chainId: '0x7a69' },
        ])) as string;
        await anvil.rpc('eth_sendRawTransaction', [raw]);
        const got = await rawError('eth_sendRawTransaction', [raw]);
        expect({ code: got?.code, message: got?.message }).to.deep.equal(ANVIL.alreadyImported);
      } finally {
        await anvil.rpc('evm_setAutomine', [true]);
      }
    });
  });
});

describe('evm-errors: revert reasons are contract text', () => {
  it('a code-3 revert whose reason mentions a limit stays a revert (not a rate limit)', () => {
    const e = normaliseUpstreamError({ status: 200, code: 3, message: 'execution reverted: Max mint limit exceeded', data: '0x08c379a0', method: 'eth_call' });
    expect(e.name).to.equal('ErrEndpointExecutionException');
    expect(e.code).to.equal(3);
  });
});

describe('upstream faults without a rule (the upstreamFault hook, spec §7)', () => {
  const fault: UpstreamFault = { status: 200, code: 3, message: 'execution reverted', method: 'eth_call' };

  it('with no classifier tapped, a fault is ErrEndpointServerSideException carrying the vendor code and the upstream id', () => {
    const e = nameUpstreamFault(fault, 'u1', undefined);
    expect(e).to.be.instanceOf(ErrEndpointServerSideException);
    expect(e.code).to.equal(3);
    expect(e.details).to.deep.equal({ upstreamCode: 3, upstreamStatus: 200, upstream: 'u1' });
  });

  it('a classifier that throws leaves the fault its generic name instead of failing the call as svc', () => {
    const e = nameUpstreamFault(fault, 'u1', () => {
      throw new Error('bug in a rule');
    });
    expect(e).to.be.instanceOf(ErrEndpointServerSideException);
    expect(e.code).to.equal(3);
  });

  it('a rule that sets a code and names nothing leaves no trace on the generic error', () => {
    const e = nameUpstreamFault(fault, 'u1', (_f, opts) => {
      opts.code = -1;
      opts.details = { tampered: true };
      return undefined;
    });
    expect(e.code).to.equal(3);
    expect(e.details).to.deep.equal({ upstreamCode: 3, upstreamStatus: 200, upstream: 'u1' });
  });

  it("the evm-errors plugin's tap is what the transport's classifier calls", async () => {
    const { createHooks } = await import('../../../core/pipeline/hooks.ts');
    const { evmErrorsPlugin } = await import('../../../plugins/evm-errors/index.ts');
    const hooks = createHooks();
    evmErrorsPlugin().apply({ hooks } as never);
    const e = nameUpstreamFault(fault, 'u1', (f, opts) => hooks.upstreamFault.call(f, opts));
    expect(e).to.be.instanceOf(ErrEndpointExecutionException);
    expect(e.details).to.deep.include({ upstream: 'u1' });
  });
});

describe('evm-errors: every upstream is built with the fault rules, however it joined', function () {
  this.timeout(20_000);

  it('an upstream added at run time (providers, CLI endpoints) names a revert as the rules say, not as a generic server error', async () => {
    const { createServer } = await import('node:http');
    const { createProxy } = await import('../../../core/host/create.ts');
    const { createLogger } = await import('../../../lib/logger.ts');
    const { defaultPreset } = await import('../../../presets/default.ts');
    // A node that reverts every call it is sent (svc's own request id echoed).
    const node = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const { id } = JSON.parse(body) as { id: number };
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ jsonrpc: '2.0', id, error: { code: 3, message: 'execution reverted: nope', data: '0x' } }));
      });
    });
    await new Promise<void>((r) => node.listen(0, '127.0.0.1', r));
    const port = (node.address() as { port: number }).port;
    const proxy = createProxy({
      config: { projects: [{ id: 'main', upstreams: [{ id: 'first', endpoint: `http://127.0.0.1:${port}`, evm: { chainId: 1 } }] }] },
      plugins: defaultPreset(),
      logger: createLogger('silent'),
    });
    try {
      proxy.buildRegistry();
      const project = proxy.projects.get('main')!;
      const late = proxy.addUpstreamFromConfig(project, { id: 'late', endpoint: `http://127.0.0.1:${port}`, evm: { chainId: 1 } });
      const network = project.networks.get('evm:1')!;
      for (const u of [project.upstreams.get('first')!, late]) {
        const err = await proxy.upstreamCall(network, u, 'eth_call', [{ to: '0x0000000000000000000000000000000000000001' }, 'latest'], 5000).then(
          () => undefined,
          (e: unknown) => e as SvcError,
        );
        expect(err, u.id).to.be.instanceOf(ErrEndpointExecutionException);
        expect(err?.code, u.id).to.equal(3);
      }
    } finally {
      await proxy.close();
      await new Promise((r) => node.close(r));
    }
  });
});
