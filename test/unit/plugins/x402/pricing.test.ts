/**
 * Pay per request's prices and offers (spec §5 item 1, docs/access.md "Pay per request"): a call costs its method's own price, else
 * credits × perCredit (a fractional credit rounds up, never to free), else perCall; a batch the sum; invalid elements and calls on
 * networks the project does not serve nothing; per-accept and per-network prices and offers; the v1 shape for chains x402 v1 names.
 */
import { expect } from 'chai';
import { compilePrice, Pricing } from '../../../../plugins/x402/offers.ts';
import type { X402Settings } from '../../../../plugins/x402/schema.ts';
import { ConfigError } from '../../../../core/plugin-errors.ts';
import type { HttpRequestInfo, Network, ParsedCall } from '../../../../core/plugin-api.ts';

const net = (id: string) => ({ id }) as Network;
const mainnet = net('evm:1');
const base = net('evm:8453');
const http = { host: 'rpc.test', path: '/main/evm/1' } as HttpRequestInfo;
const call = (method: string, networkId?: string): ParsedCall => ({ idRaw: '1', method, params: [], ...(networkId ? { networkId } : {}) });
const ACCEPT = {
  network: 'eip155:8453',
  asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  payTo: '0x1234567890AbcdEF1234567890aBcdef12345678',
  eip712: { name: 'USD Coin', version: '2' },
};
const V1 = new Map([[8453, 'base']]);

describe('x402: prices and offers', () => {
  it('a method of its own first (exact names, then globs), else credits × perCredit rounded up, else perCall', () => {
    const credits = (n: number) => () => n;
    const p = compilePrice({ perCredit: '10', methods: { eth_getLogs: '5000', 'trace_*': '700', 'eth_get*': '1' } }, 'x402.price');
    expect(p('eth_getLogs', credits(99))).to.equal(5000n);
    expect(p('trace_block', credits(99))).to.equal(700n);
    expect(p('eth_getBalance', credits(99))).to.equal(1n);
    expect(p('eth_call', credits(3))).to.equal(30n);
    expect(p('eth_call', credits(0.01))).to.equal(1n, 'a tenth of an atomic unit is one unit, never free');
    expect(p('eth_call', credits(0))).to.equal(0n);
    expect(compilePrice({ perCall: '42' }, 'x402.price')('eth_call', credits(5))).to.equal(42n);
  });

  it('a price block that prices nothing is a config problem at its path', () => {
    expect(() => compilePrice({ methods: { eth_call: '1' } }, 'projects[0].auth.strategies[0].x402.price'))
      .to.throw(ConfigError)
      .with.property('problems')
      .that.deep.equals([{ path: 'projects[0].auth.strategies[0].x402.price', message: 'set perCredit or perCall' }]);
  });

  it('a batch costs the sum of its calls; invalid elements and calls on networks the project does not serve cost nothing', () => {
    const quoted: string[] = [];
    const pricing = new Pricing({ accepts: [ACCEPT], price: { perCredit: '100' } } as X402Settings, 'x402', (n, m) => {
      quoted.push(`${n.id}:${m}`);
      return m === 'eth_getLogs' ? 5 : 1;
    });
    const invalid = { ...call(''), invalid: new Error('bad') } as unknown as ParsedCall;
    const calls = [call('eth_call', 'evm:1'), call('eth_getLogs', 'evm:8453'), invalid, call('eth_call', 'evm:999')];
    const { offers, credits } = pricing.offers(undefined, calls, [mainnet, base, undefined, undefined], http, V1);
    expect(offers).to.have.length(1);
    expect(offers[0]!.amount).to.equal(600n);
    expect(offers[0]!.v2.amount).to.equal('600');
    expect(credits).to.equal(6);
    expect(quoted).to.deep.equal(['evm:1:eth_call', 'evm:8453:eth_getLogs']);
    // A price table answering NaN or a negative number prices the call at nothing more, never below free, never a crash.
    const odd = new Pricing({ accepts: [ACCEPT], price: { perCredit: '100' } } as X402Settings, 'x402', (_n, m) => (m === 'a' ? Number.NaN : -5));
    expect(odd.offers(mainnet, [call('a'), call('b'), call('eth_getLogs')], [mainnet, mainnet, mainnet], http, V1).offers[0]!.amount).to.equal(0n);
  });

  it('offers in the v2 shape, and in the v1 shape for chains x402 v1 names', () => {
    const pricing = new Pricing(
      { accepts: [ACCEPT, { ...ACCEPT, network: 'eip155:31337', maxTimeoutSeconds: 60 }], price: { perCall: '7' }, description: 'RPC' } as X402Settings,
      'x402',
      () => 1,
    );
    const [onBase, onDevnet] = pricing.offers(mainnet, [call('eth_call')], [mainnet], http, V1).offers;
    expect(onBase!.v2).to.deep.equal({
      scheme: 'exact',
      network: 'eip155:8453',
      asset: ACCEPT.asset,
      amount: '7',
      payTo: ACCEPT.payTo,
      maxTimeoutSeconds: 300,
      extra: { name: 'USD Coin', version: '2' },
    });
    expect(onBase!.v1).to.deep.include({
      scheme: 'exact',
      network: 'base',
      maxAmountRequired: '7',
      resource: 'http://rpc.test/main/evm/1',
      description: 'RPC',
      mimeType: 'application/json',
    });
    expect(onDevnet!.v2.maxTimeoutSeconds).to.equal(60);
    expect(onDevnet!.v1).to.equal(undefined);
  });

  it("an accept's own price beats its network's, which beats the block's; a network's own offers replace the block's", () => {
    const ownOffer = { ...ACCEPT, network: 'eip155:1' };
    const pricing = new Pricing(
      {
        accepts: [ACCEPT, { ...ACCEPT, asset: '0x0000000000000000000000000000000000000001', price: { perCall: '3' } }],
        price: { perCall: '1' },
        networks: { 'evm:8453': { price: { perCall: '2' } }, 'evm:1': { accepts: [ownOffer] } },
      } as X402Settings,
      'x402',
      () => 1,
    );
    const onBase = pricing.offers(base, [call('eth_call')], [base], http, V1).offers;
    expect(onBase.map((o) => o.amount)).to.deep.equal([2n, 3n]);
    const onMainnet = pricing.offers(mainnet, [call('eth_call')], [mainnet], http, V1).offers;
    expect(onMainnet.map((o) => o.v2.network)).to.deep.equal(['eip155:1']);
    expect(onMainnet[0]!.amount).to.equal(1n);
    expect(pricing.fixedOffers(base, 5000n, http, V1).map((o) => o.amount)).to.deep.equal([5000n, 5000n]);
  });
});
