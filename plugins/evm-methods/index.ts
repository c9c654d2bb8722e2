/**
 * evm-methods plugin (spec §2.8 #4, §7 `ErrNotImplemented`): local and special methods.
 * Taps: `call` at CallStage.LOCAL_METHODS (answer `eth_chainId` from config with no upstream
 * call; refuse methods a proxy cannot serve, `eth_accounts`/`eth_sign`), `call` at
 * {@link IDEMPOTENT_BROADCAST_STAGE} (`eth_sendRawTransaction` is idempotent: "already known",
 * or "nonce too low" for a transaction the network already has, becomes success with the
 * transaction hash), and `select` at {@link STATEFUL_GUARD_SELECT_STAGE} (stateful filter
 * methods need exactly one candidate upstream after every filter, `use-upstream` included).
 */
import type { Hex } from 'viem';
import {
  type CallContext,
  type CallHandler,
  CallStage,
  type Network,
  definePlugin,
  type Plugin,
  type PluginHost,
  RpcResult,
  SelectStage,
  type Upstream,
  Type,
} from 'svc-proxy/plugin';
import { declareDirectives, Directive } from 'svc-proxy/plugins/directives';
import {
  ErrEndpointExecutionException,
  ErrEndpointNonceException,
  ErrEndpointUnsupported,
  ErrNotImplemented,
  ErrUpstreamsExhausted,
  SvcError,
} from 'svc-proxy/plugin/errors';
import { STATEFUL_METHODS, toHex } from 'svc-proxy/util';
export { STATEFUL_METHODS } from 'svc-proxy/util';

/**
 * Directive `skip-cache-read` (spec §2.8 #3), declared as the cache plugin declares it (which owns
 * its `directiveDefaults` key): `true` also bypasses the local `eth_chainId` answer.
 */
export const SKIP_CACHE_READ = new Directive<string | undefined>({
  field: 'skipCacheRead',
  query: 'skip-cache-read',
  header: 'X-SVC-Skip-Cache-Read',
  type: 'string',
  fallback: undefined,
  spec: '#3',
});

/** Methods a proxy never forwards by default: they use the node's own keys (eRPC method guard). */
export const DEFAULT_UNSUPPORTED_METHODS: readonly string[] = ['eth_accounts', 'eth_sign'];

/**
 * Stage of the `select` tap of the stateful guard: after the policy (100), method support
 * (200), `use-upstream` (300) and availability filters (400), so it counts the candidates the
 * sweep would really walk.
 */
export const STATEFUL_GUARD_SELECT_STAGE = SelectStage.STATEFUL_GUARD;

/**
 * Stage of the `eth_sendRawTransaction` idempotency wrapper: just inside multiplexing (800),
 * so identical in-flight broadcasts share one recovery, and outside cache and the failsafe.
 */
export const IDEMPOTENT_BROADCAST_STAGE = CallStage.IDEMPOTENT_BROADCAST;

/** Messages meaning "this very transaction is already in the node's pool" (lower-case needles). */
const ALREADY_KNOWN = ['already known', 'known transaction', 'already imported', 'already in mempool', 'already exists', 'alreadyknown'];
/** Messages meaning "that nonce is used": our transaction may be the one that used it. */
const NONCE_TOO_LOW = ['nonce too low', 'nonce has already been used', 'nonce is too low'];

/** How a failed broadcast relates to the transaction sent. */
export type BroadcastFailure = 'already_known' | 'nonce_too_low';

/**
 * Classifies an `eth_sendRawTransaction` failure: `already_known` when a node says it already
 * has the transaction, `nonce_too_low` when the nonce is used (by this transaction or
 * another), undefined for anything else. Looks through `ErrUpstreamsExhausted` causes
 * (`already_known` wins). Only nonce exceptions and non-revert `-32003` execution errors are
 * read: a revert's reason text is contract-defined and never matched.
 * @param err the error the call failed with
 */
