/**
 * Pay per request across a fleet (spec §5 item 1, docs/access.md "Pay per request"): payments verified and settled through an x402
 * facilitator (a local one, `@x402/core`'s facilitator on anvil), and one payment raced at two replicas sharing a Redis claim store and
 * at two workers of one replica (claims in the primary): served once, settled once. Outcomes are counted in `svc_x402_payments_total`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../helpers/anvil.ts';
import { ensureBuilt } from '../helpers/build.ts';
import { startRedis, type RedisHandle } from '../helpers/redis.ts';
import { httpRequest, NO_CACHE, startSvc, waitFor, type SvcHandle } from '../helpers/svc.ts';
import { listeningPids, spawnSvc, type SvcProcess } from '../helpers/svc-process.ts';
import { deployPaymentChain, TOKEN_NAME, TOKEN_VERSION, type PaymentChain } from '../helpers/x402-chain.ts';
import { startFacilitator, type FacilitatorHandle } from '../helpers/x402-facilitator.ts';

const CHAIN_ID = 84532;
const PATH = `/main/evm/${CHAIN_ID}`;
/** anvil's third funded account: the facilitator's gas payer. */
const FACILITATOR_KEY = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const PRICE = 2000n;

describe('e2e: pay per request through a facilitator, raced across replicas and workers', function () {
  this.timeout(90_000);
  let anvil: AnvilHandle;
  let chain: PaymentChain;
  let facilitator: FacilitatorHandle;
  let redis: RedisHandle;
  let replicas: SvcHandle[] = [];
  let dir: string;

  const project = (nonces?: object) => ({
    id: 'main',
    networks: [{ architecture: 'evm', evm: { chainId: CHAIN_ID } }],
    upstreams: [{ id: 'node', endpoint: anvil.url, evm: { chainId: CHAIN_ID } }],
    auth: {
      strategies: [
        {
          type: 'x402',
          x402: {
            accepts: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token, payTo: chain.payTo, eip712: { name: TOKEN_NAME, version: TOKEN_VERSION } }],
            price: { perCall: String(PRICE) },
            facilitator: { url: facilitator.url, timeout: '10s' },
            // The answer's wait bound is pinned with fake timers in the unit tests; here the receipt must come back on a loaded machine.
            settleTimeout: '30s',
            verifyTimeout: '30s',
            ...(nonces ? { nonces } : {}),
          },
        },
      ],
    },
  });
  const call = () => ({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [privateKeyToAccount(generatePrivateKey()).address, 'latest'] });
  /** A signed payment for one call, from the 402 of `url`. */
  const paymentFor = async (url: string, payer: PrivateKeyAccount, body: object) => {
    const r = await httpRequest('POST', `${url}${PATH}`, JSON.stringify(body));
    expect(r.status).to.equal(402);
    const client = new x402Client();
    client.setSpendControls({ allowedAssets: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token }] });
    registerExactEvmScheme(client, { signer: payer });
    return encodePaymentSignatureHeader(await client.createPaymentPayload(decodePaymentRequiredHeader(r.headers['payment-required']!)));
  };
  const metric = async (url: string, outcome: string) => {
    const text = (await httpRequest('GET', url)).text;
    const line = text.split('\n').find((l) => l.startsWith('svc_x402_payments_total{') && l.includes(`outcome="${outcome}"`));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN_ID });
    chain = await deployPaymentChain(anvil, 3);
    facilitator = await startFacilitator(anvil, FACILITATOR_KEY);
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'svc-x402-'));
    const shared = { id: 'claims', driver: 'redis', redis: { uri: redis.url, keyPrefix: 'x402_e2e:' } };
    replicas = [await startSvc({ ...NO_CACHE, projects: [project(shared)] }), await startSvc({ ...NO_CACHE, projects: [project(shared)] })];
  });
  after(async () => {
    for (const r of replicas) await r.close();
    await facilitator?.close();
    await redis?.stop();
    await anvil?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('each replica asks the facilitator once, at start, which ways to pay it supports', async () => {
    await waitFor(() => facilitator.calls.supported >= 2);
  });

  it('verified and settled through the facilitator: one /verify, one /settle, the exact amount moved, counted as settled', async () => {
    const payer = chain.payers[0]!;
    const before = await chain.balanceOf(payer.address);
    const body = call();
    const header = await paymentFor(replicas[0]!.url, payer, body);
    const seen = { ...facilitator.calls };
    const r = await replicas[0]!.post(PATH, body, { 'PAYMENT-SIGNATURE': header });
    expect(r.status, r.text).to.equal(200);
    expect(r.json.result).to.equal('0x0');
    expect(decodePaymentResponseHeader(r.headers['payment-response']!).success).to.equal(true);
    expect(facilitator.calls.verify - seen.verify).to.equal(1);
    expect(facilitator.calls.settle - seen.settle).to.equal(1);
    expect(await chain.balanceOf(payer.address)).to.equal(before - PRICE);
    expect(await metric(replicas[0]!.metricsUrl!, 'settled')).to.equal(1);
    expect(await metric(replicas[0]!.metricsUrl!, 'required')).to.equal(1);
  });

  it('one payment raced at two replicas sharing the claim store: served once, settled once', async () => {
    const payer = chain.payers[1]!;
    const before = await chain.balanceOf(payer.address);
    const body = call();
    const header = await paymentFor(replicas[0]!.url, payer, body);
    const answers = await Promise.all(replicas.map((s) => s.post(PATH, body, { 'PAYMENT-SIGNATURE': header })));
    expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 402]);
    expect(answers.find((a) => a.status === 402)!.json.error).to.match(/already used/);
    expect(await chain.balanceOf(payer.address)).to.equal(before - PRICE);
  });

  it('one payment raced at the two workers of one replica (claims held by the primary): served once, settled once', async () => {
    await ensureBuilt();
    let svc: SvcProcess | undefined;
    try {
      svc = await spawnSvc(dir, 'workers', { ...NO_CACHE, server: { workers: 2, waitBeforeShutdown: '0s', waitAfterShutdown: '0s' }, projects: [project()] });
      await waitFor(() => listeningPids(svc!.logs()).length >= 2, 20_000);
      const payer = chain.payers[2]!;
      const before = await chain.balanceOf(payer.address);
      const body = call();
      const header = await paymentFor(svc.url, payer, body);
      // Each request on its own connection, so the kernel hands them to both workers.
      const answers = await Promise.all(
        Array.from({ length: 4 }, () => httpRequest('POST', `${svc!.url}${PATH}`, JSON.stringify(body), { 'PAYMENT-SIGNATURE': header, connection: 'close' })),
      );
      expect(answers.filter((a) => a.status === 200)).to.have.length(1);
      expect(answers.filter((a) => a.status === 402)).to.have.length(3);
      expect(await chain.balanceOf(payer.address)).to.equal(before - PRICE);
    } finally {
      await svc?.stop();
    }
  });
});
