/**
 * Pay per request over WebSocket (spec §5 item 1, docs/access.md "Pay per request"): an upgrade without payment gets HTTP 402 with the
 * challenge for `x402.websocket.prepaid`; an upgrade with a payment opens, each call is counted down from the prepaid amount at the HTTP
 * prices, a call past the balance is refused, and the payment settles once, after the first answered call; a socket closed before any
 * call is never settled. On anvil with an EIP-3009 token compiled by solc.
 */
import { expect } from 'chai';
import WebSocket from 'ws';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { Hex } from 'viem';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { deployPaymentChain, SETTLER_KEY, TOKEN_NAME, TOKEN_VERSION, type PaymentChain } from '../helpers/x402-chain.ts';

const CHAIN_ID = 84532;
const PATH = `/main/evm/${CHAIN_ID}`;
const PER_CALL = 1000n;
const PREPAID = 3n * PER_CALL;

/** Opens a socket; resolves with it, or rejects with the refusal's status, headers and body. */
function connect(url: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, headers: res.headers, body })));
    });
    ws.once('error', reject);
  });
}

/** Sends one call and waits for its answer. */
function ask(ws: WebSocket, id: number, method = 'eth_chainId'): Promise<{ result?: unknown; error?: { code: number; message: string } }> {
  return new Promise((resolve) => {
    const on = (data: WebSocket.RawData) => {
      const msg = JSON.parse(data.toString());
      if (msg.id !== id) return;
      ws.off('message', on);
      resolve(msg);
    };
    ws.on('message', on);
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params: [] }));
  });
}

describe('e2e: pay per request over WebSocket (prepaid connections)', function () {
  this.timeout(60_000);
  let anvil: AnvilHandle;
  let chain: PaymentChain;
  let svc: SvcHandle;
  let wsUrl: string;

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN_ID });
    chain = await deployPaymentChain(anvil, 3);
    svc = await startSvc({
      ...NO_CACHE,
      projects: [
        {
          id: 'main',
          networks: [{ architecture: 'evm', evm: { chainId: CHAIN_ID } }],
          upstreams: [{ id: 'node', endpoint: anvil.url, evm: { chainId: CHAIN_ID } }],
          auth: {
            strategies: [
              {
                type: 'x402',
                x402: {
                  accepts: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token, payTo: chain.payTo, eip712: { name: TOKEN_NAME, version: TOKEN_VERSION } }],
                  price: { perCall: String(PER_CALL) },
                  settler: { privateKey: SETTLER_KEY },
                  verifyTimeout: '30s',
                  websocket: { prepaid: String(PREPAID) },
                },
              },
            ],
          },
        },
      ],
    });
    wsUrl = `${svc.url.replace('http', 'ws')}${PATH}`;
  });
  after(async () => {
    await svc?.close();
    await anvil?.stop();
  });

  /** A payment header for the upgrade's challenge. */
  const paymentFor = async (payer: PrivateKeyAccount): Promise<{ header: string; nonce: Hex }> => {
    const refused = (await connect(wsUrl).then(
      () => expect.fail('an upgrade without payment opened'),
      (e: { status: number; headers: Record<string, string>; body: string }) => e,
    )) as { status: number; headers: Record<string, string>; body: string };
    expect(refused.status).to.equal(402);
    const required = decodePaymentRequiredHeader(refused.headers['payment-required']!);
    expect(required.accepts[0]!.amount).to.equal(String(PREPAID));
    // The same challenge as HTTP's: the v1 body beside the v2 header.
    const v1 = JSON.parse(refused.body);
    expect(v1.x402Version).to.equal(1);
    expect(v1.accepts[0]).to.include({ scheme: 'exact', network: 'base-sepolia', maxAmountRequired: String(PREPAID), payTo: chain.payTo });
    const client = new x402Client();
    client.setSpendControls({ allowedAssets: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token }] });
    registerExactEvmScheme(client, { signer: payer });
    const payment = await client.createPaymentPayload(required);
    return { header: encodePaymentSignatureHeader(payment), nonce: (payment.payload as { authorization: { nonce: Hex } }).authorization.nonce };
  };

  it('an upgrade without payment is refused with 402 and the challenge for the prepaid amount; with it, calls are counted down (a message that serves nothing given back) and the payment settles once', async () => {
    const payer = chain.payers[0]!;
    const before = await chain.balanceOf(payer.address);
    const { header, nonce } = await paymentFor(payer);
    const ws = await connect(wsUrl, { 'PAYMENT-SIGNATURE': header });
    try {
      // A message that serves nothing (a method the node does not have) is given back: three calls still fit afterwards.
      expect((await ask(ws, 10, 'svc_noSuchMethod')).error).to.be.an('object');
      for (let id = 1; id <= 3; id++) expect((await ask(ws, id)).result).to.equal(`0x${CHAIN_ID.toString(16)}`);
      const past = await ask(ws, 4);
      expect(past.error?.code).to.equal(-32000);
      expect(past.error?.message).to.match(/prepaid balance exhausted/);
      await waitFor(async () => (await chain.balanceOf(payer.address)) === before - PREPAID, 30_000);
      expect(await chain.used(payer.address, nonce)).to.equal(true);
    } finally {
      ws.close();
    }
  });

  it('a subscription serves the connection: the payment settles once it is accepted', async () => {
    const payer = chain.payers[2]!;
    const before = await chain.balanceOf(payer.address);
    const { header } = await paymentFor(payer);
    const ws = await connect(wsUrl, { 'PAYMENT-SIGNATURE': header });
    try {
      const sub = await new Promise<{ result?: unknown }>((resolve) => {
        ws.once('message', (d) => resolve(JSON.parse(d.toString())));
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }));
      });
      expect(sub.result).to.match(/^0x[0-9a-f]{32}$/);
      await waitFor(async () => (await chain.balanceOf(payer.address)) === before - PREPAID, 30_000);
    } finally {
      ws.close();
    }
  });

  it('the same payment cannot open a second socket, and a socket closed before any call is never settled', async () => {
    const payer = chain.payers[1]!;
    const before = await chain.balanceOf(payer.address);
    const { header, nonce } = await paymentFor(payer);
    const ws = await connect(wsUrl, { 'PAYMENT-SIGNATURE': header });
    const again = (await connect(wsUrl, { 'PAYMENT-SIGNATURE': header }).then(
      () => expect.fail('a used payment opened a socket'),
      (e: { status: number; body: string }) => e,
    )) as { status: number; body: string };
    expect(again.status).to.equal(402);
    expect(JSON.parse(again.body).error).to.match(/already used/);
    ws.close();
    await new Promise((r) => setTimeout(r, 200));
    expect(await chain.balanceOf(payer.address)).to.equal(before);
    expect(await chain.used(payer.address, nonce)).to.equal(false);
  });
});
