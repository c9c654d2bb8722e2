/**
 * Pay per request across a fleet (spec §5 item 1, docs/access.md "Pay per request"): payments verified and settled through an x402
 * facilitator (a local one, `@x402/core`'s facilitator on anvil), and one payment raced at two replicas sharing a Redis claim store and
 * at two workers of one replica (claims in the primary): served once, settled once. Outcomes are counted in `svc_x402_payments_total`.
 * A third svc with a short `settleTimeout` and one retry shows the settlement bound and retries against a facilitator that holds or
 * fails its settlements on the test's word (no timing is measured: the answer comes back while the facilitator still holds it).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Hex } from 'viem';
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

  /** The third svc: answers wait at most 100 ms for a settlement, and a settlement is retried once. */
  let bounded: SvcHandle;
  const logs: Array<Record<string, unknown>> = [];

  const project = (nonces?: object, timing: object = { settleTimeout: '30s' }) => ({
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
            verifyTimeout: '30s',
            ...timing,
            ...(nonces ? { nonces } : {}),
          },
        },
      ],
    },
  });
  const call = () => ({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [privateKeyToAccount(generatePrivateKey()).address, 'latest'] });
  /** A signed payment for one call, from the 402 of `url`: the header value and its authorization nonce. */
  const paymentFor = async (url: string, payer: PrivateKeyAccount, body: object) => {
    const r = await httpRequest('POST', `${url}${PATH}`, JSON.stringify(body));
    expect(r.status).to.equal(402);
    const client = new x402Client();
    client.setSpendControls({ allowedAssets: [{ network: `eip155:${CHAIN_ID}`, asset: chain.token }] });
    registerExactEvmScheme(client, { signer: payer });
    const payment = await client.createPaymentPayload(decodePaymentRequiredHeader(r.headers['payment-required']!));
    return { header: encodePaymentSignatureHeader(payment), nonce: (payment.payload as { authorization: { nonce: Hex } }).authorization.nonce };
  };
  /** A counter's value on a svc's /metrics (0 when absent): `svc_x402_payments_total` of an outcome, or another series by name. */
  const metric = async (url: string, outcome: string, name = 'svc_x402_payments_total') => {
    const text = (await httpRequest('GET', url)).text;
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && (name !== 'svc_x402_payments_total' || l.includes(`outcome="${outcome}"`)));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  before(async () => {
    anvil = await startAnvil({ chainId: CHAIN_ID });
    chain = await deployPaymentChain(anvil, 7);
    facilitator = await startFacilitator(anvil, FACILITATOR_KEY);
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'svc-x402-'));
    const shared = { id: 'claims', driver: 'redis', redis: { uri: redis.url, keyPrefix: 'x402_e2e:' } };
    replicas = [await startSvc({ ...NO_CACHE, projects: [project(shared)] }), await startSvc({ ...NO_CACHE, projects: [project(shared)] })];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) logs.push(JSON.parse(l));
        cb();
      },
    });
    bounded = await startSvc(
      { ...NO_CACHE, projects: [project(undefined, { settleTimeout: '100ms', settleRetries: 1 })] },
      { logger: pino({ level: 'info' }, sink) },
    );
  });
  after(async () => {
    for (const r of replicas) await r.close();
    await bounded?.close();
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
    const { header } = await paymentFor(replicas[0]!.url, payer, body);
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
    const { header } = await paymentFor(replicas[0]!.url, payer, body);
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
      const { header } = await paymentFor(svc.url, payer, body);
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
  it('a refusal through the facilitator says why (a payer without the tokens): 402 naming it, nothing settled', async () => {
    const body = call();
    const { header, nonce } = await paymentFor(replicas[0]!.url, chain.broke, body);
    const seen = { ...facilitator.calls };
    const r = await replicas[0]!.post(PATH, body, { 'PAYMENT-SIGNATURE': header });
    expect(r.status, r.text).to.equal(402);
    expect(r.json.error).to.match(/insufficient/i);
    expect(decodePaymentRequiredHeader(r.headers['payment-required']!).error).to.match(/insufficient/i);
    expect(facilitator.calls.verify - seen.verify).to.equal(1);
    expect(facilitator.calls.settle - seen.settle).to.equal(0);
    expect(await chain.used(chain.broke.address, nonce)).to.equal(false);
  });

  it('the answer does not wait past settleTimeout: it goes while the facilitator still holds the settlement, which lands after and is counted', async () => {
    const payer = chain.payers[3]!;
    const before = await chain.balanceOf(payer.address);
    const body = call();
    const { header } = await paymentFor(bounded.url, payer, body);
    const settled = await metric(bounded.metricsUrl!, 'settled');
    let release!: () => void;
    facilitator.settleGate = new Promise((resolve) => (release = resolve));
    try {
      const r = await bounded.post(PATH, body, { 'PAYMENT-SIGNATURE': header });
      expect(r.status, r.text).to.equal(200);
      expect(r.json.result).to.equal('0x0');
      expect(r.headers['x-svc-payment-outcome']).to.equal('pending');
      expect(r.headers['payment-response']).to.equal(undefined);
      expect(await chain.balanceOf(payer.address)).to.equal(before);
    } finally {
      release();
      facilitator.settleGate = undefined;
    }
    await waitFor(async () => (await metric(bounded.metricsUrl!, 'settled')) === settled + 1, 30_000);
    expect(await chain.balanceOf(payer.address)).to.equal(before - PRICE);
  });

  it('a settlement that fails to reach the facilitator is retried and counted: settled once by the retry', async () => {
    const payer = chain.payers[4]!;
    const before = await chain.balanceOf(payer.address);
    const body = call();
    const { header } = await paymentFor(bounded.url, payer, body);
    const seen = { settle: facilitator.calls.settle, settled: await metric(bounded.metricsUrl!, 'settled') };
    const retries = await metric(bounded.metricsUrl!, '', 'svc_x402_settle_retries_total');
    facilitator.failSettles = 1;
    const r = await bounded.post(PATH, body, { 'PAYMENT-SIGNATURE': header });
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['x-svc-payment-outcome']).to.equal('pending');
    await waitFor(async () => (await metric(bounded.metricsUrl!, 'settled')) === seen.settled + 1, 30_000);
    expect(await metric(bounded.metricsUrl!, '', 'svc_x402_settle_retries_total')).to.equal(retries + 1);
    expect(facilitator.calls.settle - seen.settle).to.equal(2);
    expect(await chain.balanceOf(payer.address)).to.equal(before - PRICE);
  });

  it('a settlement that still fails after its retries is counted as settle_failed and logged with the payer, never lost silently', async () => {
    const payer = chain.payers[5]!;
    const before = await chain.balanceOf(payer.address);
    const body = call();
    const { header, nonce } = await paymentFor(bounded.url, payer, body);
    const failed = await metric(bounded.metricsUrl!, 'settle_failed');
    facilitator.failSettles = 2;
    try {
      const r = await bounded.post(PATH, body, { 'PAYMENT-SIGNATURE': header });
      expect(r.headers['x-svc-payment-outcome']).to.equal('pending');
      await waitFor(async () => (await metric(bounded.metricsUrl!, 'settle_failed')) === failed + 1, 30_000);
    } finally {
      facilitator.failSettles = 0;
    }
    const line = logs.find((l) => l.msg === 'x402: a served request could not be settled' && l.payer === payer.address.toLowerCase());
    expect(line, JSON.stringify(logs)).to.include({ level: 50, amount: String(PRICE), network: `eip155:${CHAIN_ID}` });
    expect(String(line!.err)).to.match(/503/);
    expect(await chain.balanceOf(payer.address)).to.equal(before);
    expect(await chain.used(payer.address, nonce)).to.equal(false);
  });
});
