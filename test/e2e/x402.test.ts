/**
 * Pay per request (spec §5 item 1, docs/access.md "Pay per request") on a real chain: an EIP-3009 token compiled with solc and deployed
 * on anvil (chain 84532, which x402 v1 names `base-sepolia`), svc verifying and settling through its own network of that chain, the payer
 * paying with `@x402/fetch` or, for hostile cases, with payments built by hand and signed with viem. The upstream is a recording proxy, so
 * "reaches no upstream" is what the node saw; "settled" and "nothing settled" are token balances and authorization states read on chain.
 * The upstream's vendor has a price table (eth_getCode costs 7 credits), so prices come from the same credits as `X-SVC-Credits`.
 */
import { expect } from 'chai';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { x402Client, wrapFetchWithPayment } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { toHex, type Hex } from 'viem';
import type { PluginHost } from '../../core/plugin-api.ts';
import { COST_SERVICE, type CostService } from '../../plugins/cost/index.ts';
import { defaultPreset } from '../../presets/default.ts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.ts';
import { NO_CACHE, startSvc, type SvcHandle, type SvcResponse } from '../helpers/svc.ts';
import { deployPaymentChain, SETTLER_KEY, TOKEN_NAME, TOKEN_VERSION, type PaymentChain } from '../helpers/x402-chain.ts';

const CHAIN_ID = 84532;
const PATH = `/main/evm/${CHAIN_ID}`;
/** Atomic units per credit, and the flat price of eth_getLogs. */
const PER_CREDIT = 1000n;
const GET_LOGS_PRICE = 50_000n;
/** Credits of eth_getCode in the upstream vendor's price table. */
const CODE_CREDITS = 7;

/** A pricing plugin: eth_getCode on the vendor `acme` costs {@link CODE_CREDITS} units, everything else the flat 1. */
const pricing = {
  name: 'pricing-acme',
  dependsOn: ['cost'],
  apply(host: PluginHost) {
    host.services.require<CostService>(COST_SERVICE).registerPriceTable('acme', (m) => (m === 'eth_getCode' ? CODE_CREDITS : undefined));
  },
};

