/**
 * The EVM fault rules: one ordered table maps an upstream's HTTP status, JSON-RPC code and message to a named error, once, where the
 * transport reads the answer. Ordered because vendors overlap (a revert's reason may say "limit exceeded"): the first match wins.
 */
import type { UpstreamFault } from 'svc-proxy/plugin';
import {
  ErrEndpointBillingIssue,
  ErrEndpointCapacityExceeded,
  ErrEndpointClientSideException,
  ErrEndpointExecutionException,
  ErrEndpointMissingData,
  ErrEndpointNonceException,
  ErrEndpointRequestTooLarge,
  ErrEndpointUnauthorized,
  ErrEndpointUnsupported,
  type SvcError,
  type SvcErrorOptions,
} from 'svc-proxy/plugin/errors';

type Ctor = new (message: string, opts?: SvcErrorOptions) => SvcError;

/** One rule of the table. `keepCode` passes the upstream's own code to the client. */
interface Rule {
  name: string;
  match: (f: UpstreamFault, msg: string) => boolean;
  error: Ctor;
  keepCode?: boolean;
  /** Forces the JSON-RPC code (e.g. -32003 for insufficient funds). */
  code?: number;
}

const has = (msg: string, ...needles: string[]) => needles.some((n) => msg.includes(n));
/** A revert's contract-defined reason ("Max mint limit exceeded") is never a limit: code 3 (geth), or a revert message (Hardhat -32603, Ganache -32000). */
const notRevert = (f: UpstreamFault, m: string) => f.code !== 3 && !has(m, 'revert', 'vm exception', 'vm execution error');

/** For eth_simulateV1's own code ranges (execution-apis `execute.yaml`). */
const inRange = (c: number | undefined, hi: number, lo: number): boolean => c !== undefined && c <= hi && c >= lo;

/** The ordered rule table (messages compared lower-cased); exported for the README and the rule-by-rule tests. */
export const NORMALISATION_RULES: readonly Rule[] = [
  {
    // -38010 nonce too low, -38011 nonce too high.
    name: 'simulate: nonce',
    match: (f) => inRange(f.code, -38010, -38011),
    error: ErrEndpointNonceException,
    keepCode: true,
  },
  {
    // -38012 base fee, -38013 intrinsic gas, -38014 funds, -38015 block gas limit; and the
    // simulate meanings of -32005 (maxFeePerGas too low) and -32015 (VM execution error).
    name: 'simulate: execution',
    match: (f) => inRange(f.code, -38012, -38019) || (f.method === 'eth_simulateV1' && (f.code === -32005 || f.code === -32015)),
    error: ErrEndpointExecutionException,
    keepCode: true,
  },
  {
    // -38020..-38026: block order, timestamps, precompile moves, non-EOA sender, init code size, client limits.
    name: 'simulate: invalid input',
    match: (f) => inRange(f.code, -38020, -38099),
    error: ErrEndpointClientSideException,
    keepCode: true,
  },
  {
    name: 'range too large',
    match: (f, m) =>
      f.code === -32012 ||
      (notRevert(f, m) &&
        has(
          m,
          'range too large',
          'max block range',
          'try with this block range',
          'query returned more than',
          'too many results',
          'try paginating',
          'block range is too wide',
          'exceed maximum block range',
          'this block range should work',
          'log response size exceeded',
          'is limited to a',
          'exceeds limit of',
          'block range too large',
          'response size exceeded',
        )),
    error: ErrEndpointRequestTooLarge,
  },
  {
    name: 'billing',
    match: (f, m) =>
      f.status === 402 ||
      (notRevert(f, m) && has(m, 'billing', 'quota', 'reached the free tier', 'monthly capacity limit', 'payment required', 'insufficient credits')),
    error: ErrEndpointBillingIssue,
  },
  {
    name: 'capacity exceeded',
    match: (f, m) =>
      f.status === 429 ||
      f.code === -32005 ||
      f.code === -32007 ||
      (notRevert(f, m) &&
        has(m, 'too many requests', 'rate limit', 'limit exceeded', 'rate-limit', 'has exceeded', 'request limit reached', 'capacity exceeded')),
    error: ErrEndpointCapacityExceeded,
  },
  {
    name: 'missing data',
    match: (f, m) =>
      f.code === -32014 ||
      has(
        m,
        'missing trie node',
        'header not found',
        'unknown block',
        'transaction not found',
        'block not found',
        'no historical rpc',
        'state is not available',
        "state histories haven't been fully indexed",
      ) ||
      /\bblock #?\d+ not found/.test(m),
    error: ErrEndpointMissingData,
  },
  {
    name: 'execution reverted',
    match: (f, m) => f.code === 3 || has(m, 'execution reverted', 'vm execution error', 'vm exception', 'reverted'),
    error: ErrEndpointExecutionException,
    keepCode: true,
  },
  {
    name: 'nonce',
    match: (_f, m) =>
      has(
        m,
        'nonce too low',
        'nonce too high',
        'nonce has max value',
        'already known',
        'known transaction',
        'tx already in mempool',
        'nonce has already been used',
        'transaction already imported',
        'already imported',
      ),
    error: ErrEndpointNonceException,
  },
  {
    name: 'insufficient funds / fee too low',
    match: (f, m) =>
      f.code === -32003 ||
      has(
        m,
        'insufficient funds',
        'fee too low',
        'underpriced',
        'gas too low',
        'out of gas',
        'intrinsic gas too low',
        'max fee per gas less than block base fee',
        'exceeds block gas limit',
        'max priority fee per gas higher than max fee per gas',
        'tip above fee cap',
      ),
    error: ErrEndpointExecutionException,
    code: -32003,
  },
  {
    name: 'unsupported method',
    match: (f, m) =>
      f.code === -32601 ||
      f.code === -32004 ||
      f.status === 405 ||
      f.status === 415 ||
      has(m, 'not supported', 'unsupported method', 'method not found', 'does not exist/is not available', 'is not available', 'method is not whitelisted'),
    error: ErrEndpointUnsupported,
  },
  {
    name: 'invalid params',
    // An HTTP 401/403 is an auth failure whatever JSON-RPC code the body carries.
    match: (f, m) => f.status !== 401 && f.status !== 403 && (f.code === -32602 || f.code === -32600 || has(m, 'invalid params', 'invalid argument')),
    error: ErrEndpointClientSideException,
  },
  {
    name: 'unauthorized',
    match: (f, m) => f.status === 401 || f.status === 403 || has(m, 'invalid api key', 'unauthorized', 'forbidden', 'must be authenticated'),
    error: ErrEndpointUnauthorized,
  },
];

/**
 * Names an upstream fault by the first matching rule (spec §7), the vendor's code kept where the rule says; undefined when no rule
 * matches (core then passes it on as `ErrEndpointServerSideException` with the vendor's code).
 */
export function classifyEvmFault(f: UpstreamFault, opts: SvcErrorOptions): SvcError | undefined {
  const msg = f.message.toLowerCase();
  for (const r of NORMALISATION_RULES) {
    if (r.match(f, msg)) {
      if (r.keepCode && f.code !== undefined) opts.code = f.code;
      else if (r.code !== undefined) opts.code = r.code;
      return new r.error(f.message, opts);
    }
  }
  return undefined;
}

/** Selector of `Error(string)`: an `eth_call` result starting with it is a revert (rule 5). */
export const ERROR_STRING_SELECTOR = '0x08c379a0';
