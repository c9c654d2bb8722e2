/**
 * Pay per request with the response cache on (docs/access.md "Pay per request"): an answer served from the cache is an answer
 * served, so its payment is settled like one an upstream gave; the node is asked once. A real chain, as in x402.test.ts.
 */
import { expect } from 'chai';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { startSvc, type SvcHandle } from '../helpers/svc.ts';
import { deployPaymentChain, SETTLER_KEY, TOKEN_NAME, TOKEN_VERSION, type PaymentChain } from '../helpers/x402-chain.ts';

const CHAIN_ID = 84532;
const PATH = `/main/evm/${CHAIN_ID}`;
const PER_CREDIT = 1000n;

describe('e2e: pay per request answered from the cache', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let rec: RecordingProxy;
  let chain: PaymentChain;
  let svc: SvcHandle;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN_ID });
    chain = await deployPaymentChain(anvil, 2);
    rec = await startRecordingProxy(anvil.url);
    svc = await startSvc(
      {
        // svc's zero-config cache: a memory tier caching finalized answers.
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN_ID } }],
            upstreams: [{ id: 'node', endpoint: rec.url, evm: { chainId: CHAIN_ID } }],
            auth: {
              strategies: [
                {
                  type: 'x402',
                  x402: {
                    accepts: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token, payTo: chain.payTo, eip712: { name: TOKEN_NAME, version: TOKEN_VERSION } }],
                    price: { perCredit: String(PER_CREDIT) },
                    settler: { privateKey: SETTLER_KEY },
                    settleTimeout: '30s',
                    verifyTimeout: '30s',
                  },
                },
              ],
            },
          },
        ],
      },
      { plugins: defaultPreset() },
    );
  });
  after(async () => {
    await svc?.close();
    await rec?.close();
    await anvil?.stop();
  });

  const payFor = async (body: unknown, payerIndex: number) => {
    const challenge = await svc.post(PATH, body);
    expect(challenge.status).to.equal(402);
    const client = new x402Client();
    client.setSpendControls({ allowedAssets: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token }] });
    registerExactEvmScheme(client, { signer: chain.payers[payerIndex]! });
    const payment = await client.createPaymentPayload(decodePaymentRequiredHeader(challenge.headers['payment-required']!));
    return svc.post(PATH, body, { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payment) });
  };

  it('a paid call answered from the cache is settled once for its price, and the node is asked once', async () => {
    // Block 0 by number is final on any chain: cacheable as soon as it is read.
    const body = { jsonrpc: '2.0', id: 1, method: 'eth_getBlockByNumber', params: ['0x0', false] };
    const first = await payFor(body, 0);
    expect(first.status, first.text).to.equal(200);
    expect(first.headers['x-svc-payment-outcome']).to.equal('settled');
    const payer = chain.payers[1]!;
    const before = await chain.balanceOf(payer.address);
    const second = await payFor(body, 1);
    expect(second.status, second.text).to.equal(200);
    expect(second.headers['x-svc-cache']).to.equal('HIT');
    expect(second.json.result).to.deep.equal(first.json.result);
    expect(second.headers['x-svc-payment-outcome']).to.equal('settled');
    expect(second.headers['x-svc-payment-amount']).to.equal(String(PER_CREDIT));
    const receipt = decodePaymentResponseHeader(second.headers['payment-response']!);
    expect(receipt.success).to.equal(true);
    expect(await chain.balanceOf(payer.address)).to.equal(before - PER_CREDIT);
    expect(rec.callsOf('eth_getBlockByNumber').filter((c) => c.params[0] === '0x0')).to.have.length(1);
  });
});