describe('e2e: pay per request (x402) on a real chain', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let rec: RecordingProxy;
  let chain: PaymentChain;
  let svc: SvcHandle;

  const x402 = () => ({
    accepts: [
      { network: `eip155:${CHAIN_ID}`, asset: chain.token, payTo: chain.payTo, eip712: { name: TOKEN_NAME, version: TOKEN_VERSION }, maxTimeoutSeconds: 120 },
    ],
    price: { perCredit: String(PER_CREDIT), methods: { eth_getLogs: String(GET_LOGS_PRICE) } },
    settler: { privateKey: SETTLER_KEY },
    // The bound on the answer's wait is pinned with fake timers in the unit tests; here the receipt must come back on a loaded machine.
    settleTimeout: '30s',
    verifyTimeout: '30s',
  });

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN_ID });
    chain = await deployPaymentChain(anvil, 4);
    rec = await startRecordingProxy(anvil.url);
    svc = await startSvc(
      {
        ...NO_CACHE,
        server: { costHeaders: true },
        rateLimiters: { budgets: [{ id: 'paid', rules: [{ method: 'eth_getStorageAt', maxCount: 1, period: 'minute', perUser: true }] }] },
        projects: [
          {
            id: 'main',
            networks: [{ architecture: 'evm', evm: { chainId: CHAIN_ID } }],
            upstreams: [{ id: 'node', endpoint: rec.url, vendorName: 'acme', evm: { chainId: CHAIN_ID } }],
            auth: {
              strategies: [
                { type: 'secret', secret: { value: 'key-holder' } },
                { type: 'x402', x402: x402(), rateLimitBudget: 'paid' },
              ],
            },
          },
        ],
      },
      { plugins: [...defaultPreset(), pricing] },
    );
  });
  after(async () => {
    await svc?.close();
    await rec?.close();
    await anvil?.stop();
  });

  /** A call only this test makes: an eth_getBalance of a fresh address, so the node's record says whether it was served. */
  const fresh = () => {
    const address = privateKeyToAccount(generatePrivateKey()).address;
    return {
      body: { jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params: [address, 'latest'] },
      reached: () => rec.callsOf('eth_getBalance').filter((c) => c.params[0] === address).length,
    };
  };
  const clientOf = (payer: PrivateKeyAccount) => {
    // The test token is not one of x402's default stablecoins: the client is told to pay with it, in atomic units.
    const client = new x402Client();
    client.setSpendControls({
      allowedAssets: [`eip155:${CHAIN_ID}`, 'base-sepolia', 'eip155:1'].map((network) => ({ network: network as `${string}:${string}`, asset: chain.token })),
    });
    registerExactEvmScheme(client, { signer: payer });
    return client;
  };
  const challengeOf = async (body: unknown) => {
    const r = await svc.post(PATH, body);
    expect(r.status).to.equal(402);
    return { r, required: decodePaymentRequiredHeader(r.headers['payment-required']!) };
  };
  const paid = (body: unknown, payment: object, v: 1 | 2 = 2) =>
    svc.post(PATH, body, { [v === 2 ? 'PAYMENT-SIGNATURE' : 'X-PAYMENT']: encodePaymentSignatureHeader(payment as never) });
  const refusedFor = (r: SvcResponse, why: RegExp) => {
    expect(r.status, r.text).to.equal(402);
    expect(decodePaymentRequiredHeader(r.headers['payment-required']!).error).to.match(why);
    expect(r.json.error).to.match(why);
    expect(r.headers['payment-response']).to.equal(undefined);
  };

  it('a call without payment gets HTTP 402: the v2 PAYMENT-REQUIRED header and the v1 body, priced from the credit table, and reaches no upstream', async () => {
    const call = fresh();
    const { r, required } = await challengeOf(call.body);
    expect(required.x402Version).to.equal(2);
    expect(required.accepts).to.have.length(1);
    expect(required.accepts[0]).to.include({
      scheme: 'exact',
      network: `eip155:${CHAIN_ID}`,
      asset: chain.token,
      payTo: chain.payTo,
      amount: String(PER_CREDIT),
      maxTimeoutSeconds: 120,
    });
    expect(required.accepts[0]!.extra).to.deep.equal({ name: TOKEN_NAME, version: TOKEN_VERSION });
    expect(r.json.x402Version).to.equal(1);
    expect(r.json.accepts[0]).to.include({
      scheme: 'exact',
      network: 'base-sepolia',
      maxAmountRequired: String(PER_CREDIT),
      payTo: chain.payTo,
      asset: chain.token,
    });
    expect(r.headers['x-svc-payment-amount']).to.equal(String(PER_CREDIT));
    expect(call.reached()).to.equal(0);
  });

  it('a key holder is served as before, without payment', async () => {
    const call = fresh();
    const r = await svc.post(PATH, call.body, { 'X-SVC-Secret-Token': 'key-holder' });
    expect(r.status).to.equal(200);
    expect(r.json.result).to.equal('0x0');
    expect(r.headers['payment-response']).to.equal(undefined);
  });

  it('a call paid with @x402/fetch is served and settled once, for the exact amount, with the transaction hash in PAYMENT-RESPONSE', async () => {
    const payer = chain.payers[0]!;
    const before = { payer: await chain.balanceOf(payer.address), payTo: await chain.balanceOf(chain.payTo) };
    const call = fresh();
    const pay = wrapFetchWithPayment(fetch, clientOf(payer));
    const res = await pay(`${svc.url}${PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(call.body) });
    expect(res.status).to.equal(200);
    expect(((await res.json()) as { result: string }).result).to.equal('0x0');
    expect(res.headers.get('x-svc-payment-outcome')).to.equal('settled');
    expect(res.headers.get('x-svc-payment-amount')).to.equal(String(PER_CREDIT));
    const receipt = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(receipt.success).to.equal(true);
    expect(receipt.transaction).to.match(/^0x[0-9a-f]{64}$/);
    expect(receipt.payer?.toLowerCase()).to.equal(payer.address.toLowerCase());
    expect(call.reached()).to.equal(1);
    expect(await chain.balanceOf(payer.address)).to.equal(before.payer - PER_CREDIT);
    expect(await chain.balanceOf(chain.payTo)).to.equal(before.payTo + PER_CREDIT);
    const tx = await anvil.rpc('eth_getTransactionReceipt', [receipt.transaction]);
    expect(tx.status).to.equal('0x1');
    // The payer is the identity metrics see: the calls it paid for are counted under its address.
    const metrics = (await (await fetch(svc.metricsUrl!)).text()).split('\n');
    expect(metrics.some((l) => l.startsWith('svc_network_request_received_total{') && l.includes(`user="${payer.address.toLowerCase()}"`))).to.equal(true);
  });

  it('a call is priced from the credit table (its credits × perCredit), and what it cost is in the cost headers', async () => {
    const code = { jsonrpc: '2.0', id: 4, method: 'eth_getCode', params: [chain.token, 'latest'] };
    const { required } = await challengeOf(code);
    const price = BigInt(CODE_CREDITS) * PER_CREDIT;
    expect(required.accepts[0]!.amount).to.equal(String(price));
    const payer = chain.payers[2]!;
    const before = await chain.balanceOf(payer.address);
    const r = await paid(code, await clientOf(payer).createPaymentPayload(required));
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['x-svc-payment-amount']).to.equal(String(price));
    expect(r.headers['x-svc-payment-credits']).to.equal(String(CODE_CREDITS));
    expect(r.headers['x-svc-credits']).to.equal(`acme:eth_getCode=${CODE_CREDITS}`);
    expect(r.headers['x-svc-payment-outcome']).to.equal('settled');
    expect(await chain.balanceOf(payer.address)).to.equal(before - price);
  });

  it('a batch is priced as the sum of its calls and settled once for that sum', async () => {
    const a = fresh();
    const b = fresh();
    const logs = { jsonrpc: '2.0', id: 9, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x1', address: chain.token }] };
    const batch = [a.body, { ...b.body, id: 8 }, logs];
    const { r, required } = await challengeOf(batch);
    const sum = 2n * PER_CREDIT + GET_LOGS_PRICE;
    expect(required.accepts[0]!.amount).to.equal(String(sum));
    expect(r.json.accepts[0].maxAmountRequired).to.equal(String(sum));
    const payer = chain.payers[1]!;
    const before = await chain.balanceOf(payer.address);
    const payment = await clientOf(payer).createPaymentPayload(required);
    const res = await paid(batch, payment);
    expect(res.status).to.equal(200);
    expect(res.json).to.have.length(3);
    expect(res.headers['x-svc-payment-outcome']).to.equal('settled');
    expect(res.headers['x-svc-payment-amount']).to.equal(String(sum));
    expect(await chain.balanceOf(payer.address)).to.equal(before - sum);
    expect(a.reached() + b.reached()).to.equal(2);
  });

  it('a call priced on the network it is served on, however its body networkId is written; a bad element appended to a served batch does not make it free', async () => {
    const hex = `evm:0x${CHAIN_ID.toString(16)}`;
    const logs = { jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x0' }], networkId: hex };
    const { required } = await (async () => {
      const r = await svc.post('/main', logs);
      expect(r.status).to.equal(402);
      return { required: decodePaymentRequiredHeader(r.headers['payment-required']!) };
    })();
    expect(required.accepts[0]!.amount).to.equal(String(GET_LOGS_PRICE));
    const call = fresh();
    const batch = [call.body, { jsonrpc: '2.0', id: 99 }];
    const { required: forBatch } = await challengeOf(batch);
    expect(forBatch.accepts[0]!.amount).to.equal(String(PER_CREDIT));
    const payer = chain.payers[0]!;
    const before = await chain.balanceOf(payer.address);
    const r = await paid(batch, await clientOf(payer).createPaymentPayload(forBatch));
    expect(r.json[1].error.code).to.equal(-32600);
    expect(r.headers['x-svc-payment-outcome']).to.equal('settled');
    expect(await chain.balanceOf(payer.address)).to.equal(before - PER_CREDIT);
  });

  it('a replayed payment is refused: served once, settled once', async () => {
    const call = fresh();
    const { required } = await challengeOf(call.body);
    const payer = chain.payers[2]!;
    const before = { payer: await chain.balanceOf(payer.address), payTo: await chain.balanceOf(chain.payTo) };
    const payment = await clientOf(payer).createPaymentPayload(required);
    const first = await paid(call.body, payment);
    expect(first.status).to.equal(200);
    expect(first.headers['x-svc-payment-outcome']).to.equal('settled');
    const again = await paid(call.body, payment);
    refusedFor(again, /already used/);
    // The same payment with another body of the same price: refused too (a payment is used once, whatever it is sent with).
    refusedFor(await paid(fresh().body, payment), /already used/);
    expect(call.reached()).to.equal(1);
    expect(await chain.balanceOf(payer.address)).to.equal(before.payer - PER_CREDIT);
    expect(await chain.balanceOf(chain.payTo)).to.equal(before.payTo + PER_CREDIT);
  });

  it('a payment covers exactly the calls it priced: a payment for one call sent with a batch of two is refused, nothing served', async () => {
    const [a, b] = [fresh(), fresh()];
    const { required } = await challengeOf(a.body);
    const payer = chain.payers[1]!;
    const before = await chain.balanceOf(payer.address);
    const payment = await clientOf(payer).createPaymentPayload(required);
    refusedFor(await paid([a.body, { ...b.body, id: 8 }], payment), new RegExp(`is for ${PER_CREDIT} but these calls cost ${2n * PER_CREDIT}`));
    expect(a.reached() + b.reached()).to.equal(0);
    expect(await chain.balanceOf(payer.address)).to.equal(before);
  });

  describe('refused before any upstream work, nothing settled', () => {
    const payer = () => chain.payers[3]!;
    /** Asserts the call never reached the node and the payer's balance did not move. */
    const unserved = async (call: ReturnType<typeof fresh>, balance: bigint) => {
      expect(call.reached()).to.equal(0);
      expect(await chain.balanceOf(payer().address)).to.equal(balance);
    };
    /** An EIP-3009 payment signed with viem directly, for the offer of `required`, with fields overridden. */
    const signed = async (
      required: Awaited<ReturnType<typeof challengeOf>>['required'],
      over: { validAfter?: bigint; validBefore?: bigint; to?: Hex; value?: bigint; from?: PrivateKeyAccount; chainId?: number; token?: Hex } = {},
    ) => {
      const offer = required.accepts[0]!;
      const signer = over.from ?? payer();
      const authorization = {
        from: signer.address,
        to: over.to ?? (offer.payTo as Hex),
        value: over.value ?? BigInt(offer.amount),
        validAfter: over.validAfter ?? 0n,
        validBefore: over.validBefore ?? BigInt(Math.floor(Date.now() / 1000) + 60),
        nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
      };
      const signature = await signer.signTypedData({
        domain: { name: TOKEN_NAME, version: TOKEN_VERSION, chainId: over.chainId ?? CHAIN_ID, verifyingContract: over.token ?? chain.token },
        types: {
          TransferWithAuthorization: [
            { name: 'from', type: 'address' },
            { name: 'to', type: 'address' },
            { name: 'value', type: 'uint256' },
            { name: 'validAfter', type: 'uint256' },
            { name: 'validBefore', type: 'uint256' },
            { name: 'nonce', type: 'bytes32' },
          ],
        },
        primaryType: 'TransferWithAuthorization',
        message: authorization,
      });
      const asStrings = Object.fromEntries(Object.entries(authorization).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : v]));
      return { x402Version: 2, resource: required.resource, accepted: offer, payload: { signature, authorization: asStrings } };
    };

    it('underpaid: a payment for less than these calls cost', async () => {
      const call = fresh();
      const balance = await chain.balanceOf(payer().address);
      const { required } = await challengeOf(call.body);
      const cheaper = { ...required, accepts: [{ ...required.accepts[0]!, amount: String(PER_CREDIT - 1n) }] };
      refusedFor(await paid(call.body, await clientOf(payer()).createPaymentPayload(cheaper)), /cost 1000/);
      // The offer as quoted, but an authorization for less.
      refusedFor(await paid(call.body, await signed(required, { value: PER_CREDIT - 1n })), /payment refused/);
      await unserved(call, balance);
    });

    it('expired: an authorization past its validBefore', async () => {
      const call = fresh();
      const balance = await chain.balanceOf(payer().address);
      const { required } = await challengeOf(call.body);
      refusedFor(await paid(call.body, await signed(required, { validBefore: BigInt(Math.floor(Date.now() / 1000) - 5) })), /valid_before|expired/i);
      // Not valid yet: its validAfter is still ahead.
      refusedFor(await paid(call.body, await signed(required, { validAfter: BigInt(Math.floor(Date.now() / 1000) + 3600) })), /valid_after/i);
      await unserved(call, balance);
    });

    it('wrong chain and wrong payee: an offer these calls do not accept, or an authorization paying someone else', async () => {
      const call = fresh();
      const balance = await chain.balanceOf(payer().address);
      const { required } = await challengeOf(call.body);
      const onMainnet = { ...required, accepts: [{ ...required.accepts[0]!, network: 'eip155:1' as const }] };
      refusedFor(await paid(call.body, await clientOf(payer()).createPaymentPayload(onMainnet)), /chain, token, payee or scheme/);
      const other = privateKeyToAccount(generatePrivateKey()).address;
      const elsewhere = { ...required, accepts: [{ ...required.accepts[0]!, payTo: other }] };
      refusedFor(await paid(call.body, await clientOf(payer()).createPaymentPayload(elsewhere)), /chain, token, payee or scheme/);
      refusedFor(await paid(call.body, await signed(required, { to: other })), /payment refused/);
      // Signed for another chain's domain while claiming this chain's offer.
      refusedFor(await paid(call.body, await signed(required, { chainId: 1 })), /signature/);
      await unserved(call, balance);
    });

    it('wrong token: an offer for another token, or an authorization signed for another token contract', async () => {
      const call = fresh();
      const balance = await chain.balanceOf(payer().address);
      const { required } = await challengeOf(call.body);
      const otherToken = privateKeyToAccount(generatePrivateKey()).address;
      const inOther = { ...required, accepts: [{ ...required.accepts[0]!, asset: otherToken }] };
      const client = clientOf(payer());
      client.setSpendControls({ allowedAssets: [{ network: `eip155:${CHAIN_ID}`, asset: otherToken }] });
      refusedFor(await paid(call.body, await client.createPaymentPayload(inOther)), /chain, token, payee or scheme/);
      refusedFor(await paid(call.body, await signed(required, { token: otherToken })), /signature/);
      await unserved(call, balance);
    });

    it('forged: a signature that is not the payer’s', async () => {
      const call = fresh();
      const balance = await chain.balanceOf(payer().address);
      const { required } = await challengeOf(call.body);
      const payment = await signed(required);
      const sig = payment.payload.signature;
      payment.payload.signature = `${sig.slice(0, 10)}${sig[10] === 'a' ? 'b' : 'a'}${sig.slice(11)}` as Hex;
      refusedFor(await paid(call.body, payment), /payment refused/);
      // Signed by another key on the payer's behalf.
      const impostor = privateKeyToAccount(generatePrivateKey());
      const forged = await signed(required, { from: impostor });
      forged.payload.authorization.from = payer().address;
      refusedFor(await paid(call.body, forged), /signature/);
      await unserved(call, balance);
    });

    it('insufficient balance: a payer without the tokens', async () => {
      const call = fresh();
      const { required } = await challengeOf(call.body);
      refusedFor(await paid(call.body, await clientOf(chain.broke).createPaymentPayload(required)), /insufficient|balance/i);
      expect(call.reached()).to.equal(0);
    });

    it('a header that is not an x402 payment, or too large, is refused with the reason', async () => {
      const call = fresh();
      refusedFor(await svc.post(PATH, call.body, { 'PAYMENT-SIGNATURE': 'not base64 json' }), /not base64-encoded x402 JSON|not an x402 v2 payment/);
      refusedFor(await svc.post(PATH, call.body, { 'PAYMENT-SIGNATURE': 'A'.repeat(10_000) }), /exceeds/);
      expect(call.reached()).to.equal(0);
    });
  });

  it('an upstream failure is not settled: the answer says so and the authorization stays unused on chain', async () => {
    const call = fresh();
    const address = call.body.params[0] as string;
    rec.intercept = (c) => (c.method === 'eth_getBalance' && c.params[0] === address ? { error: { code: -32603, message: 'internal error' } } : undefined);
    try {
      const { required } = await challengeOf(call.body);
      const payer = chain.payers[0]!;
      const balance = await chain.balanceOf(payer.address);
      const payment = await clientOf(payer).createPaymentPayload(required);
      const r = await paid(call.body, payment);
      expect(r.json.error, r.text).to.be.an('object');
      expect(r.headers['x-svc-payment-outcome']).to.equal('not-settled');
      expect(r.headers['payment-response']).to.equal(undefined);
      expect(await chain.balanceOf(payer.address)).to.equal(balance);
      expect(await chain.used(payer.address, (payment.payload as { authorization: { nonce: Hex } }).authorization.nonce)).to.equal(false);
    } finally {
      rec.intercept = undefined;
    }
  });

  it("the payer's address is the rate-limit identity: a payer past its budget is refused and not charged; another payer is served", async () => {
    const storage = { jsonrpc: '2.0', id: 3, method: 'eth_getStorageAt', params: [chain.token, '0x0', 'latest'] };
    const payOnce = async (payer: PrivateKeyAccount) => {
      const { required } = await challengeOf(storage);
      return paid(storage, await clientOf(payer).createPaymentPayload(required));
    };
    const [a, b] = [chain.payers[2]!, chain.payers[3]!];
    expect((await payOnce(a)).headers['x-svc-payment-outcome']).to.equal('settled');
    const balance = await chain.balanceOf(a.address);
    const limited = await payOnce(a);
    expect(limited.status).to.equal(429);
    expect(limited.headers['x-svc-payment-outcome']).to.equal('not-settled');
    expect(await chain.balanceOf(a.address)).to.equal(balance);
    const other = await payOnce(b);
    expect(other.status).to.equal(200);
    expect(other.headers['x-svc-payment-outcome']).to.equal('settled');
  });

  it('x402 v1: X-PAYMENT built from the v1 body is served and settled, with X-PAYMENT-RESPONSE', async () => {
    const call = fresh();
    const { r } = await challengeOf(call.body);
    const payer = chain.payers[1]!;
    const before = await chain.balanceOf(payer.address);
    const payment = await clientOf(payer).createPaymentPayload(r.json);
    expect(payment.x402Version).to.equal(1);
    const res = await paid(call.body, payment, 1);
    expect(res.status, res.text).to.equal(200);
    expect(res.json.result).to.equal('0x0');
    expect(decodePaymentResponseHeader(res.headers['x-payment-response']!).success).to.equal(true);
    expect(await chain.balanceOf(payer.address)).to.equal(before - PER_CREDIT);
  });
});
