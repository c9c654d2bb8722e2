/**
 * Where payments are verified and settled (spec §5 item 1): an x402 facilitator over HTTP (`/verify`, `/settle`, `/supported`), or svc
 * itself — `@x402/core`'s facilitator with `@x402/evm`'s exact scheme, reading the token and sending `transferWithAuthorization` through
 * svc's own network of the payment's chain (`evm:<chainId>` of the same project), so the check uses the same failover as any call.
 * The packages (and viem's wallet code) load on first use: a svc without the strategy never holds them.
 */
import type { PluginHost, Project } from 'svc-proxy/plugin';
import { isSvcError } from 'svc-proxy/plugin/errors';
import type { Requirements, RequirementsV1 } from './offers.ts';

/** A payment as decoded from `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1). */
export interface PaymentPayload {
  x402Version: number;
  accepted?: Requirements;
  scheme?: string;
  network?: string;
  payload: Record<string, unknown>;
  resource?: unknown;
  extensions?: Record<string, unknown>;
}

/** A facilitator's verdict on a payment. */
export interface Verdict {
  isValid: boolean;
  invalidReason?: string;
  invalidMessage?: string;
  payer?: string;
}

/** A settlement's outcome (the `PAYMENT-RESPONSE` body). */
export interface Settlement {
  success: boolean;
  errorReason?: string;
  errorMessage?: string;
  payer?: string;
  transaction: string;
  network: string;
}

/** A facilitator's `/supported` answer, as far as svc reads it. */
export interface Supported {
  kinds: ReadonlyArray<{ x402Version: number; scheme: string; network: string }>;
}

/** What verifies and settles payments for one payment chain. */
export interface Facilitator {
  verify(payment: PaymentPayload, requirements: Requirements | RequirementsV1): Promise<Verdict>;
  settle(payment: PaymentPayload, requirements: Requirements | RequirementsV1): Promise<Settlement>;
  /** The payment kinds it takes (`/supported`). */
  getSupported(): Supported | Promise<Supported>;
}

/** The lazily loaded packages. */
interface Lib {
  core: typeof import('@x402/core/server');
  facilitator: typeof import('@x402/core/facilitator');
  http: typeof import('@x402/core/http');
  evm: typeof import('@x402/evm');
  evmFacilitator: typeof import('@x402/evm/exact/facilitator');
  v1: typeof import('@x402/evm/v1');
  viem: typeof import('viem');
  accounts: typeof import('viem/accounts');
  nonce: typeof import('viem/nonce');
}

let loading: Promise<Lib> | undefined;
/** Loads the x402 packages once. */
export function loadLib(): Promise<Lib> {
  return (loading ??= (async () => {
    const [core, facilitator, http, evm, evmFacilitator, v1, viem, accounts, nonce] = await Promise.all([
      import('@x402/core/server'),
      import('@x402/core/facilitator'),
      import('@x402/core/http'),
      import('@x402/evm'),
      import('@x402/evm/exact/facilitator'),
      import('@x402/evm/v1'),
      import('viem'),
      import('viem/accounts'),
      import('viem/nonce'),
    ]);
    return { core, facilitator, http, evm, evmFacilitator, v1, viem, accounts, nonce };
  })());
}

/** Deadline of one chain call svc makes to verify or settle, ms. */
const CHAIN_CALL_TIMEOUT_MS = 10_000;
/** How often a settlement's receipt is polled, ms (svc's own network answers; no public RPC is spared). */
const RECEIPT_POLL_MS = 250;

/** An x402 facilitator over HTTP. */
export async function remoteFacilitator(url: string, timeoutMs: number): Promise<Facilitator> {
  const lib = await loadLib();
  const client = new lib.core.HTTPFacilitatorClient({ url, timeoutMs: Math.max(1, Math.round(timeoutMs)) });
  return client as unknown as Facilitator;
}

/**
 * svc as the facilitator of one payment chain: reads and writes go through the project's `evm:<chainId>` network.
 * @param privateKey the settler's key (pays gas); its nonces are tracked by a nonce manager of this facilitator's (per process, strategy and chain)
 * @param confirmationTimeoutMs longest wait for a settlement's receipt
 */
export async function localFacilitator(
  host: PluginHost,
  project: Project,
  chainId: number,
  privateKey: `0x${string}`,
  confirmationTimeoutMs: number,
): Promise<Facilitator> {
  const lib = await loadLib();
  const { viem } = lib;
  const networkId = `evm:${chainId}`;
  // svc's own pipeline already retries and fails over: viem retrying on top would repeat a revert three times with backoff.
  const transport = viem.custom(
    {
      async request({ method, params }: { method: string; params?: unknown }) {
        const network = project.networks.get(networkId);
        if (!network) throw new Error(`project ${project.id} serves no network ${networkId} to verify and settle payments on`);
        const { ctx, done } = host.internalContext(network, method, params ?? [], CHAIN_CALL_TIMEOUT_MS);
        try {
          return (await host.runCall(ctx)).result;
        } catch (e) {
          // viem reads a JSON-RPC error's code, message and data (revert bytes) from what the transport throws.
          if (isSvcError(e)) throw Object.assign(new Error(e.message), { code: e.code, data: e.upstreamData });
          throw e;
        } finally {
          done();
        }
      },
    },
    { retryCount: 0 },
  );
  const chain = viem.defineChain({
    id: chainId,
    name: networkId,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [] } },
  });
  // A nonce manager of its own (viem's shared one is keyed by address and chain id only, across every chain of that id the process talks to).
  const nonceManager = lib.nonce.createNonceManager({ source: lib.nonce.jsonRpc() });
  const account = lib.accounts.privateKeyToAccount(privateKey, { nonceManager });
  const client = viem.createWalletClient({ account, chain, transport, pollingInterval: RECEIPT_POLL_MS }).extend(viem.publicActions);
  type Args<F extends (...a: never[]) => unknown> = Parameters<F>[0];
  const signer = lib.evm.toFacilitatorEvmSigner(
    {
      address: account.address,
      readContract: (a) => client.readContract(a as Args<typeof client.readContract>),
      verifyTypedData: (a) => client.verifyTypedData(a as Args<typeof client.verifyTypedData>),
      writeContract: (a) => client.writeContract({ ...(a as Args<typeof client.writeContract>), account, chain }),
      sendTransaction: (a) => client.sendTransaction({ to: a.to, data: a.data, account, chain }),
      waitForTransactionReceipt: (a) => client.waitForTransactionReceipt({ hash: a.hash, timeout: a.timeout, pollingInterval: RECEIPT_POLL_MS }),
      getCode: (a) => client.getCode(a),
    },
    { confirmationTimeoutMs },
  );
  const facilitator = new lib.facilitator.x402Facilitator();
  lib.evmFacilitator.registerExactEvmScheme(facilitator, { signer, networks: `eip155:${chainId}` as `${string}:${string}` });
  return facilitator as unknown as Facilitator;
}
