/**
 * A local x402 facilitator for tests: `@x402/core`'s facilitator with `@x402/evm`'s exact scheme behind node:http (`POST /verify`,
 * `POST /settle`, `GET /supported`, the paths `HTTPFacilitatorClient` calls), reading and settling on an anvil directly with its own
 * funded key. Counts the requests it served; a test can hold its settlements (`settleGate`) or fail the next ones (`failSettles`).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { x402Facilitator } from '@x402/core/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { registerExactEvmScheme } from '@x402/evm/exact/facilitator';
import { createWalletClient, defineChain, http, publicActions, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { AnvilHandle } from './anvil.ts';

/** A running facilitator. */
export interface FacilitatorHandle {
  url: string;
  /** Requests served, by path. */
  calls: { verify: number; settle: number; supported: number };
  /** While set, each /settle waits for it before settling. */
  settleGate?: Promise<void>;
  /** How many of the next /settle requests fail with HTTP 503 (a facilitator down), without settling. */
  failSettles: number;
  close(): Promise<void>;
}

/**
 * Starts a facilitator settling on `anvil` with `key` (it pays the gas).
 * @param key a funded anvil account's private key, not the one svc settles with (their nonces would collide)
 */
export async function startFacilitator(anvil: AnvilHandle, key: Hex): Promise<FacilitatorHandle> {
  const account = privateKeyToAccount(key);
  const chain = defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
  const client = createWalletClient({ account, chain, transport: http(anvil.url), pollingInterval: 50 }).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    readContract: (a) => client.readContract(a as never),
    verifyTypedData: (a) => client.verifyTypedData(a as never),
    writeContract: (a) => client.writeContract(a as never),
    sendTransaction: (a) => client.sendTransaction({ to: a.to, data: a.data }),
    waitForTransactionReceipt: (a) => client.waitForTransactionReceipt({ hash: a.hash, timeout: a.timeout }),
    getCode: (a) => client.getCode(a),
  });
  const facilitator = new x402Facilitator();
  registerExactEvmScheme(facilitator, { signer, networks: `eip155:${anvil.chainId}` as `${string}:${string}` });
  const calls = { verify: 0, settle: 0, supported: 0 };
  let handle!: FacilitatorHandle;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        try {
          let out: unknown;
          if (req.method === 'GET' && req.url === '/supported') {
            calls.supported++;
            out = facilitator.getSupported();
          } else if (req.method === 'POST' && (req.url === '/verify' || req.url === '/settle')) {
            const { paymentPayload, paymentRequirements } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            if (req.url === '/verify') {
              calls.verify++;
              out = await facilitator.verify(paymentPayload, paymentRequirements);
            } else {
              calls.settle++;
              if (handle.failSettles > 0) {
                handle.failSettles--;
                res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'facilitator unavailable' }));
                return;
              }
              await handle.settleGate;
              out = await facilitator.settle(paymentPayload, paymentRequirements);
            }
          } else {
            res.writeHead(404).end();
            return;
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)));
        } catch (e) {
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: e instanceof Error ? e.message : String(e) }));
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  handle = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    failSettles: 0,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return handle;
}