export function classifyBroadcastFailure(err: unknown): BroadcastFailure | undefined {
  let found: BroadcastFailure | undefined;
  const visit = (e: unknown, depth: number): void => {
    if (found === 'already_known' || depth > 8) return;
    if (e instanceof ErrUpstreamsExhausted) {
      for (const c of e.causes) visit(c, depth + 1);
      return;
    }
    const nonceLike =
      e instanceof ErrEndpointNonceException || (e instanceof ErrEndpointExecutionException && e.code === -32003 && e.upstreamData === undefined);
    if (!nonceLike) return;
    const msg = e.message.toLowerCase();
    if (ALREADY_KNOWN.some((n) => msg.includes(n))) found = 'already_known';
    else if (NONCE_TOO_LOW.some((n) => msg.includes(n))) found ??= 'nonce_too_low';
  };
  visit(err, 0);
  return found;
}

/**
 * viem, imported on the first broadcast failure that needs a hash: loading its index costs about
 * 14 MiB of resident memory in every process, and most processes never need it.
 */
let viemModule: Promise<typeof import('viem')> | undefined;

/**
 * The transaction hash of an `eth_sendRawTransaction` call: keccak-256 of the raw signed bytes
 * (legacy RLP or typed EIP-2718 envelope alike), lower-case 0x hex.
 * @param params the call's params (`[rawTx]`)
 * @returns the hash, or undefined when params[0] is not an even-length 0x hex string
 */
export async function transactionHashOf(params: unknown): Promise<Hex | undefined> {
  const raw = Array.isArray(params) ? (params[0] as unknown) : undefined;
  if (typeof raw !== 'string' || !/^0x(?:[0-9a-fA-F]{2})+$/.test(raw)) return undefined;
  viemModule ??= import('viem');
  return (await viemModule).keccak256(raw as Hex);
}

/** Options of {@link evmMethodsPlugin}. */
export interface EvmMethodsPluginOptions {
  /**
   * Methods refused locally with `ErrEndpointUnsupported` (-32601), never forwarded. Default
   * {@link DEFAULT_UNSUPPORTED_METHODS} (`eth_accounts`, `eth_sign`); `[]` forwards them.
   */
  unsupportedMethods?: readonly string[];
  /** Turn `eth_sendRawTransaction` duplicates into success (default true). */
  idempotentBroadcast?: boolean;
}

/** Schema of `networks[].evm.idempotentTransactionBroadcast` (eRPC's key; also under `networkDefaults.evm`). */
export const idempotentBroadcastSchema = Type.Boolean({
  default: true,
  description:
    'eth_sendRawTransaction answered "already known" (or "nonce too low" for a transaction a by-hash lookup finds) becomes success with the transaction hash, so retries and hedges of a send are safe; false returns the upstream errors as they are (eRPC\'s evm.idempotentTransactionBroadcast)',
});

/**
 * `networks[].evm.idempotentTransactionBroadcast` of a network: true unless set to false.
 * @param network the network
 */
export function idempotentBroadcastOf(network: Network): boolean {
  const evm = network.config.settings.evm as { idempotentTransactionBroadcast?: unknown } | undefined;
  return evm?.idempotentTransactionBroadcast !== false;
}

/**
 * Looks a transaction up by hash through the whole network chain, as a child of the call
 * (same record, deadline and directives, `retry-empty` forced on so one upstream's null does
 * not hide the transaction from another).
 * @returns the lookup answer, or undefined when the lookup itself failed
 */
async function lookupTransaction(host: PluginHost, ctx: CallContext, hash: Hex): Promise<RpcResult | undefined> {
  const child: CallContext = {
    ...ctx,
    request: { idRaw: ctx.request.idRaw, method: 'eth_getTransactionByHash', params: [hash] },
    directives: { ...ctx.directives, retryEmpty: true },
    state: new Map(),
  };
  try {
    return await host.runCall(child);
  } catch {
    return undefined;
  }
}

/** Whether a by-hash lookup found this transaction. */
function foundTransaction(r: RpcResult | undefined, hash: string): boolean {
  if (!r || r.isEmpty() || typeof r.result !== 'object') return false;
  const h = (r.result as { hash?: unknown }).hash;
  return typeof h !== 'string' || h.toLowerCase() === hash.toLowerCase();
}

