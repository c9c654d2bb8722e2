/**
 * eRPC's `x402` strategy block carried over at load (docs/access.md "Pay per request", docs/migrating-from-erpc.md): rewritten into
 * svc's shape with a rewrite line, the asset and EIP-712 domain defaulting to the chain's stablecoin in `@x402/evm`'s table, and
 * `verifyOnly: true` or an unknown chain name refused by name. The rewritten block passes the x402 schema.
 */
import { expect } from 'chai';
import { getDefaultAsset } from '@x402/evm';
import { loadConfigObject } from '../../../../config/load.ts';
import { resolveConfigBlock } from '../../../../config/block.ts';
import type { SchemaFragment } from '../../../../config/schema.ts';
import { defaultPreset } from '../../../../presets/default.ts';
import { X402Schema } from '../../../../plugins/x402/schema.ts';
import { problemsOf } from '../../../helpers/config-problems.ts';

const FRAGMENTS: SchemaFragment[] = defaultPreset().flatMap((p) => (p.schema ? [p.schema] : []));
type Doc = Record<string, unknown>;
const load = (raw: unknown) => loadConfigObject(raw, { fragments: FRAGMENTS, env: {} });
const withStrategy = (x402: Doc): Doc => ({
  projects: [
    {
      id: 'main',
      networks: [{ evm: { chainId: 8453 } }],
      upstreams: [{ endpoint: 'http://127.0.0.1:8545', evm: { chainId: 8453 } }],
      auth: { strategies: [{ type: 'x402', x402 }] },
    },
  ],
});
const strategyOf = (doc: Doc) => (((doc.projects as Doc[])[0]?.auth as Doc).strategies as Doc[])[0] as Doc;
const SELLER = '0x1234567890AbcdEF1234567890aBcdef12345678';

describe('x402: eRPC block shape', () => {
  it('facilitatorUrl, sellerAddress, pricePerRequest, a v1 network name: rewritten, the asset and domain from the chain default', () => {
    const usdc = getDefaultAsset('eip155:8453');
    const { document, rewrites } = load(
      withStrategy({
        facilitatorUrl: 'https://x402.example/facilitator',
        sellerAddress: SELLER,
        pricePerRequest: '5',
        network: 'base',
        description: 'RPC',
        maxTimeoutSeconds: 120,
      }),
    );
    const s = strategyOf(document);
    expect(s.x402).to.deep.equal({
      description: 'RPC',
      accepts: [{ network: 'eip155:8453', asset: usdc.asset, payTo: SELLER, eip712: { name: usdc.name, version: usdc.version }, maxTimeoutSeconds: 120 }],
      price: { perCall: '5' },
      facilitator: { url: 'https://x402.example/facilitator' },
    });
    expect(rewrites.map((r) => r.path)).to.include('projects[0].auth.strategies[0].x402');
    expect(() => resolveConfigBlock(X402Schema, s.x402, 'x402')).to.not.throw();
  });

  it("the block's rateLimitBudget (eRPC applied it to the payer) moves to the strategy, where svc's strategies carry their budget", () => {
    const raw = withStrategy({ facilitatorUrl: 'https://x', sellerAddress: SELLER, pricePerRequest: '1', network: 'base', rateLimitBudget: 'payers' });
    (raw as { rateLimiters?: unknown }).rateLimiters = { budgets: [{ id: 'payers', rules: [{ method: '*', maxCount: 10, period: 'second' }] }] };
    const s = strategyOf(load(raw).document);
    expect(s.rateLimitBudget).to.equal('payers');
    expect(s.x402).to.not.have.property('rateLimitBudget');
    const clash = withStrategy({ facilitatorUrl: 'https://x', sellerAddress: SELLER, pricePerRequest: '1', network: 'base', rateLimitBudget: 'payers' });
    strategyOf(clash).rateLimitBudget = 'other';
    expect(problemsOf(() => load(clash))).to.deep.include({
      path: 'projects[0].auth.strategies[0].x402.rateLimitBudget',
      message: 'the strategy already names rateLimitBudget "other": keep one',
    });
  });

  it('an asset of its own keeps the domain given in extra', () => {
    const { document } = load(
      withStrategy({
        facilitatorUrl: 'https://x402.example',
        sellerAddress: SELLER,
        pricePerRequest: '1',
        network: 'eip155:84532',
        asset: '0x00000000000000000000000000000000000000A1',
        extra: { name: 'My Token', version: '1' },
      }),
    );
    expect((strategyOf(document).x402 as Doc).accepts).to.deep.equal([
      { network: 'eip155:84532', asset: '0x00000000000000000000000000000000000000A1', payTo: SELLER, eip712: { name: 'My Token', version: '1' } },
    ]);
  });

  it('verifyOnly: true and a chain name x402 v1 does not know are refused by name', () => {
    const refused = problemsOf(() =>
      load(withStrategy({ facilitatorUrl: 'https://x', sellerAddress: SELLER, pricePerRequest: '1', network: 'base', verifyOnly: true })),
    );
    expect(refused).to.deep.include({
      path: 'projects[0].auth.strategies[0].x402.verifyOnly',
      message: 'eRPC verifyOnly serves without settling; svc never serves a payment it does not settle: drop it and test on a testnet',
    });
    const unknown = problemsOf(() => load(withStrategy({ facilitatorUrl: 'https://x', sellerAddress: SELLER, pricePerRequest: '1', network: 'atlantis' })));
    expect(unknown[0]).to.deep.equal({
      path: 'projects[0].auth.strategies[0].x402.network',
      message: '"atlantis" is not an x402 v1 network name; write the chain as eip155:<chainId>',
    });
  });

  it("svc's own shape is left as written", () => {
    const own = {
      accepts: [{ network: 'eip155:8453', asset: SELLER, payTo: SELLER, eip712: { name: 'USD Coin', version: '2' } }],
      price: { perCredit: '10' },
      facilitator: { url: 'https://x' },
    };
    const { document, rewrites } = load(withStrategy(own));
    expect(strategyOf(document).x402).to.deep.equal(own);
    expect(rewrites.filter((r) => r.path.includes('x402'))).to.deep.equal([]);
  });
});