/**
 * Creates the evm-methods plugin.
 *
 * - `eth_chainId` is answered with the network's configured chain id (`0x`-hex) and no upstream
 *   attempt, unless the call sets `skip-cache-read: true` (then it is forwarded, as in eRPC).
 * - {@link EvmMethodsPluginOptions.unsupportedMethods} fail with `ErrEndpointUnsupported` (-32601).
 * - Stateful filter methods ({@link STATEFUL_METHODS}) with more than one candidate upstream
 *   left after selection (cordons, method filters, `use-upstream`) fail with `ErrNotImplemented`
 *   (-32601); with exactly one they are forwarded to it.
 * - `eth_sendRawTransaction`: a nonce exception saying the node already has the transaction
 *   ("already known", anvil's "transaction already imported") becomes success with
 *   `keccak256(rawTx)`; "nonce too low" becomes success when `eth_getTransactionByHash` through
 *   the same network finds the transaction, else the original error stands. Reverts and every
 *   other error pass through unchanged.
 * @param opts unsupported methods, idempotent broadcast switch
 * @returns a plugin declaring `skip-cache-read` (honoured by its local `eth_chainId` answer), tapping `call` (twice) and `select`; owning `networks[].evm.idempotentTransactionBroadcast` (false: no idempotency wrapper on that network)
 * @throws TypeError when `unsupportedMethods` is not an array of strings
 */
export function evmMethodsPlugin(opts: EvmMethodsPluginOptions = {}): Plugin {
  const unsupportedList = opts.unsupportedMethods ?? DEFAULT_UNSUPPORTED_METHODS;
  if (!Array.isArray(unsupportedList) || unsupportedList.some((m) => typeof m !== 'string'))
    throw new TypeError('evmMethodsPlugin: unsupportedMethods must be an array of method names');
  const unsupported: ReadonlySet<string> = new Set(unsupportedList);
  const idempotent = opts.idempotentBroadcast ?? true;
  return definePlugin({
    name: 'evm-methods',
    schema: { networkEvm: { idempotentTransactionBroadcast: idempotentBroadcastSchema } },
    apply(host: PluginHost) {
      declareDirectives(host, 'evm-methods', SKIP_CACHE_READ);
      const hooks = host.hooks;

      hooks.call.tap({ name: 'evm-methods:local', stage: CallStage.LOCAL_METHODS }, (inner: CallHandler, network: Network): CallHandler => {
        const chainId = toHex(network.chainId);
        return (ctx) => {
          const method = ctx.request.method;
          if (method === 'eth_chainId' && SKIP_CACHE_READ.get(ctx.directives) !== 'true') return Promise.resolve(new RpcResult(chainId));
          if (unsupported.has(method))
            return Promise.reject(new ErrEndpointUnsupported(`method ${method} is not supported: svc holds no accounts or keys`, { details: { method } }));
          return inner(ctx);
        };
      });

      hooks.select.tap({ name: 'evm-methods:stateful-guard', stage: STATEFUL_GUARD_SELECT_STAGE }, (ups: Upstream[], ctx: CallContext) => {
        if (ups.length <= 1 || !STATEFUL_METHODS.has(ctx.request.method)) return ups;
        throw new ErrNotImplemented(
          `${ctx.request.method} is stateful and needs exactly one upstream, but ${ups.length} upstreams of ${ctx.network.id} can serve it: choose one with the use-upstream directive (X-SVC-Use-Upstream)`,
          { details: { method: ctx.request.method, candidates: ups.map((u) => u.id) } },
        );
      });

      if (!idempotent) return;
      hooks.call.tap({ name: 'evm-methods:idempotent-broadcast', stage: IDEMPOTENT_BROADCAST_STAGE }, (inner: CallHandler, network: Network): CallHandler => {
        // Decided when the network's chain is built: a network that turns the rule off pays nothing per call.
        if (!idempotentBroadcastOf(network)) return inner;
        const broadcast = async (ctx: CallContext): Promise<RpcResult> => {
          try {
            return await inner(ctx);
          } catch (e) {
            if (!(e instanceof SvcError)) throw e;
            const kind = classifyBroadcastFailure(e);
            const hash = kind ? await transactionHashOf(ctx.request.params) : undefined;
            if (!kind || !hash) throw e;
            if (kind === 'nonce_too_low' && !foundTransaction(await lookupTransaction(host, ctx, hash), hash)) throw e;
            host.logger.debug(
              { project: ctx.project.id, network: ctx.network.id, hash, kind, err: e.message },
              'eth_sendRawTransaction: transaction already known, answering its hash',
            );
            return new RpcResult(hash);
          }
        };
        return (ctx) => (ctx.request.method === 'eth_sendRawTransaction' ? broadcast(ctx) : inner(ctx));
      });
    },
  });
}
